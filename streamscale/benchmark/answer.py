"""The answer of an execution in one sentence and two small tables, read by the runner's
summary.json, the report's opening and the demo's closing paragraph.

Resource demand (load -> fewest resources) and load capacity (resources -> highest load) are two
readings of the same verdicts: whichever metric ran, the other is derived from it under the search's
monotonicity (more resources never hurt, more load never helps), restricted to the values tested.
"""

from __future__ import annotations

import math
import re
import statistics

from streamscale.benchmark.units import Axes
from streamscale.benchmark.verdict import majority_verdict


def _who(sut: str) -> str:
    """A task sample in capitals (UC2), a user's job by its function's name as written."""
    return sut.upper() if sut.lower() in ("uc1", "uc2", "uc3", "uc4", "the sut") else sut


def answer(
    metric: dict,
    kind: str,
    axes: Axes,
    sut: str = "the SUT",
    most_resources: int | None = None,
    assumed: set | frozenset = frozenset(),
    rows=(),
    config: str = "",
) -> dict:
    """{"sentence", "demand": [{load, rate, resources}], "capacity": [{resources, load, rate, assumed}]}.

    ``metric`` is what the search returned: {load: resources | None} for demand,
    {resources: load | None} for capacity. ``most_resources``: the largest amount tested (said
    for loads that no tested amount held). ``assumed``: resource amounts whose capacity no
    experiment ran (see :func:`assumed_capacities`). ``rows``: the experiments (of ``config``), by
    which a load no amount held is said to need more than ``most_resources`` only where its runs
    there failed (not where they stayed undecided or fell short of the load).
    """
    demand, capacity = _both_metrics(metric, kind)
    mine = [r for r in rows if getattr(r, "config", "") == config]
    demand_rows = [
        {"load": k, "rate": axes.rate(k), "resources": v, **held_latency(_on(mine, v), k)}
        for k, v in sorted(demand.items())
    ]
    capacity_rows = [
        {
            "resources": r,
            "load": v,
            "rate": None if v is None else axes.rate(v),
            "assumed": r in assumed,
            **held_latency(_on(mine, r), v),
        }
        for r, v in sorted(capacity.items())
    ]
    held = [(r, v) for r, v in sorted(capacity.items()) if v is not None]
    # a resource amount whose capacity equals a smaller amount's adds nothing to the sentence
    steps = [(r, v) for i, (r, v) in enumerate(held) if i == 0 or held[i - 1][1] != v]
    if steps:
        parts = [f"{axes.resources(r)} up to {axes.amount(v)}" for r, v in steps]
        sentence = f"{_who(sut)} needs " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
    else:
        sentence = f"{_who(sut)} met its SLOs at none of the tested points"
    beyond = [k for k, v in sorted(demand.items()) if v is None]
    if beyond and most_resources:
        most = axes.resources(most_resources)
        unsure = _not_failed(beyond, rows, most_resources, config)
        failed = [k for k in beyond if k not in unsure]
        said = {"invalid": "was not delivered (the generator fell short)", "undecided": f"stayed undecided on {most}"}
        words = [f"{axes.amount(k)} {said[unsure[k]]}" for k in beyond[:1] if k in unsure]
        words += [f"{axes.amount(k)} needs more than {most}" for k in failed[:1]]
        sentence += "; " + " and ".join(words)
    return {"sentence": sentence + " on this machine", "demand": demand_rows, "capacity": capacity_rows}


def _both_metrics(metric: dict, kind: str) -> tuple[dict, dict]:
    """({load: resources needed}, {resources: load held}) from the one the search returned."""
    if kind == "demand":
        demand = {float(k): v for k, v in metric.items()}
        tested = sorted({int(v) for v in demand.values() if v is not None})
        capacity = {}
        for r in tested:
            ok = [load for load, need in demand.items() if need is not None and need <= r]
            capacity[r] = max(ok) if ok else None
        return demand, capacity
    capacity = {int(k): (None if v is None else float(v)) for k, v in metric.items()}
    demand = {}
    for r, cap in sorted(capacity.items()):
        if cap is not None and cap not in demand:
            demand[cap] = r  # the fewest resources known to hold this load
    return demand, capacity


def _on(rows, resources) -> list:
    """The experiments on that resource amount (none for None)."""
    return [r for r in rows if resources is not None and int(r.resources) == int(resources)]


