"""A network for a cluster whose brokers can be cut off: each node in a network namespace of its own,
joined by a veth pair to a bridge in the host's namespace, where the clients run (root only).

Isolating a node takes its veth pair's host end down: the node can reach neither the other nodes
nor the clients, and they cannot reach it, as when a switch port dies; healing brings it up again.
The addresses are a /24 of 10.x that only these namespaces and the bridge use, made here and
removed by :meth:`ClusterNetwork.destroy` (and on any failure while it is made).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from streamscale.errors import BrokerError
from streamscale.processes import remove_network_at_exit


def _ledger() -> Path:
    """Where the networks this machine's streamscale processes made are written down, each with
    its maker's process id: what a SIGKILLed maker leaves is removed by the next one."""
    return Path(os.environ.get("STREAMSCALE_STATE_DIR", Path.home() / ".streamscale")) / "networks"


def record_network(tag: str, items: list[str]) -> None:
    """Write down what a network will consist of (``link:NAME`` / ``netns:NAME``) before it is made."""
    d = _ledger()
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{tag}.json").write_text(json.dumps({"pid": os.getpid(), "items": items}))


def forget_network(tag: str) -> None:
    (_ledger() / f"{tag}.json").unlink(missing_ok=True)


def remove_items(items: list[str]) -> None:
    """Delete links and namespaces, in reverse order of making; what is already gone is no error."""
    for item in reversed(items):
        kind, name = item.split(":", 1)
        cmd = ["ip", "link", "del", name] if kind == "link" else ["ip", "netns", "del", name]
        subprocess.run(cmd, capture_output=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_networks() -> int:
    """Remove the networks whose maker is gone (SIGKILLed mid-run); how many there were."""
    d = _ledger()
    if os.geteuid() != 0 or not d.is_dir():
        return 0
    removed = 0
    for f in d.glob("*.json"):
        try:
            info = json.loads(f.read_text())
            pid, items = int(info["pid"]), list(info["items"])
        except (OSError, ValueError, KeyError, TypeError):
            f.unlink(missing_ok=True)
            continue
        if not _alive(pid):
            remove_items(items)
            f.unlink(missing_ok=True)
            removed += 1
    return removed


def run_net(*cmd: str, error: type[Exception] = BrokerError) -> None:
    """Run an ``ip`` / ``tc`` command; its failure is ``error`` with the command and what it said."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise error(f"`{' '.join(cmd)}` failed: {(r.stderr or r.stdout).strip()}")


@functools.lru_cache(maxsize=1)
def namespaces_available() -> tuple[bool, str]:
    """Whether network namespaces, veth pairs and a bridge can be made here, and why not."""
    if os.geteuid() != 0:
        return False, "isolating a broker needs root (network namespaces, veth pairs, a bridge)"
    if shutil.which("ip") is None:
        return False, "`ip` is not installed (Debian package iproute2)"
    net = ClusterNetwork(1)
    try:
        net.create()
        return True, "network namespaces work"
    except BrokerError as exc:
        return False, str(exc)
    finally:
        net.destroy()


class ClusterNetwork:
    """``nodes`` namespaces ``ssc<tag>-<i>`` at ``10.<a>.<b>.<10 + i>``, the bridge at ``.1``."""

    def __init__(self, nodes: int):
        tag = uuid.uuid4().hex[:6]
        self.tag, self.nodes = tag, nodes
        a, b = 200 + int(tag[:2], 16) % 50, int(tag[2:4], 16)
        self.prefix = f"10.{a}.{b}"
        self.bridge = f"ssb{tag}"
        self.created: list[str] = []  # what to remove, in reverse

    def netns(self, node: int) -> str:
        return f"ssc{self.tag}-{node}"

    def ip(self, node: int) -> str:
        return f"{self.prefix}.{10 + node}"

    def host_if(self, node: int) -> str:
        return f"ssh{self.tag}{node}"

    def planned(self) -> list[str]:
        items = [f"link:{self.bridge}"]
        for node in range(1, self.nodes + 1):
            items += [f"netns:{self.netns(node)}", f"link:{self.host_if(node)}"]
        return items

    def create(self) -> ClusterNetwork:
        remove_stale_networks()
        record_network(self.tag, self.planned())
        remove_network_at_exit(self.planned())  # and what runs in it, however this process ends
        try:
            run_net("ip", "link", "add", self.bridge, "type", "bridge")
            self.created.append(f"link:{self.bridge}")
            run_net("ip", "addr", "add", f"{self.prefix}.1/24", "dev", self.bridge)
            run_net("ip", "link", "set", self.bridge, "up")
            for node in range(1, self.nodes + 1):
                ns, host_if, ns_if = self.netns(node), self.host_if(node), f"ssn{self.tag}{node}"
                run_net("ip", "netns", "add", ns)
                self.created.append(f"netns:{ns}")
                run_net("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
                self.created.append(f"link:{host_if}")
                run_net("ip", "link", "set", ns_if, "netns", ns)
                run_net("ip", "link", "set", host_if, "master", self.bridge)
                run_net("ip", "link", "set", host_if, "up")
                run_net("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip(node)}/24", "dev", ns_if)
                run_net("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
                run_net("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise
        return self

    def prefix_cmd(self, node: int) -> list[str]:
        """What runs a command inside node ``node``'s namespace."""
        return ["ip", "netns", "exec", self.netns(node)]

    def isolate(self, node: int) -> None:
        run_net("ip", "link", "set", self.host_if(node), "down")

    def heal(self, node: int) -> None:
        run_net("ip", "link", "set", self.host_if(node), "up")

    def destroy(self) -> None:
        remove_items(self.created)
        self.created = []
        forget_network(self.tag)
