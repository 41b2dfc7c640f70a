"""Triggers as a configuration: their text, the writer's keywords, and real-time mode's rules that
need no Spark (streamscale.pipelines.trigger, streamscale.pipelines.realtime)."""

import pytest

from streamscale.errors import ConfigError
from streamscale.pipelines import make_pipeline, realtime
from streamscale.pipelines.jobsetup import JobSetup
from streamscale.pipelines.trigger import check_streams, parse_duration, parse_trigger


@pytest.mark.parametrize(
    "text,kwargs,seconds",
    [
        ("processing_time:1 second", {"processingTime": "1 seconds"}, 1.0),
        ("processing_time:500ms", {"processingTime": "500 milliseconds"}, 0.5),
        ("processing_time:0", {"processingTime": "0 seconds"}, 0.0),
        ("processing_time: 2.50 minutes", {"processingTime": "2.5 minutes"}, 150.0),
        ("real_time:5 seconds", {"realTime": "5 seconds"}, 5.0),
        ("real_time:1min", {"realTime": "1 minutes"}, 60.0),
        ("available_now", {"availableNow": True}, 0.0),
    ],
)
def test_a_trigger_reads_as_spark_writes_it(text, kwargs, seconds):
    t = parse_trigger(text)
    assert t.writer_kwargs() == kwargs and t.seconds == seconds
    assert parse_trigger(str(t)) == t  # said as it is read


@pytest.mark.parametrize(
    "text,words",
    [
        ("continuous:1 second", "use processing_time:DURATION, available_now or real_time:DURATION"),
        ("processing_time", "processing_time needs a duration"),
        ("processing_time:5", "'5' is not a duration"),
        ("processing_time:5 fortnights", "'5 fortnights' is not a duration"),
        ("real_time:0", "real-time mode needs a checkpoint interval above 0"),
        ("available_now:5s", "available_now takes no duration"),
    ],
)
def test_a_trigger_that_is_none_says_how_to_write_one(text, words):
    with pytest.raises(ConfigError, match=words):
        parse_trigger(text)


def test_a_duration_is_spark_s_and_its_seconds():
    assert parse_duration("250 MILLISECONDS") == ("250 milliseconds", 0.25)
    assert parse_duration("3 sec") == ("3 seconds", 3.0)


def test_a_pipeline_triggers_by_its_parameter_else_by_its_interval():
    assert make_pipeline("uc1").trigger().writer_kwargs() == {"processingTime": "1 seconds"}
    assert make_pipeline("uc2", {"trigger_interval_s": 2}).trigger().writer_kwargs() == {"processingTime": "2 seconds"}
    pipe = make_pipeline("uc1", {"trigger": "real_time:5 seconds"})
    assert pipe.trigger().writer_kwargs() == {"realTime": "5 seconds"}
    assert pipe.query_settings("/tmp/x", available_now=True)[1] == {"availableNow": True}  # a drain's
    with pytest.raises(ConfigError, match=r"trigger: .*'sometimes' is not a duration"):
        make_pipeline("uc1", {"trigger": "processing_time:sometimes"})


def test_a_run_streams_so_available_now_is_refused_with_why():
    with pytest.raises(ConfigError, match="available_now stops at the input's end"):
        check_streams(parse_trigger("available_now"))
    check_streams(parse_trigger("processing_time:0"))


def _job(tmp_path, body="    return records\n"):
    f = tmp_path / "j.py"
    f.write_text("def job(records, params):\n" + body)
    return f"{f}:job"


RT = {"trigger": "real_time:5 seconds", "connector": "spark"}


@pytest.mark.parametrize(
    "sut,params,setup,words",
    [
        ("uc2", RT, None, "uc2 aggregates over event-time windows: real-time mode runs stateless queries only"),
        ("uc1", RT, None, "sink log cannot take its output"),
        ("uc1", {**RT, "sink": "kafka", "connector": "python"}, None, "set connector: spark"),
        ("uc1", {**RT, "sink": "kafka", "dead_letter_topic": "dl"}, None, "dead_letter_topic starts a second query"),
        ("uc1", {**RT, "sink": "kafka", "trigger": "real_time:2 seconds"}, None, r"below .*minBatchDuration \(5 s\)"),
        ("job", RT, JobSetup(sink_format="parquet"), "writes to Kafka .*not parquet"),
        ("job", RT, JobSetup(foreach_batch="x.py:f"), "real-time mode has no foreachBatch"),
        ("job", {**RT, "sink": "noop"}, None, "sink noop cannot take its output"),
    ],
)
def test_real_time_rules_that_need_no_spark_are_one_line_naming_the_rule(tmp_path, sut, params, setup, words):
    name = _job(tmp_path) if sut == "job" else sut
    pipe = make_pipeline(name, params) if setup is None else _with_setup(name, params, setup)
    with pytest.raises(ConfigError, match=f"trigger real_time:.*{words}"):
        realtime.check_setup(pipe)


