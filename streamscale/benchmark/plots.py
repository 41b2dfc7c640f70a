"""PNG plots: lag over time with its trend and the SLO limit (Henning and Hasselbring, Fig. 3), and the metric.

Every axis carries its unit. The load axis is in records/s wherever the load type is a rate
(``sensors``, ``nested_groups``: see ``streamscale.benchmark.units``); resources are integers and drawn as steps.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from streamscale.benchmark.units import Axes, approx  # noqa: E402


def _thousands(ax_axis) -> None:
    ax_axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def plot_lag(times, lags, warmup_s: float, res, path: Path, trend=None, axes: Axes | None = None) -> Path:
    """The lag, the points the trend was fitted through, that trend (streamscale.experiment.slo:
    the one place the trend is computed; nothing is refitted here) and the steepest trend the SLO
    allows, drawn from the same starting point."""
    axes = axes or Axes()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(times, lags, marker=".", linewidth=1, label="consumer lag (1 s samples)")
    if times:
        ax.axvspan(0, warmup_s, color="grey", alpha=0.15, label=f"warm-up ({warmup_s:g} s)")
        if trend is not None and math.isfinite(trend.start_s) and trend.start_s > warmup_s:
            ax.axvspan(warmup_s, trend.start_s, color="grey", alpha=0.07, label="start-up backlog draining")
    bt, bl = trend.commits if trend is not None else ((), ())
    if len(bt):
        ax.plot(bt, bl, "o", color="black", markersize=3, label="after each batch commit")
    if trend is not None and math.isfinite(trend.slope):
        start = trend.start_s if math.isfinite(trend.start_s) else warmup_s
        xs = [x for x in (bt if trend.basis == "batches" else times) if x >= start]
        if xs:
            grid = np.array([min(xs), max(xs)])
            line = trend.line(grid)
            ax.plot(
                grid,
                line,
                color="red",
                linewidth=2,
                label=f"trend {trend.slope:,.0f} records/s (95 %: {trend.low:,.0f} to {trend.high:,.0f})"
                + (f"\n{trend.period_s:g} s window periods fitted out" if trend.period_s else ""),
            )
            if math.isfinite(res.lag_limit):
                ax.plot(
                    grid,
                    line[0] + res.lag_limit * (grid - grid[0]),
                    color="darkorange",
                    linestyle="--",
                    linewidth=1.5,
                    label=f"SLO limit: trend ≤ {res.lag_limit:,.0f} records/s",
                )
    verdict = (getattr(res, "verdict", "") or ("pass" if res.passed else "fail" if res.valid else "invalid")).upper()
    rate = getattr(res, "target_rate", None) or axes.rate(res.load)
    ax.set_title(
        f"{rate:,.0f} records/s on {axes.resources(res.resources)}, repetition {res.repetition + 1}: {verdict}",
        fontsize=10,
    )
    _thousands(ax.yaxis)
    return _finish(fig, ax, "time since the experiment started (s)", "consumer lag (records)", path)


def fit_label(xs, ys, kind: str, axes: Axes) -> tuple[float, float, str] | None:
    """A linear fit worth drawing: at least three points and more than one distinct value;
    coefficients rounded to three significant digits and said in words."""
    if len(xs) < 3 or len(set(ys)) < 2:
        return None
    b, a = np.polyfit(xs, ys, 1)
    if kind == "demand" and b > 0:
        return b, a, f"linear fit: one {axes.resources(1).split()[1]} per {approx(1 / b)} {_unit(axes)}"
    return b, a, f"linear fit: {approx(b)} x {'+' if a >= 0 else '−'} {approx(abs(a))}"


def _unit(axes: Axes) -> str:
    return axes.unit


def plot_metric(
    metric: dict,
    kind: str,
    axes: Axes,
    path: Path,
    most_tested: int | None = None,
    assumed: set | frozenset = frozenset(),
) -> Path:
    """Resource demand (integer resources against load, as steps: r resources cover every load up
    to the highest tested one that needed r) or load capacity (load against integer resources;
    ``assumed``: amounts whose capacity no experiment ran, drawn hollow)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    if kind == "demand":
        _draw_demand(ax, metric, axes, most_tested)
        xlabel, ylabel = axes.load_label, axes.resource_label
    else:
        _draw_capacity(ax, metric, axes, assumed)
        xlabel, ylabel = axes.resource_label, axes.load_label
    return _finish(fig, ax, xlabel, ylabel, path)


def _draw_demand(ax, metric: dict, axes: Axes, most_tested: int | None) -> None:
    pts = sorted((axes.rate(k), v) for k, v in metric.items() if v is not None)
    missing = sorted(axes.rate(k) for k, v in metric.items() if v is None)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    if xs:
        # 'pre': on (x_i-1, x_i] the demand is at most y_i (more load never needs fewer resources)
        ax.step(
            [0.0, *xs],
            [ys[0], *ys],
            where="pre",
            color="tab:blue",
            linewidth=2,
            label="enough for every load up to the point on the step",
        )
        ax.plot(xs, ys, "o", markersize=8, color="tab:blue", label="measured")
    # a load no tested amount held: drawn above the most tested amount, not above the most used
    top = max([*ys, most_tested or 0], default=1)
    _missing_and_fit(
        ax,
        xs,
        ys,
        [(x, top + 1) for x in missing],
        "^",
        f"more than {axes.resources(most_tested)}" if most_tested else "more than the most tested",
        "demand",
        axes,
    )
    ax.set_ylim(0, top + 1.5)
    ax.set_xlim(0, max(xs + missing, default=1) * 1.08)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _thousands(ax.xaxis)
    ax.set_title("resource demand: fewest resources meeting every SLO")


