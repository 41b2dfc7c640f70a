"""PNG plots: lag over time with its trend line (seed 002 Fig. 3), and the metric with a linear fit."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_lag(times, lags, warmup_s: float, res, path: Path, trend=None) -> Path:
    """The lag, the points the trend was fitted through, and that trend (streamscale.execution.metrics:
    the one place the trend is computed; nothing is refitted here)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(times, lags, marker=".", linewidth=1, label="consumer lag (1 s samples)")
    if times:
        ax.axvspan(0, warmup_s, color="grey", alpha=0.15, label=f"warm-up ({warmup_s:g} s)")
    bt, bl = trend.commits if trend is not None else ((), ())
    if len(bt):
        ax.plot(bt, bl, "o", color="black", markersize=3, label="after each batch commit")
    if trend is not None and math.isfinite(trend.slope):
        xs = [x for x in (bt if trend.basis == "batches" else times) if x >= warmup_s]
        if xs:
            grid = np.array([min(xs), max(xs)])
            ax.plot(grid, trend.line(grid), color="red", linewidth=2,
                    label=f"trend {trend.slope:,.1f} records/s [{trend.low:,.1f}, {trend.high:,.1f}]")
    verdict = "PASS" if res.passed else ("INVALID" if not res.valid else "FAIL")
    ax.set_title(f"load {res.load:g}, resources {res.resources}, repetition {res.repetition + 1}: {verdict} "
                 f"(limit {res.lag_limit:,.0f}/s)", fontsize=10)
    return _finish(fig, ax, "time (s)", "lag (records)", path)


def plot_metric(metric: dict, kind: str, load_type: str, resource_type: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = [k for k, v in metric.items() if v is not None]
    ys = [metric[k] for k in xs]
    missing = [k for k, v in metric.items() if v is None]
    xlabel, ylabel = (load_type, resource_type) if kind == "demand" else (resource_type, load_type)
    ax.plot(xs, ys, "o", markersize=8, label="measured")
    if len(xs) >= 2:
        b, a = np.polyfit(xs, ys, 1)
        grid = np.linspace(min(xs), max(xs), 50)
        ax.plot(grid, a + b * grid, "r--", label=f"linear fit: {b:.3g} x + {a:.3g}")
    for k in missing:
        ax.axvline(k, color="grey", linestyle=":", alpha=0.7)
    if missing:
        ax.plot([], [], color="grey", linestyle=":", label="no tested amount sufficed")
    ax.set_title("resource demand" if kind == "demand" else "load capacity")
    return _finish(fig, ax, xlabel, ylabel, path)


def _finish(fig, ax, xlabel: str, ylabel: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
