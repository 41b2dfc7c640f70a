"""Theodolite's run lengths for re-checking a search's answer: the same spec at given loads on one
resource amount, every run whole and once (no early stop, no added runs, a session of its own)."""

from __future__ import annotations

import json


def long_spec(spec: dict, resources: int, loads: list[float], seconds: float, warmup: float, name: str) -> dict:
    """``spec`` re-checking ``loads`` on ``resources``: every run ``seconds`` long after ``warmup``,
    once; the execution named ``name``."""
    spec = json.loads(json.dumps(spec))
    spec["execution"].update(
        load={**spec["execution"]["load"], "values": sorted(loads)},
        resources={**spec["execution"]["resources"], "values": [resources]},
        duration_s=seconds,
        warmup_s=warmup,
        min_duration_s=None,
        repetitions=1,
        stop_at_majority=False,
        extra_repetitions=0,
        strategy={"name": "full", "lower_bound": False},
        metric="demand",
        reuse_spark=False,
    )
    spec["name"] = name
    return spec
