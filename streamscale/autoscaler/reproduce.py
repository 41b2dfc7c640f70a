"""`streamscale autoscale reproduce`: Landau et al.'s §VI-C and §VI-E figures, each with its spread.

Every parameter the paper names is a field of :class:`ReproduceSpec` (YAML). Each figure is
measured over many independent draws (streams of Eq. 15, and for Kafka's assignment a random
equal-count assignment per draw); ``measured`` is the median over draws, ``low``/``high`` the 5th
and 95th percentiles. No seed is chosen to match the paper: draw d uses seed ``spec.seed + d``.

Readings of the text this module makes (docs/autoscaler.md gives the reasons):

* p90 latencies are taken over the samples > 0 s (the paper's Fig. 8 box plots only those; over all
  samples MWF's p90 is 0 s). One sample per byte written (Eqs. 22 and 27 are stated for every
  byte i), per-byte exact without enumerating bytes (:class:`~.latency.Segments`).
* Kafka's assignment is "random" with an equal count per consumer and does not change over the
  experiment: a fresh random deal per draw.
* "kd_N with the same operational cost as MWF" is N = MWF's average consumer count, rounded.
* "the smallest kd_N whose p90 beats MWF": the smallest N with p90(kd_N) < p90(MWF) in a draw.
* §VI-E compares MWF with the baseline of lowest E(Rscore) (Eq. 29) in each stream; operational
  cost is MWF's CBS (Eq. 28) over all eight algorithms.
* Eq. 14 literally: NFD opens every consumer, the first included, by h(j, k). The variant where the
  first consumer is 0 (the authors' controller) goes to reproduction-variants.csv.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from streamscale.autoscaler.binpacking import (
    ALGORITHMS,
    Assignment,
    any_fit_decreasing,
    consumers_used,
    known_algorithm,
)
from streamscale.autoscaler.evaluation import cardinal_bin_score, expected_rscore, measurement_stream, run_stream
from streamscale.autoscaler.latency import latency_segments

BASELINES = ("NFD", "FFD", "BFD", "WFD")
COLUMNS = ["figure", "paper", "measured", "low", "high"]  # reproduction*.csv
DETAILS = [*COLUMNS, "unit", "draws", "in_spread", "note"]  # reproduction.json, report

_Pos = Field(gt=0, allow_inf_nan=False)


Initial = Literal["uniform", "zero", "half", "full"]  # §VI-B's four starting speeds


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LatencySpec(_Spec):
    """§VI-C: MWF against Kafka's equal-count assignment kd_N."""

    partitions: int = Field(32, ge=1, le=10_000)
    measurements: int = Field(100, ge=2, le=100_000)
    delta: float = Field(5.0, ge=0, le=100, allow_inf_nan=False)
    initial: Initial = Field("uniform", description="Eq. 15 start: uniform in [0, C], zero, C/2 or C")
    bin_capacity: float = Field(100.0, gt=0, allow_inf_nan=False, description="C, the bin capacity")
    consumer_capacity: float = Field(133.0, gt=0, allow_inf_nan=False, description="C-bar, a consumer's read rate")
    iteration_s: float = Field(30.0, gt=0, allow_inf_nan=False)
    rebalance_s: float = Field(5.0, ge=0, allow_inf_nan=False)
    sampling: Literal["bytes", "instants"] = Field("bytes", description="one sample per byte, or instants")
    instants: int = Field(30, ge=1, description="samples per queue and iteration when sampling=instants")
    percentile: float = Field(90.0, gt=0, le=100, allow_inf_nan=False)
    over: Literal["positive", "all"] = Field("positive", description="samples > 0 s (as Fig. 8), or all")
    draws: int = Field(200, ge=1, le=100_000)
    algorithm: str = "MWF"

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v: str) -> str:
        return known_algorithm(v)

    @model_validator(mode="after")
    def _capacities(self):
        if self.bin_capacity > self.consumer_capacity:
            raise ValueError("bin_capacity (C) must not exceed consumer_capacity (C-bar)")
        return self


class PackingSpec(_Spec):
    """§VI-D/E: CBS and E(Rscore) of the modified algorithms against the adapted baselines."""

    partitions: int = Field(200, ge=1, le=10_000)
    measurements: int = Field(500, ge=2, le=100_000)
    bin_capacity: float = Field(100.0, gt=0, allow_inf_nan=False)
    initial: Initial = Field("uniform", description="Eq. 15 start: uniform in [0, C], zero, C/2 or C")
    deltas: list[float] = Field(default_factory=lambda: [5.0, 25.0])
    streams: int = Field(10, ge=1, le=10_000)

    @field_validator("deltas")
    @classmethod
    def _deltas(cls, v: list[float]) -> list[float]:
        if not v or any(not math.isfinite(d) or d < 0 or d > 100 for d in v):
            raise ValueError("deltas must be numbers in [0, 100]")
        return v


