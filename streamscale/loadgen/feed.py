"""What a run's load generators write, as one kind of thing: a feed per input topic.

Theodolite's sensor readings, records a user describes or replays, UC4's readings of its registry's
sensors and each of a job's several inputs are each a :class:`Feed`: its topic (named after the
run's input), its records, its share of the load, its partitions, the inputs its records refer to
and whether the job reads it. A pipeline says its feeds (``Pipeline.feeds``); the generators, the
lag and the drain read every feed the same way, with no question of which kind it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscale.errors import ConfigError


@dataclass(frozen=True)
class Feed:
    """One input topic's load. ``name``: "" for a run's one input topic, else the input's name
    (its topic is ``BASE.NAME``). ``records``: a RecordsSpec, None for sensor readings. ``keys``:
    a number of keys the pipeline fixes (UC4's registered sensors), so that the rate sets how often
    each sends, not how many there are."""

    name: str = ""
    records: object = None
    share: float = 1.0
    partitions: int | None = None  # its topic's (None: the run's own number)
    refs: tuple[str, ...] = ()  # the feeds its records refer to (ref:), launched before it
    read: bool = True  # the job reads it: its lag is judged and drained (else only generated)
    keys: int | None = None

    def topic(self, base: str) -> str:
        """Its topic in a run whose input topic is named ``base``."""
        return f"{base}.{self.name}" if self.name else base

    def shape(self, rate: float | None, sensors: int, period_s: float) -> tuple[int, float]:
        """(keys, period_s) its generator runs with at a load of ``rate`` records/s in all (None:
        ``sensors`` keys, each sending once per ``period_s``): its share of the rate spread over its
        keys (described records: one key per record a second)."""
        mine = None if rate is None else rate * self.share
        if self.keys is not None:
            return self.keys, (self.keys / mine if mine else period_s)
        if mine is None:
            return sensors, period_s
        if not mine >= 1:
            whose = f"input {self.name} ({self.share:g} of {rate:g} records/s): " if self.name else ""
            raise ConfigError(f"{whose}rate must be at least 1 record/s, not {mine:g}")
        if self.records is not None:
            return int(round(mine)), 1.0
        return max(1, int(round(mine * period_s))), period_s

    def backlog(self, records: int) -> int:
        """Its part of a backlog of ``records`` in all (at least one record)."""
        return max(1, round(records * self.share))