def _not_failed(loads: list[float], rows, resources: int, config: str) -> dict[float, str]:
    """Those of ``loads`` whose runs on ``resources`` ran and no strict majority of them failed:
    "invalid" where every one fell short of its load, else "undecided"."""
    out = {}
    for load in loads:
        verdicts = [
            r.verdict
            for r in rows
            if float(r.load) == load and int(r.resources) == resources and getattr(r, "config", "") == config
        ]
        decided = majority_verdict(verdicts, len(verdicts), final=True) if verdicts else "fail"
        if decided != "fail":
            out[load] = "invalid" if decided == "invalid" else "undecided"
    return out


def assumed_capacities(metric: dict, ran) -> set[int]:
    """Resource amounts of a capacity search whose capacity is a lower bound no experiment ran: the
    lower-bound search starts an amount above the capacity of the one below and, when every load
    above fails, takes that capacity over untried (more resources never hurt). ``ran``: the
    (load, resources) pairs the search ran."""
    ran = {(float(load), int(res)) for load, res in ran}
    return {int(r) for r, v in metric.items() if v is not None and (float(v), int(r)) not in ran}


def bracket_answer(brackets: list[dict], axes: Axes, sut: str, rows=()) -> dict:
    """The answer of a bracket search (streamscale.benchmark.bracket): per resource amount the
    highest load held and the lowest load failed, in one sentence. ``rows``: the experiments, from
    which each amount's bracket gets what Spark really had (CPUs, on average over its runs) and
    whether a run that decided it was taken on a machine that drifted."""
    parts, table = [], []
    for b in brackets:
        res, config = b["resources"], b.get("config", "")
        mine = [
            r
            for r in rows
            if int(r.resources) == res
            and getattr(r, "config", "") == config
            and r.verdict in ("pass", "fail", "undecided")
        ]
        cpus = [r.spark_cpu_pct / 100 for r in mine if r.spark_cpu_pct == r.spark_cpu_pct]  # not NaN
        ends = {b["held"], b["failed"]}
        drifted = [r for r in mine if r.drifted and float(r.load) in ends]
        # Spark's CPU-seconds per million records at the held end (the table's, not the sentence's)
        per_million = sorted(
            r.cpu_s_per_million
            for r in mine
            if b["held"] is not None and float(r.load) == float(b["held"]) and math.isfinite(r.cpu_s_per_million)
        )
        row = {
            **b,
            **held_latency(mine, b["held"]),
            "held_rate": None if b["held"] is None else axes.rate(b["held"]),
            "failed_rate": None if b["failed"] is None else axes.rate(b["failed"]),
            "spark_cpus": sum(cpus) / len(cpus) if cpus else None,
            "ends_drifted": len(drifted),
            "cpu_s_per_million": statistics.median(per_million) if per_million else None,
            "cpu_s_per_million_range": [per_million[0], per_million[-1]] if per_million else None,
            "executors": _executors_at(mine, b["held"] if b["held"] is not None else b["failed"]),
        }
        row["fewer_held_more"] = _fewer_held_more(table, row)
        table.append(row)
        words = _bracket_words(row, axes)
        if config and (len(table) == 1 or table[-2].get("config") != config):
            words = f"with {config}: {words}"  # the first of a configuration's amounts names it
        parts.append(words)
    sentence = f"{_who(sut)} on this machine: " + "; ".join(parts) if parts else f"{_who(sut)}: nothing searched"
    capacity = [
        {
            **({"config": r["config"]} if "config" in r else {}),
            "resources": r["resources"],
            "load": r["held"],
            "rate": r["held_rate"],
            "assumed": bool(r["held_assumed"]),
        }
        for r in table
    ]
    return {"sentence": sentence, "brackets": table, "capacity": capacity, "demand": []}


def _fewer_held_more(table: list[dict], row: dict) -> dict | None:
    """The amount of fewer resources (same configuration) whose held end, run on it, lies above
    ``row``'s, run on its own: {"resources", "held"} of the highest such (None: none). More
    resources most likely hold at least as much; where runs say otherwise the sentence says so
    rather than leave a scaling answer that reads as if more resources slowed the job."""
    if row["held_rate"] is None or row["held_assumed"]:
        return None
    more = [
        r
        for r in table
        if r.get("config", "") == row.get("config", "")
        and r["resources"] < row["resources"]
        and r["held_rate"] is not None
        and not r["held_assumed"]
        and r["held_rate"] > row["held_rate"]
    ]
    best = max(more, key=lambda r: r["held_rate"], default=None)
    return None if best is None else {"resources": best["resources"], "held": best["held"]}