def _draw_capacity(ax, metric: dict, axes: Axes, assumed: set | frozenset) -> None:
    pts = sorted((k, axes.rate(v)) for k, v in metric.items() if v is not None)
    missing = sorted(k for k, v in metric.items() if v is None)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    ran = [(x, y) for x, y in pts if x not in assumed]
    ax.plot(xs, ys, "-", color="tab:blue")
    ax.plot([x for x, _ in ran], [y for _, y in ran], "o", markersize=8, color="tab:blue", label="measured")
    took = [(x, y) for x, y in pts if x in assumed]
    if took:
        ax.plot(
            [x for x, _ in took],
            [y for _, y in took],
            "o",
            markersize=8,
            markerfacecolor="white",
            color="tab:blue",
            label="not run: every higher load failed, the capacity of fewer resources assumed",
        )
    _missing_and_fit(ax, xs, ys, [(x, 0) for x in missing], "v", "even the lowest load failed", "capacity", axes)
    ax.set_ylim(bottom=0)
    # whole resource amounts from 0: one amount alone would otherwise get ticks such as 0.945
    ax.set_xlim(0, max(xs + missing, default=1) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _thousands(ax.yaxis)
    ax.set_title("load capacity: highest load meeting every SLO")


def plot_brackets(brackets: list[dict], axes: Axes, path: Path) -> Path:
    """Each resource amount's bracket: the highest load it held (a filled circle; hollow where the
    amount below held it and this one was not run), the lowest it failed (a cross; a diamond where
    that run stayed undecided), and the span between them in which its capacity lies."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    labels: set[str] = set()

    def mark(x, y, style: dict, label: str) -> None:
        ax.plot([x], [y], linestyle="none", label=None if label in labels else label, **style)
        labels.add(label)

    top = 0.0
    for b in brackets:
        x = b["resources"]
        held, failed = b.get("held_rate"), b.get("failed_rate")
        if held is not None and failed is not None:
            ax.plot([x, x], [held, failed], color="tab:blue", linewidth=6, alpha=0.25, solid_capstyle="butt")
        if held is not None:
            hollow = b.get("held_assumed")
            mark(
                x,
                held,
                {
                    "marker": "o",
                    "markersize": 9,
                    "color": "tab:blue",
                    "markerfacecolor": "white" if hollow else "tab:blue",
                },
                "held (hollow: as fewer resources, not run)" if hollow else "highest load held",
            )
            top = max(top, held)
        if failed is not None:
            if b.get("failed_undecided"):
                mark(
                    x, failed, {"marker": "D", "markersize": 8, "color": "goldenrod"}, "undecided (interval straddles)"
                )
            else:
                mark(x, failed, {"marker": "X", "markersize": 10, "color": "tab:red"}, "lowest load failed")
            top = max(top, failed)
        elif held is not None:
            mark(x, held * 1.04, {"marker": "^", "markersize": 9, "color": "grey"}, "no higher load tested")
    ax.set_xlim(0.5, max((b["resources"] for b in brackets), default=1) + 0.5)
    ax.set_ylim(0, max(top, 1) * 1.15)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _thousands(ax.yaxis)
    ax.set_title("capacity: the load held and the load failed, per resource amount")
    return _finish(fig, ax, axes.resource_label, axes.load_label, path)


def plot_config_brackets(brackets: list[dict], axes: Axes, path: Path) -> Path:
    """Configurations side by side: per resource amount one bar per configuration up to the load it
    held, a line on to the load it failed (dashed where that run stayed undecided)."""
    names = list(dict.fromkeys(b.get("config", "") for b in brackets))
    amounts = sorted({b["resources"] for b in brackets})
    fig, ax = plt.subplots(figsize=(6.5, 4))
    width = 0.8 / max(1, len(names))
    top = 0.0
    for i, name in enumerate(names):
        colour = f"C{i}"
        mine = {b["resources"]: b for b in brackets if b.get("config", "") == name}
        for j, res in enumerate(amounts):
            b = mine.get(res)
            if b is None:
                continue
            x = j + (i - (len(names) - 1) / 2) * width
            held, failed = b.get("held_rate"), b.get("failed_rate")
            hatch = "//" if b.get("held_assumed") else None
            ax.bar(x, held or 0, width * 0.9, color=colour, alpha=0.8, hatch=hatch, label=name if j == 0 else None)
            if failed is not None:
                style = "--" if b.get("failed_undecided") else "-"
                ax.plot([x, x], [held or 0, failed], style, color="black", linewidth=1.2)
                ax.plot([x], [failed], marker="_", markersize=12, color="black")
            top = max(top, held or 0, failed or 0)
    ax.set_xticks(range(len(amounts)), [axes.resources(r) for r in amounts])
    ax.set_ylim(0, max(top, 1) * 1.15)
    _thousands(ax.yaxis)
    ax.set_title("capacity per configuration (bar: held; line: up to failed)")
    return _finish(fig, ax, axes.resource_label, axes.load_label, path)


def _missing_and_fit(ax, xs, ys, missing_at, marker: str, missing_label: str, kind: str, axes: Axes) -> None:
    """Markers where no tested amount sufficed, and the linear fit where it means something."""
    for x, y in missing_at:
        ax.plot([x], [y], marker=marker, markersize=10, color="tab:red", linestyle="none")
    if missing_at:
        ax.plot([], [], marker=marker, color="tab:red", linestyle="none", label=missing_label)
    fitted = fit_label(xs, ys, kind, axes)
    if fitted:
        b, a, text = fitted
        grid = np.linspace(min(xs), max(xs), 50)
        ax.plot(grid, a + b * grid, "r--", linewidth=1, label=text)


def _finish(fig, ax, xlabel: str, ylabel: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # an amount judged at no load draws nothing to name
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
