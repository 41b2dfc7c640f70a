"""PNG plots: lag over time with its trend line (seed 002 Fig. 3), and the metric with a linear fit."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_lag(times, lags, warmup_s: float, res, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(times, lags, marker=".", linewidth=1, label="consumer lag")
    if times:
        ax.axvspan(0, warmup_s, color="grey", alpha=0.15, label=f"warm-up ({warmup_s:g} s)")
    t = np.asarray(times, dtype=float)
    y = np.asarray(lags, dtype=float)
    keep = t >= warmup_s
    if keep.sum() >= 2 and math.isfinite(res.lag_slope):
        b, a = np.polyfit(t[keep], y[keep], 1)
        ax.plot(t[keep], a + b * t[keep], color="red", linewidth=2, label=f"trend {b:,.1f} records/s")
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
