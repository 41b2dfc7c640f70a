"""Each UC pushed through the real streaming job; every output compared to a pandas reference."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from streamscale.errors import ConfigError
from streamscale.pipelines import make_pipeline
from streamscale.pipelines.base import Reading
from tests.conftest import produce
from tests.pipelines.helpers import T0, assert_stats_equal, latest_per_key, read_topic, rec, reference_stats, send

pytestmark = pytest.mark.spark
DAY = 86_400_000
# the same exactness on either Kafka connector: streamscale's Python source and sink, and Spark's own
CONNECTORS = pytest.mark.parametrize("connector", ["python", "spark"])


def run(pipe, spark, broker, src, out, ckpt, **kw):
    r = pipe.start(spark, broker.bootstrap, src, out, str(ckpt), available_now=True, **kw)
    r.await_available(300)
    assert r.exception() is None
    return r


def window_start(ts: int, size_ms: int) -> int:
    return ts - ts % size_ms


# -- UC1 ---------------------------------------------------------------------------------------
@CONNECTORS
def test_uc1_every_record_reaches_sqlite_exactly_once(connector, spark, broker, topic_factory, tmp_path):
    src = topic_factory(3)
    db = tmp_path / "uc1.sqlite"
    first = [(f"s_{i % 17}", T0 + i, (i % 400) * 0.25) for i in range(6000)]
    send(broker.bootstrap, src, first, 3)
    pipe = make_pipeline(
        "uc1", {"sink": "sqlite", "db_path": str(db), "max_offsets_per_trigger": 2000}, connector=connector
    )
    r1 = run(pipe, spark, broker, src, None, tmp_path / "ck")
    assert r1.shuffle_stages() == 0
    assert len([b for b in r1.batches if b.input_rows]) >= 3
    second = [(f"s_{i % 17}", T0 + 10_000 + i, 1.5) for i in range(2500)]
    send(broker.bootstrap, src, second, 3)
    run(pipe, spark, broker, src, None, tmp_path / "ck")  # restart from the checkpoint
    got = pd.read_sql(
        "SELECT identifier, timestamp, valueInW, valueInKW, kafka_partition, kafka_offset FROM active_power",
        sqlite3.connect(db),
    )
    assert len(got) == len(first) + len(second)
    assert not got.duplicated(["kafka_partition", "kafka_offset"]).any()
    want = pd.DataFrame(first + second, columns=["identifier", "timestamp", "valueInW"])
    cols = ["identifier", "timestamp", "valueInW"]
    pd.testing.assert_frame_equal(
        got[cols].sort_values(cols).reset_index(drop=True), want.sort_values(cols).reset_index(drop=True)
    )
    assert (got["valueInKW"] == got["valueInW"] / 1000).all()


def test_uc1_log_sink_writes_one_line_per_record(spark, broker, topic_factory, tmp_path, capfd):
    src = topic_factory(2)
    recs = [(f"s_{i % 5}", T0 + i, i * 0.5) for i in range(300)]
    send(broker.bootstrap, src, recs, 2)
    run(make_pipeline("uc1", {"sink": "log", "log_file": "-"}), spark, broker, src, None, tmp_path / "ck")
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith('{"identifier"')]
    assert sorted((d["identifier"], d["timestamp"], d["valueInW"]) for d in lines) == sorted(recs)


def test_uc1_log_sink_writes_into_a_file_not_the_terminal_by_default(tmp_path, capfd):
    from streamscale.pipelines.uc1 import LogBatchWriter, records_log_path

    class Batch:  # what foreachBatch hands over, as far as the writer reads it
        def select(self, _col):
            return self

        def toLocalIterator(self):  # noqa: N802 - Spark's name
            return iter([{"line": '{"identifier": "a"}'}, {"line": '{"identifier": "b"}'}])

    assert LogBatchWriter(None).path == records_log_path()
    LogBatchWriter(str(tmp_path / "uc1.log"))(Batch(), 0)
    LogBatchWriter(str(tmp_path / "uc1.log"))(Batch(), 1)
    assert (tmp_path / "uc1.log").read_text().splitlines() == ['{"identifier": "a"}', '{"identifier": "b"}'] * 2
    assert '{"identifier"' not in capfd.readouterr().out


def test_uc1_lines_are_valid_json_whatever_the_identifier(spark, broker, topic_factory, tmp_path, capfd):
    # quotes, backslashes, control characters and non-ASCII in identifiers: a JSON encoder, not formatting
    src = topic_factory(2)
    idents = ['q"uote', "back\\slash", "tab\tnew\nline", "ünï€😀", '{"nested": 1}', ""]
    recs = [(idents[i % len(idents)], T0 + i, i * 0.25) for i in range(60)]
    produce(broker.bootstrap, src, ((None, rec(*r), i % 2) for i, r in enumerate(recs)))
    run(
        make_pipeline("uc1", {"sink": "log", "log_file": str(tmp_path / "uc1.log")}),
        spark,
        broker,
        src,
        None,
        tmp_path / "ck",
    )
    lines = [json.loads(line) for line in (tmp_path / "uc1.log").read_text().splitlines()]
    assert sorted((d["identifier"], d["timestamp"], d["valueInW"]) for d in lines) == sorted(recs)


# -- UC2 ---------------------------------------------------------------------------------------
@CONNECTORS
def test_uc2_windows_exact_and_late_records_dropped_and_counted(
    connector, spark, broker, access, topic_factory, tmp_path
):
    src, out = topic_factory(2), topic_factory(2)
    rng = random.Random(7)
    window, lateness = 10_000, 5_000
    phase1 = [(f"s_{s}", T0 + i * 500, (i * (s + 1) % 37) * 0.25) for s in range(5) for i in range(120)]
    rng.shuffle(phase1)  # out of order within the phase: all accepted
    # after phase 1 the watermark is max event time - lateness = T0 + 59.5 s - 5 s
    watermark = max(t for _, t, _ in phase1) - lateness
    # three late readings of one sensor and window: Spark's own metric would count them once
    late = [
        ("s_1", T0 + 12_000, 100.0),
        ("s_1", T0 + 12_001, 101.0),
        ("s_1", T0 + 12_002, 102.0),
        ("s_2", T0 + 44_000, 200.0),
        ("s_4", T0 + 49_999, 300.0),
    ]
    out_of_order_ok = [("s_3", T0 + 51_000, 3.25), ("s_0", T0 + 50_000, 4.5)]
    phase2 = (
        late
        + out_of_order_ok
        + [(f"s_{s}", T0 + 60_000 + i * 250, (i % 11) * 0.5) for s in range(5) for i in range(80)]
    )
    rng.shuffle(phase2)
    assert all(window_start(t, window) + window <= watermark for _, t, _ in late)
    assert all(window_start(t, window) + window > watermark for _, t, _ in out_of_order_ok)

    pipe = make_pipeline("uc2", {"window_s": 10, "lateness_s": 5, "emit": "update"}, connector=connector)  # open too
    send(broker.bootstrap, src, phase1, 2)
    r1 = run(pipe, spark, broker, src, out, tmp_path / "ck", reading=Reading(commit_group="uc2-test"))
    assert r1.shuffle_stages() == 1
    send(broker.bootstrap, src, phase2, 2)
    produce(broker.bootstrap, src, [(b"s_0", b"{not json", 0)])  # malformed: counted, not aggregated
    r2 = run(pipe, spark, broker, src, out, tmp_path / "ck", reading=Reading(commit_group="uc2-test"))
    totals = r2.totals()
    assert totals["malformed"] == 1 and totals["connector"] == connector
    assert access.committed_offsets("uc2-test", src) == access.end_offsets(src)  # lag observable: 0
    # Spark's connector: counted by replaying the run's batches (streamscale.pipelines.replay)
    assert totals["dropped_late"] == len(late) and totals["late_counted"]

    accepted = pd.DataFrame(phase1 + phase2, columns=["identifier", "ts", "valueInW"])
    accepted = accepted[~accepted.apply(lambda r: (r.identifier, r.ts, r.valueInW) in late, axis=1)]
    accepted["windowStartMs"] = accepted["ts"] - accepted["ts"] % window
    got = latest_per_key(read_topic(broker.bootstrap, out, 2), ["identifier"])
    assert (got["windowEndMs"] - got["windowStartMs"] == window).all()
    assert_stats_equal(got, reference_stats(accepted, ["identifier"]), ["identifier"])


# -- UC3 ---------------------------------------------------------------------------------------
@CONNECTORS
def test_uc3_hour_of_day_over_sliding_days(connector, spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(2), topic_factory(2)
    rng = random.Random(3)
    # five days of readings from 3 sensors at pseudo-random times of day
    recs = [
        (f"s_{s}", T0 - T0 % DAY + d * DAY + rng.randrange(DAY), rng.randrange(400) * 0.25)
        for s in range(3)
        for d in range(5)
        for _ in range(60)
    ]
    pipe = make_pipeline("uc3", {}, connector=connector)  # the paper's defaults: 3-day windows sliding by 1 day
    assert (pipe.params.window_s, pipe.params.slide_s, pipe.params.emit_interval_s) == (3 * 86400, 86400, 5)
    send(broker.bootstrap, src, recs, 2)
    r = run(pipe, spark, broker, src, out, tmp_path / "ck")
    assert r.shuffle_stages() == 1
    got = latest_per_key(read_topic(broker.bootstrap, out, 2), ["identifier", "hourOfDay"])
    assert got["count"].sum() == 3 * len(recs)  # every record is in 3 windows
    rows = []
    for ident, ts, v in recs:
        hour = (ts // 3_600_000) % 24
        for k in range(3):
            rows.append((ident, hour, window_start(ts, DAY) - k * DAY, v))
    ref = reference_stats(
        pd.DataFrame(rows, columns=["identifier", "hourOfDay", "windowStartMs", "valueInW"]).assign(ts=0),
        ["identifier", "hourOfDay"],
    )
    assert (got["windowEndMs"] - got["windowStartMs"] == 3 * DAY).all()
    assert_stats_equal(got, ref, ["identifier", "hourOfDay"])


# -- UC4 ---------------------------------------------------------------------------------------
def _ancestors_from_json(tree: dict) -> dict[str, list[str]]:
    """Independent of SensorRegistry.ancestors(): walk the published JSON tree."""
    out: dict[str, list[str]] = {}

    def walk(node, chain):
        kids = node.get("children")
        if not kids:
            out[node["identifier"]] = chain
        for c in kids or []:
            walk(c, [node["identifier"]] + chain)

    walk(tree["topLevelSensor"], [])
    return out


@CONNECTORS
def test_uc4_hierarchical_one_record_per_group_and_window(connector, spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(2), topic_factory(2)
    pipe = make_pipeline("uc4", {"levels": 3, "children": 4, "window_s": 10, "lateness_s": 2}, connector=connector)
    anc = _ancestors_from_json(json.loads(pipe.registry.to_json()))
    assert len(anc) == 64 and all(len(a) == 3 for a in anc.values())
    rng = random.Random(11)
    phase1 = [(f"s_{s}", T0 + rng.randrange(30_000), rng.randrange(100) * 0.25) for s in range(64) for _ in range(5)]
    watermark = max(t for _, t, _ in phase1) - 2_000
    late = [(f"s_{s}", T0 + 5_000 + s, 1.0) for s in range(4)]  # window [0, 10 s) closed
    phase2 = late + [
        (f"s_{s}", T0 + 25_000 + rng.randrange(20_000), rng.randrange(100) * 0.25) for s in range(64) for _ in range(3)
    ]
    assert all(window_start(t, 10_000) + 10_000 <= watermark for _, t, _ in late)
    sentinel = [("s_0", T0 + 10 * 60_000, 0.0)]  # moves the watermark on so that every window closes

    send(broker.bootstrap, src, phase1, 2)
    r = run(pipe, spark, broker, src, out, tmp_path / "ck")
    assert r.shuffle_stages() == 1  # the registry join is a broadcast, not a shuffle
    send(broker.bootstrap, src, phase2, 2)
    r2 = run(pipe, spark, broker, src, out, tmp_path / "ck")
    assert r2.totals()["dropped_late"] == len(late) and r2.totals()["late_counted"]
    send(broker.bootstrap, src, sentinel, 2)
    run(pipe, spark, broker, src, out, tmp_path / "ck")

    msgs = read_topic(broker.bootstrap, out, 2)
    docs = [json.loads(v) for *_, v in msgs]
    keys = [(d["groupId"], d["windowStartMs"]) for d in docs]
    assert len(keys) == len(set(keys))  # exactly one output record per group and window
    got = latest_per_key(msgs, ["groupId"])
    accepted = [r for r in phase1 + phase2 if r not in late]
    rows = [(g, window_start(t, 10_000), v) for ident, t, v in accepted for g in anc[ident]]
    ref = reference_stats(pd.DataFrame(rows, columns=["groupId", "windowStartMs", "valueInW"]), ["groupId"])
    assert_stats_equal(got, ref, ["groupId"])


def test_describe_and_parameter_errors():
    for name in ("uc1", "uc2", "uc3", "uc4"):
        text = make_pipeline(name).describe()
        assert text.startswith(name.upper()) and "Source: Kafka" in text
    with pytest.raises(ConfigError, match="window_s"):
        make_pipeline("uc2", {"window_s": -1})
    with pytest.raises(ConfigError, match="slide_s"):
        make_pipeline("uc3", {"window_s": 10, "slide_s": 20})
    with pytest.raises(ConfigError, match="jdbc_url"):
        make_pipeline("uc1", {"sink": "jdbc"})
    with pytest.raises(ConfigError, match="unknown pipeline"):
        make_pipeline("uc9")
    with pytest.raises(ConfigError, match="windw_s"):
        make_pipeline("uc2", {"windw_s": 3})


def test_a_run_removes_the_temporary_checkpoint_it_made_and_keeps_a_named_one(spark, broker, topic_factory, tmp_path):
    from pathlib import Path

    src = topic_factory(1)
    send(broker.bootstrap, src, [(f"s_{i % 3}", T0 + i, 1.0) for i in range(50)], 1)
    pipe = make_pipeline("uc1", {"sink": "none"})
    r = pipe.start(spark, broker.bootstrap, src, None, None, available_now=True)
    r.await_available(300)
    assert Path(r.checkpoint).is_dir()
    r.stop()
    assert not Path(r.checkpoint).exists()
    named = run(pipe, spark, broker, src, None, tmp_path / "ck")
    named.stop()
    assert (tmp_path / "ck").is_dir()  # the user's: kept for a restart


def test_a_snapshot_written_into_a_stopped_runs_checkpoint_is_removed_after_the_session(tmp_path):
    # Spark's state-store maintenance thread may write a snapshot into a temporary checkpoint after
    # the run removed it; once the session stopped, remove_stopped_checkpoints removes it again
    from streamscale.pipelines import run

    class Query:
        recentProgress: list = []

        def stop(self):
            pass

    ck = Path(run.temporary_checkpoint("streamscale-uc2-", str(tmp_path)))
    run.PipelineRun("uc2", [Query()], Query(), str(ck)).stop()
    assert not ck.exists()
    (ck / "state" / "0" / "0").mkdir(parents=True)
    (ck / "state" / "0" / "0" / ".11.snapshot.crc").write_text("late")
    run.remove_stopped_checkpoints()
    assert not ck.exists()
    ck.mkdir()  # removed once, the checkpoint no longer waits for removal: a folder there now stays
    run.remove_stopped_checkpoints()
    assert ck.exists()
