"""An experiment's line on the console: its verdict and the figures that decided it."""

from __future__ import annotations

import math

from rich.markup import escape

from streamscale.benchmark.results import ExperimentResult, failed_without_output
from streamscale.benchmark.sloregistry import run_line_words

_COLOUR = {"pass": "green", "fail": "red", "undecided": "yellow", "invalid": "red"}


def run_line(
    r: ExperimentResult,
    latency_limit_ms: float | None = None,
    duration_s: float | None = None,
    cut: bool = False,
) -> str:
    """One experiment's line: its verdict and the figures that decided it (unmeasured ones left out);
    a run that went on past its ``duration_s`` because it was undecided there says so, and one a
    time budget ended (``cut``), before its longest, says that."""
    colour = _COLOUR.get(r.verdict, "red")
    if math.isnan(r.lag_slope) and r.note:  # nothing measured: Spark's JVM died under the load
        return f"  [{colour}]{r.verdict.upper()}[/] {escape(r.note)}, after {r.ran_s:.0f} s"
    parts = [
        f"  [{colour}]{r.verdict.upper()}[/] lag slope {r.lag_slope:,.1f}/s [{r.lag_low:,.1f}, {r.lag_high:,.1f}] "
        f"(limit {r.lag_limit:,.0f})"
    ]
    if math.isfinite(r.processing_p95_ms):
        limit = f" (limit {r.processing_limit_ms:,.0f})" if math.isfinite(r.processing_limit_ms) else ""
        text = f"processing p95 {r.processing_p95_ms:,.0f} ms{limit}"
        parts.append(text if r.processing_slo else f"[red]{text}[/]")
    elif not r.processing_slo:
        parts.append("[red]no record processed after the warm-up (processing latency SLO)[/]")
    if r.processing_growing:  # a fail of its own, which no other figure on the line shows
        parts.append(
            f"[red]processing latency growing {r.processing_trend:,.0f} ms per s "
            f"[{r.processing_trend_low:,.0f}, {r.processing_trend_high:,.0f}][/]"
        )
    out = _output_latency_text(r, latency_limit_ms)
    if out:
        parts.append(out)
    parts.append(f"dropped {r.dropped:,}" if r.dropped_slo else f"[red]dropped {r.dropped:,}[/]")
    parts += [f"[red]{escape(words)}[/]" for words in run_line_words(r.slo_verdicts)]  # registered SLOs' own
    if math.isfinite(r.median_batch_ms):
        parts.append(f"median batch {r.median_batch_ms:,.0f} ms")
    if math.isfinite(r.ran_s):
        parts.append(f"{r.ran_s:.0f} s run{_extension(r, duration_s, cut)}")
    if math.isfinite(r.spark_cpu_pct):
        parts.append(f"Spark {r.spark_cpu_pct / 100:.1f} CPUs")
    gen = f"generator {r.generator_rate:,.0f}/s"
    if math.isfinite(r.generator_cpu_pct):
        gen += f" ({r.generator_cpu_pct:.0f} % of a CPU)"
    parts.append(gen)
    if math.isfinite(r.machine_cpu_pct):
        parts.append(f"machine {r.machine_cpu_pct:.0f} % busy")
    line = ", ".join(parts)
    if r.drifted:
        line += f" [yellow](machine speed moved {r.drift:.0%})[/]"
    if not r.valid:
        line += " [red]INVALID[/]"
    if r.note and (r.verdict in ("undecided", "invalid") or not r.valid or r.note.startswith("stalled:")):
        line += f": {escape(r.note)}"  # why it decided nothing, or why a trend that held failed
    return line


def _output_latency_text(r: ExperimentResult, limit: float | None) -> str:
    """The run's p95 output latency (windowed UCs), with the limit where it is an SLO."""
    if limit is not None and failed_without_output(r):
        return "[red]no output row after the warm-up (no p95 output latency)[/]"
    if math.isnan(r.latency_p95_ms):
        return ""
    text = f"output p95 latency {r.latency_p95_ms:,.0f} ms"
    if limit is None:
        return text
    bound = f"limit {limit:,.0f}" if r.latency_slo else f"[red]limit {limit:,.0f}[/]"
    return f"{text} ({bound})"


def _extension(r: ExperimentResult, duration_s: float | None, cut: bool = False) -> str:
    """Why a run lasted longer than its duration_s, or not as long as its longest ("" where
    neither)."""
    if cut:
        return " (undecided when the time budget ended it, before its longest)"
    if duration_s is None or not r.ran_s > duration_s + 1:
        return ""
    if math.isfinite(r.decided_s):
        return f" (undecided at {duration_s:g} s, went on until decided)"
    return f" (undecided at {duration_s:g} s, went on to its longest)"
