import dataclasses
import math

import numpy as np
import pytest

from streamscale.experiment.slo import lag_limit, lag_trend
from tests.experiment.helpers import sawtooth_run, slow_batch_run


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
    assert abs(lag_trend(t, flat, 120)) < lag_limit(10_000) == 100  # |slope| << 1 % of 10,000/s
    assert lag_trend(t, growing, 120) > lag_limit(10_000)  # 150/s > 100/s


def test_too_few_samples_cannot_pass():
    assert math.isnan(lag_trend([0, 1, 2], [1, 2, 3], warmup_s=5))


# -- the trend through batch commits, with its interval -------------------------------------------


def test_commit_points_see_through_the_sawtooth_that_fools_one_second_samples():
    from streamscale.experiment.slo import lag_trend_estimate

    # three runs of one flat pipeline, batches of 5-6 s: the 1 s fit swings with the teeth
    per_second, at_commits = [], []
    for seed in (1, 2, 3):
        samples, batches, t0 = sawtooth_run(jitter=0.15, seed=seed)
        per_second.append(lag_trend_estimate(samples, warmup_s=10))
        at_commits.append(lag_trend_estimate(samples, batches, t0, warmup_s=10, topic="in"))
    assert all(t.basis == "seconds" for t in per_second) and all(t.basis == "batches" for t in at_commits)
    limit = 0.01 * 20_000
    assert max(abs(t.slope) for t in per_second) > limit / 2  # the teeth move the 1 s slope a lot
    for t in at_commits:  # through the troughs: the lag after a commit is one batch's worth
        assert t.verdict(limit) == "pass", t
        assert abs(t.slope) < limit / 4


def test_a_lag_that_falls_faster_than_the_limit_is_catching_up_and_decides_nothing():
    from streamscale.experiment.slo import Trend, lag_trend_estimate

    limit = 0.01 * 67_000
    # one slow batch as the run starts, then the backlog drained: the lag after each commit falls
    draining = lag_trend_estimate(*slow_batch_run(), warmup_s=5, topic="in")
    assert draining.high < -limit, draining  # surely below the limit: a pass by the limit alone
    assert draining.draining(limit) and draining.verdict(limit) == "undecided"
    # the same query without the slow batch, once its batches reached their size: steady, a pass
    steady = lag_trend_estimate(*slow_batch_run(slow_s=0.0, seconds=41), warmup_s=15, topic="in")
    assert not steady.draining(limit) and steady.verdict(limit) == "pass", steady
    # a slow batch in the middle of the fitted span: its interval is wide anyway
    middle = lag_trend_estimate(*slow_batch_run(slow_at=13.0, slow_s=2.0), warmup_s=5, topic="in")
    assert middle.low < -limit and middle.high > limit and middle.verdict(limit) == "undecided", middle
    # falling, but by less than the limit (or straddling it): a pass, as before
    assert Trend(-500, 0, -600, -400, 20, "batches").verdict(limit) == "pass"
    assert Trend(-700, 0, -900, -500, 20, "batches").verdict(limit) == "pass"
    assert Trend(-900, 0, -1_000, -800, 20, "batches").verdict(limit) == "undecided"
    # a look's wider interval reaches above -limit again: still catching up (judged at 95 %)
    wide = Trend(-900, 0, -1_000, -800, 20, "batches", se=50.0, df=18)
    assert wide.interval(0.9999)[1] > -limit and wide.draining(limit) and wide.verdict(limit, 0.9999) == "undecided"
    assert not Trend(-900, 0, -1_000, -800, 20, "batches").draining(0.0)  # no limit, no steady state asked


