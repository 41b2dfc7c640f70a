"""Logical plans, repartition placement, Kafka-Streams-style descriptions, and compilation to PySpark
with equal results with and without optimization (against pandas), and fewer shuffles where a rule applies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamscale.pipelines.plans import plan_for
from streamscale.topology.catalog import blog_plan
from streamscale.topology.compile import combined, compile_plan, count_distinct_exchanges
from streamscale.topology.physical import describe, physical_plan, to_dot
from streamscale.topology.plan import LogicalPlan

# -- planning (no Spark) ----------------------------------------------------------------------


def exchange_count(df, run: bool = True) -> int:
    """Distinct shuffles in the physical plan Spark finally ran (collects ``df``: use small data).

    Adaptive execution decides the final plan while it runs, so the plan is read after running;
    an exchange inside a cached (shared) stream is the same exchange in every branch that reads
    it (same ``plan_id``), a ReusedExchange is no shuffle, and "Initial Plan" sections are skipped.
    """
    if run:
        df.collect()
    return count_distinct_exchanges(df._jdf.queryExecution().executedPlan().toString())


def test_key_changing_inference():
    plan = LogicalPlan("t")
    s = plan.stream("in", ["k"])
    f = s.filter(lambda d: d).map_values(lambda d: d)
    assert not f.node.key_changing and f.node.keys == ["k"]
    assert f.select_key(["k2"]).node.key_changing and f.flat_map(lambda d: d, ["k3"]).node.keys == ["k3"]


@pytest.mark.parametrize(
    "name,opt_reparts,unopt_reparts,opt_subs,unopt_subs",
    [("uc1", 0, 0, 1, 1), ("uc2", 0, 0, 1, 1), ("uc3", 1, 1, 2, 2), ("uc4", 1, 1, 2, 2), ("blog", 1, 2, 2, 3)],
)
def test_repartitions_and_subtopologies(name, opt_reparts, unopt_reparts, opt_subs, unopt_subs):
    opt, unopt = physical_plan(plan_for(name), True), physical_plan(plan_for(name), False)
    assert (len(opt.repartitions), len(unopt.repartitions)) == (opt_reparts, unopt_reparts)
    assert (len(opt.subtopologies), len(unopt.subtopologies)) == (opt_subs, unopt_subs)


def test_blog_repartition_is_pushed_up_after_the_key_change_and_shared():
    opt = physical_plan(blog_plan(), True)
    (r,) = opt.repartitions
    assert r.parents[0].kind == "selectKey" and r.explicit
    assert sorted(c.kind for c in r.children) == ["groupByKey", "groupByKey"]
    unopt = physical_plan(blog_plan(), False)
    assert all(r.children[0].kind == "groupByKey" and not r.explicit for r in unopt.repartitions)
    text = describe(opt)
    assert text.startswith(
        "Topologies:\n   Sub-topology: 0\n    Source: KSTREAM-SOURCE-0000000000 (topics: [inputTopic])"
    )
    assert text.count("-repartition") == 2  # its sink in sub-topology 0, its source in sub-topology 1
    assert "Sub-topology: 2" not in text and "Sub-topology: 2" in describe(unopt)
    assert to_dot(opt).count("style=dashed") == 2


def _two_aggregations(combinable_second: bool) -> LogicalPlan:
    plan = LogicalPlan("two")
    rekeyed = plan.stream("in", ["k"]).select_key(["k2"], lambda d: d)
    rekeyed.group_by_key().aggregate(lambda d, k, w: d, "a-store").to("a")
    rekeyed.group_by_key().aggregate(lambda d, k, w: d, "b-store", combinable=combinable_second).to("b")
    return plan


def test_the_default_merges_repartitions_only_where_it_pays_on_spark():
    # all aggregations combine partially (the blog's counts): Spark's own shuffles win, no merge
    auto, off = physical_plan(blog_plan()), physical_plan(blog_plan(), False)
    assert not auto.optimized and describe(auto) == describe(off)
    assert physical_plan(blog_plan(), True).optimized  # forced: Bejeck and Wang's rule
    assert not physical_plan(_two_aggregations(True)).optimized
    # one aggregation cannot combine (raw records cross its shuffle anyway): one shared shuffle
    merged = physical_plan(_two_aggregations(False))
    assert merged.optimized and describe(merged) == describe(physical_plan(_two_aggregations(False), True))
    assert not physical_plan(_two_aggregations(False), False).optimized
    for name in ("uc1", "uc2", "uc3", "uc4"):  # one aggregation each: nothing to merge
        assert describe(physical_plan(plan_for(name))) == describe(physical_plan(plan_for(name), False))


def test_optimization_leaves_the_logical_plan_untouched():
    plan = blog_plan()
    before = [(n.kind, [p.id for p in n.parents]) for n in plan.nodes]
    physical_plan(plan, True)
    physical_plan(plan, False)
    assert [(n.kind, [p.id for p in n.parents]) for n in plan.nodes] == before


# -- compiled to Spark ------------------------------------------------------------------------


def _blog_input(spark, n=4000, seed=3):
    rng = np.random.default_rng(seed)
    prefixes = np.array([f"k{i:03d}" for i in range(40)])
    pdf = pd.DataFrame(
        {
            "key": [f"r{i}" for i in range(n)],
            "value": [p + "-payload" for p in rng.choice(prefixes, n)],
            "timestamp": rng.integers(0, 60_000, n),
        }
    )
    return pdf, spark.createDataFrame(pdf)


def _rows(df, cols):
    return df.toPandas().sort_values(cols).reset_index(drop=True)


@pytest.mark.spark
def test_blog_example_same_results_fewer_shuffles(spark):
    pdf, df = _blog_input(spark)
    outs = {opt: compile_plan(physical_plan(blog_plan(), opt), spark, {"inputTopic": df}) for opt in (True, False)}
    ref_count = pdf.assign(newKey=pdf["value"].str[:5]).groupby("newKey").size().rename("count").reset_index()
    ref_win = (
        pdf.assign(newKey=pdf["value"].str[:5], windowStartMs=pdf["timestamp"] // 5000 * 5000)
        .groupby(["newKey", "windowStartMs"])
        .size()
        .rename("count")
        .reset_index()
    )
    for o in outs.values():
        got = _rows(o["count-topic"], ["newKey"])
        pd.testing.assert_frame_equal(got, ref_count.sort_values("newKey").reset_index(drop=True), check_dtype=False)
        got_w = _rows(o["windowed-count"], ["newKey", "windowStartMs"])[["newKey", "windowStartMs", "count"]]
        pd.testing.assert_frame_equal(got_w, ref_win, check_dtype=False)
    opt_ex, unopt_ex = exchange_count(combined(outs[True])), exchange_count(combined(outs[False]))
    assert (opt_ex, unopt_ex) == (1, 2)


def _sensor_records(spark, sensors, n=3000, seed=5):
    rng = np.random.default_rng(seed)
    pdf = pd.DataFrame(
        {
            "identifier": rng.choice(sensors, n),
            "valueInW": rng.uniform(0, 100, n).round(3),
            "timestamp": rng.integers(0, 180_000, n),
        }
    )
    return pdf, spark.createDataFrame(pdf)


def _reference(name: str, pdf: pd.DataFrame, pipeline) -> pd.DataFrame:
    """count and sum per key and window, from the readings by pandas (not by any plan)."""
    if name == "uc2":  # tumbling 10 s windows per sensor
        rows = pdf.assign(windowStartMs=pdf["timestamp"] // 10_000 * 10_000)
        keys = ["identifier"]
    elif name == "uc3":  # 60 s windows sliding by 20 s, per sensor and hour of day
        starts = [
            (i, (t // 3_600_000) % 24, s, v)
            for i, t, v in zip(pdf["identifier"], pdf["timestamp"], pdf["valueInW"])
            for s in range(t - t % 20_000, t - 60_000, -20_000)
        ]
        rows = pd.DataFrame(starts, columns=["identifier", "hourOfDay", "windowStartMs", "valueInW"])
        keys = ["identifier", "hourOfDay"]
    else:  # uc4: every reading in each group above its sensor, tumbling 10 s windows
        up = pipeline.registry.ancestors()
        rows = pd.DataFrame(
            [
                (g, t // 10_000 * 10_000, v)
                for i, t, v in zip(pdf["identifier"], pdf["timestamp"], pdf["valueInW"])
                for g in up[i]
            ],
            columns=["groupId", "windowStartMs", "valueInW"],
        )
        keys = ["groupId"]
    cols = [*keys, "windowStartMs"]
    return rows.groupby(cols)["valueInW"].agg(["count", "sum"]).reset_index().sort_values(cols).reset_index(drop=True)


@pytest.mark.spark
@pytest.mark.parametrize(
    "name,params",
    [
        ("uc2", {"window_s": 10}),
        ("uc3", {"window_s": 60, "slide_s": 20}),
        ("uc4", {"levels": 2, "children": 3, "window_s": 10}),
    ],
)
def test_use_cases_compile_to_their_reference_results_either_way(spark, name, params):
    from streamscale.pipelines import make_pipeline

    pipeline = make_pipeline(name, params)
    sensors = sorted(pipeline.registry.ancestors()) if name == "uc4" else [f"s{i}" for i in range(7)]
    pdf, df = _sensor_records(spark, sensors)
    cols = pipeline.key_cols + ["windowStartMs"]
    ref = _reference(name, pdf, pipeline)
    assert len(ref) > 20 and ref["count"].sum() >= len(pdf)
    for optimize in (True, False):
        out = pipeline.build(spark, df, optimize=optimize)
        # a single aggregation: no repartition rule applies, one exchange either way
        assert exchange_count(out) == 1
        got = _rows(out, cols)
        pd.testing.assert_frame_equal(got[[*cols, "count"]], ref[[*cols, "count"]], check_dtype=False)
        np.testing.assert_allclose(got["sum"], ref["sum"], rtol=1e-9)


def test_the_optimization_switch_is_a_pipeline_parameter():
    from streamscale.errors import ConfigError
    from streamscale.pipelines import make_pipeline

    assert make_pipeline("uc4", {"optimize_topology": False}).params.optimize_topology is False
    assert make_pipeline("uc4").params.optimize_topology is None  # default: chosen per plan
    with pytest.raises(ConfigError, match="optimize_topology"):
        make_pipeline("uc2", {"optimize_topology": "sometimes"})
