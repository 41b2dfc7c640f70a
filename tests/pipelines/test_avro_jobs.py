"""Avro records through Spark: decoded by streamscale with Spark's from_avro (Confluent's wire format
included, what does not decode counted as malformed), and a job that decodes them itself; outputs
checked exactly against the records produced, read back with fastavro."""

import io
import json
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Producer

from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut
from streamscale.loadgen.recordspec import records_spec
from streamscale.pipelines import make_pipeline
from streamscale.pipelines.jobsetup import JobSetup
from tests.pipelines.helpers import read_topic

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"
FIELDS = {"id": {"type": "long", "gen": "sequence"}, "user": {"type": "string", "gen": "keys:5"},
          "cents": {"type": "long", "gen": "uniform:1,100"}}  # fmt: skip


def test_avro_records_are_decoded_with_from_avro_and_what_does_not_decode_is_malformed(broker, spark, topic_factory,
                                                                                         tmp_path):  # fmt: skip
    spec = records_spec({"encoding": "avro", "wire": "confluent", "schema_id": 7, "fields": FIELDS}, "t")
    rows = [{"id": i, "user": f"u{i % 3}", "cents": 10 * i} for i in range(40)]
    good = []
    for row in rows:  # fastavro's bodies, in Confluent's wire format by hand
        body = io.BytesIO()
        fastavro.schemaless_writer(body, fastavro.parse_schema(spec.avro_schema()), row)
        good.append(b"\x00\x00\x00\x00\x07" + body.getvalue())
    hostile = [
        b"\x01" + good[0][1:],  # another magic byte
        b"\x00\x00\x00\x00\x08" + good[0][5:],  # another schema id
        good[1][:6],  # a body cut short
        b"",
        b"\x00\x00\x00",  # shorter than the header
    ]
    tin, tout = topic_factory(2, "avro-in"), topic_factory(2, "avro-out")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, v in enumerate(good + hostile):
        p.produce(tin, v, partition=i % 2)
    assert p.flush(30) == 0
    job = tmp_path / "same.py"
    job.write_text("def same(records, params):\n    return records\n")
    pipe = make_pipeline(f"{job}:same", {"connector": "spark"}, records=spec)
    run = pipe.start(spark, broker.bootstrap, tin, tout, str(tmp_path / "ck"), available_now=True)
    run.await_available(120)
    assert run.exception() is None
    got = sorted((json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, tout, 2)), key=lambda r: r["id"])
    assert sum(b.malformed for b in run.batches) == len(hostile)
    assert got == rows


def test_a_job_that_decodes_confluent_avro_itself_keeps_exactly_its_large_payments(broker, spark, topic_factory):
    from streamscale.benchmark.spec import load_spec

    spec = load_spec(EXAMPLES / "avro_payments.yaml")
    bm = spec.benchmark
    tin, tout = topic_factory(4, "avp-in"), topic_factory(4, "avp-out")
    r = run_sut(
        Workload(bm.sut, bm.params, rate=2000, records=bm.records, job=JobSetup(decode="raw")),
        policy=StopPolicy(5, drain_s=180),
        context=Context(bootstrap=broker.bootstrap, spark=spark, topics=(tin, tout)),
    )
    assert r.undrained == 0 and r.generated == r.processed_records > 0
    schema = fastavro.parse_schema(json.loads((EXAMPLES / "payment.avsc").read_text()))
    sent = []
    for _, _, _, v in read_topic(broker.bootstrap, tin, 4):
        assert v[:5] == b"\x00\x00\x00\x00\x07"  # Confluent's header, schema id 7
        sent.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), schema))
    want = sorted((p["payment"], p["user"], p["cents"]) for p in sent if p["cents"] >= 9000)
    out = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, tout, 4)]
    assert want and sorted((o["payment"], o["user"], o["cents"]) for o in out) == want
    assert all(o["key"] == o["user"] for o in out)
