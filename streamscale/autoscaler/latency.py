"""The latency model of seed 001 §VI-C (Eqs. 16-27).

Each iteration lasts 30 s with stable write speeds; a rebalance takes 5 s, during which data of
partitions moved to a consumer (its *rebalanced* queue) cannot be read. Data of partitions it
kept (its *fixed* queue) is read all along. A queue written at W bytes/s and read at R bytes/s
gives byte i the latency L(i) = max{(1/R - 1/W) i + b, 0}; b is the latency carried over from the
previous iteration's fixed queue (Eq. 20), or the 5 s rebalance for the rebalanced queue (Eq. 27).
Bin capacity C is 5/6 of the consumer's capacity C-bar, which leaves the headroom to catch up
after a rebalance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def latency_samples(stream: Sequence[Mapping[int, float]], assignments: Sequence[Mapping[int, int]],
                    consumer_capacity: float, samples_per_iteration: int = 30,
                    iteration_s: float = ITERATION_S, rebalance_s: float = REBALANCE_S) -> list[float]:
    """Latency of the bytes written at evenly spaced instants of every iteration, every queue."""
    cbar = consumer_capacity
    carry: dict[int, float] = {}  # consumer -> latency of the last byte of its fixed queue
    out: list[float] = []
    prev: Mapping[int, int] | None = None
    for speeds, assign in zip(stream, assignments):
        consumers = set(assign.values())
        new_carry: dict[int, float] = {}
        for c in consumers:
            parts = [p for p, x in assign.items() if x == c]
            moved = [p for p in parts if prev is not None and prev.get(p) != c]         # Eq. 16
            fixed = [p for p in parts if p not in moved]                                # Eq. 17
            w_f = sum(speeds[p] for p in fixed)                                         # Eq. 18
            w_r = sum(speeds[p] for p in moved)                                         # Eq. 24
            r_f = cbar if w_r == 0 else min(cbar, w_f)
            r_r = cbar - r_f
            b_f = carry.get(c, 0.0)                                                     # Eq. 20
            t_f, t_r = iteration_s * w_f, iteration_s * w_r                             # Eqs. 21, 26
            for s in range(samples_per_iteration):
                frac = s / samples_per_iteration
                if w_f > 0:
                    out.append(line_latency(r_f, w_f, frac * t_f, b_f))
                if w_r > 0:
                    out.append(line_latency(r_r, w_r, frac * t_r, rebalance_s))
            new_carry[c] = line_latency(r_f, w_f, t_f, b_f) if w_f > 0 else 0.0
        carry = new_carry
        prev = assign
    return out
