from pathlib import Path

import pytest

from streamscale.benchmark.plan import resolve
from streamscale.benchmark.spec import load_spec, parse_spec
from streamscale.errors import ConfigError

EXAMPLES = sorted(Path(__file__).parents[2].joinpath("examples").glob("*.yaml"))


def base(**execution):
    ex = {"load": {"type": "sensors", "values": [1000, 2000]}, "resources": {"type": "cores", "values": [1, 2]}}
    ex.update(execution)
    return {"name": "t", "benchmark": {"sut": "uc1", "params": {"sink": "none"}}, "execution": ex}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_are_valid(path):
    spec = load_spec(path)
    assert spec.name == path.stem


def test_examples_cover_every_uc_small_and_paper_size():
    names = {p.stem for p in EXAMPLES}
    assert {f"uc{i}-{size}" for i in range(1, 5) for size in ("small", "paper")} <= names


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda d: d["execution"].update(duration_s=10, warmup_s=20), "warmup_s"),
        (lambda d: d["execution"]["resources"].update(type="executors"), "master"),
        (lambda d: d["execution"]["load"].update(values=[]), "execution.load.values"),
        (lambda d: d["execution"].update(strategy={"name": "random"}), "execution.strategy.name"),
        (lambda d: d["benchmark"].update(sut="uc7"), "benchmark.sut"),
        (lambda d: d["benchmark"]["params"].update(sink="mongodb"), "sink"),
        (lambda d: d["execution"].update(repetitons=3), "execution.repetitons"),
        (lambda d: d["execution"]["load"].update(type="nested_groups"), "uc4 only"),
        (lambda d: d["execution"].update(master="yarn"), "master"),
        (lambda d: d["execution"].update(duration_s=60, max_duration_s=45), "must be at least duration_s"),
        (
            lambda d: d["execution"].update(strategy={"name": "bracket", "search_lag_threshold": -1}),
            "a share of the load",
        ),
        (lambda d: d["execution"].update(strategy={"name": "bracket", "time_budget_s": 0}), "auto or null"),
        (lambda d: d["execution"].update(strategy={"name": "bracket", "time_budget_s": "soon"}), "auto or null"),
    ],
)
def test_bad_specs_name_the_field(mutate, field):
    d = base()
    mutate(d)
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_spec(d)


def test_a_run_may_go_on_to_300_s_or_its_duration_and_a_long_run_is_whole():
    from streamscale.benchmark.plan import long_execution

    d = base()
    d["execution"].update(duration_s=40, warmup_s=10)
    assert parse_spec(d).execution.longest_s == 300
    d["execution"].update(duration_s=600)
    assert parse_spec(d).execution.longest_s == 600
    d["execution"].update(duration_s=40, max_duration_s=90, min_duration_s=None)
    ex = parse_spec(d).execution
    assert ex.longest_s == 90 and ex.judged_as_it_goes  # looked at from its duration on, to go on
    long = long_execution(parse_spec(d)).execution
    assert long.longest_s == long.duration_s == 300 and not long.judged_as_it_goes


def test_a_bracket_search_has_a_time_budget_of_12_minutes_per_amount_and_configuration_by_default():
    d = base()
    d["execution"].update(metric="capacity", strategy={"name": "bracket"})
    d["execution"]["resources"].update(values=[1, 2])
    assert resolve(parse_spec(d)).runs.time_budget_s == 2 * 720
    d["execution"]["configs"] = {"a": {}, "b": {}, "c": {}}
    assert resolve(parse_spec(d)).runs.time_budget_s == 3 * 2 * 720
    # with long runs to decide the ends: 20 minutes less two 300 s long runs (and 10 s each beyond)
    d["execution"]["strategy"].update(confirm=True)
    assert resolve(parse_spec(d)).runs.time_budget_s == 3 * 2 * (1200 - 2 * 310)
    del d["execution"]["configs"]
    for given, budget in [(900, 900.0), (None, None)]:
        d["execution"]["strategy"].update(time_budget_s=given)
        assert resolve(parse_spec(d)).runs.time_budget_s == budget
    d["execution"]["strategy"] = {"name": "binary"}  # a budget bounds a bracket only
    assert resolve(parse_spec(d)).runs.time_budget_s is None


def test_yaml_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")


def test_experiment_settings_map_load_and_resources():
    spec = parse_spec(base())
    s = resolve(spec).point(2000, 2)
    assert s.master == "local[2]" and s.sensors == 2000 and s.rate == 2000
    uc4 = load_spec(next(p for p in EXAMPLES if p.stem == "uc4-small"))
    s = resolve(uc4).point(5, 1)
    assert s.sensors == 4**5 and s.params["levels"] == 5
    paper = load_spec(next(p for p in EXAMPLES if p.stem == "uc1-paper"))
    s = resolve(paper).point(50000, 3)
    assert s.master.startswith("spark://") and s.spark_conf["spark.cores.max"] == 3


