"""How a run's query triggers: a micro-batch at most every DURATION (``processing_time:DURATION``,
``0`` as fast as possible), once over what is there (``available_now``), or Spark's real-time mode
(``real_time:DURATION``: long-running tasks that process each record as it arrives, the duration
being how often they checkpoint).

DURATION is written as Spark writes it (``5 seconds``, ``500 milliseconds``, ``1 minute``) or
short (``5s``, ``500ms``, ``1min``); ``0`` alone means zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamscale.errors import ConfigError

KINDS = ("processing_time", "available_now", "real_time")
FORMS = "processing_time:DURATION, available_now or real_time:DURATION (DURATION as '5 seconds' or '500ms')"

# unit -> (seconds, Spark's name)
_UNITS = {
    "ms": (0.001, "milliseconds"),
    "millisecond": (0.001, "milliseconds"),
    "milliseconds": (0.001, "milliseconds"),
    "s": (1.0, "seconds"),
    "sec": (1.0, "seconds"),
    "second": (1.0, "seconds"),
    "seconds": (1.0, "seconds"),
    "min": (60.0, "minutes"),
    "minute": (60.0, "minutes"),
    "minutes": (60.0, "minutes"),
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


@dataclass(frozen=True)
class Trigger:
    kind: str  # one of KINDS
    duration: str = ""  # Spark's form, e.g. "5 seconds" ("" for available_now)
    seconds: float = 0.0

    @property
    def real_time(self) -> bool:
        return self.kind == "real_time"

    def writer_kwargs(self) -> dict:
        """``DataStreamWriter.trigger``'s keywords."""
        if self.kind == "available_now":
            return {"availableNow": True}
        if self.kind == "real_time":
            return {"realTime": self.duration}
        return {"processingTime": self.duration}

    def __str__(self) -> str:
        return self.kind if self.kind == "available_now" else f"{self.kind}:{self.duration}"


def parse_duration(text: str) -> tuple[str, float]:
    """(Spark's form, seconds) of a duration; ConfigError when it is none."""
    m = _DURATION.match(str(text).lower())
    if not m or (m.group(2) == "" and float(m.group(1)) != 0) or (m.group(2) and m.group(2) not in _UNITS):
        raise ConfigError(f"'{text}' is not a duration: write it as '5 seconds', '500 milliseconds', '1 minute' or 0")
    number, unit = m.group(1), m.group(2) or "s"
    scale, name = _UNITS[unit]
    shown = number.rstrip("0").rstrip(".") if "." in number else number
    return f"{shown} {name}", float(number) * scale


def parse_trigger(text: str) -> Trigger:
    """A trigger from its text (see the module's notes); ConfigError saying the forms otherwise."""
    kind, _, duration = str(text).strip().partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise ConfigError(f"trigger '{text}': use {FORMS}")
    if kind == "available_now":
        if duration.strip():
            raise ConfigError(f"trigger '{text}': available_now takes no duration")
        return Trigger(kind)
    if not duration.strip():
        raise ConfigError(f"trigger '{text}': {kind} needs a duration ({kind}:5 seconds)")
    try:
        shown, seconds = parse_duration(duration)
    except ConfigError as exc:
        raise ConfigError(f"trigger '{text}': {exc}") from None
    if kind == "real_time" and seconds <= 0:
        raise ConfigError(f"trigger '{text}': real-time mode needs a checkpoint interval above 0")
    return Trigger(kind, shown, seconds)


def processing_time(interval_s: float) -> Trigger:
    """The micro-batch trigger of an interval in seconds."""
    return Trigger("processing_time", f"{interval_s:g} seconds", float(interval_s))


def check_streams(trigger: Trigger) -> None:
    """A run streams for its duration: a trigger that stops at the input's end cannot load it."""
    if trigger.kind == "available_now":
        raise ConfigError(
            "trigger available_now: a run streams its load for its whole duration, and available_now stops at "
            "the input's end: use processing_time:DURATION or real_time:DURATION"
        )
