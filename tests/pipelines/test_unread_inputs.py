"""A spec of three inputs whose job reads two (a join of bids with the auctions they are for,
persons declared for another query): the input nothing reads is refused before any load, names
itself, and with ``unread: true`` it is generated at its share and left out of the lag."""

import uuid

import pytest

from streamscale.errors import ConfigError
from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut
from streamscale.pipelines import make_pipeline
from streamscale.sparkio.planread import topics_read
from tests.pipelines.threeinputs import three_inputs

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("connector", ["spark", "python"])
def test_an_input_the_job_never_reads_is_refused_naming_it(spark, tmp_path, connector):
    bm = three_inputs(tmp_path)
    pipe = make_pipeline(bm.sut, {"connector": connector}, records=bm.feed(), job=bm.job_setup())
    with pytest.raises(ConfigError) as exc:
        pipe.check(spark, "127.0.0.1:9", "in-x")  # builds the query: no broker is asked
    said = str(exc.value)
    assert said.startswith("inputs.persons: job bids_per_auction never reads it (its query reads auctions, bids)")
    assert "\n" not in said and "unread: true" in said


def test_unread_true_on_an_input_the_job_reads_is_refused(spark, tmp_path):
    bm = three_inputs(tmp_path, {"persons": {"unread": True}, "bids": {"unread": True}})
    pipe = make_pipeline(bm.sut, {}, records=bm.feed(), job=bm.job_setup())
    with pytest.raises(ConfigError, match=r"^inputs.bids.unread: true, but job bids_per_auction reads bids"):
        pipe.check(spark, "127.0.0.1:9", "in-x")


def test_the_topics_a_query_reads_come_from_its_plan(spark, tmp_path):
    bm = three_inputs(tmp_path, {"persons": {"unread": True}})
    pipe = make_pipeline(bm.sut, {}, records=bm.feed(), job=bm.job_setup())
    out, _ = pipe.build(spark, pipe.read(spark, "127.0.0.1:9", "in-x", "earliest", None))
    assert topics_read(out) == {"in-x.auctions", "in-x.bids"}
    assert pipe.read_topics("in-x") == ["in-x.auctions", "in-x.bids"]  # the referenced input starts first
    assert pipe.read_share == pytest.approx(0.8)


def test_an_unread_input_is_generated_at_its_share_and_left_out_of_the_lag(broker, spark, _created_topics, tmp_path):
    from streamscale.broker import BrokerAccess

    bm = three_inputs(tmp_path, {"persons": {"unread": True}})
    base, tout = f"q3-{uuid.uuid4().hex[:8]}", f"q3-out-{uuid.uuid4().hex[:8]}"
    topics = {n: f"{base}.{n}" for n in ("persons", "auctions", "bids")}
    _created_topics.extend([*topics.values(), tout])
    r = run_sut(
        Workload(bm.sut, bm.params, rate=500, records=bm.feed(), job=bm.job_setup(), partitions=1),
        policy=StopPolicy(4, drain_s=120),
        context=Context(bootstrap=broker.bootstrap, spark=spark, topics=(base, tout)),
    )
    with BrokerAccess(broker.bootstrap) as a:
        sent = {n: sum(a.end_offsets(t).values()) for n, t in topics.items()}
    assert sum(sent.values()) == r.generated and sent["persons"] > 0  # generated all the same
    assert sent["persons"] == pytest.approx(0.2 * r.generated, rel=0.1)
    # the lag and the drain are the read topics' alone: every record of them processed
    assert r.input_topic == f"{topics['auctions']},{topics['bids']}"
    assert r.undrained == 0 and r.processed_records == sent["auctions"] + sent["bids"]
    assert r.lag[-1].end_total == sent["auctions"] + sent["bids"]
    assert r.read_share == pytest.approx(0.8)