def test_runs_too_short_for_their_windows_are_told_so():
    from streamscale.benchmark.setting import short_for_windows

    spec = base()
    spec["benchmark"].update(sut="uc2", params={"window_s": 60})
    spec["execution"].update(duration_s=60, warmup_s=20)
    note = short_for_windows(resolve(parse_spec(spec)))
    assert note and "every 60 s" in note and "duration_s ≥ warmup_s + 120" in note
    spec["execution"].update(duration_s=150, warmup_s=30)  # two whole periods after the warm-up
    assert short_for_windows(resolve(parse_spec(spec))) is None
    spec["execution"].update(duration_s=24, warmup_s=5)  # no window closes in most runs: no jump
    assert short_for_windows(resolve(parse_spec(spec))) is None
    spec["benchmark"].update(sut="uc1", params={})
    spec["execution"].update(duration_s=60, warmup_s=20)
    assert short_for_windows(resolve(parse_spec(spec))) is None
    for example in EXAMPLES:  # the examples leave room for two periods
        assert short_for_windows(resolve(load_spec(example))) is None, example


def test_the_default_processing_latency_limit_is_8_trigger_intervals_at_most_10_s():
    def limit(uc: str, params: dict | None = None, slos: dict | None = None) -> float | None:
        d = base(**({"slos": slos} if slos is not None else {}))
        d["benchmark"] = {"sut": uc, "params": params or {}}
        spec = parse_spec(d)
        return (
            resolve(spec).point(spec.execution.load.values[0], spec.execution.resources.values[0]).processing_limit_ms
        )

    assert limit("uc1") == 8_000  # 1 s trigger
    assert limit("uc2") == 8_000
    assert limit("uc3") == 10_000  # 5 s emit interval: 40 s capped
    assert limit("uc3", {"emit_interval_s": 0.5}) == 4_000
    assert limit("uc3", slos={"processing_latency_p95_ms": 60_000}) == 60_000  # the spec's own
    assert limit("uc3", slos={"processing_latency_p95_ms": None}) is None


def test_a_csv_encoding_for_the_task_samples_is_refused_in_one_line():
    # the task samples decode JSON sensor readings: a CSV spec would run JSON, so it is refused
    d = base()
    d["benchmark"]["loadgen"] = {"encoding": "csv"}
    with pytest.raises(ConfigError) as e:
        parse_spec(d)
    assert "\n" not in str(e.value) and "benchmark.records.encoding: csv" in str(e.value)
    d["benchmark"]["loadgen"] = {"encoding": "json"}
    assert parse_spec(d).benchmark.loadgen.encoding == "json"


def test_a_load_value_its_pipeline_refuses_is_one_line_before_any_load():
    # UC3's window is the load: a window shorter than its slide (a day by default) cannot run
    from streamscale.benchmark.plan import resolve

    d = base()
    d["benchmark"] = {"sut": "uc3", "params": {"slide_s": 60}}
    d["execution"]["load"] = {"type": "window_s", "values": [30, 600]}
    with pytest.raises(ConfigError) as e:
        resolve(parse_spec(d)).check()
    assert str(e.value).startswith("execution.load.values: 30: ") and "slide_s must not exceed window_s" in str(e.value)
    d["execution"]["load"]["values"] = [60, 600]
    resolve(parse_spec(d)).check()  # every window at least its slide: runs


JOB = str(Path(__file__).parents[2] / "examples" / "jobs" / "attribution.py") + ":attribution"
IMP = {"fields": {"id": {"type": "string", "gen": "sequence"}}}
CLICK = {"fields": {"id": {"type": "string", "gen": "ref:imp.id,5"}}}


def two_inputs(values=(100,), load_type="rate", sut=JOB, **bm) -> dict:
    inputs = {"imp": {"share": 0.9, "records": IMP}, "click": {"share": 0.1, "records": CLICK}}
    execution = {"load": {"type": load_type, "values": list(values)}, "resources": {"values": [1]}}
    return {"name": "t", "benchmark": {"sut": sut, "inputs": inputs, **bm}, "execution": execution}


@pytest.mark.parametrize(
    "spec,says",
    [
        (two_inputs(values=(5, 100)), "inputs.click: 0.1 of a load of 5 records/s is less than 1 record/s"),
        (two_inputs(load_type="sensors"), "loaded by rate"),
        (two_inputs(sut="uc1"), "uc1 is a task sample reading one topic: inputs are for your own job"),
        (two_inputs(params={"trigger": "real_time:5s"}), "a real-time run here reads one input topic"),
        ({"name": "t", "benchmark": {"sut": JOB, "records": CLICK},
          "execution": {"load": {"type": "rate", "values": [100]}, "resources": {"values": [1]}}},
         "records.fields.id: ref:imp.id refers to another input: name the inputs in benchmark.inputs"),
    ],
)  # fmt: skip
def test_several_inputs_a_spec_cannot_run_are_one_line(spec, says):
    with pytest.raises(ConfigError) as e:
        parse_spec(spec)
    assert "\n" not in str(e.value) and says in str(e.value)


def test_the_inputs_of_a_spec_split_its_load_and_read_back_from_its_saved_copy():
    spec = parse_spec(two_inputs(decode="fields"))
    feed = spec.benchmark.feed()
    assert feed.names == ["imp", "click"] and [i.rate(1000) for i in feed] == [900, 100]
    again = parse_spec(spec.model_dump(by_alias=True))
    assert again.benchmark.feed() == feed
