"""`streamscale autoscale evaluate`: the paper's evaluation (§VI) as CSV tables and PNG figures (Figs. 5-12)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from streamscale.autoscaler.binpacking import ALGORITHMS, consumers_used, kafka_equal_count
from streamscale.autoscaler.evaluation import (
    DELTAS,
    cardinal_bin_score,
    expected_rscore,
    measurement_stream,
    pareto_front,
    run_stream,
)
from streamscale.autoscaler.latency import CAPACITY_RATIO, latency_samples

BASELINES = ("NFD", "FFD", "BFD", "WFD")
MODIFIED = ("MWF", "MBF", "MWFP", "MBFP")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _plt().close(fig)


def evaluate(
    out_dir: Path,
    partitions: int = 32,
    measurements: int = 500,
    latency_measurements: int = 100,
    consumer_capacity: float = 100.0,
    seed: int = 0,
    progress=None,
) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    capacity = consumer_capacity * CAPACITY_RATIO  # the bin capacity C = 5/6 C-bar
    plt = _plt()
    # §VI-D/E: CBS, E(Rscore), Pareto fronts per delta
    rows, points_by_delta = _by_delta(partitions, measurements, capacity, seed, progress)
    fronts = {delta: pareto_front(points) for delta, points in points_by_delta.items()}
    _write_csv(out_dir / "algorithms_by_delta.csv", rows)
    _plot_by_delta(plt, rows, points_by_delta, fronts, out_dir)
    # §VI-C: latency, modified worst fit vs Kafka's equal-count assignment
    stream = measurement_stream(partitions, latency_measurements, 5, capacity, seed=seed)
    lat_rows, samples = _latencies(stream, partitions, capacity, consumer_capacity)
    _write_csv(out_dir / "latency_summary.csv", lat_rows)
    table = ["algorithm  avg consumers  p90 latency (s)  samples > 0 s"]
    table += [
        f"{r['algorithm']:<10} {r['avg_consumers']:>13.2f}  {r['p90_latency_s']:>15.3f}  {r['samples_latency_gt0']:>13}"
        for r in lat_rows
    ]
    (out_dir / "latency_table.txt").write_text("\n".join(table) + "\n")
    _plot_latencies(plt, lat_rows, samples, f"kd_{min(27, partitions)}", out_dir)
    return {"fronts": fronts, "latency": lat_rows, "by_delta": rows}


def _by_delta(partitions: int, measurements: int, capacity: float, seed: int, progress) -> tuple[list, dict]:
    """Each algorithm's CBS, E(Rscore) and consumers per delta, and the (CBS, E(Rscore)) points."""
    rows, points_by_delta = [], {}
    for delta in DELTAS:
        stream = measurement_stream(partitions, measurements, delta, capacity, seed=seed + delta)
        runs = {name: run_stream(name, algo, stream, capacity) for name, algo in ALGORITHMS.items()}
        cbs = cardinal_bin_score(runs)
        for name, run in runs.items():
            rows.append(
                {
                    "delta": delta,
                    "algorithm": name,
                    "cbs": round(cbs[name], 6),
                    "expected_rscore": round(expected_rscore(run), 6),
                    "avg_consumers": round(float(np.mean(run.bins)), 3),
                }
            )
        points_by_delta[delta] = {n: (cbs[n], expected_rscore(runs[n])) for n in runs}
        if progress:
            progress(f"delta {delta}: {len(runs)} algorithms over {measurements} measurements")
    return rows, points_by_delta


