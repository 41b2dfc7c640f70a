"""An embedded Kafka cluster: N KRaft nodes on this machine, each broker and controller at once, each
its own JVM with its own ports, storage and log file, every one in the controller quorum (three
survive the loss of one), started and stopped by process id (:mod:`.kafka_server` builds their
command lines and settings).

The nodes listen on loopback, or, with ``isolation``, each in a network namespace of its own
(:mod:`.clusternet`), so that one can be cut off from the others and from the clients. Faults act
on a node by id: :meth:`EmbeddedCluster.kill` (SIGKILL, or a clean stop), :meth:`start_node`,
:meth:`restart`, :meth:`isolate` and :meth:`heal`; :meth:`leader` and :meth:`controller` say which
node a fault should hit.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamscale.broker import kafka_server
from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.broker.readiness import wait_for_group_coordinator
from streamscale.broker.security import SecuredKafka, Security, check_mode
from streamscale.errors import BrokerError
from streamscale.ports import free_port
from streamscale.processes import die_with_parent, remove_at_exit, stop_process


@dataclass
class Node:
    node_id: int
    host: str
    port: int
    controller_port: int
    data_dir: Path
    log_path: Path
    prefix: list[str] = field(default_factory=list)  # runs it inside its network namespace
    props: Path | None = None
    log4j: Path | None = None
    proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class EmbeddedCluster(SecuredKafka):
    """``brokers`` Kafka nodes; use as a context manager.

    >>> with EmbeddedCluster(3) as cluster:
    ...     cluster.bootstrap  # '127.0.0.1:NNNNN,127.0.0.1:NNNNN,127.0.0.1:NNNNN'
    """

    def __init__(
        self,
        brokers: int = 3,
        log_dir=None,
        ready_timeout: float = 90.0,
        isolation: bool = False,
        daemon: bool = False,
        data_dir=None,
        security: str = "plaintext",
        hosts: list | None = None,
    ):
        self.security = check_mode(security)
        # hosts of their own a caller made (streamscale.hosts), one per node: each its ``ip`` and
        # ``command(args)``; their network is the caller's, made and removed by it
        self.hosts = hosts
        self.secrets = None  # sasl_ssl: its Security (certificates, users, client properties)
        self.guardian = None  # a daemon's: kills the nodes if the starting process dies first
        if not 1 <= brokers <= 9:
            raise BrokerError(f"an embedded cluster has 1 to 9 brokers, not {brokers}")
        self.brokers = brokers
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.gettempdir()) / "streamscale-broker"
        self.ready_timeout = ready_timeout
        self.isolation = isolation
        self.daemon = daemon
        self.keep_data = data_dir is not None
        self.root = Path(data_dir).resolve() if data_dir is not None else None
        self.nodes: dict[int, Node] = {}
        self.network = None
        self.started_s: float | None = None
        self.isolated: set[int] = set()

    # -- life ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if not self.nodes:
            raise BrokerError("cluster not started")
        return ",".join(n.address for n in self.nodes.values())

    def _at(self, address: str) -> KafkaConnection:
        return KafkaConnection.of(address, self.client_properties())

    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.nodes.values() if n.proc is not None]

    def start(self) -> EmbeddedCluster:
        t0 = time.monotonic()
        kafka_server.kafka_libs()  # one clear error before anything is made
        kafka_server.java_binary()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # the ports are free when picked, and another process may bind one before its node does:
        # such a start is tried again on other ports, in fresh storage (stop removed the first's),
        # or a kept cluster's in its own storage, as any restart of it is (on ports picked anew)
        for attempt in range(3):
            self._make_root()
            try:
                return self._start_nodes(t0)
            except BrokerError:
                if attempt == 2 or self.network is not None or self.hosts or not self._port_taken():
                    raise
                self.nodes = {}
        raise AssertionError("unreachable")  # pragma: no cover

    def _make_root(self) -> None:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="streamscale-kafka-cluster-"))
            if self.guardian is not None:
                self.guardian.remove(self.root)
            elif not self.daemon:
                remove_at_exit(self.root)

    def _port_taken(self) -> bool:
        """Whether a node failed because its port was bound by another process meanwhile."""
        return any(
            n.log_path.exists() and "Address already in use" in n.log_path.read_text(errors="replace")
            for n in self.nodes.values()
        )

    def _start_nodes(self, t0: float) -> EmbeddedCluster:
        try:
            self._make_nodes()
            cluster_id = kafka_server.new_cluster_id()
            voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes.values())
            if self.security == "sasl_ssl":
                self.secrets = Security.prepare(self.root, sorted({n.host for n in self.nodes.values()}))
            for n in self.nodes.values():
                extra = (
                    self.secrets.server_settings(n.host, n.port, n.controller_port, n.address) if self.secrets else None
                )
                text = kafka_server.node_properties(
                    n.node_id, self.brokers, n.data_dir, n.host, n.port, n.controller_port, voters, extra
                )
                n.props, n.log4j = kafka_server.write_config(n.data_dir, text)
            self._format(cluster_id)
            for n in self.nodes.values():
                self._spawn(n)
            self.wait_ready(set(self.nodes))
            wait_for_group_coordinator(self.connection, self.ready_timeout)
            self.started_s = time.monotonic() - t0
            return self
        except BaseException:
            self.stop()
            raise

    def _make_nodes(self) -> None:
        if self.isolation:
            from streamscale.broker.clusternet import ClusterNetwork

            self.network = ClusterNetwork(self.brokers).create()
        for i in range(1, self.brokers + 1):
            if self.network is not None:  # a namespace of its own: the usual ports are free there
                host, port, cport, prefix = self.network.ip(i), 9092, 9093, self.network.prefix_cmd(i)
            elif self.hosts:
                host, port, cport, prefix = self.hosts[i - 1].ip, 9092, 9093, self.hosts[i - 1].command([])
            else:
                host, port, cport, prefix = "127.0.0.1", free_port(), free_port(), []
            self.nodes[i] = Node(
                i, host, port, cport, self.root / f"node-{i}", self.log_dir / f"kafka-node{i}-{port}.log", prefix
            )

    def _format(self, cluster_id: str) -> None:
        """Every node's storage with the same cluster id, the formatting JVMs side by side."""
        errors: list[BaseException] = []

        def one(n: Node) -> None:
            try:
                if not kafka_server.is_formatted(n.data_dir):
                    with open(n.log_path, "ab") as log:
                        extra_args = self.secrets.format_arguments() if self.secrets else None
                        kafka_server.format_storage(n.data_dir, n.props, n.log4j, log, n.prefix, cluster_id, extra_args)
            except BaseException as exc:  # noqa: BLE001 - raised below, in this thread
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(n,)) for n in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def _spawn(self, n: Node) -> None:
        if not self.daemon and threading.current_thread() is not threading.main_thread():
            # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends
            raise BrokerError("start (or restart) the embedded cluster's brokers from the main thread")
        cmd = kafka_server.server_command(n.props, n.log4j, n.prefix)
        with open(n.log_path, "ab") as log:
            kwargs = {"start_new_session": True} if self.daemon else {"preexec_fn": die_with_parent}
            n.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)
        if self.guardian is not None:
            self.guardian.watch(n.proc.pid)

    def wait_ready(self, nodes: set[int], timeout: float | None = None) -> None:
        """Until every node in ``nodes`` answers a metadata request of its own naming itself as a
        live broker (asked of the node itself: the others would name a just-killed node until its
        session expires)."""
        waited = timeout or self.ready_timeout
        deadline = time.monotonic() + waited
        pending = set(nodes)
        # one admin client per node for the whole wait: a client made and dropped every 0.1 s
        # while a node starts leaves requests in flight in clients being destroyed
        admins = {i: self._at(self.nodes[i].address).admin({"socket.timeout.ms": 2000, "log_level": 0}) for i in nodes}
        while pending:
            for i in sorted(pending):
                n = self.nodes[i]
                if n.proc is not None and n.proc.poll() is not None:
                    raise BrokerError(f"broker {i} exited with code {n.proc.returncode}; its log: {n.log_path}")
                try:
                    if i in {b.id for b in admins[i].list_topics(timeout=2).brokers.values()}:
                        pending.discard(i)
                except Exception:  # noqa: BLE001 - polled until the deadline
                    pass
            if pending and time.monotonic() > deadline:
                raise BrokerError(f"brokers {sorted(pending)} were not up after {waited:.0f} s")
            if pending:
                time.sleep(0.1)

    def stop(self, timeout: float = 30.0) -> None:
        """Every node down. Storage that is removed afterwards needs no clean shutdown: SIGKILL.
        Kept storage gets SIGTERM, sent to all nodes at once: one after another, the last ones
        would wait for a controller quorum that is already gone."""
        procs = [n.proc for n in self.nodes.values() if n.proc is not None and n.proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM if self.keep_data else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        for n in self.nodes.values():
            n.proc = None
        if self.network is not None:
            self.network.destroy()
            self.network = None
        if self.root is not None and not self.keep_data:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- faults -------------------------------------------------------------------------
    def _stop_proc(self, n: Node, hard: bool, timeout: float = 30.0) -> None:
        if n.proc is None:
            return
        stop_process(n.proc, signal.SIGKILL if hard else signal.SIGTERM, timeout)
        n.proc = None

    def kill(self, node: int, hard: bool = True) -> None:
        """Node ``node`` down: SIGKILL (``hard``) or a clean stop (SIGTERM: leadership handed over,
        logs closed)."""
        self._stop_proc(self.nodes[node], hard)

    def start_node(self, node: int, wait: bool = True) -> None:
        """Node ``node`` up again on its ports and storage."""
        n = self.nodes[node]
        if not n.alive():
            self._spawn(n)
        if wait:
            self.wait_ready({node})

    def restart(self, node: int, hard: bool = False) -> None:
        self.kill(node, hard)
        self.start_node(node)

    def isolate(self, node: int) -> None:
        if self.network is None:
            raise BrokerError("isolating a broker needs a cluster started with isolation (network namespaces)")
        self.network.isolate(node)
        self.isolated.add(node)

    def heal(self, node: int) -> None:
        if self.network is not None and node in self.isolated:
            self.network.heal(node)
            self.isolated.discard(node)

    def restore(self) -> None:
        """Every node up and joined again: the cut off healed, the down started, all ready."""
        for i in sorted(self.isolated):
            self.heal(i)
        for n in self.nodes.values():
            if not n.alive():
                self._spawn(n)
        self.wait_ready(set(self.nodes))

    # -- who is who -----------------------------------------------------------------------
    def _reachable(self) -> list[Node]:
        """The nodes that are up and not cut off: the ones a client can ask."""
        return [n for n in self.nodes.values() if n.alive() and n.node_id not in self.isolated]

    def describe(self, topics: list[str] | None = None) -> dict:
        """{topic: {partition: (leader, replicas, isr)}} as the cluster's metadata says (leader -1:
        none), asked of the nodes that are up and not cut off."""
        live = [n.address for n in self._reachable()]
        with BrokerAccess(self._at(",".join(live) or self.bootstrap), timeout=10) as access:
            return access.partition_layout(topics)

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.describe([topic])[topic][partition][0]

    def controller(self) -> int | None:
        """The active controller: the quorum leader of the newest epoch the live nodes have written."""
        best = (-1, None)
        for n in self.nodes.values():
            state = n.data_dir / "metadata" / "__cluster_metadata-0" / "quorum-state"
            try:
                doc = json.loads(state.read_text())
            except (OSError, ValueError):
                continue
            epoch, leader = int(doc.get("leaderEpoch", -1)), doc.get("leaderId")
            if leader is not None and leader >= 0 and epoch > best[0]:
                best = (epoch, int(leader))
        return best[1]

    def views(self, topics: list[str]) -> dict[int, dict]:
        """{node: its own answer to :meth:`describe`} for every node that is up and not cut off,
        each asked through a client that knows only that node (its first request goes there)."""
        out: dict[int, dict] = {}
        for n in self._reachable():
            with BrokerAccess(self._at(n.address), timeout=10) as access:
                out[n.node_id] = access.partition_layout(topics)
        return out

    def wait_in_sync(self, topics: list[str], timeout: float = 60.0) -> None:
        """Until every live node says that every partition of ``topics`` has a leader and all its
        replicas in sync, and all say the same (:func:`settled`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if settled(self.views(topics), topics):
                    return
            except Exception:  # noqa: BLE001 - polled until the deadline
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"the replicas of {topics} were not all in sync after {timeout:.0f} s")
            time.sleep(0.2)


def settled(views: dict[int, dict], topics: list[str]) -> bool:
    """Whether the nodes' views ({node: {topic: {partition: (leader, replicas, isr)}}}) agree and
    show each of ``topics`` with a leader for every partition and every replica in sync.

    One view is not enough: a node healed after a cut, or started again, answers from the metadata
    it had when it went until it has replayed the controllers' log, e.g. itself the leader with
    every replica in sync while the others elected another leader and dropped it from the ISR. A
    reader sent to it then reads that node's old log end (none of what the new leader took) and
    counts as lost what the cluster holds."""
    if not views:
        return False
    first = next(iter(views.values()))
    if set(first) != set(topics) or any(not first[t] for t in topics):
        return False
    in_sync = all(leader >= 0 and set(isr) == set(rep) for t in topics for leader, rep, isr in first[t].values())
    return in_sync and all(_same(v, first) for v in views.values())


def _same(a: dict, b: dict) -> bool:
    """The same layout, replicas and ISRs compared as sets (their order is the answering node's)."""

    def norm(view: dict) -> dict:
        return {t: {p: (ld, frozenset(r), frozenset(i)) for p, (ld, r, i) in ps.items()} for t, ps in view.items()}

    return norm(a) == norm(b)