def _with_setup(name, params, setup):
    from streamscale.pipelines.job import UserJob

    pipe = UserJob(name, params)
    pipe.setup = setup  # a foreach_batch file need not exist for the rule to apply
    return pipe


def test_the_minimum_interval_is_the_sessions_when_set(tmp_path):
    pipe = make_pipeline("uc1", {**RT, "sink": "kafka", "trigger": "real_time:2 seconds"})
    realtime.check_setup(pipe, {realtime.MIN_BATCH_KEY: "1s"})
    realtime.check_setup(pipe, {realtime.MIN_BATCH_KEY: "2000"})  # Spark's bare number: ms
    realtime.check_setup(make_pipeline("uc2"))  # micro-batches: no rule applies


def test_a_task_slot_per_input_partition():
    rt = parse_trigger("real_time:5 seconds")
    assert realtime.slots_of("local[4]", {}) == 4 and realtime.slots_of("local", {}) == 1
    assert realtime.slots_of("local[*]", {}) is None
    assert realtime.slots_of("spark://h:7077", {"spark.executor.instances": 3, "spark.executor.cores": 2}) == 6
    assert realtime.slots_of("spark://h:7077", {}) is None
    realtime.check_slots(4, 4, rt)
    realtime.check_slots(1, 8, parse_trigger("processing_time:1s"))
    with pytest.raises(ConfigError, match=r"a task slot per input partition: 2 slot\(s\) for 4 partitions"):
        realtime.check_slots(2, 4, rt)


def test_a_masters_slots_are_checked_once_before_the_run_and_a_clusters_once_it_runs():
    from types import SimpleNamespace

    rt = {**RT, "sink": "kafka", "trigger": "real_time:5 seconds"}
    pipe, conf = make_pipeline("uc1", rt), {realtime.MIN_BATCH_KEY: "5s"}
    with pytest.raises(ConfigError, match=r"1 slot\(s\) for 2 partitions"):
        realtime.check_run(pipe, "local[1]", conf, 2)
    realtime.check_run(pipe, "spark://h:7077", conf, 2)  # a cluster's slots: not known yet
    # executors asked for that would give enough pass before the run: a request a cluster may not fill
    realtime.check_run(pipe, "spark://h:7077", {**conf, "spark.executor.instances": 2, "spark.executor.cores": 1}, 2)
    one_slot = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=1))  # what the cluster gave
    with pytest.raises(ConfigError, match=r"1 slot\(s\) for 2 partitions"):
        realtime.check_started(one_slot, "spark://h:7077", 2, pipe.trigger())
    # a local master's were checked before the run: not again
    realtime.check_started(one_slot, "local[1]", 2, pipe.trigger())


# Spark 4.2's explain of a Python UDF over Kafka records (ArrowEvalPython) and of a count by key
PLAN_UDF = """== Physical Plan ==
*(2) Project [key#71, pythonUDF0#80 AS value#79]
+- ArrowEvalPython [<lambda>(cast(value#72 as string))#78], [pythonUDF0#80], 101
   +- *(1) Project [key#71, value#72]
      +- StreamingRelation kafka, [key#71, value#72, topic#73, partition#74, offset#75L]
"""
PLAN_AGG = """== Physical Plan ==
*(4) HashAggregate(keys=[key#88], functions=[count(1)])
+- StateStoreSave [key#88], state info [ checkpoint = <unknown>, opId = 0], Append, 2
   +- *(3) HashAggregate(keys=[key#88], functions=[merge_count(1)])
      +- Exchange hashpartitioning(key#88, 2), REQUIRED_BY_STATEFUL_OPERATOR, [plan_id=153]
         +- *(1) Project [key#88]
            +- StreamingRelation kafka, [key#88, value#89]
"""
PLAN_JOIN = """== Physical Plan ==
AdaptiveSparkPlan isFinalPlan=false
+- Project [key#57, value#58]
   +- BroadcastHashJoin [cast(partition#60 as bigint)], [k#1L], Inner, BuildRight, false, false
      :- Project [key#57, value#58, partition#60]
      :  +- Filter isnotnull(partition#60)
      :     +- StreamingRelation kafka, [key#57, value#58, topic#59, partition#60]
      +- BroadcastExchange HashedRelationBroadcastMode(List(input[0, bigint, false]),false), [plan_id=78]
         +- Project [id#0L AS k#1L]
            +- Range (0, 10, step=1, splits=2)
"""


def test_a_plans_operators_are_read_from_its_explain():
    assert realtime.operators_in(PLAN_UDF) == ["Project", "ArrowEvalPython", "Project", "StreamingRelation"]
    assert set(realtime.operators_in(PLAN_AGG)) - realtime.ALLOWED_OPERATORS == {
        "HashAggregate", "StateStoreSave", "Exchange"
    }  # fmt: skip
    assert set(realtime.operators_in(PLAN_JOIN)) <= realtime.ALLOWED_OPERATORS  # a broadcast join with static data
