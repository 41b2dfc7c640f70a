"""`streamscale report RESULTS_DIR`: one self-contained HTML page per benchmark execution.

The page opens with the answer (one sentence, demand per load, capacity per resource amount, the
metric plot), then the details: the metric table, every experiment's lag plot with its trend and SLO
verdicts (invalid experiments flagged with the reason), the environment the execution ran in and
the spec. Experiments are read typed (:mod:`.results`).
"""

from __future__ import annotations

import csv
import html
import json
import math
import time
from pathlib import Path

from streamscale.benchmark.results import FILE_NAME, read_results
from streamscale.benchmark.units import approx
from streamscale.errors import ConfigError
from streamscale.observe.html import html_table, img_tag, page_head, page_tail


def answer_section(summary: dict) -> list[str]:
    """The opening: the sentence, demand per load and capacity per resource amount."""
    a = summary.get("answer")
    if not a:
        return ["<p><em>no answer recorded (an unfinished execution, or results without summary.json)</em></p>"]
    load_col = summary.get("load_label", "load")
    res_col = summary.get("resource_label", "resources")

    def rate(v):
        return "—" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:g}"

    demand = [
        {
            **({"configuration": r["config"]} if "config" in r else {}),
            load_col: rate(r["rate"]),
            res_col: r["resources"] if r["resources"] is not None else "more than tested",
        }
        for r in a.get("demand", [])
    ]
    capacity = [
        {
            **({"configuration": r["config"]} if "config" in r else {}),
            res_col: r["resources"],
            f"highest {load_col} held": rate(r["rate"])
            # a lower bound taken over from fewer resources: every higher load failed, this one was not run
            + (" (not run: assumed from fewer resources)" if r.get("assumed") else ""),
        }
        for r in a.get("capacity", [])
    ]
    for table, given in ((demand, a.get("demand", [])), (capacity, a.get("capacity", []))):
        if any(r.get("processing_ms") for r in given):  # the latency where each was held
            for row, r in zip(table, given, strict=True):
                row["processing p50 / p95 / p99"] = _percentiles(r)
    sentence = f'<p class="answer" style="font-size:1.25em"><strong>{html.escape(a["sentence"])}.</strong></p>'
    if a.get("brackets"):
        # why a search stopped short (the generator's limit, the highest load allowed): below the
        # table, so that its rows stay one line each
        ceilings = [
            f"{b.get('config') + ', ' if b.get('config') else ''}{b['resources']} {res_col}: {b['ceiling']}"
            for b in a["brackets"]
            if b.get("failed") is None and b.get("ceiling")
        ]
        return [
            sentence,
            "<h2>Capacity per resource amount</h2>",
            html_table(_bracket_rows(a, load_col, res_col), "brackets"),
            *(f"<p>— untested above the load held: {html.escape(c)}.</p>" for c in ceilings),
        ]
    return [
        sentence,
        '<div style="display:flex;gap:3em"><div><h2>Demand per load</h2>',
        html_table(demand, "demand"),
        "</div><div><h2>Capacity per resource amount</h2>",
        html_table(capacity, "capacity"),
        "</div></div>",
    ]


def _bracket_rows(a: dict, load_col: str, res_col: str) -> list[dict]:
    """A bracket search's table: both ends per resource amount, how far apart, what Spark had."""

    def rate(v):
        return "—" if v is None else f"{v:,.0f}"

    rows = []
    for b in a["brackets"]:
        failed = rate(b.get("failed_rate"))
        if b.get("failed_undecided"):
            failed += " (undecided)"
        elif b.get("failed") is None and b.get("ceiling"):
            failed = "— (untested, below)"
        rows.append(
            {
                **({"configuration": b["config"]} if "config" in b else {}),
                res_col: b["resources"],
                f"highest {load_col} held": rate(b.get("held_rate"))
                + (" (not run: as fewer resources)" if b.get("held_assumed") else ""),
                f"lowest {load_col} failed": failed,
                "apart": "—" if b.get("width") is None else f"{b['width']:.0%}",
                "runs": b.get("runs", ""),
                "processing p50 / p95 / p99 held": _percentiles(b),
                "CPUs Spark used": "—" if b.get("spark_cpus") is None else f"{b['spark_cpus']:.2f}",
                "CPU-s per million records held": per_million(b),
                "deciding runs on a drifting machine": b.get("ends_drifted", 0),
            }
        )
    return rows


