"""A drain probe's run (``StopPolicy(backlog=...)``): the whole backlog is written, split by the
inputs' shares, before the query starts; the query then reads every record of the inputs it reads,
in batches no larger than its cap, and nothing else."""

import uuid

import pytest

from streamscale.broker import BrokerAccess
from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut
from tests.pipelines.threeinputs import three_inputs

pytestmark = pytest.mark.spark


def test_a_drain_reads_its_whole_backlog_written_before_the_query_in_capped_batches(
    broker, spark, _created_topics, tmp_path, monkeypatch
):
    import streamscale.experiment.sut as sut

    made = []
    real = sut.run_checkpoint
    monkeypatch.setattr(sut, "run_checkpoint", lambda prefix, root: made.append(real(prefix, root)) or made[-1])
    bm = three_inputs(tmp_path, {"persons": {"unread": True}})
    base, tout = f"drain-{uuid.uuid4().hex[:8]}", f"drain-out-{uuid.uuid4().hex[:8]}"
    topics = {n: f"{base}.{n}" for n in ("persons", "auctions", "bids")}
    _created_topics.extend([*topics.values(), tout])
    r = run_sut(
        Workload(
            bm.sut,
            {**bm.params, "max_offsets_per_trigger": 1_500},
            rate=500,
            records=bm.feed(),
            job=bm.job_setup(),
            partitions=1,
        ),
        policy=StopPolicy(0.0, drain_s=120, backlog=10_000),
        context=Context(
            bootstrap=broker.bootstrap, spark=spark, topics=(base, tout), checkpoint_root=str(tmp_path / "shared")
        ),
    )
    with BrokerAccess(broker.bootstrap) as a:
        sent = {n: sum(a.end_offsets(t).values()) for n, t in topics.items()}
    # the backlog split by the shares (0.2, 0.2, 0.6), each input's count exact
    assert sent == {"persons": 2_000, "auctions": 2_000, "bids": 6_000} and r.generated == 10_000
    # every record of the inputs the job reads, none of the unread one's, and nothing left
    assert r.processed_records == 8_000 and r.undrained == 0
    sizes = [b["input_rows"] for b in r.batches if b["input_rows"]]
    # each batch at most the cap per source (two sources read), the first already full: the whole
    # backlog was in the topics before the query read any of it
    assert max(sizes) <= 2 * 1_500 and sizes[0] == max(sizes) and len(sizes) >= 3
    # its checkpoint under the root given (a cluster's shared folder), removed when the run stopped
    assert len(made) == 1 and made[0].startswith(str(tmp_path / "shared") + "/")
    assert not list((tmp_path / "shared").iterdir())
