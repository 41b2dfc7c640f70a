"""Late-record counts against an independent replay of Spark's two-watermark rule.

Spark (3.5+, the version pinned here) drops the rows of micro-batch N whose window ends at or
before the *previous* batch's watermark, and evicts state with batch N's own. The replay below
takes the batch boundaries from the checkpoint's offsets log (what Spark itself read per batch),
computes both watermarks from the event times it has seen (W(N) = max(W(N-1), newest event time of
the batches before N - lateness), W(0) = 0), keeps a reading's window when the window ends after
W(N-1), and is checked three ways: its watermarks equal the ones Spark wrote, its kept readings
equal the counts in Spark's output, and its dropped counts equal the pipeline's. The inputs are
built so that many readings fall between the two watermarks: the one-watermark rule gives other
counts on them (asserted), so a count following that rule fails here.

The query runs with ``availableNow`` and a small ``maxOffsetsPerTrigger`` over several Kafka
partitions (several data batches in a row, no batch without data between them), restarted from
its checkpoint half-way.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pandas as pd
import pytest

from streamscale.pipelines import make_pipeline
from streamscale.pipelines.accounting import FLUSH_SENSOR, flush_record
from tests.conftest import produce
from tests.pipelines.helpers import T0, assert_stats_equal, rec, reference_stats, windows

pytestmark = pytest.mark.spark
PARTS = 3


def offsets_log(ckpt: Path, topic: str) -> list[tuple[int, int, dict[int, int]]]:
    """(batch id, batchWatermarkMs, end offset per partition) of every batch Spark planned."""
    out = []
    for f in sorted((ckpt / "offsets").iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1):
        if not f.name.isdigit():
            continue
        lines = f.read_text().splitlines()
        ends = json.loads(lines[2])[topic]
        out.append(
            (
                int(f.name),
                int(json.loads(lines[1]).get("batchWatermarkMs", 0)),
                {int(p): int(o) for p, o in ends.items()},
            )
        )
    return out


def replay(log, per_partition, size, slide, lateness, keys_of):
    """Per batch of ``log``: its readings (from ``per_partition``, in offset order), the two watermarks,
    and what each rule keeps and drops. -> dict of results."""
    newest, wm, prev_wm = None, 0, 0
    start = {p: 0 for p in per_partition}
    kept, wms = [], {}
    new = {"records": 0, "contributions": 0}
    old = {"records": 0, "contributions": 0}
    unregistered = 0
    for batch_id, _spark_wm, ends in log:
        late_wm = prev_wm  # W(N-1): the previous batch's watermark (0 before the first)
        wms[batch_id] = wm
        rows = [r for p, recs in per_partition.items() for r in recs[start.get(p, 0) : ends.get(p, 0)]]
        for ident, ts, value in rows:
            newest = ts if newest is None else max(newest, ts)
            if ident == FLUSH_SENSOR:
                continue
            keys = keys_of(ident)
            if not keys:
                unregistered += 1
                continue
            lost_new = lost_old = 0
            for w_start, w_end in windows(ts, size, slide):
                for k in keys:
                    if w_end <= late_wm:
                        lost_new += 1
                    else:
                        kept.append((*k, w_start, value))
                    lost_old += w_end <= wm
            new["records"] += lost_new > 0
            new["contributions"] += lost_new
            old["records"] += lost_old > 0
            old["contributions"] += lost_old
        start = {p: ends.get(p, 0) for p in per_partition}
        prev_wm = wm
        if newest is not None:
            wm = max(wm, newest - lateness)
    return {"kept": kept, "watermarks": wms, "new": new, "old": old, "unregistered": unregistered}


def stream(rng, idents, n, jump_ms, spread_ms):
    """``n`` readings: the front of event time jumps every few readings, each reading lies up to
    ``spread_ms`` behind the front: some late, some between the two watermarks, some on time."""
    front, out = T0, []
    for i in range(n):
        if i % 7 == 0:
            front += rng.randrange(jump_ms // 2, jump_ms * 3 // 2)
        out.append((rng.choice(idents), front - rng.randrange(spread_ms), rng.randrange(400) * 0.25))
    return out


def write(bootstrap, topic, per_partition, readings, flush=False):
    batch = []
    for i, r in enumerate(readings):
        p = i % PARTS
        per_partition[p].append(r)
        batch.append((r[0].encode(), rec(*r), p))
    if flush:  # one end-of-input marker, in partition 0
        per_partition[0].append((FLUSH_SENSOR, json.loads(flush_record())["timestamp"], 0.0))
        batch.append((FLUSH_SENSOR.encode(), flush_record(), 0))
    produce(bootstrap, topic, batch)


def _run(spark, broker, topic_factory, tmp_path, name, pipe, size, slide, lateness, idents, keys_of, key_cols):
    src, out = topic_factory(PARTS), topic_factory(2)
    ckpt = tmp_path / "ckpt"
    rng = random.Random(sum(map(ord, name)))
    per_partition: dict[int, list] = {p: [] for p in range(PARTS)}
    totals = []
    halves = [stream(rng, idents, 240, 4_000, 25_000), stream(rng, idents, 240, 4_000, 25_000)]
    halves[1] = [(i, ts + 240 // 7 * 4_000, v) for i, ts, v in halves[1]]  # the second half goes on in time
    for k, readings in enumerate(halves):
        write(broker.bootstrap, src, per_partition, readings, flush=k == 1)
        run = pipe.start(spark, broker.bootstrap, src, out, str(ckpt), available_now=True)
        run.await_available(300)
        assert run.exception() is None
        assert all(b.late_counted for b in run.batches)
        assert sum(1 for b in run.batches if b.input_rows) >= 4  # several data batches in a row
        totals.append(run.totals())
    got = {k: sum(t[k] for t in totals) for k in ("dropped_late", "dropped_contributions", "unregistered")}

    ref = replay(offsets_log(ckpt, src), per_partition, size, slide, lateness, keys_of)
    # the replay's watermarks are Spark's own
    assert ref["watermarks"] == {b: w for b, w, _ in offsets_log(ckpt, src)}
    # the input separates the rules: a count by the batch's own watermark is different here
    assert ref["new"] != ref["old"], (ref["new"], ref["old"])
    assert 0 < ref["new"]["records"]
    # the reference's kept readings are what Spark aggregated
    docs = [json.loads(v) for _p, _o, _k, v in sorted(_read(broker.bootstrap, out))]
    last = {}
    for d in docs:
        last[tuple(d[c] for c in key_cols) + (d["windowStartMs"],)] = d
    out_df = pd.DataFrame(list(last.values())).sort_values(key_cols + ["windowStartMs"]).reset_index(drop=True)
    kept = pd.DataFrame(ref["kept"], columns=[*key_cols, "windowStartMs", "valueInW"])
    assert_stats_equal(out_df, reference_stats(kept, key_cols), key_cols)
    # and the pipeline's counts are the reference's
    assert (got["dropped_late"], got["dropped_contributions"], got["unregistered"]) == (
        ref["new"]["records"],
        ref["new"]["contributions"],
        ref["unregistered"],
    )


def _read(bootstrap, topic):
    from tests.pipelines.helpers import read_topic

    return read_topic(bootstrap, topic, 2)


def test_uc2_late_counts_follow_the_previous_batch_watermark(spark, broker, topic_factory, tmp_path):
    # update mode: a row per change (final mode: UC4's test below)
    pipe = make_pipeline(
        "uc2", {"window_s": 10, "lateness_s": 3, "emit": "update", "max_offsets_per_trigger": 60}, connector="python"
    )
    idents = [f"s_{i}" for i in range(6)]
    _run(
        spark, broker, topic_factory, tmp_path, "uc2-update", pipe, 10_000, 10_000, 3_000, idents,
        lambda i: [(i,)], ["identifier"],
    )  # fmt: skip


def test_uc3_sliding_windows_lose_some_of_their_windows_by_the_same_rule(spark, broker, topic_factory, tmp_path):
    # on Spark's connector: its late records are counted by a replay (streamscale.pipelines.replay)
    size, slide, lateness = 30_000, 10_000, 3_000
    pipe = make_pipeline(
        "uc3", {"window_s": 30, "slide_s": 10, "lateness_s": 3, "max_offsets_per_trigger": 60}, connector="spark"
    )
    # T0 + up to ~5 min: one hour of day for every reading, so the key is the sensor and that hour
    hour = (T0 // 3_600_000) % 24
    assert ((T0 + 600_000) // 3_600_000) % 24 == hour
    idents = [f"s_{i}" for i in range(6)]
    _run(
        spark, broker, topic_factory, tmp_path, "uc3", pipe, size, slide, lateness, idents,
        lambda i: [(i, hour)], ["identifier", "hourOfDay"],
    )  # fmt: skip


# the Python source's rule is checked on UC2 above; its UC4 run (the same accounting) on request
@pytest.mark.parametrize("connector", [pytest.param("python", marks=pytest.mark.slow), "spark"])
def test_uc4_counts_one_contribution_per_ancestor_group(connector, spark, broker, topic_factory, tmp_path):
    from streamscale.loadgen.registry import SensorRegistry

    # an irregular registry of depth 3: s_0..s_3 under g_a/g_b (under root), s_4 straight under root;
    # s_5 is not registered
    tree = {"topLevelSensor": {"identifier": "root", "children": [
        {"identifier": "g_a", "children": [{"identifier": "s_0"}, {"identifier": "s_1"}]},
        {"identifier": "g_b", "children": [
            {"identifier": "s_2"}, {"identifier": "g_c", "children": [{"identifier": "s_3"}]},
        ]},
        {"identifier": "s_4"},
    ]}}  # fmt: skip
    reg_path = tmp_path / "registry.json"
    reg_path.write_text(json.dumps(tree))
    ancestors = SensorRegistry.load(str(reg_path)).ancestors()
    want = {"s_0": ["g_a", "root"], "s_1": ["g_a", "root"], "s_2": ["g_b", "root"], "s_3": ["g_c", "g_b", "root"]}
    want["s_4"] = ["root"]
    assert {s: sorted(g) for s, g in ancestors.items()} == {s: sorted(g) for s, g in want.items()}
    pipe = make_pipeline(
        "uc4",
        {
            "registry_path": str(reg_path),
            "window_s": 10,
            "lateness_s": 3,
            "emit": "final",
            "max_offsets_per_trigger": 60,
        },
        connector=connector,
    )
    idents = [f"s_{i}" for i in range(6)]
    _run(
        spark, broker, topic_factory, tmp_path, "uc4-final", pipe, 10_000, 10_000, 3_000, idents,
        lambda i: [(g,) for g in want.get(i, [])], ["groupId"],
    )  # fmt: skip


def test_windows_helper_matches_hand_worked_examples():
    # 30 s windows sliding by 10 s: a reading at 25 s is in [0, 30), [10, 40), [20, 50)
    assert windows(25_000, 30_000, 10_000) == [(20_000, 50_000), (10_000, 40_000), (0, 30_000)]
    # tumbling: exactly one, a reading on a boundary starts the next window
    assert windows(20_000, 10_000, 10_000) == [(20_000, 30_000)]
    # a slide that does not divide the size: ceil(30 / 7) = 5 candidates, the reading in 5 of them
    assert len(windows(5, 30_000, 7_000)) == math.ceil(30_000 / 7_000)
