"""A/B measurements of the benchmark scripts: variants alternate run by run, so that a drift of
the machine (its load, its clock speed) falls on every variant alike."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def alternate(
    repeat: int, variants: dict[str, dict], measure: Callable[[dict], dict], label: str
) -> list[tuple[str, dict[str, str]]]:
    """``measure(env)`` for every variant (name -> environment) in turn, ``repeat`` times; each run's
    figures on stderr as they come. -> (variant, {figure: "median (min-max)"}) per variant."""
    got: dict[str, list[dict]] = {name: [] for name in variants}
    for i in range(repeat):
        for name, env in variants.items():
            got[name].append(measure(env))
            print(f"{label}, {name} {i + 1}/{repeat}: {got[name][-1]}", file=sys.stderr)
    return [(name, {k: summary([r[k] for r in runs]) for k in runs[0]}) for name, runs in got.items()]
