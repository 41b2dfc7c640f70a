"""Every client of streamscale against a secured Kafka: SASL_SSL with SCRAM-SHA-512, TLS from a CA
made at start, ACLs on. One secured broker for the module; each test runs one client's path and
checks what arrived (counts read back through the secured listener), or one refusal's line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.broker.access import ensure_reachable
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import AccessDenied, AuthenticationFailed, BrokerUnreachable

pytestmark = pytest.mark.secured


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with EmbeddedBroker(security="sasl_ssl", log_dir=tmp_path_factory.mktemp("secured-logs")) as b:
        yield b


@pytest.fixture
def topic(secured):
    name = f"sec-{uuid.uuid4().hex[:8]}"
    with BrokerAccess(secured.connection) as a:
        a.create_topic(name, 2)
    return name


def read_all(conn: KafkaConnection, topic: str) -> list[bytes]:
    """Every record's value up to the end offsets, through ``conn`` (a consumer of its own)."""
    from confluent_kafka import TopicPartition

    with BrokerAccess(conn) as a:
        ends = a.end_offsets(topic)
    c = conn.consumer({"group.id": f"read-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got.append(m.value())
        return got
    finally:
        c.close()


def test_the_broker_has_no_plaintext_listener_and_its_client_file_works_as_is(secured):
    server = (Path(secured.data_dir) / "server.properties").read_text()
    listeners = next(line for line in server.splitlines() if line.startswith("listeners="))
    assert "PLAINTEXT" not in listeners and listeners.startswith("listeners=SASL_SSL://")
    assert "CONTROLLER:SASL_SSL" in server and "StandardAuthorizer" in server
    from streamscale.broker.connection import read_properties_file

    props = read_properties_file(secured.secrets.client_file)
    assert set(props) == {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location"}
    ensure_reachable(KafkaConnection.of(secured.bootstrap, props), timeout=20)
    with pytest.raises(BrokerUnreachable, match="secured cluster also needs its client properties"):
        ensure_reachable(secured.bootstrap, timeout=2)  # plaintext finds no listener


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"sasl.password": "wrong"}, "authentication failed for user 'streamscale'"),
        ({"sasl.username": "nobody"}, "authentication failed for user 'nobody'"),
    ],
)
def test_refused_credentials_end_at_once_with_the_user_and_the_broker(secured, change, said):
    conn = KafkaConnection.of(secured.bootstrap, {**secured.client_properties(), **change})
    t0 = time.monotonic()
    with pytest.raises(AuthenticationFailed, match=said) as caught:
        ensure_reachable(conn, timeout=25)
    assert time.monotonic() - t0 < 25  # not the connect timeout: the refusal itself
    assert secured.bootstrap in str(caught.value) and caught.value.exit_code == 2


def test_a_certificate_from_another_ca_is_a_tls_error(secured, tmp_path):
    from streamscale.broker.security import Security

    other = Security.prepare(tmp_path, ["127.0.0.1"])  # a CA of its own
    conn = KafkaConnection.of(secured.bootstrap, {**secured.client_properties(), "ssl.ca.location": str(other.ca_file)})
    with pytest.raises(AuthenticationFailed, match="TLS handshake .* not signed by a CA this client trusts"):
        ensure_reachable(conn, timeout=25)


def test_a_user_without_acls_is_told_which_operation_on_which_topic(secured, topic):
    guest = KafkaConnection.of(secured.bootstrap, secured.client_properties("guest"))
    ensure_reachable(guest, timeout=20)  # authenticated: the refusals below are the ACLs'
    with BrokerAccess(guest) as a:
        with pytest.raises(AccessDenied, match="user 'guest' may not create topic 'mine'"):
            a.create_topic("mine", 1)
        with pytest.raises(AccessDenied, match=f"user 'guest' may not describe topic '{topic}'"):
            a.partitions(topic)  # hidden by the ACLs, not missing
    # allowed to see and read the topic, not to write it: the generator names the write
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    with BrokerAccess(secured.connection) as a:
        bindings = [
            AclBinding(
                ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:guest", "*", op, AclPermissionType.ALLOW
            )
            for op in (AclOperation.DESCRIBE, AclOperation.READ)
        ]
        for fut in a.admin.create_acls(bindings).values():
            fut.result()
    from streamscale.loadgen import GeneratorConfig, LoadGenerator

    cfg = GeneratorConfig(bootstrap=guest, topic=topic, sensors=10, records=100, throttle=False)
    with pytest.raises(AccessDenied, match=f"user 'guest' may not write topic '{topic}'"):
        LoadGenerator(cfg).start()