def _percentiles(b: dict) -> str:
    """The processing latency's percentiles at the held end, and where they were read."""
    p = b.get("processing_ms") or {}
    if not p:
        return "—"
    text = " / ".join(_duration_ms(p[k]) if k in p else "—" for k in ("p50", "p95", "p99"))
    return text + (" (at the output topic)" if b.get("latency_at") == "output" else "")


def per_million(b: dict) -> str:
    """Spark's CPU-seconds per million records at the held end, with the runs' range."""
    mid, span = b.get("cpu_s_per_million"), b.get("cpu_s_per_million_range")
    if mid is None:
        return "—"
    if not span or span[0] == span[1]:
        return _num(mid)
    return f"{_num(mid)} ({_num(span[0])}–{_num(span[1])})"


# the experiments table: the columns a reader compares across experiments, formatted for a person;
# every other figure is in experiments.csv, linked beside the table
def _num(x, digits: int = 3) -> str:
    """A figure with thousands separated and at most ``digits`` significant digits (— when unknown)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return approx(float(x)) if abs(x) >= 1 or x == 0 else f"{x:.{digits}g}"


def _duration_ms(x) -> str:
    """A latency or a batch time: ms below a second, else s, three significant digits at most."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{_num(x)} ms" if abs(x) < 1000 else f"{_num(x / 1000)} s"


def _with_limit(value: str, limit: str) -> str:
    return value if limit == "—" or limit.startswith("—") else f"{value} (limit {limit})"


def _experiment_row(e, configs: bool) -> dict:
    row = {"configuration": e.config} if configs else {}
    row.update(
        {
            "load (records/s)": _num(e.target_rate),  # what the run's plan had its generators send
            "resources": e.resources,
            "verdict": e.verdict or ("pass" if e.passed else "fail"),
            "lag trend": _with_limit(f"{_num(e.lag_slope)}/s", f"{_num(e.lag_limit)}/s"),
            "processing p95": _with_limit(_duration_ms(e.processing_p95_ms), _duration_ms(e.processing_limit_ms)),
            "median batch": _duration_ms(e.median_batch_ms),
            "run": f"{_num(e.ran_s)} s" if math.isfinite(e.ran_s) else "—",
            "machine drift": "—" if not math.isfinite(e.drift) else f"{e.drift:.0%}",
        }
    )
    return row


_METRIC_HEADERS = {
    "config": "configuration",
    "width": "apart",
    "failed_undecided": "failed end undecided",
    "held_assumed": "held as fewer resources (not run)",
}


def _metric_cell(key: str, value: str) -> str:
    """A cell of the metric table (summary.csv's text) for a person: loads with separators, the
    width as a percentage, yes or no."""
    if value in ("", "none of the tested amounts"):
        return value or "—"
    if value in ("True", "False"):
        return "yes" if value == "True" else "no"
    try:
        x = float(value)
    except ValueError:
        return value
    if key == "width":
        return f"{x:.0%}"
    return _num(x)