class ReproduceSpec(_Spec):
    seed: int = 0
    latency: LatencySpec = Field(default_factory=LatencySpec)
    packing: PackingSpec = Field(default_factory=PackingSpec)


PAPER = {  # Landau et al., in the unit of `measured`, with half a unit of the paper's last digit
    "VI-E Rscore of MWF vs the best baseline, delta=25": (-23.0, "%", 0.5),
    "VI-E operational cost (CBS of MWF), delta=25": (8.8, "%", 0.05),
    "VI-E Rscore of MWF vs the best baseline, delta=5": (-55.0, "%", 0.5),
    "VI-E operational cost (CBS of MWF), delta=5": (11.8, "%", 0.05),
    "VI-C p90 latency of MWF": (4.52, "s", 0.005),
    "VI-C p90 latency of kd_N with MWF's cost (paper: kd_15)": (217.0, "s", 0.5),
    "VI-C smallest kd_N whose p90 beats MWF": (24.0, "consumers", 0.5),
}


@dataclass
class Row:
    figure: str
    values: list[float]
    note: str = ""
    variant: str = ""  # variants name their reading in the figure column: "<figure> [<variant>]"

    def as_dict(self) -> dict:
        paper, unit, rounding = PAPER.get(self.figure, (float("nan"), "", 0.0))
        vals = np.array([v for v in self.values if v is not None and math.isfinite(v)], dtype=float)
        med, lo, hi = (
            (float(np.median(vals)), float(np.percentile(vals, 5)), float(np.percentile(vals, 95)))
            if len(vals)
            else (float("nan"),) * 3
        )
        inside = bool(len(vals)) and lo - rounding <= paper <= hi + rounding
        note = self.note
        if len(vals) and math.isfinite(paper) and not inside:
            note = (note + "; " if note else "") + "paper outside the measured 5-95 % spread"
        figure = f"{self.figure} [{self.variant}]" if self.variant else self.figure
        return {
            "figure": figure,
            "paper": paper,
            "measured": round(med, 4),
            "low": round(lo, 4),
            "high": round(hi, 4),
            "unit": unit,
            "draws": len(vals),
            "in_spread": inside,
            "note": note,
        }


# -- §VI-C ------------------------------------------------------------------------------------
def random_equal_count(partitions: int, consumers: int, rng: np.random.Generator) -> Assignment:
    """Kafka's assignment as the paper describes it: an equal count per consumer, partitions random."""
    order = rng.permutation(partitions)
    return {int(p): i % consumers for i, p in enumerate(order)}


@dataclass
class LatencyDraw:
    p90: dict[str, float]  # configuration -> percentile (spec.over)
    p90_all: dict[str, float]  # over all samples (variant)
    consumers: dict[str, float]  # configuration -> average consumers
    positive: dict[str, int]  # samples > 0 s


def latency_draw(spec: LatencySpec, seed: int) -> LatencyDraw:
    stream = measurement_stream(
        spec.partitions, spec.measurements, spec.delta, spec.bin_capacity, seed=seed, initial=spec.initial
    )
    configs: dict[str, list[Assignment]] = {
        spec.algorithm: run_stream(spec.algorithm, ALGORITHMS[spec.algorithm], stream, spec.bin_capacity).assignments
    }
    rng = np.random.default_rng(seed + 1_000_003)
    for n in range(1, spec.partitions + 1):
        fixed = random_equal_count(spec.partitions, n, rng)
        configs[f"kd_{n}"] = [fixed] * len(stream)
    out = LatencyDraw({}, {}, {}, {})
    for name, assigns in configs.items():
        seg = latency_segments(
            stream, assigns, spec.consumer_capacity, spec.iteration_s, spec.rebalance_s, spec.sampling, spec.instants
        )
        out.p90[name] = seg.percentile(spec.percentile, positive_only=spec.over == "positive")
        out.p90_all[name] = seg.percentile(spec.percentile, positive_only=False)
        out.consumers[name] = float(np.mean([consumers_used(a) for a in assigns]))
        out.positive[name] = seg.count_above(0.0)
    return out


