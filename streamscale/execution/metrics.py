"""The consumer-lag trend: least-squares slope of lag over time after the warm-up (seed 002 §5.3)."""

from __future__ import annotations

import numpy as np


def lag_trend(times_s, lags, warmup_s: float = 0.0) -> float:
    """Slope in records/s of the regression line through the samples taken after ``warmup_s``.

    Fewer than two samples after the warm-up give NaN: no trend can be judged.
    """
    t = np.asarray(times_s, dtype=float)
    y = np.asarray(lags, dtype=float)
    keep = t >= warmup_s
    t, y = t[keep], y[keep]
    if len(t) < 2 or np.ptp(t) == 0:
        return float("nan")
    slope, _intercept = np.polyfit(t, y, 1)
    return float(slope)


def lag_slo_holds(slope: float, generated_rate: float, threshold: float = 0.01) -> bool:
    """The SLO holds if the lag grows by at most ``threshold`` x the generated records/s."""
    return bool(np.isfinite(slope)) and slope <= threshold * generated_rate
