"""Offsets of the Kafka source: what ``startingOffsets`` means, and a micro-batch capped at
``maxOffsetsPerTrigger`` records spread over partitions in proportion to what each has."""

from __future__ import annotations

import json

from streamscale.errors import ConfigError

EARLIEST, LATEST = -2, -1  # in startingOffsets JSON, as in Spark's connector


def parse_starting(spec: str, topics: tuple[str, ...]) -> dict | str:
    s = spec.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    try:
        parsed = json.loads(s)
    except ValueError:
        raise ConfigError(
            'startingOffsets must be \'earliest\', \'latest\' or JSON like {"topic": {"0": 23, "1": -2}}'
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ConfigError('startingOffsets JSON must look like {"topic": {"0": 23, "1": -2}}')
    unknown = set(parsed) - set(topics)
    if unknown:
        raise ConfigError(f"startingOffsets names topics not subscribed: {sorted(unknown)}")
    return parsed


def limit_offsets(start: dict, end: dict, max_rows: int) -> dict:
    """Cap a batch at ``max_rows`` records, spread over partitions in proportion to what is available."""
    avail = {(t, p): end[t][p] - start.get(t, {}).get(p, 0) for t in end for p in end[t]}
    total = sum(v for v in avail.values() if v > 0)
    if total <= max_rows:
        return end
    take = {k: (v * max_rows) // total if v > 0 else 0 for k, v in avail.items()}
    left = max_rows - sum(take.values())
    for k in sorted(avail, key=lambda k: avail[k] - take[k], reverse=True):
        if left <= 0:
            break
        extra = min(left, avail[k] - take[k])
        if extra > 0:
            take[k] += extra
            left -= extra
    out: dict = {}
    for (t, p), n in take.items():
        out.setdefault(t, {})[p] = start.get(t, {}).get(p, 0) + n
    return out
