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
