"""A job of two inputs: impressions and the clicks that refer to them (``ref:``), joined by the
attribution example; its output checked exactly against a join of the two input topics computed here
in plain Python."""

import json
import uuid
from pathlib import Path

import pytest

from streamscale.benchmark.spec import load_spec
from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut
from tests.pipelines.helpers import read_topic

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def test_the_attribution_join_outputs_exactly_the_join_of_its_two_input_topics(broker, spark, _created_topics):
    bm = load_spec(EXAMPLES / "attribution.yaml").benchmark
    base, tout = f"attr-{uuid.uuid4().hex[:8]}", f"attr-out-{uuid.uuid4().hex[:8]}"
    imp_topic, click_topic = f"{base}.impressions", f"{base}.clicks"
    _created_topics.extend([imp_topic, click_topic, tout])
    r = run_sut(
        Workload(bm.sut, bm.params, rate=1500, records=bm.feed(), job=bm.job_setup(), partitions=4),
        policy=StopPolicy(8, drain_s=180),
        context=Context(bootstrap=broker.bootstrap, spark=spark, topics=(base, tout)),
    )
    assert r.undrained == 0 and r.generated == r.processed_records > 0
    assert r.input_topic == f"{imp_topic},{click_topic}"
    shown = {}
    for _, _, key, v in read_topic(broker.bootstrap, imp_topic, 4):
        rec = json.loads(v)
        assert key == rec["impression"].encode()
        shown[rec["impression"]] = (rec["campaign"], rec["shown"])
    clicks = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, click_topic, 2)]
    assert len(shown) == pytest.approx(0.8 * r.generated, rel=0.05) and len(clicks) > 1000
    # every click names an impression shown at most 60 s before it: its ref:
    assert all(c["impression"] in shown for c in clicks)
    assert all(0 <= c["clicked"] - shown[c["impression"]][1] <= 60_000 for c in clicks)
    want = sorted(
        (c["click"], c["impression"], shown[c["impression"]][0], shown[c["impression"]][1], c["clicked"])
        for c in clicks
        if c["impression"] in shown and 0 <= c["clicked"] - shown[c["impression"]][1] <= 60_000
    )
    out = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, tout, 4)]
    got = sorted((o["click"], o["impression"], o["campaign"], o["shown_ms"], o["clicked_ms"]) for o in out)
    assert got == want
    assert all(o["key"] == o["campaign"] for o in out)
    assert r.dropped_late == 0 and r.malformed == 0
    # the run saw both topics: each batch's end offsets, the lag summed, latencies of both inputs
    assert set(r.batches[-1]["end_offsets"]) == {imp_topic, click_topic}
    assert r.lag and r.lag[-1].end_total == r.generated
    assert r.processing_ms.get("p50") is not None


def test_inputs_decode_each_their_own_way_and_the_malformed_are_counted_per_input(broker, spark, _created_topics,
                                                                                 tmp_path):  # fmt: skip
    from confluent_kafka import Producer

    from streamscale.broker import BrokerAccess
    from streamscale.loadgen.inputs import InputSpec, resolve_inputs
    from streamscale.pipelines import make_pipeline

    ids = {"fields": {"id": {"type": "long", "gen": "sequence"}}}
    inputs = resolve_inputs({
        "a": InputSpec.model_validate({"share": 0.5, "records": ids}),
        "b": InputSpec.model_validate({"share": 0.5, "records": ids, "decode": "raw"}),
    })  # fmt: skip
    base, tout = f"two-{uuid.uuid4().hex[:8]}", f"two-out-{uuid.uuid4().hex[:8]}"
    _created_topics.extend([f"{base}.a", f"{base}.b", tout])
    with BrokerAccess(broker.bootstrap) as a:
        a.create_topics({f"{base}.a": 2, f"{base}.b": 1, tout: 1})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        p.produce(f"{base}.a", b'{"id": %d}' % i, partition=i % 2)
    p.produce(f"{base}.a", b'{"id": "not a number"}', partition=0)  # malformed in a
    p.produce(f"{base}.a", b"{", partition=1)
    for v in (b"raw one", b'{"id": "kept as bytes"}', b""):
        p.produce(f"{base}.b", v)  # b is the job's to decode: nothing of it is malformed
    assert p.flush(30) == 0
    job = tmp_path / "two.py"
    job.write_text(
        "from pyspark.sql import functions as F\n\n"
        "def two(inputs, params):\n"
        "    a = inputs['a'].select(F.col('id').cast('string').alias('v'), F.lit('a').alias('src'))\n"
        "    b = inputs['b'].select(F.col('value').cast('string').alias('v'), F.col('topic').alias('src'))\n"
        "    return a.unionByName(b)\n"
    )
    pipe = make_pipeline(f"{job}:two", {"connector": "spark"}, records=inputs)
    run = pipe.start(spark, broker.bootstrap, base, tout, str(tmp_path / "ck"), available_now=True)
    run.await_available(120)
    assert run.exception() is None
    got = sorted((r["src"], r["v"]) for r in (json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, tout, 1)))
    want = sorted(
        [("a", str(i)) for i in range(30)] + [(f"{base}.b", s) for s in ("raw one", '{"id": "kept as bytes"}', "")]
    )
    assert got == want
    assert sum(b.malformed for b in run.batches) == 2
    ends = {}
    for b in run.batches:
        for t, parts in b.end_offsets.items():
            ends[t] = {int(k): int(v) for k, v in parts.items()}
    assert ends == {f"{base}.a": {0: 16, 1: 16}, f"{base}.b": {0: 3}}
