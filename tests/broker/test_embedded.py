import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from streamscale.broker import BrokerAccess, EmbeddedBroker, daemon, embedded, readiness
from streamscale.processes import running


def test_context_manager_starts_on_free_loopback_port_and_stops(tmp_path):
    with EmbeddedBroker(log_dir=tmp_path) as b:
        pid, data = b.proc.pid, b.data_dir
        assert b.bootstrap.startswith("127.0.0.1:")
        with BrokerAccess(b.bootstrap) as a:
            a.create_topic("x", 2)
            assert a.topics() == {"x": 2}
        log = (tmp_path / f"kafka-{b.port}.log").read_text()
        assert "Kafka Server started" in log  # Kafka's own log goes to the file
        props = (data / "server.properties").read_text()
        assert "auto.create.topics.enable=false" in props and "process.roles=broker,controller" in props
    assert not running(pid)
    assert not data.exists()  # the temporary storage goes with the broker


def test_a_kept_data_dir_keeps_topics_and_records_across_starts(tmp_path):
    from confluent_kafka import Producer

    data = tmp_path / "data"
    with EmbeddedBroker(log_dir=tmp_path, data_dir=data) as b:
        with BrokerAccess(b.bootstrap) as a:
            a.create_topic("kept", 2)
        # a producer of its own, gone with this broker (the suite's cached ones would go on
        # reconnecting to it, and librdkafka would say so on stderr)
        p = Producer({"bootstrap.servers": b.bootstrap, "log_level": 0})
        for i in range(30):
            p.produce("kept", b"x", partition=i % 2)
        assert p.flush(30) == 0
        del p
    assert data.exists()
    with EmbeddedBroker(log_dir=tmp_path, data_dir=data) as b, BrokerAccess(b.bootstrap) as a:
        assert a.topics() == {"kept": 2}
        assert a.end_offsets("kept") == {0: 15, 1: 15}
        b.restart()  # same port and storage
        assert a.end_offsets("kept") == {0: 15, 1: 15}


