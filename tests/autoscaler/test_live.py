"""The live autoscaler against the embedded broker: consumers follow the load, hand-overs never
overlap, every record reaches the sink exactly once, and a controller killed mid-reassignment recovers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest

from streamscale.autoscaler.live.backend import LocalProcessBackend
from streamscale.autoscaler.live.controller import CRASH_EXIT_CODE, Controller
from streamscale.autoscaler.live.launch import parse_bytes, run_monitor, setup
from streamscale.autoscaler.live.load import PartitionLoad
from streamscale.autoscaler.live.monitor import WriteSpeedMonitor
from streamscale.autoscaler.live.protocol import LiveConfig
from streamscale.autoscaler.live.sink import FencingError, SQLiteSink
from streamscale.broker.log_dirs import LogDirsUnavailable
from streamscale.errors import ConfigError
from streamscale.waiting import wait_for


def overlapping_readers(ownership: list[tuple[int, str, int, float, float | None]]) -> list[str]:
    """Periods in which two consumers owned one partition at once (empty when hand-overs were clean)."""
    problems = []
    by_tp: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
    for c, t, p, start, stop in ownership:
        by_tp.setdefault((t, p), []).append((start, stop if stop is not None else float("inf"), c))
    for (t, p), spans in by_tp.items():
        spans.sort()
        for (_s1, e1, c1), (s2, _e2, c2) in zip(spans, spans[1:]):
            if s2 < e1:
                problems.append(f"{t}[{p}]: consumer {c2} started at {s2:.3f} before consumer {c1} stopped at {e1:.3f}")
    return problems


@pytest.fixture
def live_cfg(broker, topic_factory, _created_topics, tmp_path):
    def make(partitions: int = 3, **kw) -> LiveConfig:
        topic = topic_factory(partitions, prefix="auto")
        uid = uuid.uuid4().hex[:8]
        cfg = LiveConfig(
            bootstrap=broker.bootstrap,
            topics=[topic],
            group=f"g-{uid}",
            state_dir=tmp_path / "state",
            consumer_capacity=24_000,
            window_secs=2,
            sample_interval_secs=0.25,
            publish_interval_secs=0.5,
            wait_time_secs=0.2,
            batch_size=1_000_000,
            max_consumers=6,
            ack_timeout_secs=30,
            speed_topic=f"speed-{uid}",
            metadata_topic=f"meta-{uid}",
            **kw,
        )
        setup(cfg)
        _created_topics.extend([cfg.speed_topic, cfg.metadata_topic])
        return cfg

    return make


# -- pieces -------------------------------------------------------------------------------------


def test_parse_bytes():
    assert parse_bytes("24000") == 24_000
    assert parse_bytes("2.3MB") == 2_300_000
    assert parse_bytes("5MiB") == 5 * 2**20
    with pytest.raises(ConfigError, match="not a byte size"):
        parse_bytes("fast")


def test_config_rejects_unknown_algorithm(tmp_path):
    with pytest.raises(ValueError, match="unknown algorithm 'XYZ'"):
        LiveConfig(bootstrap="x:1", topics=["t"], state_dir=tmp_path, consumer_capacity=1, algorithm="XYZ")


def test_sink_fences_a_second_reader_and_logs_overlaps(tmp_path):
    sink = SQLiteSink(tmp_path / "s.sqlite")
    sink.write(0, {("t", 0): [(0, b"k", b"a", 1), (1, b"k", b"b", 2)]})
    assert sink.next_offsets([("t", 0)]) == {("t", 0): 2}
    with pytest.raises(FencingError, match="another reader"):
        sink.write(1, {("t", 0): [(1, b"k", b"b", 2)], ("t", 1): [(0, b"k", b"x", 3)]})
    assert sink.next_offsets([("t", 1)]) == {}  # all or nothing: partition 1 was not written either
    assert len(sink.rows("t")) == 2
    own = [(0, "t", 0, 1.0, 5.0), (1, "t", 0, 5.0, None), (2, "t", 0, 7.0, None)]
    assert overlapping_readers(own[:2]) == []
    assert len(overlapping_readers(own)) == 1
    sink.close()


def _log_bytes(broker, topic: str, partition: int) -> int:
    """What the broker holds for a partition, read off its disk: its segment files' sizes."""
    return sum(f.stat().st_size for f in (broker.data_dir / "logs" / f"{topic}-{partition}").glob("*.log"))


