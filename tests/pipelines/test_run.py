"""Stopping a run leaves nothing of its queries running on the cluster."""

from __future__ import annotations

import threading
import time
import uuid

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


def test_settle_jobs_without_queries_or_context_does_nothing():
    settle_jobs([])