def test_the_generator_writes_through_the_secured_listener(secured, topic):
    from streamscale.loadgen import GeneratorConfig, LoadGenerator

    cfg = GeneratorConfig(bootstrap=secured.connection, topic=topic, sensors=50, records=5_000, throttle=False)
    result = LoadGenerator(cfg).run()
    assert (result.delivered, result.failed) == (5_000, 0)
    values = read_all(secured.connection, topic)
    assert len(values) == 5_000 and len({json.loads(v)["identifier"] for v in values}) == 50


def test_log_sizes_through_kafka_python_and_the_lag_sampler(secured, topic):
    from streamscale.broker.log_dirs import LogDirSizes
    from streamscale.experiment.lagsampler import LagSampler

    producer = secured.connection.producer()
    for i in range(1_000):
        producer.produce(topic, b"x" * 100, partition=i % 2)
    assert producer.flush(30) == 0
    sizes = LogDirSizes(secured.connection)
    try:
        got = sizes.sizes({topic: [0, 1]})
    finally:
        sizes.close()
    assert set(got) == {(topic, 0), (topic, 1)} and all(v > 500 * 100 for v in got.values())
    with BrokerAccess(secured.connection) as a:
        sample = LagSampler(secured.connection, f"g-{uuid.uuid4().hex[:6]}", topic).sample_once(a)
    assert sample.lag == 1_000  # nothing committed: the whole topic


@pytest.mark.spark
@pytest.mark.parametrize("connector", ["spark", "python"])
def test_a_pipeline_reads_and_writes_through_both_connectors(secured, spark, connector):
    from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut

    r = run_sut(
        Workload("uc1", {"connector": connector}, sensors=200, period_s=0.1),
        policy=StopPolicy(4, drain_s=120),
        context=Context(bootstrap=secured.connection, spark=spark),
    )
    assert r.generated > 4_000 and r.processed_records == r.generated and r.undrained == 0


def test_a_reliability_trial_on_the_secured_broker_counts_every_record(tmp_path):
    from streamscale.reliability.spec import NoFault
    from streamscale.reliability.testbeds import ProxyTestbed
    from streamscale.reliability.tester import Trial, run_trial

    bed = ProxyTestbed(tmp_path, seed=1, security="sasl_ssl")
    try:
        assert bed.properties["security.protocol"] == "SASL_SSL"
        r = run_trial(bed, Trial("exactly-once", 5_000, 100, NoFault(), partitions=2, send_timeout_s=30))
    finally:
        bed.close()
    assert (r.acked, r.M, r.distinct, r.lost, r.duplicated) == (5_000, 5_000, 5_000, 0, 0)


def test_a_broker_advertising_an_address_nobody_answers_at_is_found_ready_every_time(tmp_path):
    # a fault proxy's broker before its proxy listens: a readiness check whose client learned the
    # advertised address (from an answer that came after its look timed out, which a TLS and SASL
    # handshake makes likely) sent every later look there and waited out its deadline
    from streamscale.broker.readiness import wait_until_ready
    from streamscale.ports import free_port

    with EmbeddedBroker(advertised_port=free_port(), security="sasl_ssl", log_dir=tmp_path, ready_timeout=60) as b:
        for _ in range(3):
            wait_until_ready(b.connection, 60, b.proc, b.log_path)


