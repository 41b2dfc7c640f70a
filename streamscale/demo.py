"""`streamscale demo`: a short, real end-to-end run on the embedded broker.

Broker -> load generator -> PySpark streaming query through the Python Kafka source
(decode JSON, count per sensor) -> records/s printed every micro-batch, a CSV and a PNG.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console

console = Console()


def run_demo(seconds: float = 10.0, sensors: int = 10000, out_dir: Path = Path("demo-results"),
             master: str = "local[2]", partitions: int = 4, execution: bool = True) -> dict:
    """Part 1: the PySpark source under load. Part 2: a short real UC1 benchmark execution."""
    result = run_source_demo(seconds, sensors, out_dir, master, partitions)
    if execution:
        result["execution"] = run_execution_demo(out_dir / "uc1-execution")
    return result


def run_execution_demo(out_dir: Path) -> dict:
    from streamscale.benchmark.runner import run_execution
    from streamscale.benchmark.spec import parse_spec

    spec = parse_spec({
        "name": "demo-uc1",
        "benchmark": {"sut": "uc1", "params": {"sink": "none"}, "topics": {"partitions": 4},
                      "loadgen": {"workers": 1}},
        "execution": {"load": {"type": "sensors", "values": [2000, 6000]},
                      "resources": {"type": "cores", "values": [1, 2]},
                      # one run per point keeps the demo at about 2 minutes: no runs added for an
                      # undecided lag interval (a benchmark spec adds up to 2 by default)
                      "duration_s": 30, "warmup_s": 10, "repetitions": 1, "extra_repetitions": 0,
                      "strategy": {"name": "linear", "lower_bound": True}, "metric": "demand"}})
    console.print("\n[bold]UC1 scalability benchmark[/] (Theodolite method, short): resource demand of "
                  "2,000 and 6,000 records/s, 1 or 2 local cores, 30 s experiments (10 s warm-up)")
    summary = run_execution(spec, out_dir)
    for row in summary["results"]:
        r = row["resources"]
        console.print(f"  {row['load']:,.0f} records/s -> {r if r is not None else 'more than 2'} core(s)")
    console.print(f"wrote {out_dir}/demand.png, experiments.csv, summary.json, lag/*.png and report.html")
    return summary


def run_source_demo(seconds: float, sensors: int, out_dir: Path, master: str, partitions: int) -> dict:
    from pyspark.sql import functions as F

    from streamscale.broker import BrokerAccess, EmbeddedBroker
    from streamscale.loadgen import GeneratorConfig, LoadGenerator
    from streamscale.sparkio.io import read_records
    from streamscale.sparkio.session import build_session

    out_dir.mkdir(parents=True, exist_ok=True)
    with EmbeddedBroker(log_dir=out_dir / "logs") as broker, BrokerAccess(broker.bootstrap) as access:
        console.print(f"[bold]1/4[/] embedded broker (Tansu) at {broker.bootstrap}")
        access.create_topic("input", partitions)
        console.print(f"[bold]2/4[/] Spark session on {master} (the first micro-batch starts Python workers)")
        spark = build_session(master, "streamscale-demo")
        if spark.streamscale_log:
            console.print(f"    Spark's and Java's own log: {spark.streamscale_log}", highlight=False)
        gen = None
        query = None
        ckpt = None
        try:
            cfg = GeneratorConfig(broker.bootstrap, topic="input", sensors=sensors, workers=2,
                                  duration_s=seconds + 60)
            console.print(f"[bold]3/4[/] load generator: {sensors:,} sensors x 1 record/s "
                          f"= {cfg.target_rate:,.0f} records/s into 'input' ({partitions} partitions)")
            gen = LoadGenerator(cfg).start()
            df = read_records(spark, broker.bootstrap, "input", starting_offsets="earliest")
            counts = df.where(F.col("value_error").isNull()).groupBy("identifier").agg(F.count("*").alias("n"))
            ckpt = tempfile.mkdtemp(prefix="streamscale-demo-ckpt-")
            query = (counts.writeStream.format("memory").queryName("demo_counts").outputMode("complete")
                     .option("checkpointLocation", ckpt).trigger(processingTime="1 second").start())
            console.print(f"[bold]4/4[/] streaming query running for {seconds:.0f} s")
            rows = []
            seen = set()
            t0 = time.monotonic()
            warm_at = None  # the clock starts once the cold first micro-batch is done
            while query.isActive and (warm_at is None or time.monotonic() - warm_at < seconds + 8):
                if warm_at is None and time.monotonic() - t0 > 180:
                    raise RuntimeError("the first micro-batch did not finish within 180 s")
                time.sleep(0.5)
                for p in query.recentProgress:
                    if p["batchId"] in seen:
                        continue
                    seen.add(p["batchId"])
                    dur = p["durationMs"].get("triggerExecution", 0) / 1000
                    row = {"batch": p["batchId"], "t_s": round(time.monotonic() - t0, 1),
                           "input_rows": p["numInputRows"],
                           "input_rate": round(p.get("inputRowsPerSecond") or 0.0),
                           "processed_rate": round(p.get("processedRowsPerSecond") or 0.0),
                           "batch_s": dur}
                    rows.append(row)
                    if warm_at is None:
                        warm_at = time.monotonic()
                    console.print(f"  batch {row['batch']:>3}: {row['input_rows']:>8,} rows in {dur:5.2f} s "
                                  f"-> {row['processed_rate']:>9,} records/s processed")
                if warm_at is not None and time.monotonic() - warm_at >= seconds:
                    break
            if query.exception():
                raise RuntimeError(query.exception())
        finally:
            if query is not None:
                query.stop()
            result = gen.stop() if gen is not None else None
            if ckpt is not None:
                shutil.rmtree(ckpt, ignore_errors=True)  # the demo's own: nothing left in $TMPDIR
        total_read = spark.sql("select coalesce(sum(n), 0) as n from demo_counts").collect()[0]["n"]
        spark.stop()
        steady = [r for r in rows[1:] if r["input_rows"] > 0]  # batch 0 pays the worker start-up
        rate = (sum(r["input_rows"] for r in steady) / sum(r["batch_s"] for r in steady)) if steady else 0.0
        csv_path = out_dir / "demo-batches.csv"
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["batch"])
            w.writeheader()
            w.writerows(rows)
        png = _plot(rows, cfg.target_rate, out_dir / "demo-rates.png")
        console.print(f"\ngenerated {result.delivered:,} records at {result.achieved_rate:,.0f} records/s; "
                      f"the query counted {total_read:,} of them")
        console.print(f"[bold green]PySpark source processing rate: {rate:,.0f} records/s[/] "
                      f"(micro-batches after the first)")
        console.print(f"wrote {csv_path} and {png}")
        return {"processed_rate": rate, "generated": result.delivered, "read": total_read}


def _plot(rows: list[dict], target: float, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    t = [r["t_s"] for r in rows]
    ax.plot(t, [r["input_rate"] for r in rows], marker="o", label="input rate (records/s)")
    ax.plot(t, [r["processed_rate"] for r in rows], marker="s", label="processing rate (records/s)")
    ax.axhline(target, color="grey", linestyle="--", label=f"generated target {target:,.0f}/s")
    ax.set_xlabel("time since query start (s)")
    ax.set_ylabel("records/s")
    ax.set_title("streamscale demo: PySpark Structured Streaming over the embedded broker")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
