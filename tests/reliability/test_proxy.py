"""The fault proxy on its own, in front of a tiny echo server: delay, reset, black hole, cut."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

import pytest

from streamscale.ports import free_port
from streamscale.reliability.proxy import FaultProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture(scope="module")
def proxy():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = FaultProxy(free_port(), f"127.0.0.1:{server.server_address[1]}", seed=1).start()
    yield p
    p.stop()
    server.shutdown()


def _roundtrip(proxy, payload=b"ping", timeout=5.0) -> tuple[bytes, float]:
    with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=timeout) as s:
        t0 = time.monotonic()
        s.sendall(payload)
        data = s.recv(65536)
        return data, time.monotonic() - t0


def test_passthrough_and_delay(proxy):
    proxy.clear()
    assert _roundtrip(proxy)[0] == b"ping"
    proxy.set(delay_ms=150)
    data, took = _roundtrip(proxy)
    assert data == b"ping" and took >= 0.3  # held back on the way there and on the way back
    proxy.clear()


def test_reset_black_hole_and_cut(proxy):
    proxy.set(reset_pct=100)
    with pytest.raises(ConnectionError):
        data, _ = _roundtrip(proxy)
        if not data:  # the reset may surface as an empty read on some kernels
            raise ConnectionResetError
    proxy.set(drop_pct=100)
    with pytest.raises(TimeoutError):
        _roundtrip(proxy, timeout=0.5)  # nothing comes back, the connection stays open
    proxy.set(cut=True)
    with pytest.raises((ConnectionError, OSError)):
        data, _ = _roundtrip(proxy)
        if not data:
            raise ConnectionResetError
    proxy.clear()
    assert _roundtrip(proxy)[0] == b"ping"
    assert proxy.stats()["resets"] >= 1 and proxy.stats()["blackholed"] >= 1 and proxy.stats()["refused"] >= 1


def test_a_testbed_whose_broker_port_is_taken_starts_on_new_ports(tmp_path, monkeypatch):
    # the testbed chooses its broker's port before the proxy starts (the proxy must listen first);
    # a port that another process holds by then is tried again with new ones, not a failed start
    from streamscale.reliability import testbeds

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    ports = iter([free_port(), taken])  # (the proxy's, the broker's) of the first attempt
    monkeypatch.setattr(testbeds, "free_port", lambda: next(ports, None) or free_port())
    try:
        bed = testbeds.ProxyTestbed(tmp_path, seed=1)
        try:
            assert bed.broker.port != taken
            assert bed.bootstrap == f"127.0.0.1:{bed.proxy_port}"
        finally:
            bed.close()
    finally:
        held.close()