def test_a_taken_port_is_one_clear_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(embedded.BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(port=port, log_dir=tmp_path).start()


def test_missing_jars_and_a_bad_heap_are_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCALE_KAFKA_LIBS", str(tmp_path / "nothing-here"))
    with pytest.raises(embedded.BrokerError, match="make install"):
        EmbeddedBroker(log_dir=tmp_path).start()
    monkeypatch.delenv("STREAMSCALE_KAFKA_LIBS")
    monkeypatch.setenv("STREAMSCALE_BROKER_HEAP", "lots")
    with pytest.raises(embedded.BrokerError, match="STREAMSCALE_BROKER_HEAP"):
        EmbeddedBroker(log_dir=tmp_path).start()
    assert not list(tmp_path.glob("streamscale-kafka-*"))


def test_broker_is_stopped_when_the_body_raises(tmp_path):
    with pytest.raises(RuntimeError):
        with EmbeddedBroker(log_dir=tmp_path) as b:
            pid = b.proc.pid
            raise RuntimeError("test failure")
    assert not running(pid)


def test_broker_dies_with_a_killed_parent(tmp_path):
    # A parent killed by SIGKILL runs no cleanup; the broker must still not be orphaned.
    script = textwrap.dedent(f"""
        import sys, time
        from streamscale.broker import EmbeddedBroker
        b = EmbeddedBroker(log_dir={str(tmp_path)!r}).start()
        print(b.proc.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        broker_pid = int(parent.stdout.readline())
        assert running(broker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while running(broker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(broker_pid)
    finally:
        parent.kill()


def test_stale_state_file_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCALE_STATE_DIR", str(tmp_path))
    # a pid that is not a broker (this test process) must never be signalled
    (tmp_path / "broker.json").write_text(
        f'{{"pid": {os.getpid()}, "port": 1, "bootstrap": "127.0.0.1:1", "log_path": "x", "binary": "java", '
        '"started_at": 0}'
    )
    assert daemon.daemon_status() is None
    assert daemon.daemon_stop() is None
    assert not (tmp_path / "broker.json").exists()


def test_bootstrap_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCALE_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("STREAMSCALE_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(embedded.BrokerError, match="--bootstrap-servers"):
        daemon.resolve_connection(None)
    import streamscale.broker.access as access_mod

    probed: list[str] = []
    monkeypatch.setattr(access_mod, "ensure_reachable", lambda bs, *a, **k: probed.append(str(bs)))  # no such hosts
    monkeypatch.setenv("STREAMSCALE_BOOTSTRAP_SERVERS", "kafka:9092")
    assert daemon.resolve_connection(None).bootstrap == "kafka:9092"
    assert daemon.resolve_connection("other:1").bootstrap == "other:1"
    assert probed == ["kafka:9092", "other:1"]  # whichever wins is checked to answer


class _Answers:
    """kafka-python's admin client, made anew for each look: answers DescribeGroups with the given
    outcomes in turn (an exception raised, or the group's error text), then without error."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.calls = 0
        self.closed = 0

    def __call__(self, **arguments):
        answers = self

        class _Client:
            def describe_groups(self, groups):
                answers.calls += 1
                outcome = answers.outcomes.pop(0) if answers.outcomes else None
                if isinstance(outcome, Exception):
                    raise outcome
                return {groups[0]: {"error": outcome}}

            def close(self):
                answers.closed += 1

        return _Client()


def test_coordinator_wait_retries_a_timed_out_request_and_a_moving_or_loading_coordinator(monkeypatch):
    import kafka
    import kafka.errors as errors

    # a busy machine: the first request times out, the coordinator moves, then its offsets topic loads
    answers = _Answers(
        [
            errors.KafkaTimeoutError("request timed out"),
            errors.NotCoordinatorError("moved"),
            str(errors.CoordinatorLoadInProgressError("loading")),
        ]
    )
    monkeypatch.setattr(kafka, "KafkaAdminClient", answers)
    readiness.wait_for_group_coordinator("127.0.0.1:1", timeout=30)
    assert answers.calls == 4 and answers.closed == 4


def test_coordinator_wait_fails_at_once_on_another_error_and_at_the_deadline(monkeypatch):
    import kafka
    import kafka.errors as errors

    answers = _Answers([str(errors.GroupAuthorizationFailedError("denied"))])
    monkeypatch.setattr(kafka, "KafkaAdminClient", answers)
    with pytest.raises(embedded.BrokerError, match="no group coordinator.*GroupAuthorizationFailed"):
        readiness.wait_for_group_coordinator("127.0.0.1:1", timeout=30)
    assert answers.calls == 1
    answers = _Answers([errors.KafkaTimeoutError("request timed out")] * 3)
    monkeypatch.setattr(kafka, "KafkaAdminClient", answers)
    with pytest.raises(embedded.BrokerError, match="timed out"):
        readiness.wait_for_group_coordinator("127.0.0.1:1", timeout=0)
    assert answers.calls == 1


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    # Kafka's storage tool reads `-t -xyz` as an option: a 3-node start failed to format, 1 in 64
    import base64
    import uuid

    from streamscale.broker import kafka_server

    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))  # 111110..: "-" in URL-safe base64
    assert base64.urlsafe_b64encode(dash.bytes).decode().startswith("-")
    drawn = iter([dash, dash, uuid.UUID(int=1)])
    monkeypatch.setattr(kafka_server.uuid, "uuid4", lambda: next(drawn))
    assert kafka_server.new_cluster_id() == base64.urlsafe_b64encode(uuid.UUID(int=1).bytes).decode().rstrip("=")
    assert next(drawn, None) is None  # drawn again until one did not start with a dash


def test_the_installed_class_data_archive_is_mapped_by_the_broker(broker):
    from streamscale.broker import kafka_server

    if not hasattr(broker, "proc"):
        pytest.skip("an external cluster: no broker of ours")
    jsa = kafka_server.kafka_libs() / kafka_server.CLASS_DATA_FILE
    if not jsa.is_file():
        pytest.fail(f"`make install` writes {jsa}; it is missing (see .venv/class-data.log)")
    assert f"-XX:SharedArchiveFile={jsa}" in broker.proc.args
    # a JVM that cannot use the archive says so in this one line of the broker's log (and starts without it)
    assert "Unable to use shared archive" not in pathlib.Path(broker.log_path).read_text(errors="replace")
    assert kafka_server._class_data(jsa.parent, dump="/x.jsa")[0] == "-XX:ArchiveClassesAtExit=/x.jsa"


def test_only_a_whole_archive_from_a_clean_exit_is_kept(tmp_path):
    from streamscale.broker.classdata import keep_archive

    tmp, path = tmp_path / "a.jsa.tmp", tmp_path / "a.jsa"
    tmp.write_bytes(b"x")
    assert not keep_archive(tmp, path, clean_exit=False) and not tmp.exists() and not path.exists()
    tmp.write_bytes(b"")
    assert not keep_archive(tmp, path, clean_exit=True) and not tmp.exists() and not path.exists()
    tmp.write_bytes(b"x")
    assert keep_archive(tmp, path, clean_exit=True) and path.read_bytes() == b"x" and not tmp.exists()


@pytest.mark.parametrize("var", ["JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"])
def test_a_collector_the_java_launcher_is_given_is_the_broker_s(monkeypatch, var):
    # a second collector on the broker's command line would stop its JVM at once
    from streamscale.broker import kafka_server

    monkeypatch.delenv("JDK_JAVA_OPTIONS", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    assert "-XX:+UseG1GC" in kafka_server.server_command(pathlib.Path("p"), pathlib.Path("l"))
    monkeypatch.setenv(var, "-Xss1m -XX:+UseSerialGC")
    cmd = kafka_server.server_command(pathlib.Path("p"), pathlib.Path("l"))
    assert not [c for c in cmd if c.endswith("GC") or "GCPause" in c]
    jvm = cmd[: cmd.index("kafka.Kafka")]
    ran = subprocess.run([*jvm, "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"\bUseSerialGC\s+= true", ran.stdout)
