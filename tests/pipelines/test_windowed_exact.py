"""UC2-UC4 against an independent replay of Spark's watermark rules, micro-batch by micro-batch.

Each phase of input is one micro-batch (one ``availableNow`` run, restarted from the checkpoint
between phases). The replay: W(0) = 0; a reading of a phase is dropped from a window when the
window ends at or before W, the watermark when its batch starts; after it W = max(W, newest event
time of the batch - lateness). Between two phases no reading lands between the previous batch's
watermark (what Spark drops late rows with) and W: test_late_rule.py replays both watermarks on
inputs where they differ. Windows are Spark's (last start = ts - ts mod slide, back by the slide while they
contain ts). The output must equal pandas statistics over what the replay accepted, and the
dropped counts must equal the replay's exactly.
"""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from streamscale.pipelines import make_pipeline
from streamscale.pipelines.accounting import FLUSH_SENSOR
from tests.conftest import produce
from tests.pipelines.helpers import T0, assert_stats_equal, read_topic, rec, reference_stats, windows

pytestmark = pytest.mark.spark
HOUR = 3_600_000


def replay(phases, size, slide, lateness, keys_of):
    """-> accepted (key..., windowStartMs, value) rows, dropped records, dropped contributions,
    unregistered readings. ``keys_of(reading)``: the aggregation keys of a reading ([] = unregistered)."""
    watermark, rows, dropped, dropped_c, unregistered = 0, [], 0, 0, 0
    for phase in phases:
        newest = None
        for r in phase:
            ident, ts, value = r
            newest = ts if newest is None else max(newest, ts)
            if ident == FLUSH_SENSOR:
                continue
            keys = keys_of(r)
            if not keys:
                unregistered += 1
                continue
            lost = 0
            for start, end in windows(ts, size, slide):
                for k in keys:
                    if end <= watermark:
                        lost += 1
                    else:
                        rows.append((*k, start, value))
            dropped += lost > 0
            dropped_c += lost
        if newest is not None:
            watermark = max(watermark, newest - lateness)
    return rows, dropped, dropped_c, unregistered


def send_phase(bootstrap, topic, phase, partitions):
    produce(bootstrap, topic, ((r[0].encode(), rec(*r), i % partitions) for i, r in enumerate(phase)))


def run_phases(spark, broker, pipe, src, out, ckpt, phases, partitions=2, batches_out=None):
    totals = []
    for phase in phases:
        send_phase(broker.bootstrap, src, phase, partitions)
        r = pipe.start(spark, broker.bootstrap, src, out, str(ckpt), available_now=True)
        r.await_available(300)
        assert r.exception() is None
        assert len([b for b in r.batches if b.input_rows]) == 1  # the replay's batch boundaries
        totals.append(r.totals())
        if batches_out is not None:
            batches_out.extend(r.batches)
    return {
        k: sum(t[k] for t in totals) for k in ("dropped_late", "dropped_contributions", "unregistered", "malformed")
    }


def docs_of(broker, out, partitions=2):
    return [json.loads(v) for _p, _o, _k, v in sorted(read_topic(broker.bootstrap, out, partitions))]


def latest(docs, keys):
    last = {}
    for d in docs:
        last[tuple(d[k] for k in keys) + (d["windowStartMs"],)] = d
    return pd.DataFrame(list(last.values())).sort_values(keys + ["windowStartMs"]).reset_index(drop=True)


def late_phases(rng, idents, span_s, lateness_ms):
    """Three batches: in order, then a mix of on-time, late and partly late, then more."""
    p1 = [(i, T0 + rng.randrange(span_s * 1000), rng.randrange(400) * 0.25) for i in idents for _ in range(6)]
    newest = max(t for _, t, _ in p1)
    # around the watermark: some readings late, some just on time
    p2 = [
        (i, newest - lateness_ms - rng.randrange(-30_000, 90_000), rng.randrange(400) * 0.25)
        for i in idents
        for _ in range(5)
    ]
    p2 += [(i, newest + rng.randrange(20_000), rng.randrange(400) * 0.25) for i in idents for _ in range(3)]
    newest2 = max(newest, max(t for _, t, _ in p2))
    p3 = [(i, newest2 - lateness_ms - rng.randrange(-40_000, 200_000), 1.25) for i in idents for _ in range(4)]
    return [p1, p2, p3]