def test_real_growth_fails_and_the_interval_decides_or_abstains():
    from streamscale.experiment.slo import Trend, fit, lag_trend_estimate

    samples, batches, t0 = sawtooth_run(growth=1_000.0, seconds=90)  # lag grows 1,000/s, limit 200
    t = lag_trend_estimate(samples, batches, t0, warmup_s=10, topic="in")
    assert t.basis == "batches" and t.verdict(200) == "fail" and t.low > 200
    assert t.slope == __import__("pytest").approx(1_000, rel=0.05)
    # a line through points is exact and its interval has no width; noise widens it
    exact = fit([0, 1, 2, 3, 4], [5, 7, 9, 11, 13])
    assert (exact.slope, exact.low, exact.high) == __import__("pytest").approx((2.0, 2.0, 2.0), abs=1e-9)
    wide = Trend(150, 0, 100, 260, 8, "batches")
    assert (wide.verdict(200), wide.verdict(300), wide.verdict(90)) == ("undecided", "pass", "fail")
    assert math.isinf(fit([0, 1], [0, 1]).high)  # two points: no interval
    assert lag_trend_estimate([], [], None).verdict(100) == "fail"  # nothing to judge is no pass


def test_latency_percentile_merges_batches_exactly_at_bucket_resolution():
    from streamscale.experiment.slo import latency_percentile_ms
    from streamscale.pipelines.output import LATENCY_EDGES_MS

    rng = np.random.default_rng(5)
    batches, everything = [], []
    for i in range(6):  # batches with different latency mixes; a percentile per batch would not merge
        lat = rng.lognormal(mean=7 + i * 0.3, sigma=0.8, size=1000 + 300 * i)
        everything.append(lat)
        batches.append(
            {
                "output_records": len(lat),
                "latency_cdf": [int((lat <= e).sum()) for e in LATENCY_EDGES_MS],
                "timestamp": f"2027-01-15T08:00:{10 * i:02d}Z",
                "batch_ms": 1000,
            }
        )
    true_p95 = float(np.quantile(np.concatenate(everything), 0.95, method="inverted_cdf"))
    got = latency_percentile_ms(batches, 0.95)
    assert true_p95 <= got < true_p95 * 2**0.25  # the bucket edge at or above the true value
    # the warm-up leaves out batches that end before it
    t0 = datetime_ts("2027-01-15T08:00:00Z")
    only_late = latency_percentile_ms(batches, 0.95, t0, warmup_s=35)  # batches 3-5 end at 31, 41, 51 s
    late_p95 = float(np.quantile(np.concatenate(everything[4:]), 0.95, method="inverted_cdf"))
    assert late_p95 <= only_late < late_p95 * 2**0.25
    assert latency_percentile_ms([{"output_records": 0, "latency_cdf": None}], 0.95) is None  # UC1: nothing


def test_median_batch_counts_batches_with_records_after_the_warm_up():
    from streamscale.experiment.slo import median_batch_ms

    def b(start_s: int, ms: int, rows: int = 10):
        return {"timestamp": f"2027-01-15T08:00:{start_s:02d}Z", "batch_ms": ms, "input_rows": rows}

    # ends: 1.5, 11, 22, 31.2, 43 s; the first two end in the warm-up, the empty one is not a batch
    batches = [b(0, 1500), b(10, 1000), b(20, 2000), b(30, 1200), b(40, 3000), b(50, 100, rows=0)]
    assert median_batch_ms(batches) == 1500.0  # 1000, 1200, 1500, 2000, 3000: no warm-up
    assert median_batch_ms(batches, datetime_ts("2027-01-15T08:00:00Z"), 15.0) == 2000.0  # 2000, 1200, 3000
    assert median_batch_ms(batches[-1:]) is None


