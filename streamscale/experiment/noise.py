"""What an experiment competed with, and how fast the machine was around it.

On one machine the load generator and the broker share the CPUs with the Spark job they measure,
and the machine's own speed drifts (15-30 % from one minute to the next, measured here). So every
experiment records, beside its verdicts:

* the CPU time the Spark application (its JVM and every process it started), the broker and the
  generator took while the load ran, and the steal time of the machine (Linux ``/proc``);
* the machine's speed just before and just after the run (:func:`machine_speed`): a fixed
  pure-Python loop, timed on an otherwise idle machine, in loops per second.

A run whose speed before or after differs from the mean of the execution's readings before it by
more than :data:`DRIFT_LIMIT`, or whose speed after differs from its speed before by more, was
taken on a machine that drifted: its verdict stands, and the results say so, except a failure to
keep up smaller than the machine's slowdown around it
(streamscale.benchmark.verdict.slowdown_explains).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamscale.experiment.cpus import process_tree
from streamscale.processes import stat_fields

DRIFT_LIMIT = 0.1  # relative change of the calibration loop's speed that marks a run as drifted
# A run whose slower reading is this much below the fastest the execution has read ran in one of the
# machine's slow phases: on this machine kind the loop reads ~12-15 million loops/s in them and
# ~18-22 million otherwise, each phase lasting minutes.
SLOW_PHASE = 0.25
_LOOP = 200_000  # iterations of the calibration loop: ~10-20 ms on this kind of machine
# Some machines of this kind flip between two speeds every 0.5-3 s (the loop at ~9 and at 15-17
# million loops/s, 43 % of 171 readings 0.5 s apart slow). A run's slowest calibration, one before
# and one after, against the execution's first then read it over 20 % slower in 30 % of runs
# (excusing loads that 20 % of the load piled up on); the mean of its readings, each the mean of 3
# calibrations 0.4 s apart, against the mean of the readings before it, in 2 % (tests/experiment).
READINGS = 3
READING_GAP_S = 0.4
READING_ROUNDS = 4


def calibration_speed(rounds: int) -> float:
    """Loops per second of a fixed CPU-bound loop, the fastest of ``rounds`` (the fastest round is
    the one least disturbed by other work)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        x = 0
        for i in range(_LOOP):
            x = (x * 31 + i) & 0xFFFF
        best = min(best, time.perf_counter() - t)
    return _LOOP / best


def machine_speed(readings: int = READINGS, gap_s: float = READING_GAP_S) -> float:
    """The machine's speed around now: the mean of ``readings`` calibrations ``gap_s`` apart (each
    :func:`calibration_speed` of READING_ROUNDS rounds), so that a machine that flips between two
    speeds from one second to the next reads as its mix, as a run of a minute sees it."""
    speeds = []
    for i in range(readings):
        if i:
            time.sleep(gap_s)
        speeds.append(calibration_speed(READING_ROUNDS))
    return sum(speeds) / len(speeds)


class SpeedLog:
    """An execution's readings of the machine's speed, before and after each run, and the
    reference a run's readings are judged against: the mean of the readings before its end, its
    own before among them (a machine whose speed flips is its mix, not whichever phase the
    execution's first reading caught). ``read``: how a reading is taken (:func:`machine_speed`)."""

    def __init__(self, read: Callable[[], float] | None = None):
        self.readings: list[float] = []
        self.read = read

    def _take(self) -> float:
        # machine_speed looked up when read, not when the log is made (a test replaces it then)
        self.readings.append((self.read or machine_speed)())
        return self.readings[-1]

    def before(self) -> float:
        """Read the speed before a run; the reference from here to its end includes it."""
        return self._take()

    def reference(self) -> float:
        return sum(self.readings) / len(self.readings) if self.readings else float("nan")

    def after(self) -> tuple[float, float]:
        """(the run's reference, its speed after): read after the run, then kept for the next."""
        reference = self.reference()
        return reference, self._take()