def _smallest_beating(draw: LatencyDraw, algorithm: str, p90: dict[str, float]) -> float | None:
    n = 1
    while f"kd_{n}" in p90:
        if p90[f"kd_{n}"] < p90[algorithm]:
            return float(n)
        n += 1
    return None


# -- §VI-E ------------------------------------------------------------------------------------
def nfd_first_consumer_zero(speeds, capacity, previous=None) -> Assignment:
    """Variant: NFD that opens consumer 0 before placing anything, as the authors' controller."""
    return any_fit_decreasing(speeds, capacity, previous, "next", first_bin=0)


def packing_stream(spec: PackingSpec, delta: float, seed: int) -> dict[str, tuple[float, float]]:
    """On one stream: (Rscore change of MWF vs the best baseline in %, CBS of MWF in %), as the
    text reads (``"text"``) and with NFD opening consumer 0 first (``"nfd0"``)."""
    stream = measurement_stream(
        spec.partitions, spec.measurements, delta, spec.bin_capacity, seed=seed, initial=spec.initial
    )
    runs = {name: run_stream(name, algo, stream, spec.bin_capacity) for name, algo in ALGORITHMS.items()}
    nfd0 = run_stream("NFD", nfd_first_consumer_zero, stream, spec.bin_capacity)
    out = {}
    for label, group in (("text", runs), ("nfd0", {**runs, "NFD": nfd0})):
        cbs = cardinal_bin_score(group)
        best = min(expected_rscore(group[b]) for b in BASELINES)
        mwf = expected_rscore(group["MWF"])
        out[label] = ((mwf / best - 1.0) * 100.0 if best > 0 else float("nan"), cbs["MWF"] * 100.0)
    return out


