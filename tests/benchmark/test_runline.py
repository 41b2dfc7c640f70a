"""An experiment's console line says what decided its verdict."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from streamscale.benchmark.runline import run_line
from tests.benchmark.helpers import fake_result


def _text(markup: str) -> str:
    console = Console(width=400, color_system=None)
    with console.capture() as cap:
        console.print(markup)
    return cap.get().strip()


def test_a_latency_that_kept_growing_is_on_the_line_of_the_run_it_failed():
    r = dataclasses.replace(
        fake_result(69_000, 1, 0, passed=False),
        verdict="fail",
        lag_slope=4394.657,
        lag_low=-7829.2,
        lag_high=16618.5,
        processing_p95_ms=5792.6,
        processing_limit_ms=8000.0,
        processing_trend=72.211,
        processing_trend_low=11.535,
        processing_trend_high=132.888,
        processing_growing=True,
        note="processing latency kept growing (72 ms per s)",
    )
    line = _text(run_line(r))
    assert line.startswith("FAIL lag slope 4,394.7/s [-7,829.2, 16,618.5] (limit 690), processing p95 5,793 ms")
    assert "processing latency growing 72 ms per s [12, 133]" in line
    assert "kept growing (72" not in line  # a failed run's figures say it; its note is not repeated


def test_an_undecided_or_invalid_run_says_why_and_dropped_records_over_the_limit_stand_out():
    r = dataclasses.replace(
        fake_result(69_000, 2, 0, passed=False),
        verdict="undecided",
        note="lag interval still straddles the limit after 38 s",
    )
    assert _text(run_line(r)).endswith(": lag interval still straddles the limit after 38 s")
    bad = dataclasses.replace(r, verdict="invalid", valid=False, note="the generator delivered 95,000 of [100,000]/s")
    assert _text(run_line(bad)).endswith("INVALID: the generator delivered 95,000 of [100,000]/s")
    dropped = dataclasses.replace(r, verdict="fail", dropped=700, dropped_slo=False, note="")
    assert "[red]dropped 700[/]" in run_line(dropped) and "[red]dropped" not in run_line(r)


def test_a_run_that_went_on_past_its_duration_says_so():
    r = dataclasses.replace(fake_result(20_000, 1, 0, passed=True), verdict="pass", ran_s=86.0, decided_s=86.0)
    assert "86 s run (undecided at 40 s, went on until decided)" in _text(run_line(r, duration_s=40))
    capped = dataclasses.replace(r, verdict="undecided", ran_s=300.0, decided_s=float("nan"))
    assert "300 s run (undecided at 40 s, went on to its longest)" in _text(run_line(capped, duration_s=40))
    on_time = dataclasses.replace(r, ran_s=40.2, decided_s=float("nan"))
    assert "40 s run," in _text(run_line(on_time, duration_s=40)) and "undecided at" not in run_line(on_time, None, 40)
