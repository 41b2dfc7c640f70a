"""One Kafka connection makes every client: properties from -X, a file, a spec section, checked once."""

import ast
from pathlib import Path

import pytest

from streamscale.broker.connection import (
    KafkaConnection,
    KafkaSection,
    build_connection,
    parse_assignments,
    parse_properties_text,
)
from streamscale.errors import ConfigError

PACKAGE = Path(__file__).parents[2] / "streamscale"


def test_no_module_but_the_connection_constructs_a_kafka_client():
    # the one place every client is made: a hand-built Producer/Consumer/AdminClient elsewhere
    # would miss the user's properties (SASL, SSL, ...)
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "connection.py" and path.parent.name == "broker":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in ("Producer", "Consumer", "AdminClient"):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_properties_file_parsing():
    text = (
        "# a comment\n! another\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : PLAIN\nclient.id = a=b\n"
        "ssl.ca.location=/etc/\\\n  ca.pem\n"
    )
    assert parse_properties_text(text, "f") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "client.id": "a=b",
        "ssl.ca.location": "/etc/ca.pem",
    }
    with pytest.raises(ConfigError, match=r"f:2: not a property"):
        parse_properties_text("a=1\njust words\n", "f")


def test_assignments_need_key_equals_value():
    assert parse_assignments(["client.id=x", "linger.ms = 7"]) == {"client.id": "x", "linger.ms": "7"}
    with pytest.raises(ConfigError, match="-X 'linger.ms': use key=value"):
        parse_assignments(["linger.ms"])


@pytest.mark.parametrize(
    "props, named",
    [
        ({"no.such.property": "1"}, "no.such.property"),
        ({"linger.ms": "soon"}, "linger.ms"),
        ({"group.id": "mine"}, "group.id"),
        ({"acks": "0"}, "acks"),
        ({"isolation.level": "read_committed"}, "isolation.level"),
    ],
)
def test_bad_or_managed_properties_are_one_error_naming_them(props, named):
    with pytest.raises(ConfigError, match=named) as info:
        KafkaConnection.of("127.0.0.1:1", props)
    assert "\n" not in str(info.value)