def held_latency(rows, held) -> dict:
    """The processing latency's p50, p95 and p99 at a held load (a bracket's held end, a capacity, a
    load's demand: the median of its passed runs'), ms, and where it was read (at each batch's
    commit, or at the output topic)."""
    ok = [r for r in rows if held is not None and float(r.load) == float(held) and r.verdict == "pass"]
    pcts = {}
    for name in ("p50", "p95", "p99"):
        got = [v for r in ok if math.isfinite(v := float(getattr(r, f"processing_{name}_ms", math.nan)))]
        if got:
            pcts[name] = statistics.median(got)
    at = sorted({getattr(r, "latency_at", "commit") for r in ok})
    return {"processing_ms": pcts, "latency_at": at[0] if len(at) == 1 else "/".join(at)} if pcts else {}


def _executors_at(rows, load) -> str:
    """Where an amount's executors ran at ``load`` (its bracket's held end, else its failed end),
    as Spark listed them in the last valid run there: "on 10.0.0.12 and 10.0.0.13, 1 core each"
    ("" off a cluster, or without such a run)."""
    listed = [
        r.executors for r in rows if getattr(r, "executors", "") and load is not None and float(r.load) == float(load)
    ]
    if not listed:
        return ""
    found = re.findall(r"@(\S+) \((\d+) cores?\)", listed[-1])
    hosts = sorted({host for host, _ in found})
    cores = sorted({int(n) for _, n in found})
    each = f"{cores[0]} core{'s' * (cores[0] != 1)} each" if len(cores) == 1 else "cores " + "/".join(map(str, cores))
    return f"on {' and '.join(hosts) if len(hosts) < 3 else ', '.join(hosts)}, {each}"


def _bracket_words(row: dict, axes: Axes) -> str:
    who = axes.resources(row["resources"])
    if row.get("spark_cpus") is not None and axes.resource.cpus_per_amount:
        who += f" (Spark used {row['spark_cpus']:.1f} CPUs)"
    elif row.get("executors"):
        who += f" ({row['executors']})"
    held, failed = row["held"], row["failed"]
    if held is None:
        ended = " before the time budget ended the search" if row.get("out_of_time") else ""
        if row.get("ends_out_of_time"):  # its long runs failed the search's held end, and no more fit
            ended = " before the time budget ended the long runs"
        if failed is None:  # every run it had was invalid (the load fell short): nothing judged
            why = f" ({row['ceiling']})" if row.get("ceiling") else ""
            return f"{who} could not be judged at any load tried{ended}{why}"
        # the lowest load tried, whatever its verdict (an undecided one below the failed end included)
        lowest = min([float(k) for k in row.get("verdicts") or {}] + [float(failed)])
        return f"{who} held none of the loads tried{ended} (down to {axes.amount(lowest)})"
    text = f"{who} held {axes.amount(held)}" + (" (as fewer resources did; not run)" if row["held_assumed"] else "")
    notes: list[str] = []  # said after the bracket in one parenthesis, not one parenthesis each
    if failed is None:
        if row.get("ceiling"):
            return text + f", higher untested: {row['ceiling']}"
        # the search ended before any load failed: by its time budget, or its runs used up
        why = "the time budget ended the search" if row.get("out_of_time") else "the search's runs were used up"
        notes.append(why)
        text += ", higher untested"
    else:
        verb = "stayed undecided at" if row["failed_undecided"] else "failed"
        text += f" and {verb} {axes.amount(failed)}"
        notes += _undecided_between(row, axes)
    if row.get("out_of_time") and row.get("width") is not None:
        notes.append(f"the time budget ended the search {row['width']:.0%} apart")
    if row.get("fewer_held_more"):
        fewer = row["fewer_held_more"]
        notes.append(f"less than {axes.resources(fewer['resources'])} held, {axes.amount(fewer['held'])}")
    notes += _checked_words(row)
    # Spark's CPU-seconds per million records stay in the table (summary.json, the report), not in
    # the sentence: on a confined core Spark keeps its CPUs busy at any load, so there the figure is
    # the CPUs over the load held and says no more than the bracket (docs/benchmarking.md)
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _checked_words(row: dict) -> list[str]:
    """What the sentence says of how a bracket's ends were checked: by long runs, under the SLOs,
    not at all (the time budget), or run again after a drift; and how many of the runs that decided
    them ran on a drifting machine."""
    if row.get("long_s"):
        return _long_words(row)
    if row.get("slo_runs") is not None:
        return _slo_words(row)
    if row.get("ends_unchecked"):
        # what was done about a drift is said beside it, not hidden by it
        drifted = "; run again after a drift" if row.get("confirmed") else _drifted_words(row, "; ")
        return [f"its ends not run under the SLOs: {row['ends_unchecked']}{drifted}"]
    if row.get("confirmed"):
        return ["its ends run again after a drift"]
    return [_drifted_words(row)] if row.get("ends_drifted") else []