def drift(reference: float, before: float, after: float) -> float:
    """The largest relative change between the reference speed and a run's speeds before and after."""
    if not (reference > 0 and before > 0 and after > 0):
        return float("nan")
    return max(abs(before / reference - 1), abs(after / reference - 1), abs(after / before - 1))


def slowdown(reference: float, before: float, after: float) -> float:
    """How much slower than the reference speed the machine was around a run, at its slowest
    reading (0 when it was not slower; NaN without readings)."""
    if not (reference > 0 and before > 0 and after > 0):
        return float("nan")
    return max(0.0, 1 - min(before, after) / reference)


def run_slowdown(reference: float, before: float, after: float) -> float:
    """How much slower than the reference speed the machine ran over a run, on average: the mean
    of its readings before and after against the reference (0 when not slower; NaN without
    readings). Its slowest reading would take a phase that began as the run ended, or a flip of
    a second, for the whole run."""
    if not (reference > 0 and before > 0 and after > 0):
        return float("nan")
    return max(0.0, 1 - (before + after) / 2 / reference)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads) so far; None once it ended."""
    try:
        fields = stat_fields(pid)
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int | None) -> dict[int, float]:
    """CPU seconds so far of ``root`` and each of its descendants."""
    if root is None:
        return {}
    out = {}
    for pid in process_tree(root):
        s = cpu_seconds(pid)
        if s is not None:
            out[pid] = s
    return out


def steal_ticks() -> tuple[int, int] | None:
    """(steal, total) CPU ticks of the machine since boot, from /proc/stat."""
    try:
        fields = [int(x) for x in open("/proc/stat").read().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    return fields[7], sum(fields[:8])


@dataclass
class Share:
    """CPU of the run's competitors, as percent of one CPU, and the machine's steal time (% of all)."""

    spark_cpu_pct: float = float("nan")
    broker_cpu_pct: float = float("nan")
    steal_pct: float = float("nan")


class CpuMeter:
    """CPU taken by the Spark application's process tree and the broker's processes between
    ``start()`` and ``stop()``."""

    def __init__(self, spark_pid: int | None, broker_pids: list[int] | None = None, executor_parents=()):
        """``executor_parents``: a cluster's worker daemons here (hosts of their own), whose
        descendants are the application's executors and their Python workers: counted with it."""
        self.spark_pid = spark_pid
        self.broker_pids = list(broker_pids or [])
        self.executor_parents = list(executor_parents)
        self._t0 = 0.0

    def _spark_cpu(self) -> dict[int, float]:
        """CPU seconds so far of the driver's process tree and of each worker's descendants."""
        out = tree_cpu(self.spark_pid)
        for parent in self.executor_parents:
            out.update({pid: s for pid, s in tree_cpu(parent).items() if pid != parent})
        return out

    def start(self) -> CpuMeter:
        self._t0 = time.monotonic()
        self._spark = self._spark_cpu()
        self._broker = {p: cpu_seconds(p) for p in self.broker_pids}
        self._steal = steal_ticks()
        return self

    def stop(self) -> Share:
        wall = time.monotonic() - self._t0
        if wall <= 0:
            return Share()
        spark = self._spark_cpu()
        # a process started during the run counts from 0; one that ended is lost (Spark reuses its
        # Python workers, so few end)
        spark_s = sum(s - self._spark.get(pid, 0.0) for pid, s in spark.items()) if spark else float("nan")
        broker_s = 0.0
        for p, before in self._broker.items():
            after = cpu_seconds(p)
            if before is None or after is None:
                broker_s = float("nan")
                break
            broker_s += after - before
        if not self.broker_pids:
            broker_s = float("nan")
        steal = steal_ticks()
        steal_pct = float("nan")
        if steal and self._steal and steal[1] > self._steal[1]:
            steal_pct = 100.0 * (steal[0] - self._steal[0]) / (steal[1] - self._steal[1])
        return Share(100.0 * spark_s / wall, 100.0 * broker_s / wall, steal_pct)