def test_precedence_section_then_file_then_x(tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMSCALE_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("STREAMSCALE_KAFKA_CONFIG", raising=False)
    f = tmp_path / "client.properties"
    f.write_text("client.id=from-file\nsocket.timeout.ms=2000\nbootstrap.servers=file:9092\n")
    section = {"bootstrap_servers": "spec:9092", "properties": {"client.id": "from-spec", "linger.ms": "3"}}
    bs, props = build_connection(None, ["client.id=from-x"], f, section)
    assert bs == "file:9092"  # the file's bootstrap.servers beats the spec's
    assert props == {"client.id": "from-x", "socket.timeout.ms": "2000", "linger.ms": "3"}
    assert build_connection("opt:9092", ["bootstrap.servers=x:1"], None, section)[0] == "opt:9092"
    monkeypatch.setenv("STREAMSCALE_BOOTSTRAP_SERVERS", "env:9092")
    assert build_connection(None, (), None, {})[0] == "env:9092"
    assert build_connection(None, (), None, {}, use_env=False)[0] is None
    monkeypatch.setenv("STREAMSCALE_KAFKA_CONFIG", str(f))
    assert build_connection(None, (), None, {})[1]["client.id"] == "from-file"
    with pytest.raises(ConfigError, match="nope.properties"):
        build_connection(None, (), tmp_path / "nope.properties", {})


def test_clients_get_the_properties_and_their_own_settings_win():
    conn = KafkaConnection.of("h:1", {"client.id": "me", "linger.ms": "50"})
    conf = conn.config({"linger.ms": 0, "group.id": "g"}, defaults={"client.id": "default", "fetch.wait.max.ms": 5})
    assert conf == {
        "bootstrap.servers": "h:1",
        "client.id": "me",
        "linger.ms": 0,
        "group.id": "g",
        "fetch.wait.max.ms": 5,
    }
    assert conn.spark_options() == {"kafka.bootstrap.servers": "h:1", "kafka.client.id": "me", "kafka.linger.ms": "50"}
    assert str(conn) == "h:1" and KafkaConnection.of(conn) is conn


def test_a_spec_section_is_checked_when_the_spec_is_read(tmp_path):
    from streamscale.benchmark.spec import parse_spec

    base = {
        "name": "k",
        "benchmark": {"sut": "uc1"},
        "execution": {"load": {"values": [1]}, "resources": {"values": [1]}, "duration_s": 10, "warmup_s": 1},
    }
    spec = parse_spec({**base, "kafka": {"properties": {"client.id": "x", "socket.keepalive.enable": True}}})
    assert spec.kafka.properties == {"client.id": "x", "socket.keepalive.enable": "true"}
    with pytest.raises(ConfigError, match=r"kafka\.properties.*no\.such\.thing"):
        parse_spec({**base, "kafka": {"properties": {"no.such.thing": 1}}})
    with pytest.raises(ConfigError, match="kafka.surprise"):
        parse_spec({**base, "kafka": {"surprise": 1}})
    assert KafkaSection().properties == {}


# A client of a broker that refuses connections: librdkafka logs "Connect to ... failed" (level 3)
# at once. The script waits for that line in the log file (bounded), then exits.
_UNREACHABLE_CLIENT = """
import sys, time
from streamscale.broker.connection import KafkaConnection, kafka_log_path
kind = sys.argv[1]
conn = KafkaConnection("127.0.0.1:1")
clients = {"producer": conn.producer, "consumer": lambda: conn.consumer({"group.id": "g"}), "admin": conn.admin}
client = clients[kind]()
if kind == "producer":
    client.produce("t", b"v")
elif kind == "consumer":
    client.subscribe(["t"])
deadline = time.monotonic() + 20
path = kafka_log_path()
while time.monotonic() < deadline:
    client.poll(0.1)
    if path is not None and path.exists() and "Connect to ipv4#127.0.0.1:1 failed" in path.read_text():
        break
    if path is None and kind == "producer" and time.monotonic() > deadline - 18:
        break  # stderr: nothing to wait for in a file
if kind == "producer":
    client.purge()
elif kind == "consumer":
    client.close()
print("done")
"""


def _run_unreachable(kind: str, env_log: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "STREAMSCALE_KAFKA_LOG": env_log}
    return subprocess.run(
        [sys.executable, "-c", _UNREACHABLE_CLIENT, kind], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_librdkafka_log_lines_go_to_the_log_file_not_the_terminal(tmp_path, kind):
    log = tmp_path / "logs" / "kafka.log"
    r = _run_unreachable(kind, str(log))
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "rdkafka" not in r.stderr and "|FAIL|" not in r.stderr, r.stderr
    text = log.read_text()
    # an admin client is a librdkafka producer underneath
    assert "Connect to ipv4#127.0.0.1:1 failed" in text and f"#{'producer' if kind == 'admin' else kind}-" in text


def test_a_log_of_dash_keeps_librdkafka_on_stderr(tmp_path):
    r = _run_unreachable("producer", "-")
    assert r.returncode == 0, r.stderr
    assert "Connect to ipv4#127.0.0.1:1 failed" in r.stderr


def test_the_default_kafka_log_is_fixed_for_child_processes(monkeypatch, tmp_path):
    import os

    from streamscale.broker.connection import LOG_ENV, kafka_log_path

    monkeypatch.delenv(LOG_ENV, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    path = kafka_log_path()
    assert path == tmp_path / "streamscale-logs" / f"kafka-{os.getpid()}.log"
    assert os.environ[LOG_ENV] == str(path)  # what processes started from here inherit
    assert kafka_log_path() == path


def test_java_clients_get_a_jaas_line_and_pem_stores_for_librdkafka_security_properties(tmp_path):
    # Spark's connector is Java's client: sasl.username/password and PEM paths are librdkafka's
    # names, which Java ignores (a warning), so they arrive translated or the client never logs in
    from streamscale.broker.security import Security

    made = Security.prepare(tmp_path, ["127.0.0.1"])  # librdkafka reads the files when configured
    ca, cert, key = made.ca_file, made.keystore_file, made.keystore_file  # one PEM: key and chain
    conn = KafkaConnection.of(
        "h:1",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": 'p"w\\',
            "ssl.ca.location": str(ca),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
            "ssl.endpoint.identification.algorithm": "none",
            "client.id": "me",
        },
    )
    assert conn.spark_options(java=True) == {
        "kafka.bootstrap.servers": "h:1",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.client.id": "me",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p\\"w\\\\";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": cert.read_text(),
        "kafka.ssl.keystore.key": key.read_text(),
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    assert conn.spark_options()["kafka.sasl.username"] == "u"  # streamscale's connector: librdkafka's names
    plain = KafkaConnection.of("h:1", {"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": "b"})
    assert plain.spark_options(java=True)["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    with pytest.raises(ConfigError, match="PLAIN and SCRAM only"):
        KafkaConnection.of("h:1", {"sasl.username": "a", "sasl.password": "b"}).spark_options(java=True)
    with pytest.raises(ConfigError, match="no equivalent in Spark's Kafka connector"):
        KafkaConnection.of("h:1", {"sasl.oauthbearer.config": "x=y"}).spark_options(java=True)