def _plot_by_delta(plt, rows: list[dict], points_by_delta: dict, fronts: dict, out_dir: Path) -> None:
    """Figures 9-12: CBS per delta (baselines, modified), Rscore per delta, two Pareto fronts."""
    for fig_no, group, title in ((9, BASELINES, "baselines"), (10, MODIFIED, "modified any fit")):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for name in group:
            ax.plot(DELTAS, [r["cbs"] for r in rows if r["algorithm"] == name], marker="o", label=name)
        ax.set(xlabel="delta (% of C)", ylabel="cardinal bin score", title=f"CBS per delta: {title}")
        ax.legend()
        ax.grid(alpha=0.3)
        _save(fig, out_dir / f"fig{fig_no:02d}_cbs_{'baselines' if fig_no == 9 else 'modified'}.png")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name in ALGORITHMS:
        ax.plot(DELTAS, [r["expected_rscore"] for r in rows if r["algorithm"] == name], marker="o", label=name)
    ax.set(xlabel="delta (% of C)", ylabel="average Rscore", title="Rscore per delta")
    ax.legend(ncol=2, fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, out_dir / "fig11_rscore_per_delta.png")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, delta in zip(axes, (5, 25)):
        pts = points_by_delta[delta]
        for name, (x, y) in pts.items():
            on = name in fronts[delta]
            ax.scatter([x], [y], color="red" if on else "grey", s=50)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        front = sorted(pts[n] for n in fronts[delta])
        ax.plot([p[0] for p in front], [p[1] for p in front], "r--", label="Pareto front")
        ax.set(xlabel="cardinal bin score", ylabel="average Rscore", title=f"delta = {delta}")
        ax.legend()
        ax.grid(alpha=0.3)
    _save(fig, out_dir / "fig12_pareto_fronts.png")


def _latencies(stream, partitions: int, capacity: float, consumer_capacity: float) -> tuple[list, dict]:
    """Each algorithm's and each equal-count assignment's (kd_n) latency samples and their summary."""
    configs: dict[str, list] = {}
    for name in ALGORITHMS:
        configs[name] = run_stream(name, ALGORITHMS[name], stream, capacity).assignments
    for n in range(1, partitions + 1):
        configs[f"kd_{n}"] = [kafka_equal_count(s, n) for s in stream]
    lat_rows, samples = [], {}
    for name, assigns in configs.items():
        lat = np.array(latency_samples(stream, assigns, consumer_capacity))
        samples[name] = lat
        pos = lat[lat > 0]
        lat_rows.append(
            {
                "algorithm": name,
                "avg_consumers": round(float(np.mean([consumers_used(a) for a in assigns])), 3),
                "samples": len(lat),
                "samples_latency_gt0": int(len(pos)),
                # over the samples > 0 s, as the paper's Fig. 8 (over all samples MWF's is 0)
                "p90_latency_s": round(float(np.percentile(pos, 90)), 3) if len(pos) else 0.0,
                "max_latency_s": round(float(lat.max()), 3) if len(lat) else 0.0,
            }
        )
    return lat_rows, samples


def _plot_latencies(plt, lat_rows: list[dict], samples: dict, kd: str, out_dir: Path) -> None:
    """Figures 5-8: MWF against ``kd`` in a histogram, consumers and latency samples per
    algorithm, and the latency box plot."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    bins = np.linspace(0, max(1.0, float(max(samples["MWF"].max(), samples[kd].max()))), 40)
    ax.hist([samples["MWF"][samples["MWF"] > 0], samples[kd][samples[kd] > 0]], bins=bins, label=["MWF", kd])
    ax.set(xlabel="latency (s)", ylabel="samples", title=f"latency > 0: MWF vs {kd}")
    ax.legend()
    _save(fig, out_dir / "fig05_latency_hist_mwf_vs_kd.png")
    names = [r["algorithm"] for r in lat_rows]
    for fig_no, key, ylabel in (
        (6, "avg_consumers", "average consumers"),
        (7, "samples_latency_gt0", "samples with latency > 0 s"),
    ):
        fig, ax = plt.subplots(figsize=(12, 4))
        ax.bar(names, [r[key] for r in lat_rows], color=["C1" if n in ALGORITHMS else "C0" for n in names])
        ax.set(ylabel=ylabel)
        ax.tick_params(axis="x", rotation=90)
        _save(fig, out_dir / f"fig{fig_no:02d}_{key}.png")
    with_lat = [n for n in names if (samples[n] > 0).any()]
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.boxplot([samples[n][samples[n] > 0] for n in with_lat], tick_labels=with_lat)
    ax.set(ylabel="latency (s), samples > 0")
    ax.tick_params(axis="x", rotation=90)
    _save(fig, out_dir / "fig08_latency_boxplot.png")


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