def datetime_ts(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_the_warm_up_lasts_until_the_start_up_backlog_is_gone():
    from streamscale.experiment.slo import backlog_gone, fit

    # the lags after each commit of a real demo run (UC2, 53,000/s on one CPU: catching up, then flat)
    lags = [220_721, 176_112, 126_203, 101_307, 95_911, 103_586, 94_866]
    assert backlog_gone(lags) == 3
    assert backlog_gone([100, 130, 160, 190, 220, 250]) == 0  # growing: its level at once
    assert backlog_gone([100, 90, 110, 95, 105, 98, 102]) == 0  # flat noise: no backlog
    assert backlog_gone([500, 400, 300, 200, 100]) == 1  # at least 4 points stay for a trend
    t = [5.1, 8.4, 10.8, 12.8, 14.6, 16.6, 18.4]
    assert fit(t, lags).slope < -9_000  # the catching up reads as a falling lag
    assert abs(fit(t[3:], lags[3:]).slope) < 1_500  # the flat rest does not


# -- windows closing once a period: a jump the trend must not take for growth ---------------------


def _windowed_lags(seconds=150.0, period=60.0, growth=0.0, spike=30_000.0, seed=3, start=0.0):
    """Lag after each ~1 s batch commit of a windowed query: a flat level with noise, plus a jump
    for the ~6 s after each window closes (at 53-59 s of every period: the closing batch emits
    every window), plus ``growth`` records/s."""
    rng = np.random.default_rng(seed)
    t = np.arange(start, start + seconds, 1.0) + rng.uniform(-0.2, 0.2, int(seconds))
    phase = t % period
    lag = 15_000 + rng.normal(0, 1_500, len(t)) + np.where((phase >= 53) & (phase < 59), spike, 0.0) + growth * t
    return t, lag


def test_a_window_jump_near_the_end_fools_a_line_over_less_than_two_periods():
    from streamscale.experiment.slo import fit, fit_periodic

    t, lag = _windowed_lags(seconds=60.0)  # 60 s, a jump in the last seconds
    keep = t >= 20  # 40 s after the warm-up, as the capacity runs of docs/performance.md
    plain = fit(t[keep], lag[keep], "batches")
    # the line reads growth beyond a limit of 1 % of 25,000/s where there is none; the jump's
    # points are one block of correlated residuals, so the interval widens: never a pass
    assert plain.slope > 250 and plain.verdict(250) != "pass"
    short = fit_periodic(t[keep], lag[keep], 60.0)  # under two periods: the same line, said so
    assert short.period_s == 0 and short.slope == plain.slope


def test_over_two_periods_or_more_the_jump_is_fitted_out_and_growth_is_not():
    from streamscale.experiment.slo import fit_periodic

    for seed in range(5):
        t, lag = _windowed_lags(seconds=150.0, seed=seed)
        keep = t >= 25
        flat = fit_periodic(t[keep], lag[keep], 60.0)
        assert flat.period_s == 60.0 and flat.verdict(250) == "pass", flat
        assert flat.low <= 0 <= flat.high
        # the fitted span: the last two whole periods, not the partial one after the warm-up
        assert flat.start_s >= t[-1] - 120 - 1e-9 and flat.n >= 110
        t, lag = _windowed_lags(seconds=150.0, growth=400.0, seed=seed)
        grows = fit_periodic(t[t >= 25], lag[t >= 25], 60.0)
        assert grows.low <= 400 <= grows.high and grows.verdict(250) == "fail", grows


def test_the_estimate_takes_the_pipelines_period():
    from streamscale.experiment.lagsampler import LagSample
    from streamscale.experiment.slo import lag_trend_estimate

    # samples only (no batches): the per-second basis also fits the period out
    t, lag = _windowed_lags(seconds=150.0, seed=7)
    samples = [LagSample(t_s=float(a), lag=int(b), end_total=0, committed_total=0) for a, b in zip(t, lag)]
    assert lag_trend_estimate(samples, warmup_s=25, period_s=60.0).verdict(250) == "pass"
    assert lag_trend_estimate(samples, warmup_s=25).period_s == 0


def _ar1(n: int, phi: float, rng) -> np.ndarray:
    e = np.zeros(n)
    e[0] = rng.normal() / np.sqrt(1 - phi**2)
    for j in range(1, n):
        e[j] = phi * e[j - 1] + rng.normal()
    return e


def test_the_interval_covers_a_flat_trend_through_autocorrelated_batches():
    # consecutive batch lags are not independent: AR(1) noise around a flat line; the ordinary
    # interval (computed here from its textbook formula) misses the true slope far more often
    # than its 5 %, the slope's interval must not
    from streamscale.experiment.slo import fit, t_quantile

    rng = np.random.default_rng(11)
    for n, phi in ((20, 0.5), (40, 0.8)):
        ours = ordinary = 0
        for _ in range(400):
            t = np.arange(n, dtype=float)
            y = _ar1(n, phi, rng)
            trend = fit(t, y, "batches")
            ours += trend.low <= 0 <= trend.high
            b, a = np.polyfit(t, y, 1)
            r = y - (a + b * t)
            se = np.sqrt(r @ r / (n - 2) / ((t - t.mean()) ** 2).sum())
            ordinary += abs(b) <= t_quantile(n - 2) * se
        assert ordinary / 400 < 0.82 and ours / 400 >= 0.87, (n, phi, ordinary / 400, ours / 400)
    # independent points: about the nominal 95 %, not an interval made wide for nothing
    hits = 0
    for _ in range(400):
        t = np.arange(30, dtype=float)
        trend = fit(t, rng.normal(size=30), "batches")
        hits += trend.low <= 0 <= trend.high
    assert 0.92 <= hits / 400 <= 0.995


def test_the_hac_error_is_newey_and_wests():
    # a hand-computable case: 6 points, lags floor(4 (6/100)^(2/9)) = 2
    from streamscale.experiment.slo import hac_lags, slope_se

    t = np.arange(6, dtype=float)
    r = np.array([1.0, -2.0, 0.5, 1.5, -1.0, 0.0])
    x = np.column_stack([t - t.mean(), np.ones(6)])
    assert hac_lags(6) == 2
    xc = t - t.mean()
    sxx = float(xc @ xc)
    u = xc * r  # the slope's scores
    s = sum(u * u) + sum((1 - lag / 3) * 2 * sum(u[i] * u[i - lag] for i in range(lag, 6)) for lag in (1, 2))
    hac = s / sxx**2 * 6 / 4
    ordinary = float(r @ r) / 4 / sxx
    raw = sum(r[i] * r[i - 1] for i in range(1, 6)) / sum(r * r)
    rho = min(0.95, max(0.0, raw + (1 + 3 * raw) / 6))
    se, df = slope_se(x, r)
    assert se == pytest.approx(np.sqrt(max(hac, ordinary, ordinary * (1 + rho) / (1 - rho))), rel=1e-12)
    assert df == max(1, int(6 / ((1 + rho) / (1 - rho))) - 2)


# -- a bounded lag decided by its band --------------------------------------------------------------


def _troughs(seconds: float, load: float, growth: float, rho: float = 0.93, wander_s: float = 0.25, seed: int = 0,
             hump: tuple[float, float] | None = None):  # fmt: skip
    """The lag after each commit of a query committing every 0.5 s at ``load`` records/s: troughs
    that wander as AR(1) noise of lag-1 autocorrelation ``rho`` (stationary deviation ``wander_s``
    seconds of input) around a line growing by ``growth`` x load per second; ``hump``: (period s,
    height in seconds of input), a window closing every period."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.5)
    e = np.zeros(len(t))
    sd = wander_s * load
    e[0] = rng.normal(0, sd)
    for i in range(1, len(t)):
        e[i] = rho * e[i - 1] + rng.normal(0, sd * math.sqrt(1 - rho**2))
    y = 2 * sd + growth * load * t + e
    if hump is not None:
        period, height = hump
        y += np.where((t % period) < 1.0, height * load, 0.0)
    return t, np.maximum(y, 0.0)


def _trend(t, y, period_s: float = 0.0):
    from streamscale.experiment.slo import fit_periodic

    trend = fit_periodic(t, y, period_s, "batches")
    start = trend.start_s if trend.period_s else float(t[0])
    return dataclasses.replace(trend, commits=(tuple(t), tuple(y)), start_s=start)


@pytest.mark.parametrize("seed", range(5))
def test_a_bounded_sawtooth_passes_within_30_s_where_its_slopes_interval_stays_wide(seed):
    load = 10_000.0
    limit = 0.05 * load  # the search's rule at a 25 % resolution
    t, y = _troughs(30, load, 0.0, seed=seed)  # 30 s of a steady span, troughs autocorrelated 0.93
    trend = _trend(t, y)
    assert trend.verdict(limit, 0.999) == "pass"
    low, high = trend.interval(0.999)
    assert high - low > 2 * limit or trend.bounded(limit)  # the band decides where the interval need not


@pytest.mark.parametrize("seed", range(5))
def test_a_load_a_quarter_over_capacity_fails_within_30_s(seed):
    load = 12_500.0  # 25 % over a capacity of 10,000: a fifth of the load piles up every second
    t, y = _troughs(30, load, 0.2, seed=seed)
    trend = _trend(t, y)
    assert not trend.bounded(0.05 * load) and trend.verdict(0.05 * load, 0.999) == "fail"


def test_window_humps_pass_once_the_span_holds_them_within_the_limit():
    load = 10_000.0
    t, y = _troughs(60, load, 0.0, hump=(10.0, 1.0))  # a window closing every 10 s: a second of input
    assert _trend(t[:22], y[:22]).band() is not None  # 10.5 s: a span
    assert not _trend(t[:30], y[:30]).bounded(0.05 * load)  # 15 s: a one-second hump is 6.7 % of it
    assert _trend(t, y, 10.0).bounded(0.05 * load)  # 60 s (the last whole periods): within 5 %


def test_a_slow_growth_over_the_limit_is_never_passed_by_its_band():
    load = 10_000.0
    for seed in range(5):
        t, y = _troughs(300, load, 0.02, seed=seed)  # 2 % of the load a second, against 1 %
        trend = _trend(t, y)
        assert not trend.bounded(0.01 * load) and trend.verdict(0.01 * load) != "pass"
        t, y = _troughs(300, load, 0.01, seed=seed)  # 1 %: within the search's 5 %
        assert _trend(t, y).bounded(0.05 * load)


def test_a_band_needs_commits_over_a_span():
    t, y = _troughs(4, 10_000.0, 0.0)  # 8 commits over 3.5 s: no band yet
    assert _trend(t, y).band() is None and not _trend(t, y).bounded(1e9)
    seconds = dataclasses.replace(_trend(*_troughs(60, 10_000.0, 0.0)), basis="seconds")
    assert seconds.band() is None  # the once-a-second samples see the teeth, not the troughs


# the lag after each commit of a 1 % SLO run at 220,000 records/s on 1 core (4-round hashes, batches
# of 1.59 s) from the end of its 10 s warm-up: it failed at 24 s, and its 300 s run passed (53/s)
TIMES_220K = (11.355, 12.791, 14.293, 15.878, 17.474, 19.001, 20.818, 22.449)
LAGS_220K = (311_835, 314_917, 331_520, 334_043, 325_944, 350_032, 391_319, 366_317)


def test_a_look_fails_no_lag_that_grew_by_less_than_a_batchs_records():
    trend = _trend(np.array(TIMES_220K), np.array(LAGS_220K, dtype=float))
    limit, tooth = 2_204.0, 220_000 * 1.589  # 1 % of the load; a median batch's records
    assert trend.verdict(limit) == "fail"  # 6,000/s over 11 s: the interval and the quarters say so
    assert 0 < trend.grown() < tooth and trend.verdict(limit, tooth=tooth) == "undecided"
    # a load a quarter over its capacity, batches of 2 s: the lag rises by a batch within 15 s
    for seed in range(5):
        t, y = _troughs(15, 12_500.0, 0.2, seed=seed)
        assert _trend(t, y).verdict(0.01 * 12_500, tooth=2 * 12_500) == "fail"