def _drifted_words(row: dict, before: str = "") -> str:
    """How many of the runs that decided a bracket's ends ran on a drifting machine ("": none)."""
    n = row.get("ends_drifted") or 0
    return f"{before}{n} deciding run{'s' if n > 1 else ''} on a drifting machine" if n else ""


def _long_words(row: dict) -> list[str]:
    """Which of a confirmed bracket's ends its long runs decided (the held end a pass, the upper
    one a fail), and which they did not."""
    length = f"{row['long_s']:g} s"
    held, failed, held_ok, failed_verdict = _end_verdicts(row, "long")
    failed_ok = failed_verdict == "fail"
    ended = row.get("ends_out_of_time") and row.get("width") is not None and not row.get("held_unchecked")
    if held_ok and failed_ok:
        short = [f"the time budget ended the long runs {row['width']:.0%} apart"] if ended else []
        return [f"ends decided by {length} runs", *short]
    said = []
    if held is not None and row.get("held_unchecked"):
        said.append(f"the held end not run for {length}: the time budget ended the long runs")
    elif held is not None:
        said.append(f"the held end {'decided by a' if held_ok else 'not decided by its'} {length} run")
    if failed is not None and not failed_ok:
        said.append(
            f"the upper end {'undecided after' if failed_verdict == 'undecided' else 'not decided by'} {length}"
        )
    elif failed_ok:
        said.append(f"the upper end decided by a {length} run")
    return [", ".join(said)] if said else []


def _undecided_between(row: dict, axes: Axes) -> list[str]:
    """The loads between a bracket's ends whose runs stayed undecided (none where none did): the
    search, or the runs that decided its ends (under the SLOs, or long ones), stepped past them,
    and the capacity may lie anywhere among them. Where such a run decided a load, its verdict
    stands over the search's."""
    held, failed = float(row["held"]), float(row["failed"])
    verdicts = {float(k): v for key in ("verdicts", "slo_runs", "long") for k, v in (row.get(key) or {}).items()}
    inside = sorted(x for x, v in verdicts.items() if v == "undecided" and held < x < failed)
    if not inside:
        return []
    if len(inside) == 1:
        return [f"undecided at {axes.amount(inside[0])}"]
    return [f"undecided from {axes.amount(inside[0])} to {axes.amount(inside[-1])}"]


def _slo_words(row: dict) -> list[str]:
    """Which of a bracket's ends the runs under the SLOs left undecided (none where they decided both:
    the held end passed, the upper one failed, as held and failed say)."""
    held, failed, held_ok, failed_verdict = _end_verdicts(row, "slo_runs")
    said = []
    if held is not None and row.get("held_unchecked"):
        said.append("the held end not run under the SLOs: the time budget ended their runs")
    elif held is not None and not held_ok:
        said.append("the held end not decided under the SLOs")
    if failed is not None and failed_verdict not in (None, "fail"):
        said.append("the upper end undecided under the SLOs")
    # an end still at a load where runs disagreed (the run past it did not agree, or none was left)
    disputed = set(row.get("disputed") or ())
    said += [f"runs at the {end} end disagreed" for end, x in (("held", held), ("upper", failed)) if x in disputed]
    return [", ".join(said)] if said else []


def _end_verdicts(row: dict, key: str) -> tuple:
    """(held, failed, whether the held end's run passed, the failed end's run's verdict) of a
    bracket whose ends runs of their own decided, their verdicts under ``key`` (load -> verdict)."""
    runs = {float(k): v for k, v in (row.get(key) or {}).items()}
    held, failed = row.get("held"), row.get("failed")
    held_ok = held is not None and runs.get(float(held)) == "pass"
    return held, failed, held_ok, None if failed is None else runs.get(float(failed))
