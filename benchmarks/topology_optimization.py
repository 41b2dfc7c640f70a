"""Effect of the topology optimization: the blog's two-aggregation example and UC4, merged always
(forced), by the default choice, and never.

    .venv/bin/python benchmarks/topology_optimization.py [--records 2000000] [--repeat 3] [--master local[2]]

Each variant compiles the same logical plan (streamscale.topology) and processes the same static
batch (one big micro-batch) into Spark's no-op sink; runs alternate between the variants. Printed:
records/s per variant (median of the runs), shuffles in the plan, the ratios to the unoptimized
plan, and what the default chose.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--keys",
        type=int,
        default=997,
        help="distinct keys after selectKey (blog example, at most 99,999: the key is value[0:5])",
    )
    args = ap.parse_args()
    from pyspark.sql import functions as F

    from streamscale.pipelines import make_pipeline
    from streamscale.sparkio.session import build_session
    from streamscale.topology.catalog import blog_plan
    from streamscale.topology.compile import combined, compile_plan, count_distinct_exchanges
    from streamscale.topology.physical import physical_plan

    spark = build_session(args.master, "streamscale-topology-bench", shuffle_partitions=4)
    n = args.records
    blog_in = (
        spark.range(n).select(
            F.col("id").cast("string").alias("key"),
            F.concat(F.lpad((F.col("id") % args.keys).cast("string"), 5, "0"), F.lit("-payload")).alias("value"),
            (F.col("id") * 7 % 600_000).alias("timestamp"),
        )
    ).cache()
    blog_in.count()
    uc4 = make_pipeline("uc4", {"levels": 2, "children": 8, "window_s": 10})
    sensors = sorted(uc4.registry.ancestors())
    sensor_col = F.element_at(F.array(*[F.lit(s) for s in sensors]), (F.col("id") % len(sensors) + 1).cast("int"))
    uc4_in = (
        spark.range(n)
        .select(
            sensor_col.alias("identifier"),
            (F.col("id") % 1000 / 10.0).alias("valueInW"),
            (F.col("id") * 13 % 600_000).alias("timestamp"),
        )
        .cache()
    )
    uc4_in.count()

    variants = {
        "blog": lambda opt: combined(compile_plan(physical_plan(blog_plan(), opt), spark, {"inputTopic": blog_in})),
        "uc4": lambda opt: uc4.build(spark, uc4_in, optimize=opt),
    }
    modes = {"forced": True, "default": None, "off": False}  # default: chosen per plan (physical.py)
    for name, make in variants.items():
        times: dict[str, list[float]] = {m: [] for m in modes}
        shuffles: dict[str, int] = {}
        for m in modes:  # warm-up, untimed: the first runs of a plan carry code generation and JIT
            make(modes[m]).write.format("noop").mode("overwrite").save()
        # the warm-up's persisted repartition would otherwise serve the first timed forced run
        # from the cache (0.8 s against 2.4 s for the others)
        spark.catalog.clearCache()
        blog_in.cache().count()
        uc4_in.cache().count()
        for i in range(args.repeat):
            order = list(modes)[i % 3 :] + list(modes)[: i % 3]  # rotate: no order advantage
            for m in order:
                df = make(modes[m])
                t0 = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                times[m].append(time.perf_counter() - t0)
                shuffles[m] = count_distinct_exchanges(df._jdf.queryExecution().executedPlan().toString())
                spark.catalog.clearCache()
                # materialised here, outside the clock: a lazy cache() made the next variant pay
                blog_in.cache().count()
                uc4_in.cache().count()
        rate = {m: n / statistics.median(ts) for m, ts in times.items()}
        chosen = physical_plan(blog_plan() if name == "blog" else uc4.logical_plan(), None).optimized
        print(
            f"{name:<5} forced {rate['forced']:>11,.0f} rec/s  default {rate['default']:>11,.0f}  "
            f"off {rate['off']:>11,.0f}   forced/off {rate['forced'] / rate['off']:.2f}  "
            f"default/off {rate['default'] / rate['off']:.2f}  (default merges: {chosen}; shuffles "
            f"{shuffles['forced']}/{shuffles['default']}/{shuffles['off']}; runs "
            f"{ {m: [round(t, 2) for t in ts] for m, ts in times.items()} })",
            flush=True,
        )
    spark.stop()


if __name__ == "__main__":
    from _main import run

    run(main)