def write_report(results_dir: Path) -> Path:
    d = Path(results_dir)
    if not (d / FILE_NAME).exists() and not (d / "summary.json").exists():
        raise ConfigError(f"{d} is not a benchmark results directory (no experiments.csv or summary.json)")
    spec_text = (d / "spec.yaml").read_text() if (d / "spec.yaml").exists() else "(spec.yaml missing)"
    summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    env = json.loads((d / "environment.json").read_text()) if (d / "environment.json").exists() else {}
    experiments = read_results(d)
    metric_rows = list(csv.DictReader(open(d / "summary.csv"))) if (d / "summary.csv").exists() else []
    metric_rows = [{_METRIC_HEADERS.get(k, k): _metric_cell(k, v) for k, v in r.items()} for r in metric_rows]
    kind = summary.get("metric", "demand")
    title = summary.get("name", d.name)
    parts = [
        page_head(f"{title}: streamscale report"),
        f"<h1>{html.escape(title)}</h1>",
        *answer_section(summary),
        f"<h2>Details</h2><p>{'Resource demand' if kind == 'demand' else 'Load capacity'} searched · "
        f"{len(experiments)} experiments · {sum(1 for e in experiments if not e.valid)} invalid · "
        + (f"Kafka connector: {html.escape(str(summary['connector']))} · " if summary.get("connector") else "")
        + f"report written {time.strftime('%Y-%m-%d %H:%M:%S')}</p>",
        "<h3>Metric as searched</h3>",
        html_table(metric_rows, "metric"),
    ]
    plot = d / ("demand.png" if kind == "demand" else "capacity.png")
    if plot.exists():  # the picture of the answer, right below it
        parts.insert(3, img_tag(plot, f"{kind} plot"))
    configs = any(e.config for e in experiments)
    parts += [
        "<h2>Experiments</h2>",
        f'<p>The figures a reader compares; every other one is in <a href="{FILE_NAME}">{FILE_NAME}</a>.</p>',
        html_table([_experiment_row(e, configs) for e in experiments], "experiments"),
    ]
    for e in experiments:
        parts += _experiment_section(e, d)
    parts += [
        "<h2>Environment</h2>",
        html_table([{"key": k, "value": v} for k, v in env.items()], "environment")
        if env
        else "<p><em>environment.json missing: where it ran was not recorded</em></p>",
        "<h2>Spec</h2>",
        f"<pre>{html.escape(spec_text)}</pre>",
        page_tail(),
    ]
    out = d / "report.html"
    out.write_text("\n".join(parts))
    return out


def _experiment_section(e, d: Path) -> list[str]:
    """One experiment's part of the page: its verdict, latency, lag trend and lag plot."""
    verdict = e.verdict or ("pass" if e.passed else "fail")
    parts = [
        f'<div class="exp" id="{html.escape(e.exp_id)}"><h3>{html.escape(e.exp_id)} '
        f'<span class="{verdict}">{verdict.upper()}</span></h3>'
    ]
    if math.isfinite(e.processing_p95_ms):
        end = "the output record's" if getattr(e, "latency_at", "commit") == "output" else "the batch's commit"
        p99 = getattr(e, "processing_p99_ms", math.nan)
        parts.append(
            f"<p>processing latency (Kafka timestamp to {end}): "
            f"p50 {_duration_ms(e.processing_p50_ms)}, p95 {_duration_ms(e.processing_p95_ms)}"
            + (f", p99 {_duration_ms(p99)}" if math.isfinite(p99) else "")
            + (f" (limit {_duration_ms(e.processing_limit_ms)})" if math.isfinite(e.processing_limit_ms) else "")
            + (f", trend {_num(e.processing_trend)} ms/s" if math.isfinite(e.processing_trend) else "")
            + f"; the run took {_num(e.ran_s)} s</p>"
        )
    if not e.valid:
        parts.append(f'<p class="invalid">INVALID: {html.escape(e.note or "no reason recorded")}</p>')
    interval = (
        f" [{_num(e.lag_low)}, {_num(e.lag_high)}] through "
        f"{'the batch commits' if e.lag_basis == 'batches' else '1 s samples'}"
        + (f" from {_num(e.trend_from_s)} s" if math.isfinite(e.trend_from_s) else "")
        + (f", the jump of every {e.lag_period_s:g} s window period fitted out" if e.lag_period_s else "")
        if math.isfinite(e.lag_low)
        else ""
    )
    parts.append(
        f"<p>lag trend {_num(e.lag_slope)} records/s{interval} (limit {_num(e.lag_limit)}): "
        f"lag SLO {_lag_word(e)}; "
        f"dropped {e.dropped:,} (SLO {'met' if e.dropped_slo else 'violated'})</p>"
    )
    lag_png = d / "lag" / f"{e.exp_id}.png"
    parts.append(
        img_tag(lag_png, f"lag of {e.exp_id}")
        if lag_png.exists()
        else "<p><em>no lag plot (experiment resumed from an older run?)</em></p>"
    )
    parts.append("</div>")
    return parts


def _lag_word(e) -> str:
    """What the run's lag trend says of its SLO, in the run's own words: an interval that still
    straddled the limit decided nothing, said as the run's note says it (which names the interval
    judged where it is wider than the 95 % one beside it; rows of an older streamscale: met or
    violated)."""
    if e.lag_verdict == "undecided":
        said = next((part for part in (e.note or "").split("; ") if part.startswith("lag ")), "")
        return f"undecided ({html.escape(said) if said else 'its interval straddles the limit'})"
    return "met" if e.lag_slo else "violated"
