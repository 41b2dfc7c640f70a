"""A TCP fault proxy between Kafka clients and the broker (loopback, no Docker, no root).

The broker advertises the proxy's address, so every client connection (bootstrap and broker
connections alike) passes through it. Faults, changeable while it runs:

* ``delay_ms`` / ``jitter_ms``: every chunk is held back delay ± jitter (order is kept);
* ``reset_pct``: each forwarded chunk (either direction) resets the connection (RST) with this
  probability instead of being forwarded: requests or their responses are lost mid-flight, which is
  what makes at-least-once producers retry and duplicate;
* ``drop_pct``: each chunk turns the connection into a black hole with this probability (nothing
  more is forwarded; the client finds out by its own timeouts);
* ``cut``: every open connection is reset and new ones are refused until the cut ends.

This is an application-level emulation: TCP itself never loses a byte, so "packet loss" here means
lost requests/responses. Real packet loss needs ``tc netem`` (see :mod:`.netem`).

The proxy runs in its own process (no GIL contention with the producer being measured), controlled
through JSON lines on its stdin/stdout; it dies with its parent.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass

from streamscale.errors import ReliabilityError


@dataclass
class ProxyFaults:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reset_pct: float = 0.0
    drop_pct: float = 0.0
    cut: bool = False


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class _Proxy:
    def __init__(self, target_host: str, target_port: int, seed: int | None):
        self.target = (target_host, target_port)
        self.faults = ProxyFaults()
        self.rng = random.Random(seed)
        self.conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        # resets_request / resets_response: resets that cut a chunk on its way to the broker, or one
        # of the broker's answers on its way back (the request was written; the client never hears)
        self.stats = {
            "connections": 0,
            "resets": 0,
            "resets_request": 0,
            "resets_response": 0,
            "blackholed": 0,
            "refused": 0,
            "chunks": 0,
        }

    def set_faults(self, faults: ProxyFaults) -> None:
        self.faults = faults
        if faults.cut:
            for a, b in list(self.conns):
                _rst(a)
                _rst(b)
                self.stats["resets"] += 1

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self.faults.cut:
            self.stats["refused"] += 1
            _rst(client_w)
            return
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.target)
        except OSError:
            _rst(client_w)
            return
        self.stats["connections"] += 1
        pair = (client_w, broker_w)
        self.conns.add(pair)
        # "reset" and "blackhole" concern the whole connection; a side that merely closes (EOF) does
        # not: what it sent before closing is still delivered, as TCP would
        state = {"reset": False, "blackhole": False}
        try:
            await asyncio.gather(
                self._pump(client_r, broker_w, pair, state, "request"),
                self._pump(broker_r, client_w, pair, state, "response"),
            )
        except asyncio.CancelledError:  # proxy shutting down
            pass
        finally:
            self.conns.discard(pair)
            for w in pair:
                if not w.is_closing():
                    w.close()

    async def _pump(self, reader, writer, pair, state, direction: str) -> None:  # noqa: C901
        queue: asyncio.Queue = asyncio.Queue()
        broken = False

        async def send() -> None:
            nonlocal broken
            while True:
                release, data = await queue.get()
                if data is None:
                    break
                wait = release - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if broken or state["reset"] or state["blackhole"]:
                    continue
                writer.write(data)
                try:
                    await writer.drain()
                except (ConnectionError, OSError):
                    broken = True

        sender = asyncio.create_task(send())
        last_release = 0.0
        try:
            while not state["reset"]:
                try:
                    data = await reader.read(65536)
                except (ConnectionError, OSError):
                    break
                if not data:
                    break
                f = self.faults
                self.stats["chunks"] += 1
                if f.reset_pct and self.rng.random() * 100 < f.reset_pct:
                    state["reset"] = True
                    self.stats["resets"] += 1
                    self.stats[f"resets_{direction}"] += 1
                    for w in pair:
                        _rst(w)
                    break
                if f.drop_pct and not state["blackhole"] and self.rng.random() * 100 < f.drop_pct:
                    state["blackhole"] = True
                    self.stats["blackholed"] += 1
                if state["blackhole"]:
                    continue
                delay = max(0.0, f.delay_ms + (self.rng.uniform(-f.jitter_ms, f.jitter_ms) if f.jitter_ms else 0.0))
                last_release = max(time.monotonic() + delay / 1000.0, last_release)
                queue.put_nowait((last_release, data))
        finally:
            queue.put_nowait((0.0, None))
            await sender  # delayed data still goes out after the sender closed its side
            if not state["reset"] and not broken and not writer.is_closing():
                try:
                    writer.write_eof()
                except (OSError, RuntimeError):
                    pass


def _serve(listen_port: int, target_host: str, target_port: int, seed: int | None) -> None:
    """The proxy process: commands arrive as JSON lines on stdin, answers leave on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the proxy ends
    out = sys.stdout

    def reply(kind: str, arg=None) -> None:
        out.write(json.dumps([kind, arg]) + "\n")
        out.flush()

    async def main() -> None:
        proxy = _Proxy(target_host, target_port, seed)
        server = await asyncio.start_server(proxy.handle, "127.0.0.1", listen_port, reuse_address=True)
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        stdin = os.fdopen(sys.stdin.fileno(), "r", buffering=1)

        def on_command() -> None:
            line = stdin.readline()
            if not line:  # parent gone
                done.set()
                return
            cmd, arg = json.loads(line)
            if cmd == "faults":
                proxy.set_faults(ProxyFaults(**arg))
                reply("ok")
            elif cmd == "stats":
                reply("ok", dict(proxy.stats))
            elif cmd == "stop":
                reply("ok")
                done.set()

        loop.add_reader(stdin.fileno(), on_command)
        reply("ready", os.getpid())
        await done.wait()
        server.close()
        for a, b in list(proxy.conns):
            _rst(a)
            _rst(b)

    asyncio.run(main())


class FaultProxy:
    """``with FaultProxy(listen_port, "127.0.0.1:9092") as proxy: proxy.set(delay_ms=50)``."""

    def __init__(self, listen_port: int, target: str, seed: int | None = None):
        self.target = target
        self.seed = seed
        self.listen_port = listen_port
        self.address = f"127.0.0.1:{listen_port}"
        self.faults = ProxyFaults()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> FaultProxy:
        from streamscale.processes import die_with_parent

        host, port = self.target.rsplit(":", 1)
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamscale.reliability.proxy",
                str(self.listen_port),
                host,
                port,
                str(self.seed if self.seed is not None else ""),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            preexec_fn=die_with_parent,
        )
        kind, _ = self._read(30)
        if kind != "ready":
            raise ReliabilityError(f"fault proxy failed to start: {kind}")
        return self

    def _read(self, timeout: float):
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            raise ReliabilityError(f"fault proxy did not answer (exit code {self._proc.poll()})")
        return json.loads(line)

    def _call(self, cmd: str, arg=None):
        with self._lock:  # fault timers call from other threads
            self._proc.stdin.write(json.dumps([cmd, arg]) + "\n")
            self._proc.stdin.flush()
            return self._read(30)[1]

    def set(self, **faults) -> None:
        self.faults = ProxyFaults(**faults)
        self._call("faults", asdict(self.faults))

    def clear(self) -> None:
        self.set()

    def stats(self) -> dict:
        return self._call("stats")

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            try:
                self._call("stop")
            except (ReliabilityError, OSError, ValueError):
                pass
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._proc = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if sys.argv[4:] and sys.argv[4] else None)