def _cli(*args, env, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "streamscale.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_the_commands_on_a_secured_daemon(tmp_path):
    env = {**os.environ, "STREAMSCALE_STATE_DIR": str(tmp_path / "state"), "STREAMSCALE_METRICS_PORT": "-1"}
    started = _cli("broker", "start", "--security", "sasl_ssl", env=env)
    try:
        assert started.returncode == 0, started.stderr
        client = next(w for w in started.stdout.split() if w.endswith("client.properties"))
        assert Path(client).is_file()
        assert _cli("topic", "create", "t", "-p", "2", env=env).returncode == 0  # its properties by default
        gen = _cli("generate", "-t", "t", "-n", "2000", "--unthrottled", env=env)
        assert gen.returncode == 0 and "2,000 delivered, 0 failed" in gen.stdout + gen.stderr, gen.stderr
        # the autoscaler: its monitor (kafka-python's DescribeLogDirs), controller and consumers
        state = tmp_path / "autoscaler"
        auto = _cli(
            "autoscale",
            "run",
            "-t",
            "t",
            "--consumer-capacity",
            "1MB",
            "--duration",
            "20",
            "--interval",
            "2",
            "--window",
            "2",
            "--sample-interval",
            "0.5",
            "--state-dir",
            str(state),
            env=env,
        )
        assert auto.returncode == 0, auto.stdout + auto.stderr
        import sqlite3

        sink = sqlite3.connect(state / "sink.sqlite")
        try:
            assert sink.execute("select count(*), count(distinct partition || '-' || offset) from t_t").fetchone() == (
                2_000,
                2_000,
            )
        finally:
            sink.close()
        status = _cli("broker", "status", env=env)
        assert status.returncode == 0 and "SASL_SSL" in status.stdout + status.stderr
        bootstrap = json.loads((tmp_path / "state" / "broker.json").read_text())["bootstrap"]
        examples = Path(__file__).resolve().parents[2] / "examples"
        for cmd in (
            ("generate", "-t", "t", "-n", "10"),
            ("topic", "list"),
            ("run-sut", "uc1", "-d", "5", "-b", bootstrap),
            ("benchmark", "run", str(examples / "uc1-small.yaml"), "--out", str(tmp_path / "b"), "-b", bootstrap),
            ("reliability", "run", str(examples / "reliability" / "reliability-small.yaml"), "-b", bootstrap),
        ):
            t0 = time.monotonic()
            wrong = _cli(*cmd, "-X", "sasl.password=wrong", env=env)
            assert wrong.returncode == 2 and time.monotonic() - t0 < 30
            assert "authentication failed for user 'streamscale'" in wrong.stdout + wrong.stderr
            assert "Traceback" not in wrong.stderr
        # the file works as is with --kafka-config against the address, as an external cluster's
        env_out = {k: v for k, v in env.items() if k != "STREAMSCALE_STATE_DIR"}
        env_out["STREAMSCALE_STATE_DIR"] = str(tmp_path / "elsewhere")
        listed = _cli("topic", "list", "-b", bootstrap, "--kafka-config", client, env=env_out)
        assert listed.returncode == 0 and "t 2" in [" ".join(line.split()) for line in listed.stdout.splitlines()]
    finally:
        _cli("broker", "stop", env=env)


def test_a_secured_cluster_keeps_every_acknowledged_record_across_a_leader_kill(tmp_path):
    # three nodes, inter-broker and controller traffic authenticated; the fault tester's admin
    # calls, leader watch, producer and receiver all on the secured listeners
    from streamscale.reliability.spec import ClusterFault, ClusterStep, ProducerSettings
    from streamscale.reliability.testbeds import ClusterTestbed
    from streamscale.reliability.tester import Trial, run_trial

    bed = ClusterTestbed(3, log_dir=tmp_path, security="sasl_ssl")
    try:
        server = (bed.cluster.nodes[1].data_dir / "server.properties").read_text()
        assert "inter.broker.listener.name=SASL_SSL" in server and "PLAINTEXT://" not in server
        fault = ClusterFault(kind="cluster", steps=[ClusterStep(at_s=1.0, do="kill", target="leader")])
        r = run_trial(
            bed,
            Trial(
                ProducerSettings(acks="all", idempotence=True),
                20_000,
                100,
                fault,
                rate=20_000,
                send_timeout_s=60,
                replication_factor=3,
                min_insync_replicas=2,
            ),
        )
    finally:
        bed.close()
    assert r.fault_injected and r.leader_changes >= 1
    assert (r.acked, r.M, r.distinct, r.lost, r.duplicated, r.acked_but_lost) == (20_000, 20_000, 20_000, 0, 0, 0)
