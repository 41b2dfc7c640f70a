"""`streamscale benchmark check`: whether a new results folder lost capacity against a baseline.

Two folders written by `benchmark run` are compared entry by entry, an entry being one configuration
at one resource amount. Each entry of a folder has its ends: the highest load it held and the lowest
load above that it failed (a bracket search's own answer where summary.json has one; otherwise read
from experiments.csv, each load's verdict the strict majority of its runs). A new entry regressed when

- its bracket lies wholly below the baseline's: its failed end at or below the baseline's held end
  less the tolerance; or
- it failed at a load the baseline held (that load at or below the baseline's held end less the
  tolerance, so that a tolerance also forgives a failure just under the baseline's held end).

An undecided or invalid run is neither held nor failed: it can neither show nor hide a regression.
Nothing is run here; both folders are only read.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

import yaml

from streamscale.benchmark.results import ExperimentResult, read_results
from streamscale.benchmark.units import LOADS, RESOURCES, approx
from streamscale.benchmark.verdict import majority_verdict
from streamscale.errors import ConfigError, ResultsError


@dataclass(frozen=True, order=True)
class Entry:
    """One configuration ("" where the spec names none) at one resource amount."""

    config: str
    resources: int

    def label(self, resource_type: str) -> str:
        amount = RESOURCES.get(resource_type, RESOURCES["cores"])().amount(self.resources)
        return f"{self.config}, {amount}" if self.config else amount


@dataclass
class Ends:
    """What an entry's runs decided: its held and failed ends, and each load's verdict."""

    held: float | None = None
    failed: float | None = None
    points: dict[float, str] = field(default_factory=dict)


@dataclass
class Folder:
    """A results folder as the gate reads it."""

    path: Path
    load_type: str
    resource_type: str
    entries: dict[Entry, Ends]


@dataclass(frozen=True)
class Regression:
    entry: Entry
    reason: str


@dataclass
class Comparison:
    compared: list[Entry]
    regressions: list[Regression]
    only_baseline: list[Entry]
    only_new: list[Entry]
    resource_type: str = "cores"


def point_verdicts(rows: list[ExperimentResult]) -> dict[Entry, dict[float, str]]:
    """Each entry's loads with their verdict: the strict majority of the runs at that load."""
    runs: dict[tuple[Entry, float], list[str]] = defaultdict(list)
    for r in rows:
        runs[(Entry(r.config, int(r.resources)), float(r.load))].append(r.verdict)
    points: dict[Entry, dict[float, str]] = defaultdict(dict)
    for (entry, load), verdicts in runs.items():
        points[entry][load] = majority_verdict(verdicts, len(verdicts), final=True)
    return dict(points)


def ends_of_points(points: dict[float, str]) -> Ends:
    """The held end (highest load passed) and the failed end (lowest load failed above it)."""
    held = max((x for x, v in points.items() if v == "pass"), default=None)
    above = [x for x, v in points.items() if v == "fail" and (held is None or x > held)]
    return Ends(held, min(above, default=None), dict(points))


def _bracket_ends(summary: dict) -> dict[Entry, tuple[float | None, float | None]]:
    """A bracket search's ends as its answer gave them (an undecided upper end is no failure)."""
    out = {}
    for b in (summary.get("answer") or {}).get("brackets") or []:
        failed = None if b.get("failed_undecided") else b.get("failed")
        out[Entry(b.get("config", "") or "", int(b["resources"]))] = (b.get("held"), failed)
    return out


def _load_types(path: Path, summary: dict) -> tuple[str, str]:
    if "load_type" in summary:
        return summary["load_type"], summary.get("resource_type", "cores")
    spec_file = path / "spec.yaml"
    try:
        ex = (yaml.safe_load(spec_file.read_text()) or {}).get("execution") or {}
        return ex["load"]["type"], ex["resources"]["type"]
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return "", "cores"


def read_folder(path: Path) -> Folder:
    """A results folder's entries; ResultsError (exit 2) when it holds no results."""
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: no such results folder")
    rows = read_results(path)
    if not rows:
        raise ResultsError(f"{path}: no results (no experiment in experiments.csv)")
    summary = {}
    if (path / "summary.json").exists():
        try:
            summary = json.loads((path / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{path / 'summary.json'}: cannot be read ({exc})") from None
    entries = {e: ends_of_points(p) for e, p in point_verdicts(rows).items()}
    for entry, (held, failed) in _bracket_ends(summary).items():
        mine = entries.setdefault(entry, Ends())
        mine.held, mine.failed = held, failed
    load_type, resource_type = _load_types(path, summary)
    return Folder(path, load_type, resource_type, entries)


def compare(baseline: Folder, new: Folder, tolerance: float = 0.0) -> Comparison:
    """Entry by entry, the regressions of ``new`` against ``baseline`` (see the module notes);
    ``tolerance`` is a fraction of the baseline's held end (0.1: 10 %)."""
    if not 0 <= tolerance < 1:
        raise ConfigError(f"tolerance {tolerance:.0%}: give a percentage from 0 to below 100")
    if baseline.load_type and new.load_type and baseline.load_type != new.load_type:
        raise ConfigError(
            f"{new.path} measures load as {new.load_type}, {baseline.path} as {baseline.load_type}: not comparable"
        )
    shared = sorted(set(baseline.entries) & set(new.entries))
    if not shared:
        raise ResultsError(
            f"{new.path} and {baseline.path} share no entry (configuration x resource amount): nothing to compare"
        )
    regressions = []
    for entry in shared:
        reason = _regression(baseline.entries[entry], new.entries[entry], tolerance, UNITS.get(new.load_type, ""))
        if reason:
            regressions.append(Regression(entry, reason))
    return Comparison(
        compared=shared,
        regressions=regressions,
        only_baseline=sorted(set(baseline.entries) - set(new.entries)),
        only_new=sorted(set(new.entries) - set(baseline.entries)),
        resource_type=new.resource_type,
    )


# how a load value reads, by the spec's load type
UNITS = {t: d.count_unit for t, d in LOADS.items()}


def _regression(base: Ends, new: Ends, tolerance: float, unit: str = "") -> str | None:
    if base.held is None:
        return None  # the baseline held nothing here: no capacity to lose
    floor = base.held * (1 - tolerance)

    def said(x: float | None) -> str:
        return "none" if x is None or math.isnan(x) else f"{approx(x)}{' ' + unit if unit else ''}"

    below = f" (less the tolerance {tolerance:.0%}: {said(floor)})" if tolerance else ""
    if new.failed is not None and new.failed <= floor:
        return (
            f"held {'nothing' if new.held is None else said(new.held)}, failed {said(new.failed)}: wholly below "
            f"the baseline's bracket (held {said(base.held)}, failed {said(base.failed)}){below}"
        )
    lost = sorted(x for x, v in new.points.items() if v == "fail" and base.points.get(x) == "pass" and x <= floor)
    if lost:
        return f"failed at {said(lost[0])}, which the baseline held (its held end {said(base.held)}){below}"
    return None


def junit_xml(comparison: Comparison, suite: str = "streamscale benchmark check") -> str:
    """The comparison as JUnit XML: one test case per shared entry, a failure per regression."""
    failed = {r.entry: r.reason for r in comparison.regressions}
    root = ElementTree.Element(
        "testsuite", name=suite, tests=str(len(comparison.compared)), failures=str(len(failed)), errors="0"
    )
    for entry in comparison.compared:
        case = ElementTree.SubElement(
            root, "testcase", classname="capacity", name=entry.label(comparison.resource_type)
        )
        if entry in failed:
            ElementTree.SubElement(case, "failure", message=failed[entry], type="regression")
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