# -- the whole reproduction ---------------------------------------------------------------------
def reproduce(spec: ReproduceSpec, out_dir: Path, progress: Callable[[str], None] | None = None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    lat, alg = spec.latency, spec.latency.algorithm
    draws: list[LatencyDraw] = []
    for d in range(lat.draws):
        draws.append(latency_draw(lat, spec.seed + d))
        if (d + 1) % max(1, lat.draws // 10) == 0 or d + 1 == lat.draws:
            say(f"§VI-C latency: {d + 1}/{lat.draws} draws")
    rows, variants = _latency_rows(draws, alg, lat.partitions)
    packed_rows, packed_variants = _packing_rows(spec, say)
    rows += packed_rows
    variants += packed_variants
    order = list(PAPER)
    rows.sort(key=lambda r: order.index(r.figure) if r.figure in order else len(order))
    table = [r.as_dict() for r in rows]
    var_table = [r.as_dict() for r in variants]
    _write(out_dir / "reproduction.csv", table)
    _write(out_dir / "reproduction-variants.csv", var_table)
    (out_dir / "reproduction.json").write_text(
        json.dumps({"figures": table, "variants": var_table, "spec": spec.model_dump()}, indent=2)
    )
    mwf_consumers = [dr.consumers[alg] for dr in draws]
    kd_curve = {n: [dr.p90[f"kd_{n}"] for dr in draws] for n in range(1, lat.partitions + 1)}
    _plots(out_dir, table, kd_curve, [dr.p90[alg] for dr in draws], mwf_consumers, alg)
    (out_dir / "report.html").write_text(_html(spec, table, var_table, out_dir))
    return {"rows": table, "variants": var_table, "mwf_consumers": float(np.median(mwf_consumers))}


def _latency_rows(draws: list[LatencyDraw], alg: str, partitions: int) -> tuple[list[Row], list[Row]]:
    """§VI-C's rows (and their variants) over the draws."""

    def same_cost(dr: LatencyDraw) -> float:
        n = min(partitions, max(1, round(dr.consumers[alg])))
        return dr.p90[f"kd_{n}"]

    rows = [
        Row("VI-C p90 latency of MWF", [dr.p90[alg] for dr in draws]),
        Row(
            "VI-C p90 latency of kd_N with MWF's cost (paper: kd_15)",
            [same_cost(dr) for dr in draws],
            "N = MWF's average consumers, rounded",
        ),
        Row("VI-C smallest kd_N whose p90 beats MWF", [_smallest_beating(dr, alg, dr.p90) for dr in draws]),
    ]
    variants = [
        Row(
            "VI-C p90 latency of MWF", [dr.p90_all[alg] for dr in draws], variant="p90 over all samples, zeros included"
        ),
        Row(
            "VI-C p90 latency of kd_N with MWF's cost (paper: kd_15)",
            [dr.p90.get("kd_15", float("nan")) for dr in draws],
            variant="kd_15 fixed, whatever MWF's cost",
        ),
    ]
    return rows, variants


def _packing_rows(spec: ReproduceSpec, say: Callable[[str], None]) -> tuple[list[Row], list[Row]]:
    """§VI-E's rows (and their variants) over the packing streams of each delta."""
    pk = spec.packing
    packing: dict[float, list[tuple[float, float]]] = {}
    packing_nfd0: dict[float, list[tuple[float, float]]] = {}
    for delta in pk.deltas:
        for s in range(pk.streams):
            r = packing_stream(pk, delta, spec.seed + 10_000 * (1 + int(delta)) + s)
            packing.setdefault(delta, []).append(r["text"])
            packing_nfd0.setdefault(delta, []).append(r["nfd0"])
            say(f"§VI-E delta {delta:g}: stream {s + 1}/{pk.streams}")
    rows, variants = [], []
    for delta in pk.deltas:
        d = f"{delta:g}"
        rows += [
            Row(f"VI-E Rscore of MWF vs the best baseline, delta={d}", [r for r, _ in packing[delta]]),
            Row(f"VI-E operational cost (CBS of MWF), delta={d}", [c for _, c in packing[delta]]),
        ]
        variants += [
            Row(
                f"VI-E Rscore of MWF vs the best baseline, delta={d}",
                [r for r, _ in packing_nfd0[delta]],
                variant="NFD opens consumer 0 first",
            ),
            Row(
                f"VI-E operational cost (CBS of MWF), delta={d}",
                [c for _, c in packing_nfd0[delta]],
                variant="NFD opens consumer 0 first",
            ),
        ]
    return rows, variants


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def _plots(
    out_dir: Path,
    table: list[dict],
    kd_curve: dict[int, list[float]],
    mwf: list[float],
    mwf_consumers: list[float],
    alg: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted(kd_curve)
    med = [np.median(kd_curve[n]) for n in ns]
    lo = [np.percentile(kd_curve[n], 5) for n in ns]
    hi = [np.percentile(kd_curve[n], 95) for n in ns]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.fill_between(ns, lo, hi, alpha=0.25, label="kd_N, 5-95 % of draws")
    ax.plot(ns, med, marker=".", label="kd_N, median")
    ax.axhline(float(np.median(mwf)), color="C3", label=f"{alg}, median ({np.median(mwf_consumers):.1f} consumers)")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    ax.set(
        xlabel="consumers N of Kafka's equal-count assignment kd_N",
        ylabel="p90 latency (s), samples > 0 s",
        title=f"§VI-C: p90 latency, {len(mwf)} draws",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "reproduction_latency.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    y = np.arange(len(table))
    for i, r in enumerate(table):
        scale = abs(r["paper"]) or 1.0  # each figure relative to the paper's value: one axis for all
        ax.errorbar(
            [r["measured"] / scale],
            [i],
            xerr=[[(r["measured"] - r["low"]) / scale], [(r["high"] - r["measured"]) / scale]],
            fmt="o",
            color="C0",
            label="measured, median and 5-95 %" if i == 0 else None,
        )
        ax.plot([r["paper"] / scale], [i], "x", color="C3", ms=9, label="paper" if i == 0 else None)
    ax.set_yticks(y, [f"{r['figure']} [{r['unit']}]" for r in table], fontsize=7)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set(xlabel="value / |paper's value|", title="Landau et al., §VI: paper vs this reproduction")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "reproduction_figures.png", dpi=100)
    plt.close(fig)


def _html(spec: ReproduceSpec, table: list[dict], variants: list[dict], out_dir: Path) -> str:
    import html

    import yaml

    from streamscale.observe.html import html_table, img_tag, page_head, page_tail

    def detailed(rows: list[dict]) -> list[dict]:
        return [{c: r[c] for c in DETAILS} for r in rows]

    return "".join(
        [
            page_head("Landau et al., §VI reproduction"),
            "<h1>Autoscaler evaluation: Landau et al., §VI reproduced</h1>",
            "<h2>Figures</h2>",
            html_table(detailed(table)),
            "<h2>Variants</h2>",
            html_table(detailed(variants)),
            img_tag(out_dir / "reproduction_figures.png", "paper vs measured"),
            img_tag(out_dir / "reproduction_latency.png", "p90 latency per kd_N"),
            "<h2>Spec</h2>",
            f"<pre>{html.escape(yaml.safe_dump(spec.model_dump(), sort_keys=False))}</pre>",
            page_tail(),
        ]
    )
