"""Stopping a run leaves nothing of its queries running on the cluster."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from streamscale.pipelines.run import settle_jobs
from streamscale.waiting import wait_for


def _statuses(sc, group: str) -> list[str]:
    tracker = sc.statusTracker()
    return [info.status for j in tracker.getJobIdsForGroup(group) if (info := tracker.getJobInfo(j)) is not None]


def test_settle_jobs_cancels_a_job_its_query_missed_and_waits_until_it_ended(spark):
    # as a query stopped while it submitted a batch's job: the job runs on in the query's group
    sc = spark.sparkContext
    group = f"settle-{uuid.uuid4().hex[:8]}"

    def slow_job():
        sc.setJobGroup(group, "a batch's job the stop missed", interruptOnCancel=True)
        try:
            sc.parallelize(range(2), 2).map(lambda x: time.sleep(120) or x).collect()
        except Exception:  # noqa: BLE001 - cancelled, as it should be
            pass

    t = threading.Thread(target=slow_job, daemon=True)
    t.start()
    wait_for(lambda: "RUNNING" in _statuses(sc, group), 60, "the job to run")

    class Stopped:
        runId = group

    settle_jobs([Stopped()], timeout=60)
    # cancelled, not waited out: the job's tasks sleep 120 s, so it ended only if it was cancelled
    assert _statuses(sc, group) and "RUNNING" not in _statuses(sc, group)
    t.join(30)
    assert not t.is_alive()


def test_settle_jobs_without_queries_or_context_does_nothing(monkeypatch):
    from pyspark import SparkContext

    class NoJobs:  # a context whose job groups must not be touched when there is nothing to settle
        def cancelJobGroup(self, group):  # noqa: N802 - Spark's name
            raise AssertionError(f"cancelled {group}")

        def statusTracker(self):  # noqa: N802 - Spark's name
            raise AssertionError("asked for the jobs")

    monkeypatch.setattr(SparkContext, "_active_spark_context", NoJobs())
    assert settle_jobs([]) is None  # no queries: the context is not asked
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)

    class Query:
        runId = "r-1"

    assert settle_jobs([Query()]) is None  # no context: nothing to cancel, no error


def test_processing_latency_from_the_created_bins_hand_worked():
    from streamscale.pipelines.progress import commit_ms, processing_latencies

    committed = commit_ms({"timestamp": "2026-11-27T10:00:00.000Z", "durationMs": {"triggerExecution": 1500}})
    assert committed == 1_795_773_601_500.0
    bins = [  # 3 records created in [..58.000, ..58.050), 5 in [..30.000, ..30.050): bins of 50 ms
        {"x": (committed - 31_500) / 50, "y": 5.0},
        {"x": (committed - 3_500) / 50, "y": 3.0},
    ]
    spans, longest = processing_latencies(bins, committed, 50)
    assert sorted(spans) == [(3_450, 3_500, 3), (31_450, 31_500, 5)]  # each in (low, high]
    assert longest == 31_500
    assert processing_latencies([], committed, 50) == (None, None)
    # a full histogram (here of 3 bins) may have merged neighbours: a pair's records lie between
    # its neighbours' keys (the outermost: as far out as the next one is in), one bin wider
    full = [{"x": 10.0, "y": 1.0}, {"x": 11.0, "y": 2.0}, {"x": 12.5, "y": 4.0}]
    spans, longest = processing_latencies(full, 1_000.0, 50, bins=3)
    assert spans == [(400, 550, 1), (325, 500, 2), (250, 450, 4)]
    assert longest == 550
    assert processing_latencies(full, 1_000.0, 50, bins=4)[0] == [(450, 500, 1), (400, 450, 2), (325, 375, 4)]


@pytest.mark.spark
@pytest.mark.parametrize("connector", ["spark", "python"])
def test_every_records_latency_runs_from_its_kafka_timestamp_to_its_batchs_commit(
    spark, broker, topic_factory, connector
):
    """Records created 40 s before a run and records created just before it: the first all count
    with a latency of 40 s and more, the others below it, none is missed (UC1, which writes no
    windows, too)."""
    import json

    from streamscale.experiment.processing import processing_percentile_ms
    from streamscale.pipelines import make_pipeline
    from tests.conftest import produce

    topic = topic_factory(2)
    now = int(time.time() * 1000)
    old = [
        (b"s_%d" % i, json.dumps({"identifier": f"s_{i}", "timestamp": now, "valueInW": 1.0}).encode(), i % 2)
        for i in range(300)
    ]
    fresh = [
        (b"s_%d" % i, json.dumps({"identifier": f"s_{i}", "timestamp": now, "valueInW": 2.0}).encode(), i % 2)
        for i in range(900)
    ]
    produce(broker.bootstrap, topic, old, timestamp=now - 40_000)
    produce(broker.bootstrap, topic, fresh)
    run = make_pipeline("uc1", {"sink": "none"}, connector=connector).start(
        spark, broker.bootstrap, topic, "unused", available_now=True
    )
    run.await_available(300)
    assert run.exception() is None
    batches = [b for b in run.batches if b.input_rows]
    assert sum(b.input_rows for b in batches) == 1_200
    spans = [s for b in batches for s in b.processing_latency]
    assert sum(n for _, _, n in spans) == 1_200  # every record counted
    # the fresh ones took less than 40 s, whatever the batch took; the others 40 s and more
    assert sum(n for _, high, n in spans if high < 40_000) == 900
    assert sum(n for low, _, n in spans if low >= 40_000 - 50) == 300
    assert processing_percentile_ms(batches, 0.5) < 40_000 <= processing_percentile_ms(batches, 0.95)
    assert max(b.processing_max_ms for b in batches) >= 40_000


def test_a_batch_of_several_inputs_counts_every_topics_offsets_malformed_records_and_latencies():
    import json

    from streamscale.experiment.lagsampler import LagSample
    from streamscale.experiment.slo import batch_boundary_lags
    from streamscale.pipelines.progress import commit_ms
    from streamscale.pipelines.run import PipelineRun

    progress = {
        "batchId": 0,
        "timestamp": "2026-11-27T10:00:00.000Z",
        "numInputRows": 9,
        "durationMs": {"triggerExecution": 1000},
        "sources": [  # Spark's Kafka source per topic: its offsets as JSON text
            {"endOffset": json.dumps({"in.imp": {"0": 4, "1": 2}})},
            {"endOffset": json.dumps({"in.click": {"0": 3}})},
        ],
        "observedMetrics": {},
    }
    committed = commit_ms(progress)
    progress["observedMetrics"] = {
        "input.imp": {"malformed": 1, "created_bins": [{"x": (committed - 2_000) / 50, "y": 6.0}]},
        "input.click": {"malformed": 2, "created_bins": [{"x": (committed - 500) / 50, "y": 3.0}]},
        "other": {"malformed": 100},  # not an input's observation
    }

    class Query:
        recentProgress = [progress]

    [b] = PipelineRun("job", [Query()], Query()).poll()
    assert b.end_offsets == {"in.imp": {"0": 4, "1": 2}, "in.click": {"0": 3}}
    assert b.malformed == 3
    assert sorted(b.processing_latency) == [(450, 500, 3), (1_950, 2_000, 6)]
    assert b.processing_max_ms == 2_000
    # the lag right after the batch: both topics' ends (11 + 9 sampled) minus both topics' offsets (9)
    t0 = committed / 1000 - 5
    samples = [LagSample(4.0, 0, 11, 0), LagSample(6.0, 0, 29, 0)]
    assert batch_boundary_lags([b], samples, t0, "in.imp,in.click") == ([5.0], [11.0])
