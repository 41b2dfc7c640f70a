"""Sequential testing with an error that stays at its nominal level however often a run is looked at.

A run is looked at every few seconds from its shortest duration on, and stops as soon as its lag
trend's interval clears the limit. Looking many times at a 95 % interval decides wrongly far more
often than 5 % of the time; so the error is spent (alpha spending, in Haybittle and Peto's
manner): the looks before a run's longest duration share a quarter of it equally, each deciding at
the two-sided level (alpha / 4) / K for its K planned looks; the verdict at the longest duration
decides at what the looks left, alpha minus what they spent (at least three quarters of it). By
the union bound the chance that any look decides wrongly is at most alpha; the early looks are
strict, and a run that goes the whole way is judged at close to the nominal level (96.25 % for
alpha 0.05, where a single 95 % look would be 95 %).

Student's t quantiles at any level come from its distribution function, exact for whole degrees
of freedom (Abramowitz and Stegun 26.7.3-4), inverted by bisection.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05  # the nominal error of a run's verdict, all looks together


def t_coverage(x: float, df: int) -> float:
    """P(|T| <= x) for Student's t with ``df`` (whole) degrees of freedom."""
    if x <= 0:
        return 0.0
    theta = math.atan(x / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # odd
        if df == 1:
            return 2 * theta / math.pi
        term, total = c, c
        for k in range(3, df - 1, 2):  # c (1 + 2/3 c^2 + 2*4/(3*5) c^4 + ...)
            term *= c * c * (k - 1) / k
            total += term
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 c^2 + 1*3/(2*4) c^4 + ...
        term *= c * c * (k - 1) / k
        total += term
    return s * total


@functools.lru_cache(maxsize=4096)
def t_quantile(df: int, confidence: float = 0.95) -> float:
    """The x with P(|T| <= x) = ``confidence`` (a two-sided interval's half-width in errors)."""
    if df <= 0 or confidence >= 1:
        return float("inf")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if df > 1000:
        return z
    lo, hi = z, z
    while t_coverage(hi, df) < confidence:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_coverage(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * hi:
            break
    return (lo + hi) / 2


INTERIM_SHARE = 0.25  # of alpha, for all the looks before the longest duration together


@dataclass
class Looks:
    """The looks at one run, from ``first_s`` every ``every_s`` until ``longest_s``: each
    :meth:`confidence` spends its share of the error, :meth:`final_confidence` the rest."""

    longest_s: float
    first_s: float
    every_s: float
    alpha: float = ALPHA
    taken: int = 0

    @property
    def planned(self) -> int:
        """Looks before the longest duration: at first_s, first_s + every_s, ... < longest_s."""
        if self.first_s >= self.longest_s or self.every_s <= 0:
            return 0
        return int(math.ceil((self.longest_s - self.first_s) / self.every_s - 1e-9))

    def per_look(self) -> float:
        return INTERIM_SHARE * self.alpha / max(1, self.planned)

    def confidence(self) -> float:
        """The two-sided confidence of the next look before the longest duration (recorded)."""
        self.taken += 1
        return 1 - self.per_look()

    def spent(self) -> float:
        return min(self.taken, max(1, self.planned)) * self.per_look()

    def final_confidence(self) -> float:
        """The verdict at the longest duration: whatever error the looks left."""
        return 1 - (self.alpha - self.spent())