def test_monitor_measures_bytes_per_second_from_the_log_sizes(broker, live_cfg):
    if not hasattr(broker, "data_dir"):
        pytest.skip("the reference reads the embedded broker's segment files")
    cfg = live_cfg(partitions=2)
    mon = WriteSpeedMonitor(cfg)
    topic = cfg.topics[0]
    with PartitionLoad(broker.bootstrap, topic, 2, value_bytes=92) as load:
        load.set_rate([0.0, 0.0])
        mon.sample(now=100.0)
        before = [_log_bytes(broker, topic, p) for p in (0, 1)]
        load.set_rate([200.0, 0.0])
        wait_for(lambda: len(load.delivered) >= 150, 20, "150 records delivered")
        load.set_rate([0.0, 0.0])
    mon.sample(now=110.0)
    after = [_log_bytes(broker, topic, p) for p in (0, 1)]
    speeds = mon.speeds()
    mon.close()
    assert mon.size_source == "log-dirs"
    assert after[0] > before[0] + 150 * 100  # records with their batch headers
    assert speeds[f"{topic}:0"] == pytest.approx((after[0] - before[0]) / 10.0)
    assert speeds[f"{topic}:1"] == 0


def test_monitor_estimates_the_sizes_where_log_dirs_are_refused(broker, live_cfg, monkeypatch, caplog):
    cfg = live_cfg(partitions=2)
    mon = WriteSpeedMonitor(cfg)

    def refuse(topics):
        raise LogDirsUnavailable("DescribeLogDirs failed: CLUSTER_AUTHORIZATION_FAILED")

    monkeypatch.setattr(mon.log_dirs, "sizes", refuse)
    with PartitionLoad(broker.bootstrap, cfg.topics[0], 2, value_bytes=92) as load:
        load.set_rate([0.0, 0.0])
        mon.sample(now=100.0)
        load.set_rate([200.0, 0.0])
        wait_for(lambda: len(load.delivered) >= 150, 20, "150 records delivered")
        load.set_rate([0.0, 0.0])
    n = len(load.delivered)
    mon.sample(now=110.0)
    speeds = mon.speeds()
    mon.close()
    key0, key1 = f"{cfg.topics[0]}:0", f"{cfg.topics[0]}:1"
    assert mon.size_source == "estimate"
    assert "log sizes unavailable (DescribeLogDirs failed: CLUSTER_AUTHORIZATION_FAILED)" in caplog.text
    assert mon.record_size[key0] == 100.0  # 8-byte key + 92-byte value, measured on the records
    assert speeds[key0] == pytest.approx(n * 100 / 10.0)
    assert speeds[key1] == 0


def test_decide_keeps_a_feasible_group_and_scales_in_only_when_it_saves_a_consumer(live_cfg):
    cfg = live_cfg(partitions=3)
    ctl = Controller(cfg, backend=LocalProcessBackend(cfg.state_dir))
    try:
        t = cfg.topics[0]
        cap = cfg.bin_capacity  # 20,000
        k = [f"{t}:{p}" for p in range(3)]
        reason, new = ctl.decide({k[0]: 0.8 * cap, k[1]: 0.8 * cap, k[2]: 0.1 * cap})
        assert reason == "unassigned partitions" and len(set(new.values())) == 2
        ctl.assignment = new
        # loads 0.9 / 0.8 of C: nothing to gain
        assert ctl.decide({k[0]: 0.8 * cap, k[1]: 0.8 * cap, k[2]: 0.1 * cap}) is None
        # one consumer over capacity
        reason, _ = ctl.decide({k[0]: 0.8 * cap, k[1]: 0.8 * cap, k[2]: 0.5 * cap})
        assert reason == "consumer over capacity"
        # everything fits one consumer: MWF consolidates, moving the slower partition(s)
        reason, new2 = ctl.decide({k[0]: 0.3 * cap, k[1]: 0.3 * cap, k[2]: 0.1 * cap})
        assert reason == "fewer consumers suffice" and len(set(new2.values())) == 1
    finally:
        ctl.close()


# -- the whole system ---------------------------------------------------------------------------


def _controller(cfg: LiveConfig, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamscale",
            "autoscale",
            "controller",
            "--state-dir",
            str(cfg.state_dir),
            "-v",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(cfg.state_dir / "controller.log", "ab"),
    )


def _owned(cfg: LiveConfig) -> dict[str, int]:
    sink = SQLiteSink(cfg.sink)
    try:
        return {k: c for c, st in sink.states().items() for k in st.assignment}
    finally:
        sink.close()


