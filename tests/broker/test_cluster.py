"""The embedded cluster: a daemon of several brokers from the command line (who leads which
partition, which replicas are in sync, topics with replicas), and no broker JVM left behind by a
killed parent."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamscale.processes import running, stat_fields
from streamscale.waiting import wait_for

EXE = str(Path(sys.executable).parent / "streamscale")


def run(*args, env):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=180, env={**os.environ, **env})


@pytest.fixture
def state(tmp_path):
    env = {
        "STREAMSCALE_STATE_DIR": str(tmp_path),
        "STREAMSCALE_BOOTSTRAP_SERVERS": "",
        "STREAMSCALE_METRICS_PORT": "-1",
    }
    yield env
    run("broker", "stop", env=env)


def test_a_cluster_from_the_command_line(state):
    r = run("broker", "start", "--brokers", "3", env=state)
    assert r.returncode == 0, r.stderr
    assert "cluster of 3 brokers running at" in r.stdout
    info = json.loads((Path(state["STREAMSCALE_STATE_DIR"]) / "cluster.json").read_text())
    pids = [n["pid"] for n in info["nodes"]]
    assert len(set(pids)) == 3 and all(running(p) for p in pids)
    for n in info["nodes"]:  # each its own log file, and a bounded heap
        assert Path(n["log_path"]).exists()
        cmdline = Path(f"/proc/{n['pid']}/cmdline").read_bytes().split(b"\0")
        assert any(a.startswith(b"-Xmx") for a in cmdline)
    r = run("broker", "start", env=state)
    assert r.returncode != 0 and "already running" in r.stderr and "Traceback" not in r.stderr
    r = run("topic", "create", "orders", "-p", "2", "-r", "3", "--min-insync-replicas", "2", env=state)
    assert r.returncode == 0, r.stderr
    assert "replication factor 3, min.insync.replicas 2" in r.stdout
    r = run("topic", "create", "bad", "-r", "2", "--min-insync-replicas", "3", env=state)
    assert r.returncode != 0 and "cannot exceed the replication factor" in r.stderr
    r = run("broker", "status", env=state)
    assert r.returncode == 0, r.stderr
    assert "3 of 3 brokers up" in r.stdout
    rows = re.findall(r"orders\[(\d)\]\s+leader (\d)\s+replicas \[([\d, ]+)\]\s+in sync \[([\d, ]+)\]", r.stdout)
    assert len(rows) == 2, r.stdout
    for _, leader, replicas, isr in rows:
        assert sorted(replicas.split(", ")) == ["1", "2", "3"] and leader in replicas
        assert sorted(isr.split(", ")) == ["1", "2", "3"]
    # a node down: the status says so, and the cluster still answers
    os.kill(pids[0], signal.SIGKILL)
    wait_for(lambda: not running(pids[0]), 10, "the killed node to exit")
    r = run("broker", "status", env=state)
    assert r.returncode == 0 and "2 of 3 brokers up" in r.stdout, r.stdout + r.stderr
    r = run("broker", "stop", env=state)
    assert r.returncode == 0 and "stopped cluster" in r.stdout
    assert not any(running(p) for p in pids) and not os.path.exists(info["data_dir"])
    assert run("broker", "status", env=state).returncode == 1


def test_a_clusters_brokers_die_with_a_killed_parent(tmp_path):
    # A parent killed by SIGKILL runs no cleanup; none of its cluster's JVMs may be orphaned.
    script = textwrap.dedent(f"""
        import time
        from streamscale.broker.cluster import EmbeddedCluster
        c = EmbeddedCluster(3, log_dir={str(tmp_path)!r}, data_dir={str(tmp_path / "data")!r}).start()
        print(" ".join(str(p) for p in c.pids()), flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(running(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        wait_for(lambda: not any(running(p) for p in pids), 15, "the cluster's brokers to exit")
    finally:
        parent.kill()
        parent.wait(10)


def _jvms_under(folder: Path) -> list[int]:
    """Kafka server JVMs whose command line names a file under ``folder``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmdline and str(folder).encode() in cmdline and running(int(proc.name)):
                found.append(int(proc.name))
    return found


@pytest.mark.parametrize("brokers", [1, 3])
def test_a_start_that_aborts_before_recording_its_daemons_leaves_none_running(state, tmp_path, brokers):
    # `broker start` aborted (SIGABRT, as inside librdkafka) once its JVMs ran and before its state
    # file: nothing else could stop them, so the guardian does; a session of their own each
    data = tmp_path / "data"
    r = run(
        "broker",
        "start",
        "--brokers",
        str(brokers),
        "--data-dir",
        str(data),
        env={**state, "STREAMSCALE_TEST_ABORT_BEFORE_RECORD": "1"},
    )
    assert r.returncode == -signal.SIGABRT
    assert not (Path(state["STREAMSCALE_STATE_DIR"]) / ("cluster.json" if brokers > 1 else "broker.json")).exists()
    wait_for(lambda: not _jvms_under(data), 20, "the unrecorded brokers to be killed")
    r = run("broker", "start", "--brokers", str(brokers), env=state)  # and a start after it works
    assert r.returncode == 0, r.stderr


def test_a_cluster_starts_and_stops_again_and_again_on_a_busy_cpu(state):
    from streamscale.broker import daemon

    # one burner beside the rest of the suite: the cluster's JVMs and librdkafka's threads wait for a CPU
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)]
    old = os.environ.get("STREAMSCALE_STATE_DIR")
    os.environ["STREAMSCALE_STATE_DIR"] = state["STREAMSCALE_STATE_DIR"]
    try:
        for _ in range(3):
            info = daemon.cluster_start(3)
            assert len(info.alive()) == 3 and (daemon.state_dir() / "cluster.json").exists()
            stopped = daemon.cluster_stop()
            assert stopped is not None and not any(running(p) for p in info.pids)
    finally:
        for b in burners:
            b.kill()
            b.wait()
        if old is None:
            os.environ.pop("STREAMSCALE_STATE_DIR")
        else:
            os.environ["STREAMSCALE_STATE_DIR"] = old


def test_a_stop_waits_for_a_node_that_is_still_exiting(monkeypatch):
    from streamscale.broker import daemon

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # its first line comes from the new program: the exec is done (while it is under way, the
        # command line reads empty, as an exiting process's does)
        assert child.stdout.readline() == "up\n"
        assert not daemon._exiting(child.pid)  # running: its command line reads
        assert not daemon._exiting(2)  # kthreadd: no command line, but a kernel thread
        child.kill()
        wait_for(lambda: stat_fields(child.pid)[0] == "Z", 10, "a zombie")
        assert not daemon._exiting(child.pid)  # a zombie has exited
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert not daemon._exiting(child.pid)  # reaped: gone

    # a node that no longer looks like our broker while it closes its files is waited for
    looks = iter([True, True, True, False])
    monkeypatch.setattr(daemon, "_pid_is_our_broker", lambda pid, props: False)
    monkeypatch.setattr(daemon, "_exiting", lambda pid: next(looks))
    node = [{"pid": child.pid, "properties": "x"}]
    assert daemon._wait_gone(node, timeout=30)
    assert next(looks, "spent") == "spent"
    monkeypatch.setattr(daemon, "_exiting", lambda pid: True)
    assert not daemon._wait_gone(node, timeout=0.2)


@pytest.mark.parametrize("kept", [False, True], ids=["temporary", "kept-storage"])
def test_a_port_another_process_took_before_its_node_bound_it_is_tried_again_elsewhere(tmp_path, monkeypatch, kept):
    import socket

    from streamscale.broker import cluster as cluster_module
    from streamscale.broker.cluster import EmbeddedCluster
    from streamscale.broker.kafka_server import is_formatted
    from streamscale.ports import free_port

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    handed = iter([port])  # the first port handed out is one another process holds by then
    monkeypatch.setattr(cluster_module, "free_port", lambda: next(handed, None) or free_port())
    try:
        data = tmp_path / "data" if kept else None
        with EmbeddedCluster(3, log_dir=tmp_path / "logs", data_dir=data) as c:
            assert port not in {n.port for n in c.nodes.values()} and len(c.pids()) == 3
            assert sorted(c.connection.admin().list_topics(timeout=10).brokers) == [1, 2, 3]
        assert "Address already in use" in (tmp_path / "logs" / f"kafka-node1-{port}.log").read_text()
        if kept:  # the storage the first try formatted, kept as given
            assert all(is_formatted(data / f"node-{i}") for i in (1, 2, 3))
    finally:
        taken.close()


# When the replicas count as settled, on views worked out by hand: node 1 was the leader, was cut
# off, and is healed; nodes 2 and 3 elected node 2 and dropped node 1 from the ISR.
def test_a_healed_node_s_stale_view_does_not_settle_the_replicas():
    from streamscale.broker.cluster import settled

    stale = {"t": {0: (1, [1, 2, 3], [1, 2, 3])}}  # node 1, before replaying the controllers' log
    current = {"t": {0: (2, [1, 2, 3], [2, 3])}}
    assert not settled({1: stale, 2: current, 3: current}, ["t"])
    assert not settled({2: current, 3: current}, ["t"])  # agreed, but node 1 not back in the ISR
    caught_up = {"t": {0: (2, [1, 2, 3], [3, 2, 1])}}  # the order of the ISR is the node's own
    again = {"t": {0: (2, [1, 2, 3], [1, 2, 3])}}
    assert settled({1: caught_up, 2: again, 3: again}, ["t"])


def test_replicas_are_not_settled_where_a_node_lacks_the_topic_or_a_leader():
    from streamscale.broker.cluster import settled

    ok = {"t": {0: (1, [1, 2], [1, 2]), 1: (2, [2, 1], [2, 1])}}
    assert settled({1: ok, 2: ok}, ["t"])
    assert not settled({1: ok, 2: {}}, ["t"])  # node 2 has not heard of the topic yet
    assert not settled({1: {"t": {}}, 2: {"t": {}}}, ["t"])  # no partitions known
    leaderless = {"t": {0: (-1, [1, 2], [1, 2]), 1: (2, [2, 1], [2, 1])}}
    assert not settled({1: leaderless, 2: leaderless}, ["t"])
    assert not settled({}, ["t"])
