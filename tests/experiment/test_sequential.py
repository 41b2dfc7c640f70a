"""Sequential testing: the error spent over a run's looks, exact t quantiles, and the chance of a
wrong verdict over many looks at a trend exactly at its limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamscale.experiment.sequential import Looks, t_coverage, t_quantile


def test_t_quantiles_are_the_tables():
    # Student's t, two-sided (tables of any statistics book)
    table = {(1, 0.95): 12.706, (3, 0.99): 5.841, (10, 0.95): 2.228, (30, 0.99): 2.750, (7, 0.999): 5.408}
    for (df, conf), value in table.items():
        assert t_quantile(df, conf) == pytest.approx(value, abs=0.001)
    assert t_coverage(2.228, 10) == pytest.approx(0.95, abs=1e-4)
    assert t_quantile(0, 0.95) == math.inf


def test_the_looks_share_a_quarter_of_the_error_and_the_last_verdict_gets_the_rest():
    looks = Looks(longest_s=40, first_s=15, every_s=2)
    assert looks.planned == 13  # 15, 17, ..., 39
    assert looks.confidence() == pytest.approx(1 - 0.0125 / 13)
    for _ in range(12):
        looks.confidence()
    assert looks.final_confidence() == pytest.approx(0.9625)  # 0.05 - 13 x 0.0125/13
    more = Looks(40, 15, 2)
    for _ in range(30):  # a caller that looks more often than planned spends no more than planned
        more.confidence()
    assert more.spent() == pytest.approx(0.0125)
    assert Looks(40, 40, 2).planned == 0 and Looks(40, 40, 2).final_confidence() == pytest.approx(0.95)


def _ar1(n, phi, rng):
    e = np.zeros(n)
    e[0] = rng.normal() / math.sqrt(1 - phi**2)
    for j in range(1, n):
        e[j] = phi * e[j - 1] + rng.normal()
    return e


def _ordinary_verdict(t, y, limit, confidence):
    # the textbook interval, independent of the code under test
    b, a = np.polyfit(t, y, 1)
    r = y - (a + b * t)
    se = math.sqrt(r @ r / (len(t) - 2) / ((t - t.mean()) ** 2).sum())
    half = t_quantile(len(t) - 2, confidence) * se
    return "pass" if b + half <= limit else "fail" if b - half > limit else "undecided"


def test_many_looks_at_a_trend_on_its_limit_rarely_decide():
    # a lag growing exactly at its limit, with autocorrelated batch noise, looked at every 2 s
    # from 15 s to 40 s: any decision is a wrong one. Looks at a fixed 99.5 % and a last look at
    # 95 %, through the ordinary interval, decide far more often than 5 %; the spent error with an
    # interval for autocorrelated points stays near it.
    from streamscale.experiment.slo import fit

    rng = np.random.default_rng(5)
    limit, t = 100.0, np.arange(0, 40.0, 1.0)
    old = new = 0
    runs = 1000
    for _ in range(runs):
        y = limit * t + 300 * _ar1(len(t), 0.6, rng)
        verdict_old = verdict_new = "undecided"
        looks = Looks(40, 15, 2)
        for at in range(15, 40, 2):
            k = t <= at
            if verdict_old == "undecided":
                verdict_old = _ordinary_verdict(t[k], y[k], limit, 0.995)
            if verdict_new == "undecided":
                verdict_new = fit(t[k], y[k]).verdict(limit, looks.confidence())
        if verdict_old == "undecided":
            verdict_old = _ordinary_verdict(t, y, limit, 0.95)
        if verdict_new == "undecided":
            verdict_new = fit(t, y).verdict(limit, looks.final_confidence())
        old += verdict_old != "undecided"
        new += verdict_new != "undecided"
    assert old / runs > 0.15 and new / runs < 0.09, (old / runs, new / runs)
