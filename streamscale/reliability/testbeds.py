"""Testbeds of the reliability tester: where its clients connect and how faults are applied —
an external cluster (no faults), the embedded broker behind the fault proxy, the embedded broker
in a network namespace whose veth pair tc netem degrades, or an embedded cluster of several
brokers whose nodes are killed, restarted and cut off."""

from __future__ import annotations

from streamscale.broker.connection import KafkaConnection
from streamscale.broker.embedded import EmbeddedBroker, Namespace
from streamscale.broker.readiness import wait_for_group_coordinator
from streamscale.errors import BrokerError, ReliabilityError
from streamscale.ports import free_port
from streamscale.reliability.proxy import FaultProxy
from streamscale.reliability.spec import NetemFault, NoFault, ProxyFault


class Testbed:
    """Where the clients connect and how faults are applied."""

    bootstrap: str
    properties: dict | None = None  # the user's Kafka client properties, for every client of a trial
    can_restart = False

    @property
    def connection(self) -> KafkaConnection:
        return KafkaConnection.of(self.bootstrap, self.properties)

    def apply(self, fault) -> None: ...
    def set_cut(self, on: bool) -> None: ...
    def clear(self) -> None: ...
    def restart_broker(self) -> None:
        raise NotImplementedError

    def proxy_resets(self) -> int:
        return 0

    def proxy_response_resets(self) -> int:
        """Resets that cut one of the broker's answers (the request had reached it)."""
        return 0

    def settle(self, topic: str) -> None:
        """Before a trial sends to the new ``topic``: until its replicas are all in sync."""

    def cluster_fault(self, fault, topic: str):
        raise ReliabilityError("faults of kind cluster need an embedded cluster (cluster: in the spec)")

    def leader_watch(self, topic: str, t0: float):
        return None

    def close(self) -> None: ...


class ExternalTestbed(Testbed):
    def __init__(self, bootstrap: KafkaConnection | str, properties: dict | None = None):
        conn = KafkaConnection.of(bootstrap, properties)
        self.bootstrap, self.properties = conn.bootstrap, dict(conn.properties)

    def apply(self, fault) -> None:
        if not isinstance(fault, NoFault):
            raise ReliabilityError("unreachable: faults on an external cluster are rejected up front")


class ProxyTestbed(Testbed):
    """Embedded broker that advertises a fault proxy's address: every client byte passes the proxy."""

    can_restart = True

    def __init__(
        self, log_dir=None, seed: int | None = None, properties: dict | None = None, security: str = "plaintext"
    ):
        # The proxy listens before the broker starts: the broker's first metadata answer names the
        # proxy's address, and a client that learned an address nobody listens on yet (the broker's
        # own readiness check among them) would send every later request there. The broker's port
        # is chosen first, so a port another process takes before the broker binds it is tried
        # again with new ports, as the broker does with its own.
        for attempt in range(3):
            self.proxy_port, broker_port = free_port(), free_port()
            self.proxy = FaultProxy(self.proxy_port, f"127.0.0.1:{broker_port}", seed=seed).start()
            self.broker = EmbeddedBroker(
                port=broker_port, advertised_port=self.proxy_port, log_dir=log_dir, security=security
            )
            try:
                self.broker.start()
                self.properties = {**self.broker.client_properties(), **(properties or {})}
                # the broker answers what it advertises
                wait_for_group_coordinator(KafkaConnection.of(self.proxy.address, self.properties))
                break
            except BaseException as exc:
                self.proxy.stop()
                self.broker.stop()
                clash = isinstance(exc, BrokerError) and any(
                    said in str(exc) for said in ("already in use", "exited with code")
                )
                if not clash or attempt == 2:
                    raise
        self.bootstrap = self.proxy.address
        self._faults: dict = {}

    def apply(self, fault) -> None:
        if isinstance(fault, ProxyFault):
            self._faults = {
                "delay_ms": fault.delay_ms,
                "jitter_ms": fault.jitter_ms,
                "reset_pct": fault.reset_pct,
                "drop_pct": fault.drop_pct,
            }
        else:
            self._faults = {}
        self.proxy.set(**self._faults)

    def set_cut(self, on: bool) -> None:
        self.proxy.set(**self._faults, cut=on)

    def clear(self) -> None:
        self._faults = {}
        self.proxy.clear()

    def restart_broker(self) -> None:
        self.broker.restart()

    def proxy_resets(self) -> int:
        return int(self.proxy.stats()["resets"])

    def proxy_response_resets(self) -> int:
        return int(self.proxy.stats().get("resets_response", 0))

    def close(self) -> None:
        self.proxy.stop()
        self.broker.stop()


class NetemTestbed(Testbed):
    """Embedded broker in its own network namespace; tc netem delays/drops packets on the veth pair."""

    can_restart = True

    def __init__(self, log_dir=None, properties: dict | None = None, security: str = "plaintext"):
        from streamscale.reliability.netem import NetemLink, require_netem

        require_netem()
        self.link = NetemLink().create()
        try:
            self.broker = EmbeddedBroker(
                namespace=Namespace(self.link.netns, self.link.peer_ip), log_dir=log_dir, port=9092, security=security
            ).start()
        except BaseException:
            self.link.destroy()
            raise
        self.properties = {**self.broker.client_properties(), **(properties or {})}
        self.bootstrap = self.broker.bootstrap

    def apply(self, fault) -> None:
        if isinstance(fault, NetemFault):
            self.link.set(fault.delay_ms, fault.loss_pct, fault.jitter_ms)
        else:
            self.link.clear()

    def clear(self) -> None:
        self.link.clear()

    def restart_broker(self) -> None:
        self.broker.restart()

    def close(self) -> None:
        self.broker.stop()
        self.link.destroy()


class ClusterTestbed(Testbed):
    """An embedded cluster of ``brokers`` nodes (in network namespaces of their own with
    ``isolation``); cluster faults act on its nodes, and after each trial every node is up and
    joined again before the records are read back."""

    def __init__(
        self,
        brokers: int = 3,
        isolation: bool = False,
        log_dir=None,
        properties: dict | None = None,
        security: str = "plaintext",
    ):
        from streamscale.broker.cluster import EmbeddedCluster

        self.cluster = EmbeddedCluster(brokers, log_dir=log_dir, isolation=isolation, security=security).start()
        self.properties = {**self.cluster.client_properties(), **(properties or {})}
        self.bootstrap = self.cluster.bootstrap

    def settle(self, topic: str) -> None:
        self.cluster.wait_in_sync([topic])

    def cluster_fault(self, fault, topic: str):
        from streamscale.reliability.clusterfaults import ClusterFaultRun

        return ClusterFaultRun(self.cluster, fault, topic)

    def leader_watch(self, topic: str, t0: float):
        from streamscale.reliability.clusterfaults import LeaderWatch

        return LeaderWatch(self.cluster, topic, t0).start()

    def clear(self) -> None:
        self.cluster.restore()

    def close(self) -> None:
        self.cluster.stop()
