"""Real packet delay and loss with ``tc netem`` between two network namespaces (root only).

The broker runs in its own namespace, joined to the host by a veth pair; netem on both ends of
the pair delays and drops packets in both directions, as Pumba did between TRAK's containers.
:func:`netem_available` tries all of this on a throw-away pair and says exactly what is missing
(not root, no iproute2, or a kernel without the ``sch_netem`` module, as on this project's CI).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import uuid

from streamscale.broker.clusternet import run_net
from streamscale.errors import ConfigError, ReliabilityError


def _run(*cmd: str) -> None:
    run_net(*cmd, error=ReliabilityError)


@functools.lru_cache(maxsize=1)
def netem_available() -> tuple[bool, str]:
    """Whether netem works here, and why not (tried once per process on a throw-away veth pair)."""
    if os.geteuid() != 0:
        return False, "tc netem needs root (network namespaces and qdiscs)"
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        return False, f"{' and '.join(missing)} not installed (Debian package iproute2)"
    link = NetemLink()
    try:
        link.create()
        link.set(delay_ms=1, loss_pct=0)
        return True, "tc netem works"
    except ReliabilityError as exc:
        reason = str(exc)
        if "qdisc kind is unknown" in reason:
            reason = "the kernel has no netem qdisc (module sch_netem missing): " + reason
        return False, reason
    finally:
        link.destroy()


def require_netem() -> None:
    ok, why = netem_available()
    if not ok:
        raise ConfigError(
            f"netem faults are not available on this machine: {why}. Use proxy faults (kind: proxy) instead."
        )


class NetemLink:
    """A namespace ``ss-<id>`` reachable from the host at ``peer_ip`` through a veth pair."""

    def __init__(self, subnet: int | None = None):
        tag = uuid.uuid4().hex[:6]
        self.tag = f"netem-{tag}"
        self.netns = f"ss-{tag}"
        self.host_if, self.ns_if = f"ssh{tag}", f"ssn{tag}"
        octet = subnet if subnet is not None else 200 + int(tag[:2], 16) % 50
        self.host_ip, self.peer_ip = f"10.{octet}.77.1", f"10.{octet}.77.2"
        self.created = False

    def create(self) -> NetemLink:
        from streamscale.broker.clusternet import record_network, remove_stale_networks

        remove_stale_networks()
        record_network(self.tag, [f"netns:{self.netns}", f"link:{self.host_if}"])
        _run("ip", "netns", "add", self.netns)
        self.created = True
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _run("ip", "link", "set", self.ns_if, "netns", self.netns)
        _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        _run("ip", "link", "set", self.host_if, "up")
        _run("ip", "netns", "exec", self.netns, "ip", "addr", "add", f"{self.peer_ip}/24", "dev", self.ns_if)
        _run("ip", "netns", "exec", self.netns, "ip", "link", "set", self.ns_if, "up")
        _run("ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up")
        return self

    def set(self, delay_ms: float = 0.0, loss_pct: float = 0.0, jitter_ms: float = 0.0) -> None:
        spec = ["delay", f"{delay_ms}ms"] + ([f"{jitter_ms}ms"] if jitter_ms else []) + ["loss", f"{loss_pct}%"]
        _run("tc", "qdisc", "replace", "dev", self.host_if, "root", "netem", *spec)
        _run("ip", "netns", "exec", self.netns, "tc", "qdisc", "replace", "dev", self.ns_if, "root", "netem", *spec)

    def clear(self) -> None:
        self.set(0, 0)

    def destroy(self) -> None:
        from streamscale.broker.clusternet import forget_network

        if self.created:
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
            self.created = False
        forget_network(self.tag)

    def __enter__(self) -> NetemLink:
        return self.create()

    def __exit__(self, *exc) -> None:
        self.destroy()
