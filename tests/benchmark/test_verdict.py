"""A run's verdict from its figures: the load delivered to the input topic, and a processing
latency that keeps growing."""

from __future__ import annotations

import pytest

from streamscale.benchmark.verdict import delivered_rate, latency_growing, run_validity
from streamscale.experiment.slo import fit
from streamscale.experiment.sut import LagSample


def _samples(rate: float, seconds: int = 30, jitter=(0, 37, -52, 11, 0, -8)):
    # the topic's end offsets once a second, as the sampler reads them (a hand-over's jitter)
    return [
        LagSample(t_s=float(t), lag=0, end_total=int(rate * t) + jitter[t % len(jitter)], committed_total=0)
        for t in range(seconds + 1)
    ]


def test_the_rate_credited_is_the_rate_records_reached_the_topic():
    samples = _samples(10_000)
    # over the fitted span only (from 10 s): the end offsets' least-squares slope
    ts = [s.t_s for s in samples if s.t_s >= 10]
    ends = [s.end_total for s in samples if s.t_s >= 10]
    assert delivered_rate(samples, 10.0, fallback=-1) == pytest.approx(fit(ts, ends).slope)
    assert delivered_rate(samples, 10.0, fallback=-1) == pytest.approx(10_000, rel=0.002)
    assert delivered_rate(samples[:2], 0.0, fallback=123.0) == 123.0  # too few readings: the generator's


def test_a_run_given_less_than_99_percent_of_its_load_is_not_judged():
    ok, why = run_validity(True, 0, 60, delivered=9_850, target=10_000)
    assert not ok
    assert why == "records reached the input topic at 9,850/s, below 99% of the target 10,000/s: experiment invalid"
    assert run_validity(True, 0, 60, delivered=9_901, target=10_000) == (True, "")
    # the generator's own account still counts, and a run without offsets is judged as before
    assert run_validity(False, 0, 60, delivered=10_000, target=10_000)[0] is False
    assert run_validity(True, 0, 60) == (True, "")


def test_a_latency_that_keeps_growing_fails_one_that_wobbles_does_not():
    t = [float(x) for x in range(10, 40)]
    growing = fit(t, [2_000 + 80 * (x - 10) + (150 if int(x) % 2 else -150) for x in t], "batches")
    assert latency_growing(growing, 30.0)  # 80 ms per s: 2.4 s more over the span
    slight = fit(t, [2_000 + 20 * (x - 10) + (150 if int(x) % 2 else -150) for x in t], "batches")
    assert slight.low > 0 and not latency_growing(slight, 30.0)  # 0.6 s over the span: tolerated
    flat = fit(t, [2_000 + (300 if int(x) % 3 == 0 else 0) for x in t], "batches")
    assert not latency_growing(flat, 30.0)
    assert not latency_growing(None, 30.0)


def test_a_windowed_run_is_first_looked_at_once_two_window_periods_are_fitted():
    from pathlib import Path

    from streamscale.benchmark.experiment_runner import ExperimentRunner, experiment_settings
    from streamscale.benchmark.spec import parse_spec

    def runner(sut: str, params: dict) -> tuple[ExperimentRunner, dict]:
        spec = parse_spec(
            {
                "name": "looks",
                "benchmark": {"sut": sut, "params": params},
                "execution": {
                    "load": {"type": "sensors", "values": [1000]},
                    "resources": {"values": [1]},
                    "duration_s": 60,
                    "warmup_s": 10,
                },
            }
        )
        return ExperimentRunner(spec, Path("."), "127.0.0.1:9092"), experiment_settings(spec, 1000, 1)

    # min_duration_s auto: 10 + (60 - 10) / 4 = 22.5 s
    assert runner("uc1", {})[0].first_look_s(runner("uc1", {})[1]) == 22.5
    r, s = runner("uc2", {"window_s": 10})
    assert r.first_look_s(s) == 30.0  # 10 s warm-up + two 10 s windows
    r, s = runner("uc2", {"window_s": 30})
    assert r.first_look_s(s) == 22.5  # two periods do not fit a 60 s run: as min_duration_s says
