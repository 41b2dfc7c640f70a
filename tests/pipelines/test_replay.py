"""Which batches of a run on Spark's connector are replayed for their late records, and from where
(the counts themselves are checked against independent references in test_late_rule.py and
test_pipelines.py)."""

from __future__ import annotations

import json

from streamscale.pipelines.replay import BatchRange, batch_range


def _checkpoint(tmp_path, watermarks: dict[int, int], initial: dict | None = None):
    (tmp_path / "offsets").mkdir()
    for batch, wm in watermarks.items():
        meta = {"batchWatermarkMs": wm, "batchTimestampMs": 0}
        (tmp_path / "offsets" / str(batch)).write_text(f'v1\n{json.dumps(meta)}\n{{"in":{{"0":1}}}}\n')
    if initial is not None:
        (tmp_path / "sources" / "0").mkdir(parents=True)
        (tmp_path / "sources" / "0" / "0").write_text("\x00v1\n" + json.dumps(initial))
    return str(tmp_path)


def _progress(batch: int, rows: int, start, end, oldest: str | None) -> dict:
    p = {"batchId": batch, "numInputRows": rows, "sources": [{"startOffset": start, "endOffset": end}]}
    if oldest:
        p["eventTime"] = {"min": oldest, "watermark": "1970-01-01T00:00:00.000Z"}
    return p


def test_a_batch_whose_oldest_reading_is_at_the_late_watermark_cannot_lose_any(tmp_path):
    # W(4) = 10 s: batch 5 drops readings whose window ends at or before 10 s; a reading at 10 s
    # lies in windows ending after 10 s, one at 9.999 s may lie in [0, 10 s)
    ck = _checkpoint(tmp_path, {4: 10_000, 5: 12_000})
    start, end = '{"in":{"0":10,"1":7}}', '{"in":{"0":20,"1":9}}'
    assert batch_range(_progress(5, 12, start, end, "1970-01-01T00:00:10.000Z"), ck) is None
    r = batch_range(_progress(5, 12, start, end, "1970-01-01T00:00:09.999Z"), ck)
    assert r == BatchRange(5, {"in": {"0": 10, "1": 7}}, {"in": {"0": 20, "1": 9}}, 10_000, 12)
    # no event time reported (every row malformed, say): replayed, not assumed
    assert batch_range(_progress(5, 12, start, end, None), ck) is not None
    # no rows: nothing to count
    assert batch_range(_progress(5, 0, start, end, None), ck) is None


def test_the_first_batch_starts_where_the_source_log_says(tmp_path):
    # Spark reports no startOffset for a checkpoint's first batch: sources/0/0 has it; W(-1) = 0
    ck = _checkpoint(tmp_path, {0: 0}, initial={"in": {"0": 3, "1": 0}})
    r = batch_range(_progress(0, 5, None, '{"in":{"0":5,"1":3}}', "1969-12-31T23:59:59.000Z"), ck)
    assert r == BatchRange(0, {"in": {"0": 3, "1": 0}}, {"in": {"0": 5, "1": 3}}, 0, 5)


def test_a_failed_replay_leaves_its_batches_not_counted_and_says_so_in_one_line(tmp_path, caplog):
    from streamscale.pipelines.run import PipelineRun

    ck = _checkpoint(tmp_path, {0: 5_000, 1: 6_000})
    progress = _progress(1, 4, '{"in":{"0":0}}', '{"in":{"0":4}}', "1970-01-01T00:00:01.000Z")
    progress.update(timestamp="2026-11-26T00:00:00.000Z", durationMs={"triggerExecution": 5})

    class Query:
        recentProgress = [progress]

        def stop(self):
            pass

        def exception(self):
            return None

    def replay(ranges):
        assert [r.batch_id for r in ranges] == [1]
        raise RuntimeError("the topic is gone\n\tat org.apache.spark.sql.kafka010.Foo(Foo.scala:1)")

    run = PipelineRun("uc2", [Query()], Query(), ck, replay=replay)
    run.stop()  # the run's other results stand
    assert [(b.batch_id, b.late_counted) for b in run.batches] == [(1, False)]
    assert not run.totals()["late_counted"]
    assert "the topic is gone" in caplog.text and "Foo.scala" not in caplog.text
