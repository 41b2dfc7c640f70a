"""Faults of an embedded cluster during a trial: the steps of a ``kind: cluster`` fault, each done
at its time to the nodes its target names at that moment (and undone ``for_s`` later), and a
watch of the trial topic's leaders and in-sync replicas, so that a trial's timeline says when
leaders changed.

The steps run in the caller's (main) thread: a broker started again must be forked from it (see
:class:`~streamscale.broker.cluster.EmbeddedCluster`); the watch runs in a thread of its own.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable

from streamscale.broker.cluster import EmbeddedCluster
from streamscale.reliability.spec import ClusterFault, ClusterStep

WATCH_EVERY_S = 0.1
DONE = {
    "kill": "killed (SIGKILL)",
    "stop": "stopped",
    "start": "started",
    "restart": "restarted",
    "isolate": "isolated",
    "heal": "healed",
}


class LeaderWatch:
    """Polls the cluster's metadata for ``topic`` every :data:`WATCH_EVERY_S`; :attr:`changes`
    holds (seconds after ``t0``, partition, old leader, new leader) and :attr:`min_isr` the
    fewest in-sync replicas any partition had."""

    def __init__(self, cluster: EmbeddedCluster, topic: str, t0: float):
        self.cluster, self.topic, self.t0 = cluster, topic, t0
        self.changes: list[tuple[float, int, int, int]] = []
        self.min_isr: int | None = None
        self._leaders: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-watch", daemon=True)

    def start(self) -> LeaderWatch:
        self._leaders = {p: v[0] for p, v in self.cluster.describe([self.topic]).get(self.topic, {}).items()}
        self._thread.start()
        return self

    def _run(self) -> None:
        admin = self.cluster.connection.admin({"socket.timeout.ms": 2000, "log_level": 0})
        while not self._stop.wait(WATCH_EVERY_S):
            try:
                meta = admin.list_topics(self.topic, timeout=1)
            except Exception:  # noqa: BLE001 - a node down or cut off: asked again next time
                continue
            t = meta.topics.get(self.topic)
            if t is None or t.error is not None:
                continue
            now = time.monotonic() - self.t0
            for p, pm in t.partitions.items():
                old = self._leaders.get(p, -1)
                if pm.leader != old:
                    self.changes.append((now, p, old, pm.leader))
                    self._leaders[p] = pm.leader
                isr = len(pm.isrs)
                self.min_isr = isr if self.min_isr is None else min(self.min_isr, isr)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class ClusterFaultRun:
    """The steps of ``fault`` against ``cluster`` for a trial writing ``topic``; :attr:`timeline`
    lists what was done when (seconds after ``t0``)."""

    def __init__(self, cluster: EmbeddedCluster, fault: ClusterFault, topic: str):
        self.cluster, self.fault, self.topic = cluster, fault, topic
        self.timeline: list[tuple[float, str]] = []
        self.first_step_s: float | None = None
        self.not_done: list[str] = []  # steps that did not happen: not due before sending ended, or no node
        self.t0 = time.monotonic()
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def _note(self, text: str) -> None:
        self.timeline.append((time.monotonic() - self.t0, text))

    def _push(self, at: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (at, self._seq, action))
        self._seq += 1

    def run(self, t0: float, sender: threading.Thread) -> None:
        """Every step at its time while ``sender`` sends (waiting on it, so that a failed sender is
        seen at once); steps not yet due when sending ends are not done (the trial's clean-up
        brings every node back)."""
        self.t0 = t0
        for step in self.fault.steps:
            self._push(step.at_s, lambda step=step: self._do(step))
        while self._queue:
            at, _, action = self._queue[0]
            ahead = self.t0 + at - time.monotonic()
            if ahead > 0:
                sender.join(ahead)
            if not sender.is_alive():
                self._note(f"sending ended: {len(self._queue)} step(s) not done")
                self.not_done += [f"a step due at {a:.1f} s (sending had ended)" for a, _, _ in sorted(self._queue)]
                return
            heapq.heappop(self._queue)
            action()

    # -- targets and actions -------------------------------------------------------------------
    def targets(self, target) -> list[int]:
        c = self.cluster
        if isinstance(target, int):
            return [target]
        if target == "all":
            return sorted(c.nodes)
        if target == "down":
            return [i for i, n in sorted(c.nodes.items()) if not n.alive()]
        if target == "isolated":
            return sorted(c.isolated)
        if target == "controller":
            ctl = c.controller()
            return [] if ctl is None else [ctl]
        leader, replicas, _ = c.describe([self.topic])[self.topic][0]
        if target == "leader":
            return [] if leader < 0 else [leader]
        return [r for r in replicas if r != leader and c.nodes[r].alive() and r not in c.isolated]

    def _do(self, step: ClusterStep) -> None:
        if self.first_step_s is None:
            self.first_step_s = time.monotonic() - self.t0
        nodes = self.targets(step.target)
        who = f"{step.target} " if isinstance(step.target, str) else ""
        if not nodes:
            self._note(f"{step.do} {step.target}: no such node now, nothing done")
            self.not_done.append(f"{step.do} {step.target} at {step.at_s:g} s (no such node)")
            return
        names = ", ".join(str(i) for i in nodes)
        c = self.cluster
        if step.do == "rolling-restart":
            for i in nodes:
                self._note(f"stopping node {i} (rolling restart)")
                c.restart(i)
                self._note(f"node {i} up again")
                c.wait_in_sync([self.topic])
                self._note(f"the topic's replicas in sync again after node {i}")
            return
        for i in nodes:
            if step.do in ("kill", "stop"):
                c.kill(i, hard=step.do == "kill")
            elif step.do == "start":
                c.start_node(i, wait=False)
            elif step.do == "restart":
                c.restart(i)
            elif step.do == "isolate":
                c.isolate(i)
            elif step.do == "heal":
                c.heal(i)
        self._note(f"{DONE[step.do]} {who}node {names}")
        if step.for_s is not None:
            undo = "heal" if step.do == "isolate" else "start"
            for i in nodes:
                back = ClusterStep(at_s=step.at_s + step.for_s, do=undo, target=i)
                self._push(time.monotonic() - self.t0 + step.for_s, lambda back=back: self._do(back))

    def describe(self) -> str:
        return "; ".join(f"{t:.2f} s {text}" for t, text in self.timeline)
