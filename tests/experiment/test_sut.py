"""The lag sampler of one experiment: a failed sample costs a second, not the rest of the run."""

import pytest

from streamscale.errors import KafkaClientError, StreamscaleError
from streamscale.experiment.lagsampler import LagSample, LagSampler
from streamscale.waiting import wait_for


def _sampler_with(monkeypatch, bootstrap, fail_at: int, error: Exception):
    calls: list[int] = []

    def sample_once(self, access):
        calls.append(len(calls) + 1)
        if len(calls) == fail_at:
            raise error
        return LagSample(t_s=float(len(calls)), lag=0, end_total=len(calls), committed_total=len(calls))

    monkeypatch.setattr(LagSampler, "sample_once", sample_once)
    return LagSampler(bootstrap, "group", "topic", interval_s=0.01).start(), calls


def test_a_failed_lag_sample_is_counted_and_the_sampling_goes_on(broker, monkeypatch):
    # At 150,000 records/s a sample's end-offset probe once went unanswered for 15 s: the thread
    # died with a traceback on the user's terminal, and the run was judged on the batches before it.
    error = KafkaClientError("no fetch response for 'topic' partitions [7] within 15.0 s")
    sampler, calls = _sampler_with(monkeypatch, broker.bootstrap, 2, error)
    wait_for(lambda: len(calls) >= 6, 10, "six sampling rounds")
    samples = sampler.stop()
    assert sampler.missed == 1
    assert [s.end_total for s in samples] == [n for n in calls if n != 2]


def test_a_sampler_that_broke_fails_the_run_instead_of_shortening_it(broker, monkeypatch):
    sampler, calls = _sampler_with(monkeypatch, broker.bootstrap, 3, ZeroDivisionError("a bug"))
    wait_for(lambda: not sampler._thread.is_alive(), 10, "the sampler thread to end")
    with pytest.raises(StreamscaleError, match="the lag sampler stopped: a bug"):
        sampler.stop()
    assert len(calls) == 3


def test_a_query_out_of_memory_is_a_load_not_held_and_other_failures_are_errors():
    from streamscale.errors import SparkDied, SparkError
    from streamscale.experiment.sut import query_failure

    plan = "\n== Physical Plan ==\n" + "+- Project [a, b]\n" * 500
    oom = query_failure(
        "uc4",
        RuntimeError(
            "org.apache.spark.SparkException: Not enough memory to build and broadcast the table to all "
            "worker nodes." + plan
        ),
    )
    assert isinstance(oom, SparkDied) and "\n" not in str(oom)
    assert str(oom).startswith("uc4 ran out of memory: org.apache.spark.SparkException: Not enough memory")
    heap = query_failure("uc2", RuntimeError("\njava.lang.OutOfMemoryError: Java heap space" + plan))
    assert isinstance(heap, SparkDied) and "Java heap space" in str(heap)
    other = query_failure("uc1", RuntimeError("[UNKNOWN_TOPIC_OR_PARTITION] no such topic" + plan))
    assert type(other) is SparkError and str(other) == "uc1 failed: [UNKNOWN_TOPIC_OR_PARTITION] no such topic"


def test_a_partition_left_without_a_leader_is_a_fault_of_the_run():
    from streamscale.experiment.sut import Context, Placement, StopPolicy, SutRun, Workload

    run = SutRun(Workload("uc1"), Placement(), StopPolicy(), Context(topics=("in", "out")))

    class Access:
        def __init__(self, layout):
            self.layout = layout

        def partition_layout(self, topics):
            assert topics == ["in", "out"]
            if self.layout is None:
                raise TimeoutError("metadata did not come")
            return self.layout

    run.access = Access({"in": {0: (1, [1, 2], [1, 2]), 1: (-1, [2, 3], [])}, "out": {0: (2, [2], [2])}})
    assert run.leaderless(25.4) == "in partition 1 without a leader 25 s into the run"
    run.access = Access({"in": {0: (1, [1], [1])}, "out": {0: (2, [2], [2])}})
    assert run.leaderless(3.0) == ""
    run.access = Access(None)  # no answer: no fault said, the next check asks again
    assert run.leaderless(3.0) == ""


def test_a_workloads_producer_settings_reach_its_generator_and_none_are_added_otherwise():
    from streamscale.broker.connection import KafkaConnection
    from streamscale.experiment.sut import Context, Placement, StopPolicy, SutRun, Workload

    def config(**workload):
        run = SutRun(Workload("uc1", rate=1000, **workload), Placement(), StopPolicy(30), Context(topics=("in", "out")))
        run.bootstrap = KafkaConnection.of("127.0.0.1:9")  # what provision() sets; nothing connects
        ((name, cfg),) = run.generators().configs  # one feed: the run's input topic
        assert name == ""
        return cfg

    cfg = config(producer_config={"linger.ms": 5})
    assert cfg.producer_config == {"linger.ms": 5} and cfg.topic == "in"
    assert config().producer_config == {}  # the generator's own defaults (linger.ms 200) then hold


@pytest.mark.spark
def test_a_run_undecided_at_its_duration_goes_on_until_a_look_decides_it(broker, spark):
    import time

    from streamscale.experiment.sut import Context as RunContext
    from streamscale.experiment.sut import StopPolicy, Workload, run_sut

    looks: list[float] = []

    def judge(lag, batches, t0_wall, topic) -> bool:  # undecided until 7 s into the load
        looks.append(time.monotonic())
        return len(lag) >= 7

    policy = StopPolicy(duration_s=3, judge=judge, min_duration_s=2, max_duration_s=60)
    r = run_sut(Workload("uc1", {"sink": "none"}, sensors=200, partitions=1), policy=policy,
                context=RunContext(bootstrap=broker.bootstrap, spark=spark))  # fmt: skip
    assert len(looks) >= 3  # looked at before its duration and after it
    assert 6 <= r.decided_s < 20 and r.ran_s == pytest.approx(r.decided_s, abs=0.01)  # past 3 s, until decided
    # no judge: the run ends at its duration whatever max_duration_s says
    assert StopPolicy(duration_s=3, max_duration_s=60).longest_s == 3
    assert StopPolicy(duration_s=3, judge=judge, max_duration_s=60).longest_s == 60


@pytest.mark.spark
def test_a_first_run_checks_every_other_configuration_before_its_load(broker, spark):
    from streamscale.errors import ConfigError
    from streamscale.experiment.sut import Context as RunContext
    from streamscale.experiment.sut import StopPolicy, Workload, run_sut

    checked = []

    class Refusing:  # a configuration searched later whose job real-time mode cannot run
        def check(self, spark, bootstrap, input_topic, spark_conf=None):
            checked.append((input_topic, spark_conf))
            raise ConfigError("trigger real_time:5 seconds: real-time mode runs stateless operators only")

    context = RunContext(bootstrap=broker.bootstrap, spark=spark, preflight=(("rt", Refusing(), {"a": 1}),))
    with pytest.raises(ConfigError, match=r"^execution.configs.rt: trigger real_time:5 seconds: real-time mode"):
        run_sut(Workload("uc1", {"sink": "none"}, sensors=100, partitions=1), policy=StopPolicy(30), context=context)
    assert len(checked) == 1 and checked[0][1] == {"a": 1}  # with its own settings, before any load
