"""The latency model of Landau et al., §VI-C (Eqs. 16-27).

Each iteration lasts 30 s with stable write speeds; a rebalance takes 5 s, during which data of
partitions moved to a consumer (its *rebalanced* queue) cannot be read. Data of partitions it
kept (its *fixed* queue) is read all along. A queue written at W bytes/s and read at R bytes/s
gives byte i the latency L(i) = max{(1/R - 1/W) i + b, 0}; b is the latency carried over from the
previous iteration's fixed queue (Eq. 20), or the 5 s rebalance for the rebalanced queue (Eq. 27).
Bin capacity C is 5/6 of the consumer's capacity C-bar, which leaves the headroom to catch up
after a rebalance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ITERATION_S = 30.0
REBALANCE_S = 5.0
CAPACITY_RATIO = 5 / 6


def line_latency(read_rate: float, write_rate: float, i: float, offset: float) -> float:
    """L(i) = max{m i + b, 0} with m = 1/R - 1/W (Eqs. 19, 22, 25, 27)."""
    if write_rate <= 0:
        return 0.0
    if read_rate <= 0:
        return float("inf")
    return max((1.0 / read_rate - 1.0 / write_rate) * i + offset, 0.0)


@dataclass
class Segments:
    """Latency samples as arithmetic runs: run r holds max{slope[r] * s + start[r], 0} for
    s = 0 .. count[r] - 1. Millions of per-byte samples in a few thousand runs."""

    slope: np.ndarray
    start: np.ndarray
    count: np.ndarray

    def expand(self) -> np.ndarray:
        return np.concatenate(
            [np.maximum(a * np.arange(n) + b, 0.0) for a, b, n in zip(self.slope, self.start, self.count)]
            or [np.zeros(0)]
        )

    def count_above(self, x: float) -> int:
        """Samples with latency > x (x >= 0)."""
        a, b, n = self.slope, self.start, self.count
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (x - b) / a
            up = n - np.clip(np.floor(t) + 1, 0, n)  # a > 0: s > t
            down = np.clip(np.ceil(t), 0, n)  # a < 0: s < t
        flat = np.where(b > x, n, 0)
        return int(np.where(a > 0, up, np.where(a < 0, down, flat)).sum())

    def total(self) -> int:
        return int(self.count.sum())

    def maximum(self) -> float:
        if not len(self.count):
            return 0.0
        return float(np.maximum(np.maximum(self.start, self.slope * (self.count - 1) + self.start), 0).max())

    def percentile(self, q: float, positive_only: bool = True) -> float:
        """The q-th percentile (inverted CDF: the smallest x with at least q % of samples <= x),
        over the samples > 0 (as the paper's Fig. 8 box plots) or over all samples."""
        pop = self.count_above(0.0) if positive_only else self.total()
        if pop == 0:
            return 0.0
        need = max(1, math.ceil(q / 100.0 * pop))  # samples that must be <= x
        below_zero_ok = pop - self.count_above(0.0)  # zeros count when they are in the population
        if not positive_only and below_zero_ok >= need:
            return 0.0
        lo, hi = 0.0, self.maximum()
        for _ in range(100):  # bisection on the value; the count is exact at every step
            mid = (lo + hi) / 2
            if pop - self.count_above(mid) >= need:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-9 * max(1.0, hi):
                break
        return hi


def latency_segments(
    stream: Sequence[Mapping[int, float]],
    assignments: Sequence[Mapping[int, int]],
    consumer_capacity: float,
    iteration_s: float = ITERATION_S,
    rebalance_s: float = REBALANCE_S,
    sampling: str = "bytes",
    instants: int = 30,
) -> Segments:
    """Eqs. 16-27 for every consumer, queue and iteration.

    ``sampling="bytes"``: one sample per byte written in the iteration, L(i) for i = 0, 1, ...
    (the equations are stated for every byte i of T); ``"instants"``: ``instants`` bytes evenly
    spaced over each queue's T. The first iteration has no previous assignment, so nothing is
    rebalanced in it (the paper's kd_31 and kd_32 have no sample above 0 s).
    """
    cbar = consumer_capacity
    carry: dict[int, float] = {}  # consumer -> latency of the last byte of its fixed queue
    slope: list[float] = []
    start: list[float] = []
    count: list[int] = []
    prev: Mapping[int, int] | None = None

    def add(read: float, write: float, offset: float) -> None:
        total = iteration_s * write  # Eqs. 21, 26
        m = (1.0 / read - 1.0 / write) if read > 0 else float("inf")  # Eqs. 19, 25
        if sampling == "bytes":
            n, step = max(1, math.ceil(total)), 1.0
        else:
            n, step = instants, total / instants
        slope.append(m * step if math.isfinite(m) else 1e300)
        start.append(offset)
        count.append(n)

    for speeds, assign in zip(stream, assignments):
        members: dict[int, list[int]] = {}
        for p, c in assign.items():
            members.setdefault(c, []).append(p)
        new_carry: dict[int, float] = {}
        for c, parts in members.items():
            moved = [p for p in parts if prev is not None and prev.get(p) != c]  # Eq. 16
            w_f = sum(speeds[p] for p in parts if p not in moved)  # Eqs. 17, 18
            w_r = sum(speeds[p] for p in moved)  # Eq. 24
            r_f = cbar if w_r == 0 else min(cbar, w_f)
            r_r = cbar - r_f
            b_f = carry.get(c, 0.0)  # Eq. 20
            if w_f > 0:
                add(r_f, w_f, b_f)  # Eq. 22
            if w_r > 0:
                add(r_r, w_r, rebalance_s)  # Eq. 27
            new_carry[c] = line_latency(r_f, w_f, iteration_s * w_f, b_f) if w_f > 0 else 0.0
        carry = new_carry
        prev = assign
    return Segments(np.array(slope, dtype=float), np.array(start, dtype=float), np.array(count, dtype=np.int64))


def latency_samples(
    stream: Sequence[Mapping[int, float]],
    assignments: Sequence[Mapping[int, int]],
    consumer_capacity: float,
    samples_per_iteration: int = 30,
    iteration_s: float = ITERATION_S,
    rebalance_s: float = REBALANCE_S,
) -> list[float]:
    """Latency of the bytes written at evenly spaced instants of every iteration, every queue."""
    return (
        latency_segments(
            stream, assignments, consumer_capacity, iteration_s, rebalance_s, "instants", samples_per_iteration
        )
        .expand()
        .tolist()
    )
