"""What the lag rule decides, and how soon, on troughs that wander as a real query's do.

    .venv/bin/python benchmarks/lag_rule.py [--series 40] [--rho 0.93] [--wander 0.25] [--load 10000]

Synthetic lags after each commit of a query committing every 0.5 s: troughs that wander as AR(1)
noise (lag-1 autocorrelation ``--rho``, stationary deviation ``--wander`` seconds of input) around a
line growing by a share of the load per second. For each growth, run length (its steady span) and
limit (the SLO's 1 % and the search's 3.75 % and 5 %), how many of ``--series`` series pass, fail
or stay undecided: by the rule as it is (the band of the troughs, then the slope's interval at a
late look's confidence, 99.9 %) and by the slope's interval alone. A growth over the limit should
never pass, one under it never fail.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import numpy as np

from streamscale.experiment.slo import Trend, fit

GROWTHS = (0.0, 0.005, 0.01, 0.02, 0.0375, 0.05, 0.1, 0.2)
SPANS = (30, 60, 120, 300)
LIMITS = (0.01, 0.0375, 0.05)


def troughs(seconds: float, load: float, growth: float, rho: float, wander_s: float, seed: int):
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.5)
    sd, e = wander_s * load, np.zeros(len(t))
    e[0] = rng.normal(0, sd)
    for i in range(1, len(t)):
        e[i] = rho * e[i - 1] + rng.normal(0, sd * math.sqrt(1 - rho**2))
    return t, np.maximum(2 * sd + growth * load * t + e, 0.0)


def verdicts(args, growth: float, span: float, limit: float, alone: bool) -> dict:
    counts = {"pass": 0, "fail": 0, "undecided": 0}
    for seed in range(args.series):
        t, y = troughs(span, args.load, growth, args.rho, args.wander, seed)
        trend = dataclasses.replace(fit(t, y, "batches"), commits=(tuple(t), tuple(y)), start_s=float(t[0]))
        if alone:  # the slope's interval alone, as the rule was before the band
            trend = dataclasses.replace(trend, basis="alone")
        counts[Trend.verdict(trend, limit * args.load, 0.999)] += 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=40)
    ap.add_argument("--rho", type=float, default=0.93)
    ap.add_argument("--wander", type=float, default=0.25)
    ap.add_argument("--load", type=float, default=10_000.0)
    args = ap.parse_args()
    print(f"{args.series} series each, troughs autocorrelated {args.rho}, wandering {args.wander} s of input; "
          "pass / fail / undecided by span", flush=True)  # fmt: skip
    for limit in LIMITS:
        for alone in (False, True):
            how = "slope interval alone" if alone else "the rule (band, then interval)"
            print(f"limit {limit:.2%} of the load, {how}:")
            for growth in GROWTHS:
                cells = []
                for span in SPANS:
                    c = verdicts(args, growth, span, limit, alone)
                    cells.append(f"{span:>3} s {c['pass']:>2}/{c['fail']:>2}/{c['undecided']:>2}")
                print(f"  growth {growth:>6.2%}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    from _main import run

    run(main)
