"""The results model: one typed row per experiment, and ``experiments.csv`` read and written here only.

The runner appends rows, resume reads them back, the report, the plots and the demo read them typed:
nobody else parses the file or compares the text ``"True"``. Rows are appended as whole lines with one
write and an fsync before the next experiment starts; a run killed while writing can still leave a
partial last line, which reading ignores and :meth:`ResultsFile.load` also cuts off the file (that
experiment runs again).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from streamscale.errors import ResultsError

FILE_NAME = "experiments.csv"

# How ``dropped`` was counted. "previous-watermark": a reading is late when its window ends at or
# before the previous micro-batch's watermark, Spark's own rule (streamscale.pipelines.accounting).
LATE_RULE = "previous-watermark"
# When a run stopped. "undecided-goes-on": a run still undecided at its duration_s went on, looked at,
# up to max_duration_s; rows without it (older files) ended undecided at duration_s, and an execution
# does not resume them (streamscale.benchmark.execution).
STOP_RULE = "undecided-goes-on"


@dataclass
class ExperimentResult:
    exp_id: str
    load: float
    resources: int
    repetition: int
    target_rate: float
    generator_rate: float
    generator_reached_target: bool
    valid: bool
    lag_slope: float
    lag_limit: float
    lag_slo: bool
    dropped: int
    dropped_fraction: float
    dropped_slo: bool
    passed: bool
    final_lag: int
    processed_records: int
    sampler_cpu_pct: float
    wall_s: float
    note: str = ""
    lag_low: float = float("nan")  # 95 % interval of the lag slope
    lag_high: float = float("nan")
    lag_basis: str = ""  # fitted through batch commits ("batches") or 1 s samples ("seconds")
    lag_verdict: str = ""  # pass | fail | undecided (interval straddles the limit)
    lag_period_s: float = 0.0  # window period fitted out of the trend (slo.fit_periodic); 0: none
    latency_p95_ms: float = float("nan")  # output latency after the warm-up (windowed UCs; 19 % buckets)
    latency_slo: bool = True  # holds, or no latency limit in the spec
    trend_from_s: float = float("nan")  # the warm-up's end: warmup_s, or later while the start-up backlog drained
    median_batch_ms: float = float("nan")  # micro-batches after the warm-up (Spark's triggerExecution)
    generator_cpu_pct: float = float("nan")  # the load generator's processes, % of one CPU over the run
    machine_cpu_pct: float = float("nan")  # all of the machine's CPUs busy while the load ran, %
    late_rule: str = LATE_RULE  # how ``dropped`` was counted (see LATE_RULE)
    # pass | fail | undecided (the lag interval still straddled its limit at the run's longest) |
    # invalid; "" in rows of an older streamscale (their ``passed`` stands)
    verdict: str = ""
    ran_s: float = float("nan")  # how long the load ran (sequential testing stops a decided run early)
    # every record's latency, Kafka timestamp to its batch's commit (at the high bound: within 50 ms)
    processing_p50_ms: float = float("nan")
    processing_p95_ms: float = float("nan")
    processing_p99_ms: float = float("nan")
    processing_max_ms: float = float("nan")
    # where a record's latency ends: "commit" (its batch's) or "output" (its output record's
    # timestamp, a real-time run's: streamscale.experiment.outlatency)
    latency_at: str = "commit"
    processing_limit_ms: float = float("nan")  # the SLO's limit on the p95 (NaN: no such SLO)
    processing_slo: bool = True
    processing_trend: float = float("nan")  # the per-batch p95's slope after the warm-up, ms per s
    processing_trend_low: float = float("nan")  # and its 95 % interval
    processing_trend_high: float = float("nan")
    # what the run competed with (streamscale.experiment.noise): % of one CPU, steal % of all CPUs
    spark_cpu_pct: float = float("nan")
    broker_cpu_pct: float = float("nan")
    steal_pct: float = float("nan")
    speed_before: float = float("nan")  # the machine's calibration loop, loops/s, just before the run
    speed_after: float = float("nan")  # and just after it
    drift: float = float("nan")  # the largest relative change against the execution's mean speed before the run
    drifted: bool = False  # drift beyond streamscale.experiment.noise.DRIFT_LIMIT
    config: str = ""  # the named configuration (execution.configs) it ran with; "": the spec names none
    delivered_rate: float = float("nan")  # records/s that reached the input topic over the fitted span
    processing_growing: bool = False  # the processing latency kept growing (a fail)
    cpu_s_per_million: float = float("nan")  # Spark's CPU-seconds per million records processed
    fault: str = ""  # what of the environment failed during the run (a broker node died): invalid
    confirms: str = ""  # a long run of a bracket's end (strategy.confirm): held, failed, or between
    # when a look found the run decided and stopped it, s into its load (NaN: none did: it ran to its
    # duration_s, or went on undecided to max_duration_s)
    decided_s: float = float("nan")
    stop_rule: str = STOP_RULE  # when the run stopped (see STOP_RULE); "" in rows of an older streamscale
    slo_verdicts: str = ""  # each SLO checker's verdict, "name=verdict" apart by spaces (streamscale.benchmark.slos)
    executors: str = ""  # on a cluster: the live executors Spark listed, "id@host (n cores)" apart by "; "
    # a host that died in the run: seconds from when the fault was seen until the lag after a commit
    # was back at or below its maximum before it (inf: not within RECOVERY_S; NaN: no such fault)
    recovery_s: float = float("nan")

    def __post_init__(self):
        if not self.verdict:  # a row of an older streamscale: its verdict as it was decided then
            self.verdict = "invalid" if not self.valid else ("pass" if self.passed else "fail")

    @property
    def key(self) -> tuple[float, int, int, str]:
        return (float(self.load), int(self.resources), int(self.repetition), self.config)


COLUMNS = [f.name for f in fields(ExperimentResult)]
_TYPES = {f.name: f.type for f in fields(ExperimentResult)}
_BOOL = {"True": True, "False": False}


def failed_without_output(r) -> bool:
    """Whether a latency SLO failed the run because no window row came out after its warm-up (so
    it has no p95 latency): its line must say why it failed, as its lag trend may be flat. Any
    object with ``latency_p95_ms`` (NaN or None when unmeasured) and ``latency_slo`` will do."""
    p95 = r.latency_p95_ms
    return (p95 is None or math.isnan(p95)) and not getattr(r, "latency_slo", True)


def exp_id(load, res, rep, config: str = "") -> str:
    return f"{config + '_' if config else ''}load{load:g}_res{res}_rep{rep}"


def _parse(row: dict, where: str) -> ExperimentResult:
    if None in row or None in row.values():
        raise ResultsError(f"{where}: a row has the wrong number of fields; move the file away to start over")
    vals = {}
    for k, v in row.items():
        t = _TYPES.get(k)
        try:
            if t is None:
                raise ValueError(f"unknown column {k!r}")
            if t in ("bool", bool):
                vals[k] = _BOOL[v]
            elif t in ("float", float):
                vals[k] = float(v)
            elif t in ("int", int):
                vals[k] = int(v)
            else:
                vals[k] = v
        except (KeyError, ValueError) as exc:
            raise ResultsError(
                f"{where}: a row cannot be read ({k}={v!r}: {exc}); move the file away to start over"
            ) from None
    try:
        return ExperimentResult(**vals)
    except TypeError as exc:  # a required column missing
        raise ResultsError(f"{where}: {exc}; move the file away to start over") from None


def _whole_lines(text: str) -> str:
    return text if not text or text.endswith("\n") else text[: text.rfind("\n") + 1]


def parse(text: str, where: str = FILE_NAME) -> list[ExperimentResult]:
    """The rows of an experiments.csv text (a partial last line is not a row)."""
    return [_parse(row, where) for row in csv.DictReader(io.StringIO(_whole_lines(text)))]


def read_results(results_dir: Path) -> list[ExperimentResult]:
    """Every experiment of a results directory (none when it has no experiments.csv)."""
    path = Path(results_dir) / FILE_NAME
    return parse(path.read_text(), str(path)) if path.exists() else []


def _csv_text(rows: list[ExperimentResult], header: bool) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    if header:
        w.writeheader()
    w.writerows(asdict(r) for r in rows)
    return buf.getvalue()


class ResultsFile:
    """``experiments.csv`` of one execution: load (repairing a torn last line) and append."""

    def __init__(self, results_dir: Path):
        self.path = Path(results_dir) / FILE_NAME

    def load(self) -> tuple[list[ExperimentResult], bool]:
        """The rows, and whether a partial last row left by an interrupted run was cut off."""
        if not self.path.exists():
            return [], False
        text = self.path.read_text()
        whole = _whole_lines(text)
        if whole != text:
            self._replace(whole)  # repaired, so that appended rows start on a line of their own
        rows = parse(whole, str(self.path))
        header = whole.split("\n", 1)[0].rstrip("\r").split(",") if whole else []
        if whole and "stop_rule" not in header:  # rows of an older streamscale: under its rule
            rows = [dataclasses.replace(r, stop_rule="") for r in rows]
        if whole and header != COLUMNS:
            # written by an older streamscale (fewer columns): rewritten with today's columns (the
            # new ones at their defaults), so that appended rows match the header
            self._replace(_csv_text(rows, header=True))
        return rows, whole != text

    def _replace(self, text: str) -> None:
        tmp = self.path.with_suffix(".csv.tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)

    def append(self, r: ExperimentResult) -> None:
        text = _csv_text([r], header=not self.path.exists())
        with open(self.path, "a", newline="") as f:
            f.write(text)  # one write of whole rows, on disk before the next experiment
            f.flush()
            os.fsync(f.fileno())
