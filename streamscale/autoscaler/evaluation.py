"""Measurement streams (Eq. 15) and the comparison metrics CBS (Eq. 28), E(Rscore) (Eq. 29), Pareto front."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.autoscaler.binpacking import Assignment, consumers_used, rscore

DELTAS = (0, 5, 10, 15, 20, 25)


def measurement_stream(
    partitions: int, n: int, delta: float, capacity: float, seed: int = 0, initial: str = "uniform"
) -> list[dict[int, float]]:
    """n measurements: s_j(t_1) uniform in [0, C]; s_j(t_k) = max{0, s_j(t_k-1) + phi(delta)/100 * C}.

    phi(delta) is uniform in [-delta, delta]. Speeds are also capped at C: a partition faster than
    one consumer cannot be assigned by any algorithm (the paper leaves this case open).
    """
    rng = np.random.default_rng(seed)
    # §VI-B tried four starts: uniform in [0, C] (the one reported), all 0, all C/2, all C
    starts = {
        "uniform": lambda: rng.uniform(0, capacity, partitions),
        "zero": lambda: np.zeros(partitions),
        "half": lambda: np.full(partitions, capacity / 2),
        "full": lambda: np.full(partitions, capacity),
    }
    if initial not in starts:
        raise ValueError(f"initial must be one of {sorted(starts)}, not {initial!r}")
    s = starts[initial]()
    out = [dict(enumerate(s.tolist()))]
    for _ in range(n - 1):
        s = np.clip(s + rng.uniform(-delta, delta, partitions) / 100.0 * capacity, 0.0, capacity)
        out.append(dict(enumerate(s.tolist())))
    return out


@dataclass
class StreamRun:
    algorithm: str
    bins: list[int]
    rscores: list[float]
    assignments: list[Assignment]


def run_stream(name: str, algorithm: Callable, stream: Sequence[Mapping[int, float]], capacity: float) -> StreamRun:
    prev: Assignment | None = None
    bins, scores, assigns = [], [], []
    for speeds in stream:
        cur = algorithm(speeds, capacity, prev)
        bins.append(consumers_used(cur))
        scores.append(rscore(speeds, capacity, prev, cur))
        assigns.append(cur)
        prev = cur
    return StreamRun(name, bins, scores, assigns)


def cardinal_bin_score(runs: Mapping[str, StreamRun]) -> dict[str, float]:
    """Eq. 28: mean over iterations of (bins of a - fewest bins of any algorithm) / fewest bins."""
    names = list(runs)
    z = np.array([runs[a].bins for a in names], dtype=float)
    best = z.min(axis=0)
    best[best == 0] = np.nan  # an iteration with no load at all says nothing about packing
    return {a: float(np.nanmean((z[i] - best) / best)) for i, a in enumerate(names)}


def expected_rscore(run: StreamRun) -> float:
    """Eq. 29: mean Rscore over the stream's iterations."""
    return float(np.mean(run.rscores))


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """Names whose (x, y) no other point beats in both (lower is better in both)."""
    front = []
    for a, (x, y) in points.items():
        dominated = any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for b, (x2, y2) in points.items() if b != a)
        if not dominated:
            front.append(a)
    return sorted(front)