def test_uc2_late_records_counted_exactly_across_batches_and_restarts(spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(2), topic_factory(2)
    rng = random.Random(21)
    phases = late_phases(rng, [f"s_{i}" for i in range(7)], 120, 5_000)
    rows, dropped, dropped_c, _ = replay(phases, 10_000, 10_000, 5_000, lambda r: [(r[0],)])
    assert 0 < dropped < sum(map(len, phases))  # the input really has late readings
    batches = []
    got = run_phases(
        spark,
        broker,
        make_pipeline("uc2", {"window_s": 10, "lateness_s": 5, "emit": "update"}),
        src,
        out,
        tmp_path / "ck",
        phases,
        batches_out=batches,
    )
    from streamscale.experiment.slo import latency_percentile_ms

    # event times of 2023 (T0): every output row's latency lies beyond the histogram's last edge
    # (7.9 h), so no bucket counts one (test_output.py checks a histogram that counts every row)
    assert any(b.output_records for b in batches)
    for b in batches:
        if b.output_records:
            assert b.latency_cdf == [0] * 100
    assert latency_percentile_ms(batches) == float("inf")  # event times of 2023: beyond the last edge
    assert (got["dropped_late"], got["dropped_contributions"], got["unregistered"]) == (dropped, dropped, 0)
    docs = docs_of(broker, out)
    ref = reference_stats(pd.DataFrame(rows, columns=["identifier", "windowStartMs", "valueInW"]), ["identifier"])
    assert_stats_equal(latest(docs, ["identifier"]), ref, ["identifier"])


def test_uc3_dropped_records_and_contributions_both_exact(spark, broker, topic_factory, tmp_path):
    # windows of 3 h sliding by 1 h, lateness 30 min: readings near the watermark lose 1 or 2 of
    # their 3 windows (a record counts once, each lost window once)
    src, out = topic_factory(2), topic_factory(2)
    rng = random.Random(5)
    p1 = [(f"s_{i}", T0 + rng.randrange(10 * HOUR), rng.randrange(400) * 0.25) for i in range(4) for _ in range(30)]
    wm = max(t for _, t, _ in p1) - HOUR // 2
    p2 = [
        (f"s_{i}", wm - rng.randrange(-HOUR, 3 * HOUR), rng.randrange(400) * 0.25) for i in range(4) for _ in range(40)
    ]
    phases = [p1, p2]
    keys = lambda r: [(r[0], (r[1] // HOUR) % 24)]  # noqa: E731 - (sensor, hour of day), UTC
    rows, dropped, dropped_c, _ = replay(phases, 3 * HOUR, HOUR, HOUR // 2, keys)
    partly = sum(1 for i, t, _ in p2 if 0 < sum(e <= wm for _, e in windows(t, 3 * HOUR, HOUR)) < 3)
    assert partly > 0 and dropped_c > dropped  # some records lost only part of their windows
    pipe = make_pipeline("uc3", {"window_s": 3 * 3600, "slide_s": 3600, "lateness_s": 1800})
    got = run_phases(spark, broker, pipe, src, out, tmp_path / "ck", phases)
    assert (got["dropped_late"], got["dropped_contributions"]) == (dropped, dropped_c)
    ref = reference_stats(
        pd.DataFrame(rows, columns=["identifier", "hourOfDay", "windowStartMs", "valueInW"]),
        ["identifier", "hourOfDay"],
    )
    assert_stats_equal(latest(docs_of(broker, out), ["identifier", "hourOfDay"]), ref, ["identifier", "hourOfDay"])


IRREGULAR = {
    "topLevelSensor": {
        "identifier": "root",
        "children": [
            {"identifier": "g1", "children": [{"identifier": "s_0"}, {"identifier": "s_1"}]},
            {"identifier": "s_2"},
            {
                "identifier": "g2",
                "children": [{"identifier": "g3", "children": [{"identifier": "s_3"}, {"identifier": "s_4"}]}],
            },
        ],
    }
}
ANCESTORS = {
    "s_0": ["g1", "root"],
    "s_1": ["g1", "root"],
    "s_2": ["root"],
    "s_3": ["g3", "g2", "root"],
    "s_4": ["g3", "g2", "root"],
}


def test_uc4_irregular_registry_unregistered_readings_and_a_final_flush(spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(2), topic_factory(2)
    reg = tmp_path / "registry.json"
    reg.write_text(json.dumps(IRREGULAR))
    rng = random.Random(9)
    idents = list(ANCESTORS) + ["s_9", "s_77"]  # two sensors the registry does not know
    phases = late_phases(rng, idents, 60, 2_000)
    keys = lambda r: [(g,) for g in ANCESTORS.get(r[0], [])]  # noqa: E731
    rows, dropped, dropped_c, unregistered = replay(phases, 10_000, 10_000, 2_000, keys)
    assert dropped and unregistered and dropped_c > dropped
    pipe = make_pipeline("uc4", {"registry_path": str(reg), "window_s": 10, "lateness_s": 2})
    assert pipe.emit_final
    got = run_phases(spark, broker, pipe, src, out, tmp_path / "ck", phases)
    assert (got["dropped_late"], got["dropped_contributions"], got["unregistered"]) == (
        dropped,
        dropped_c,
        unregistered,
    )
    before = docs_of(broker, out)
    r = pipe.finish(spark, broker.bootstrap, src, out, str(tmp_path / "ck"))  # end of the bounded input
    assert r.totals()["dropped_late"] == 0 and r.totals()["unregistered"] == 0
    docs = docs_of(broker, out)
    assert len(docs) > len(before)  # the newest windows came out only with the flush
    assert all(d["final"] is True for d in docs)
    keys_seen = [(d["groupId"], d["windowStartMs"]) for d in docs]
    assert len(keys_seen) == len(set(keys_seen))  # one row per group and window
    ref = reference_stats(pd.DataFrame(rows, columns=["groupId", "windowStartMs", "valueInW"]), ["groupId"])
    assert_stats_equal(latest(docs, ["groupId"]), ref, ["groupId"])


def test_update_rows_say_when_they_are_final_and_final_mode_emits_once(spark, broker, topic_factory, tmp_path):
    src, out, out_final = topic_factory(2), topic_factory(2), topic_factory(2)
    rng = random.Random(4)
    phases = late_phases(rng, [f"s_{i}" for i in range(5)], 90, 5_000)
    params = {"window_s": 10, "lateness_s": 5}
    run_phases(spark, broker, make_pipeline("uc2", {**params, "emit": "update"}), src, out, tmp_path / "ck", phases)
    docs = docs_of(broker, out)
    # W after each batch, from the replay's rule: a row is final iff its window ends by then
    marks, wm = [], 0
    for phase in phases:
        wm = max(wm, max(t for _, t, _ in phase) - 5_000)
        marks.append(wm)
    finals = [d for d in docs if d["final"]]
    assert finals and any(not d["final"] for d in docs)
    assert all(d["windowEndMs"] <= marks[-1] for d in finals)
    for f in finals:  # nothing follows a final row of its window
        later = [
            d
            for d in docs
            if (d["identifier"], d["windowStartMs"]) == (f["identifier"], f["windowStartMs"])
            and d["emittedAtMs"] > f["emittedAtMs"]
        ]
        assert not later
    rows, *_ = replay(phases, 10_000, 10_000, 5_000, lambda r: [(r[0],)])
    ref = reference_stats(pd.DataFrame(rows, columns=["identifier", "windowStartMs", "valueInW"]), ["identifier"])
    # emit: final, then a flush: one final row per window, equal to the update stream's last rows
    src2 = topic_factory(2)
    final = make_pipeline("uc2", {**params, "emit": "final"})
    run_phases(spark, broker, final, src2, out_final, tmp_path / "ck2", phases)
    final.finish(spark, broker.bootstrap, src2, out_final, str(tmp_path / "ck2"))
    fin = docs_of(broker, out_final)
    assert all(d["final"] for d in fin)
    assert len({(d["identifier"], d["windowStartMs"]) for d in fin}) == len(fin)
    assert_stats_equal(latest(fin, ["identifier"]), ref, ["identifier"])


@pytest.mark.parametrize("uc", ["uc2", "uc3", "uc4"])
def test_timestamps_spark_cannot_hold_are_malformed_and_the_query_lives(uc, spark, broker, topic_factory, tmp_path):
    # valid int64 all of them, but outside years 1-9999: the window arithmetic overflowed and the
    # query died on every restart
    src, out = topic_factory(2), topic_factory(2)
    hostile = [
        ("s_0", 9_000_000_000_000_000_000, 1.0),
        ("s_1", -9_000_000_000_000_000_000, 2.0),
        ("s_2", 253_402_300_800_000, 3.0),
        ("s_3", -62_135_596_800_001, 4.0),
    ]
    fine = [(f"s_{i % 4}", T0 + i * 1000, 0.25 * i) for i in range(40)]
    send_phase(broker.bootstrap, src, hostile + fine, 2)
    pipe = make_pipeline(
        uc, {"window_s": 10, "lateness_s": 1} if uc != "uc3" else {"window_s": 30, "slide_s": 10, "lateness_s": 1}
    )
    r = pipe.start(spark, broker.bootstrap, src, out, str(tmp_path / "ck"), available_now=True)
    r.await_available(300)
    assert r.exception() is None
    t = r.totals()
    assert (t["malformed"], t["dropped_late"], t["input_rows"]) == (len(hostile), 0, len(hostile) + len(fine))


def test_latency_buckets_count_every_row_at_or_below_each_edge(spark):
    import numpy as np
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from streamscale.pipelines.output import LATENCY_EDGES_MS, cumulative, latency_bucket

    rng = np.random.default_rng(8)
    lat = np.concatenate([rng.lognormal(8, 2, 3000), [0, 0.5, 1, 2**0.25, 7, 2**30], LATENCY_EDGES_MS[::7]])
    df = spark.createDataFrame([(float(x),) for x in lat], "latency DOUBLE").repartition(3)
    obs = Observation("buckets")
    df.observe(obs, F.histogram_numeric(latency_bucket(F.col("latency")), F.lit(128)).alias("b")).write.format(
        "noop"
    ).mode("overwrite").save()
    got = cumulative(obs.get["b"])
    want = [int((lat <= e * (1 + 1e-12)).sum()) for e in LATENCY_EDGES_MS]
    assert got == want


def _phases_within_then_past_a_window(seed: int):
    rng = random.Random(seed)
    idents = [f"s_{i}" for i in range(4)]

    def phase(lo_ms, span_ms):
        return [(i, T0 + lo_ms + rng.randrange(span_ms), rng.randrange(400) * 0.25) for i in idents for _ in range(3)]

    # the first two inside [T0, T0 + 10 s): the watermark moves (1 s lateness) without passing a
    # window end, so those batches cannot emit; the third passes T0 + 10 s
    return [phase(1_000, 2_000), phase(4_000, 2_000), phase(12_000, 3_000)]


def _final_run(spark, broker, topic_factory, tmp_path, phases):
    src, out = topic_factory(2), topic_factory(2)
    # the batch-by-batch write (foreachBatch) that skips batches: the Python connector's (Spark's
    # streams final rows straight into its sink)
    pipe = make_pipeline("uc2", {"window_s": 10, "lateness_s": 1, "emit": "final"}, connector="python")
    skipped, written = 0, 0
    for phase in phases:
        send_phase(broker.bootstrap, src, phase, 2)
        r = pipe.start(spark, broker.bootstrap, src, out, str(tmp_path / "ck"), available_now=True)
        r.await_available(300)
        assert r.exception() is None
        skipped += r.writer.skipped_writes
        written += sum(b.output_records or 0 for b in r.batches)
    r = pipe.finish(spark, broker.bootstrap, src, out, str(tmp_path / "ck"))
    written += sum(b.output_records or 0 for b in r.batches)
    rows, *_ = replay(phases, 10_000, 10_000, 1_000, lambda r: [(r[0],)])
    ref = reference_stats(pd.DataFrame(rows, columns=["identifier", "windowStartMs", "valueInW"]), ["identifier"])
    docs = docs_of(broker, out)
    assert all(d["final"] for d in docs)
    assert len({(d["identifier"], d["windowStartMs"]) for d in docs}) == len(docs) == written
    assert_stats_equal(latest(docs, ["identifier"]), ref, ["identifier"])
    return skipped, docs


def test_final_mode_skips_batches_that_cannot_emit_and_loses_no_row_of_one_thought_empty(
    spark, broker, topic_factory, tmp_path, monkeypatch
):
    from streamscale.pipelines.output import WindowedOutput

    # every batch is treated as one that cannot emit: the truly empty ones are skipped, the
    # ones that close a window count rows, are computed again and written
    said = []
    real = WindowedOutput.can_emit

    def never(self, batch_id):
        said.append(real(self, batch_id))
        return False

    monkeypatch.setattr(WindowedOutput, "can_emit", never)
    skipped, docs = _final_run(spark, broker, topic_factory, tmp_path, _phases_within_then_past_a_window(11))
    assert {d["windowStartMs"] for d in docs} == {T0, T0 + 10_000}
    # the grid check itself: phase 2's batch and its batch without data, phase 3's batch (the
    # watermark still before T0 + 10 s) cannot emit, and were skipped
    assert said.count(False) >= 3 and skipped >= said.count(False)
