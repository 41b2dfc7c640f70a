"""The append-mode output's grid check: where window ends can lie between two watermarks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.pipelines import make_pipeline
from streamscale.pipelines.output import window_end_between
from streamscale.sparkio.session import codegen_compiles


def ends_by_brute_force(size: int, slide: int, low: int, high: int) -> bool:
    # Spark's window(): starts at multiples of the slide (from epoch 0), end = start + size
    first_start = (low - size) // slide * slide - slide
    start = first_start
    while start + size <= high:
        if start + size >= low:
            return True
        start += slide
    return False


@given(
    st.integers(1, 50),
    st.integers(1, 50),
    st.integers(-10_000, 10_000),
    st.integers(0, 400),
)
def test_window_end_between_matches_the_grid(size_units, slide_units, low, width):
    slide = slide_units * 7
    size = max(size_units * 7, slide)  # slide never exceeds the size (UC3 refuses that)
    assert window_end_between((size, slide), low, low + width) == ends_by_brute_force(size, slide, low, low + width)


def test_window_end_between_hand_worked():
    # 60 s tumbling windows end at 60,000, 120,000, ...
    assert not window_end_between((60_000, 60_000), 60_001, 119_999)
    assert window_end_between((60_000, 60_000), 60_001, 120_000)
    assert window_end_between((60_000, 60_000), 60_000, 60_000)
    # 3 days every day: ends at whole days
    day = 86_400_000
    assert window_end_between((3 * day, day), 5 * day - 1, 5 * day)
    assert not window_end_between((3 * day, day), 5 * day + 1, 6 * day - 1)


def test_pipelines_know_their_window_grid():
    assert make_pipeline("uc2", {"window_s": 60}).window_grid_ms() == (60_000, 60_000)
    assert make_pipeline("uc3", {"window_s": 259_200, "slide_s": 86_400}).window_grid_ms() == (
        259_200_000,
        86_400_000,
    )
    assert make_pipeline("uc1").window_grid_ms() is None


@given(
    st.lists(st.floats(1.0, 50_000.0), min_size=1, max_size=60),
    st.floats(0.5, 20_000.0),
)
def test_shifted_cdf_stays_within_one_bucket_above_the_shifted_latencies(latencies, shift):
    import numpy as np

    from streamscale.pipelines.output import LATENCY_EDGES_MS, shifted_cdf

    lat = np.asarray(latencies)
    cdf = [int((lat <= e).sum()) for e in LATENCY_EDGES_MS]
    got = shifted_cdf(cdf, shift)
    true = [int((lat + shift <= e).sum()) for e in LATENCY_EDGES_MS]
    # never more rows at or below an edge than there are (so a percentile is never read too low),
    # and at least the rows at or below the edge below (so it is at most one bucket too high)
    assert all(g <= t for g, t in zip(got, true, strict=True))
    assert all(got[k] >= true[k - 1] for k in range(1, len(true)))


def test_shifted_cdf_hand_worked():
    from streamscale.pipelines.output import shifted_cdf

    # rows of 1 ms, 2 ms and 16 ms: edges 2^(k/4), so 1 ms is at edge 0, 2 ms at 4, 16 ms at 16
    cdf = [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2] + [3] * 84
    assert shifted_cdf(cdf, 0) == cdf
    # + 14 ms: 15, 16 and 30 ms; edge 16 (16 ms) - 14 = 2 ms -> edge 4 (2 ms): 2 rows;
    # edge 20 (32 ms) - 14 = 18 ms -> edge 16 (16 ms): all 3
    got = shifted_cdf(cdf, 14)
    assert got[16] == 2 and got[19] == 2 and got[20] == 3  # edge 19 (26.9 ms) - 14 -> edge 14: 2 rows
    assert got[:16] == [0] * 16  # edge 15 (13.45 ms) - 14 < 1 ms: none (truly none: all >= 15 ms)


@pytest.mark.parametrize("emit_final", [True, False], ids=["final", "update"])
def test_a_batchs_latency_includes_its_processing(spark, broker, topic_factory, tmp_path, emit_final):
    """The batch DataFrame is lazy: its work runs inside the write (or, in update mode, inside the
    job that finds its newest event), and a row's latency runs until the write returns, not from
    when the batch was handed over (that left a batch's processing out)."""
    import time

    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType

    from streamscale.experiment.slo import latency_percentile_ms
    from streamscale.pipelines.output import Emission, WindowedOutput

    from .helpers import read_topic

    out = topic_factory(1)

    @F.udf(DoubleType())
    def slow(x):  # the batch's work: 15 rows of 0.1 s in one task
        time.sleep(0.1)
        return float(x)

    event_ms = int(time.time() * 1000)
    batch = (
        spark.range(15)
        .coalesce(1)
        .select(
            F.col("id").cast("string").alias("sensor"),
            slow("id").alias("v"),
            F.lit(event_ms).cast("long").alias("max_event_ms"),
            # ten windows end at the newest event, five a minute later
            F.when(F.col("id") < 10, F.lit(event_ms)).otherwise(F.lit(event_ms + 60_000)).alias("windowEndMs"),
        )
    )
    (tmp_path / "ck" / "offsets").mkdir(parents=True)  # the batch's entry in Spark's offsets log
    (tmp_path / "ck" / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0}\n{}\n')
    writer = WindowedOutput(broker.bootstrap, out, ["sensor"], ["v"], Emission(0, emit_final), str(tmp_path / "ck"))
    writer(batch, 0)
    got = writer.batches[0]
    rows = read_topic(broker.bootstrap, out, 1)
    assert got.output_records == 15 and len(rows) == 15
    # update mode: with lateness 0 the next watermark is the newest event, which closes the ten
    finals = {key.decode(): json.loads(value)["final"] for _p, _o, key, value in rows}
    assert finals == {str(i): emit_final or i < 10 for i in range(15)}
    assert got.avg_latency_ms >= 1500 and got.max_latency_ms >= 1500
    assert latency_percentile_ms([got], 0.5) >= 1500  # every row, not only the slowest
    assert got.latency_cdf[-1] == 15  # the histogram counts every row (all within its 7.9 h)


def test_streamed_written_ms_is_the_batch_up_to_its_commit():
    from streamscale.pipelines.output import streamed_written_ms

    assert streamed_written_ms({"durationMs": {"triggerExecution": 900, "addBatch": 600, "commitOffsets": 120}}) == 780
    assert streamed_written_ms({"durationMs": {"triggerExecution": 40}}) == 40
    assert streamed_written_ms({}) == 0


def test_streamed_final_rows_are_counted_and_their_latency_runs_until_they_are_in_kafka(
    spark, broker, topic_factory, tmp_path
):
    """Final rows on Spark's connector go straight into its streaming Kafka sink. The batch that
    writes them counts them, and its latencies reach at least each row's Kafka create time (the
    sink's producer stamps it as it writes, on the JVM's clock like the batch's) minus the newest
    reading of the row's window."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    from .helpers import send

    src, out = topic_factory(2), topic_factory(2)
    now = int(time.time() * 1000)
    start = now - now % 10_000 - 20_000  # a 10 s window that ended 10-20 s ago
    readings = [(f"s_{s}", start + 1_000 * i, 1.0 + i) for s in range(3) for i in range(10)]
    readings.append(("s_0", start + 30_000, 1.0))  # moves the watermark past the window's end
    send(broker.bootstrap, src, readings, 2)
    newest = start + 9_000  # every sensor's newest reading in the window
    pipe = make_pipeline("uc2", {"window_s": 10, "lateness_s": 1, "emit": "final"}, connector="spark")
    run = pipe.start(spark, broker.bootstrap, src, out, str(tmp_path / "ck"), available_now=True)
    run.await_available(300)
    assert run.exception() is None
    writing = [b for b in run.batches if b.output_records]
    assert len(writing) == 1 and writing[0].output_records == 3

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t", "enable.partition.eof": True})
    c.assign([TopicPartition(out, p, 0) for p in range(2)])
    stamps, eof = [], set()
    deadline = time.monotonic() + 30
    while len(eof) < 2 and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                stamps.append(m.timestamp()[1])
            else:
                eof.add(m.partition())
    c.close()
    assert len(stamps) == 3
    b = writing[0]
    assert b.max_latency_ms >= max(stamps) - newest - 5  # ms rounding of the progress' durations
    assert b.avg_latency_ms >= sum(stamps) / 3 - newest - 5


def test_streamed_rows_run_the_same_code_in_every_batch(spark, tmp_path):
    """The rows' clock (the batch's timestamp) changes every batch; were it written into the
    generated code, each batch would compile its output stage again. A second query over the same
    files compiles nothing: every batch of both reuses the first one's classes."""
    from pyspark.sql import functions as F

    from streamscale.pipelines.output import Emission, WindowedOutput

    for i in range(3):
        spark.range(i * 50, (i + 1) * 50).select(
            F.col("id").cast("string").alias("sensor"),
            F.col("id").cast("double").alias("v"),
            (F.col("id") + 1_700_000_000_000).alias("max_event_ms"),
        ).coalesce(1).write.parquet(str(tmp_path / "in" / f"part={i}"))
    files = spark.read.parquet(str(tmp_path / "in"))
    writer = WindowedOutput(
        "unused:9092", "unused", ["sensor"], ["v"], Emission(0, True), str(tmp_path / "unused"), "spark"
    )

    def run(name: str) -> list[dict]:
        stream = spark.readStream.schema(files.schema).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
        q = (
            writer.streamed(stream.drop("part"))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return q.recentProgress

    first = run("a")
    before = codegen_compiles(spark)
    second = run("b")
    assert codegen_compiles(spark) == before
    for progress in (first, second):
        assert [p["numInputRows"] for p in progress] == [50, 50, 50]
        assert len({p["timestamp"] for p in progress}) == 3  # three clocks, one code
        assert [p["observedMetrics"]["streamscale-output"]["rows"] for p in progress] == [50, 50, 50]


def test_a_batchs_clock_and_watermark_are_not_compiled_into_its_code(spark, broker, topic_factory, tmp_path):
    """Update mode hands each batch to the writer with its own clock and next watermark: the second
    batch over the same rows compiles nothing the first did not."""
    from pyspark.sql import functions as F

    from streamscale.pipelines.output import Emission, WindowedOutput

    out = topic_factory(1)
    rows = spark.range(20).select(
        F.col("id").cast("string").alias("sensor"),
        F.col("id").cast("double").alias("v"),
        (F.col("id") + 1_700_000_000_000).alias("max_event_ms"),
        (F.col("id") + 1_700_000_000_010).alias("windowEndMs"),
    )
    offsets = tmp_path / "ck" / "offsets"
    offsets.mkdir(parents=True)
    for n, wm in enumerate((1_700_000_000_000, 1_700_000_000_005)):
        (offsets / str(n)).write_text(f'v1\n{{"batchWatermarkMs":{wm},"batchTimestampMs":0}}\n{{}}\n')
    writer = WindowedOutput(broker.bootstrap, out, ["sensor"], ["v"], Emission(0, False), str(tmp_path / "ck"), "spark")
    writer(rows, 0)
    before = codegen_compiles(spark)
    writer(rows, 1)
    assert codegen_compiles(spark) == before
    assert writer.batches[0].output_records == writer.batches[1].output_records == 20