def test_live_group_follows_load_exactly_once_and_survives_a_controller_crash(broker, live_cfg, monkeypatch, tmp_path):
    # also: the user's client properties reach every client of the controller and consumer processes
    trace = tmp_path / "clients.jsonl"
    monkeypatch.setenv("STREAMSCALE_KAFKA_TRACE", str(trace))
    cfg = live_cfg(partitions=3, kafka_properties={"client.id": "autoscaler-probe"})
    backend = LocalProcessBackend(cfg.state_dir)
    stop_monitor = threading.Event()
    monitor = threading.Thread(target=run_monitor, args=(cfg, None, stop_monitor), daemon=True)
    load = PartitionLoad(broker.bootstrap, cfg.topics[0], 3, value_bytes=200)
    procs: list[subprocess.Popen] = []
    try:
        load.set_rate(20)  # 3 x 4,160 B/s: one consumer (bin capacity 20,000 B/s)
        load.start()
        monitor.start()
        # this controller dies right after its first stops are acknowledged, before any start
        procs.append(_controller(cfg, "--crash-after", "stops"))
        wait_for(
            lambda: len(_owned(cfg)) == 3 and len(set(_owned(cfg).values())) == 1, 60, "all partitions on one consumer"
        )
        load.set_rate(80)  # 16,640 B/s each: no two fit one consumer -> three consumers
        assert procs[0].wait(timeout=60) == CRASH_EXIT_CODE
        assert len(_owned(cfg)) < 3  # partitions were released and nobody started them
        procs.append(_controller(cfg))
        wait_for(
            lambda: len(_owned(cfg)) == 3 and len(set(_owned(cfg).values())) == 3 and len(backend.running()) == 3,
            60,
            "three consumers with one partition each",
        )
        # a consumer killed outright is restarted and resumes from the sink's offsets
        victim = _owned(cfg)[f"{cfg.topics[0]}:0"]
        pid = json.loads((cfg.state_dir / "consumers.json").read_text())[str(victim)]
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: (
                backend.alive(victim) and json.loads((cfg.state_dir / "consumers.json").read_text())[str(victim)] != pid
            ),
            30,
            "the killed consumer restarted",
        )
        load.set_rate(20)
        wait_for(lambda: len(backend.running()) == 1 and len(_owned(cfg)) == 3, 60, "scale-in to one consumer")
        load.stop()
        assert not load.errors
        sink = SQLiteSink(cfg.sink)
        try:
            wait_for(lambda: len(sink.rows(cfg.topics[0])) >= len(load.delivered), 30, "sink to catch up")
            rows = sink.rows(cfg.topics[0])
            ownership = sink.ownership()
        finally:
            sink.close()
        stored = [(p, o) for p, o, _, _ in rows]
        assert len(stored) == len(set(stored)), "duplicates in the sink"
        assert set(stored) == load.delivered, "records lost or invented"
        assert all(v.startswith(f"{p}-".encode()) for p, _, v, _ in rows)
        assert overlapping_readers(ownership) == []
        assert len({c for c, *_ in ownership}) >= 3
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(timeout=60) == 0
        assert backend.running() == []  # the controller shut the group down on exit
        children = [c for c in map(json.loads, trace.read_text().splitlines()) if c["pid"] != os.getpid()]
        assert all(c["properties"] == {"client.id": "autoscaler-probe"} for c in children), children
        assert {p.pid for p in procs} <= {c["pid"] for c in children}  # both controllers
        assert len({c["pid"] for c in children}) >= 2 + 3 and {"consumer", "producer"} <= {c["kind"] for c in children}
    finally:
        load.stop()
        stop_monitor.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        backend.delete_all(timeout=5)
        monitor.join(timeout=10)


def test_groups_get_topics_of_their_own(tmp_path):
    from streamscale.autoscaler.live.protocol import LiveConfig

    a = LiveConfig(bootstrap="x:1", topics=["in"], group="team-a", state_dir=tmp_path / "a", consumer_capacity=10)
    b = LiveConfig(bootstrap="x:1", topics=["in"], group="team b", state_dir=tmp_path / "b", consumer_capacity=10)
    assert {a.speed_topic, a.metadata_topic} == {"team-a.monitor.writeSpeed", "team-a.consumer.metadata"}
    assert {b.speed_topic, b.metadata_topic} == {"team_b.monitor.writeSpeed", "team_b.consumer.metadata"}
    a.save()
    assert LiveConfig.load(tmp_path / "a").metadata_topic == a.metadata_topic  # consumers read the same
    with pytest.raises(Exception, match="not a valid Kafka topic name"):
        LiveConfig(bootstrap="x:1", topics=["bad topic"], group="g", state_dir=tmp_path, consumer_capacity=10)
