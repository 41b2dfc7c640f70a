import math

import numpy as np

from streamscale.execution.metrics import lag_slo_holds, lag_trend


def test_trend_is_the_least_squares_slope_after_warmup():
    t = np.arange(0, 100.0)
    lag = np.where(t < 20, 50_000 - 2000 * t, 1000 + 37.5 * t)  # a big warm-up backlog, then growth
    assert lag_trend(t, lag, warmup_s=20) == pytest_approx(37.5)
    assert lag_trend(t, lag, warmup_s=0) < 0  # the warm-up would hide the growth


def pytest_approx(x):
    import pytest

    return pytest.approx(x, rel=1e-9)


def test_noisy_flat_lag_passes_and_growth_fails():
    rng = np.random.default_rng(0)
    t = np.arange(0, 300.0)
    flat = 5000 + rng.normal(0, 500, len(t))
    growing = flat + 150 * t
    assert lag_slo_holds(lag_trend(t, flat, 120), 10_000)        # |slope| << 1 % of 10,000/s
    assert not lag_slo_holds(lag_trend(t, growing, 120), 10_000)  # 150/s > 100/s


def test_too_few_samples_cannot_pass():
    assert math.isnan(lag_trend([0, 1, 2], [1, 2, 3], warmup_s=5))
    assert not lag_slo_holds(float("nan"), 1000)
