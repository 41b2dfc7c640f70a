"""`streamscale reliability run spec.yaml`: every producer (or semantics) x size x fault x topic
setting (min.insync.replicas, unclean leader election) x repetition, then trials.csv,
summary.csv/json and the paper's figures (loss vs delay, loss vs loss rate, duplicates vs loss
rate)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from streamscale.broker.connection import KafkaConnection, build_connection, masked
from streamscale.errors import ConfigError
from streamscale.reliability.spec import NetemFault, NoFault, ReliabilitySpec
from streamscale.reliability.testbeds import ClusterTestbed, ExternalTestbed, NetemTestbed, ProxyTestbed
from streamscale.reliability.tester import Trial, TrialResult, run_trial


def _testbed_kind(spec: ReliabilitySpec, fault, external: bool) -> str:
    if external:
        return "external"
    if spec.cluster is not None:
        return "cluster"
    return "netem" if isinstance(fault, NetemFault) else "proxy"


def _testbed(kind: str, spec: ReliabilitySpec, out_dir: Path, bootstrap, properties):
    logs = out_dir / "broker-logs"
    if kind == "external":
        return ExternalTestbed(bootstrap, properties)
    security = spec.broker.security
    if kind == "cluster":
        return ClusterTestbed(spec.cluster.brokers, spec.isolation(), logs, properties, security)
    if kind == "netem":
        return NetemTestbed(logs, properties, security)
    return ProxyTestbed(logs, seed=0, properties=properties, security=security)


def run_spec(
    spec: ReliabilitySpec,
    out_dir: Path,
    bootstrap: KafkaConnection | str | None = None,
    progress: Callable[[str], None] = print,
    properties: dict | None = None,
) -> pd.DataFrame:
    """``bootstrap``: an external cluster (faults then cannot run), else the embedded testbeds;
    ``properties``: the user's Kafka client properties, given to every client of every trial.
    Neither given: both from the spec's ``kafka:`` section (a caller that gives either has read the
    section itself, as the command line does)."""
    if bootstrap is None and properties is None:  # the section (the environment is the CLI's)
        bootstrap, properties = build_connection(section=spec.kafka.model_dump(), use_env=False)
    if isinstance(bootstrap, KafkaConnection):
        properties = {**dict(bootstrap.properties), **(properties or {})}
        bootstrap = bootstrap.bootstrap
    faults = spec.all_faults()
    _check_runnable(spec, faults, bool(bootstrap))
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = spec.model_dump(mode="json")
    saved["kafka"]["properties"] = masked(saved["kafka"]["properties"])  # results keep no credential
    (out_dir / "spec.json").write_text(json.dumps(saved, indent=2))
    results = _run_trials(spec, faults, out_dir, (bootstrap, properties), progress)
    df = pd.DataFrame([r.row() for r in results])
    summary = summarise(df)
    summary.to_csv(out_dir / "summary.csv", index=False)
    (out_dir / "summary.json").write_text(json.dumps(summary.to_dict(orient="records"), indent=2, default=float))
    plot(df, out_dir)
    return df


def _check_runnable(spec: ReliabilitySpec, faults: list, external: bool) -> None:
    """Refuse, before any trial, a campaign this machine or this broker cannot run."""
    if external and any(not isinstance(f, NoFault) for f in faults):
        raise ConfigError(
            "faults need the embedded broker behind the fault proxy (or in a netem namespace); "
            "with --bootstrap-servers only `kind: none` can run, because an external cluster "
            "advertises its own addresses and clients would bypass the proxy"
        )
    if external and spec.cluster is not None:
        raise ConfigError("cluster: starts an embedded cluster; leave out --bootstrap-servers (or cluster:)")
    if spec.isolation():
        from streamscale.broker.clusternet import namespaces_available

        ok, why = namespaces_available()
        if not ok:
            raise ConfigError(f"a fault isolates a broker, which needs network namespaces: {why}")
    if any(isinstance(f, NetemFault) for f in faults):
        from streamscale.reliability.netem import require_netem

        require_netem()


def _trials(spec: ReliabilitySpec, fault) -> list[Trial]:
    """A fault's trials, in the campaign's order: size x producer x topic setting x repetition."""
    rf = spec.replication_factor()
    settings = [(m, u) for m in spec.topic.min_insync_replicas for u in spec.topic.unclean_leader_election]
    return [
        Trial(
            producer,
            spec.messages,
            size,
            fault,
            spec.partitions,
            spec.rate,
            rep,
            spec.transaction_messages,
            spec.send_timeout_s,
            spec.receive_timeout_s,
            replication_factor=rf,
            min_insync_replicas=min_isr,
            unclean_election=unclean,
        )
        for size in spec.sizes
        for producer in spec.producer_settings()
        for min_isr, unclean in settings
        for rep in range(spec.repetitions)
    ]


def _run_trials(spec: ReliabilitySpec, faults: list, out_dir: Path, where: tuple, progress) -> list[TrialResult]:
    """Every trial, each appended to trials.csv as it ends; a testbed per kind, made when first
    needed and closed at the end (or on failure)."""
    bootstrap, properties = where
    per_fault = {id(f): _trials(spec, f) for f in faults}
    total = sum(len(t) for t in per_fault.values())
    results: list[TrialResult] = []
    beds: dict[str, object] = {}
    csv_path = out_dir / "trials.csv"
    csv_path.unlink(missing_ok=True)
    try:
        for fault in faults:
            kind = _testbed_kind(spec, fault, bool(bootstrap))
            if kind not in beds:
                beds[kind] = _testbed(kind, spec, out_dir, bootstrap, properties)
            for trial in per_fault[id(fault)]:
                r = run_trial(beds[kind], trial)
                results.append(r)
                _append(csv_path, r)
                progress(_progress_line(len(results), total, r, spec))
    finally:
        for bed in beds.values():
            bed.close()
    return results


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """The campaign's table: a row per cell, α and β with their ranges, what was acknowledged and
    lost, and what splits trials that disagree in kind."""
    summary = df.groupby(CELL, sort=False).agg(**SUMMARY_COLUMNS).reset_index()
    summary["agreement"] = [agreement(g) for _, g in df.groupby(CELL, sort=False)]
    return summary


SUMMARY_COLUMNS = {
    "trials": ("alpha", "size"),
    "N": ("N", "sum"),
    "alpha": ("alpha", "mean"),
    "alpha_min": ("alpha", "min"),
    "alpha_max": ("alpha", "max"),
    "beta": ("beta", "mean"),
    "beta_min": ("beta", "min"),
    "beta_max": ("beta", "max"),
    "acked": ("acked", "sum"),
    "acked_min": ("acked", "min"),
    "acked_max": ("acked", "max"),
    "unacked_lost_min": ("unacked_lost", "min"),
    "unacked_lost_max": ("unacked_lost", "max"),
    "transmitted": ("transmitted", "mean"),
    "mean_batch_bytes": ("mean_batch_bytes", "mean"),
    "resets_response": ("resets_response", "sum"),
    "lost": ("lost", "sum"),
    "duplicated": ("duplicated", "sum"),
    "acked_but_lost": ("acked_but_lost", "sum"),
    "acked_but_lost_max": ("acked_but_lost", "max"),
    "unacked_lost": ("unacked_lost", "sum"),
    "stall_s": ("stall_s", "median"),
    "recovery_s": ("recovery_s", "median"),
    "leader_changes": ("leader_changes", "sum"),
    "accounted_rate": ("accounted_rate", "mean"),
    "broker_restarted": ("broker_restarted", "any"),
}


# what a cell of the campaign's table is: its trials are repetitions of one another
# (a trial whose fault did not happen is a cell of its own: never a 0-loss trial of that fault)
CELL = [
    "semantics",
    "size",
    "fault",
    "fault_injected",
    "received",
    "replication_factor",
    "min_insync_replicas",
    "unclean_election",
]


def agreement(trials: pd.DataFrame) -> str:
    """ "" when a cell's trials agree in kind; else what splits them, in words: some lost nothing and
    others lost, some acknowledged every record and others nothing."""
    n, said = len(trials), []
    if n < 2:
        return ""
    for col, what in (("alpha", "lost"), ("beta", "duplicated")):
        zero = int((trials[col] == 0).sum())
        if 0 < zero < n:
            rest = trials.loc[trials[col] > 0, col] * 100
            span = f"{rest.min():.3g} %" if rest.min() == rest.max() else f"{rest.min():.3g}–{rest.max():.3g} %"
            said.append(f"{zero} of {n} {what} nothing, {n - zero} {what} {span} of what they sent")
    if (trials["acks"] != "0").all():
        none = int((trials["acked"] == 0).sum())
        if 0 < none < n:
            said.append(f"{none} of {n} had no record acknowledged")
    return "; ".join(said)


def range_text(mean: float, low: float, high: float) -> str:
    """α or β as a cell shows it: the mean, and its range where the trials differ."""
    if mean != mean:  # NaN: no trial of the cell was received
        return "unknown"
    if low == high:
        return f"{mean:.3g}"
    return f"{mean:.3g} [{low:.3g}–{high:.3g}]"


def summary_lines(summary: pd.DataFrame) -> list[str]:
    """The campaign's answer, a line per cell: α and β with their ranges, acknowledged and
    unacknowledged loss apart, and what splits trials that disagree in kind."""
    lines = []
    for r in summary.itertuples(index=False):
        no_acks = str(getattr(r, "acks", "")) == "0" or str(r.semantics).startswith(("at-most-once", "acks=0"))
        acked_lost = "n/a (no acknowledgements)" if no_acks else f"{int(r.acked_but_lost):,} acknowledged lost"
        line = (
            f"{r.semantics:<13} {r.fault:<32} {int(r.trials)} trials  α {range_text(r.alpha, r.alpha_min, r.alpha_max)}"
            f"  β {range_text(r.beta, r.beta_min, r.beta_max)}  {acked_lost}, {int(r.unacked_lost):,} unacknowledged"
        )
        if str(getattr(r, "fault_injected", True)) == "False":
            line += "  [fault not injected: not a trial of this fault]"
        if str(getattr(r, "received", True)) == "False":
            line += "  [receiver failed: loss unknown, see the trials' note]"
        if r.agreement:
            line += f"  [trials disagree: {r.agreement}]"
        lines.append(line)
    return lines


def _progress_line(done: int, total: int, r: TrialResult, spec: ReliabilitySpec) -> str:
    line = (
        f"[{done}/{total}] {r.semantics:<13} {r.size:>4} B  {r.fault:<32} "
        f"alpha={r.alpha:.6f} beta={r.beta:.6f}  (L={r.lost}, D={r.duplicated}, "
        f"{r.accounted_rate:,.0f} msg/s accounted)"
    )
    if spec.cluster is not None:
        unclean = ", unclean election" if r.unclean_election else ""
        acked = "n/a (no acknowledgements)" if r.acks == "0" else f"{r.acked_but_lost} acknowledged lost"
        line += (
            f"  RF {r.replication_factor} min ISR {r.min_insync_replicas}{unclean}: {acked}, "
            f"{r.unacked_lost} unacknowledged; {r.leader_changes} leader changes, "
            f"no acknowledgment for {r.stall_s:.1f} s"
        )
    line += "  [fault not injected]" if not r.fault_injected else ""
    line += f"  [{r.note}]" if not r.received else ""
    return line + ("  [broker data lost]" if r.broker_restarted else "")


def _append(path: Path, r: TrialResult) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(r.row()))
        if new:
            w.writeheader()
        w.writerow(r.row())


def plot(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Fig. 4a (loss vs delay per size), Fig. 4b (loss vs loss rate per semantics), Fig. 5 (duplicates)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    # one-variable sweeps, each with the fault-free trials as x = 0; cuts and restarts are not on these axes
    plain = df[df["fault_kind"].isin(["none", "proxy", "netem"]) & ~df["fault"].str.contains("cut@|jitter|drop")]
    delays = plain[plain["loss_pct"] == 0]
    losses = plain[plain["delay_ms"] == 0]
    xlabel_loss = (
        "connection resets per forwarded chunk (%)" if (df["fault_kind"] == "proxy").any() else "packet loss (%)"
    )
    figs = [
        ("fig4a_loss_vs_delay.png", delays, "delay_ms", "alpha", "network delay (ms)", "message loss rate α"),
        ("fig4b_loss_vs_lossrate.png", losses, "loss_pct", "alpha", xlabel_loss, "message loss rate α"),
        ("fig5_duplicates_vs_lossrate.png", losses, "loss_pct", "beta", xlabel_loss, "duplicate rate β"),
    ]
    for name, data, x, y, xlabel, ylabel in figs:
        if data[x].nunique() < 2:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for key, g in data.groupby(["semantics", "size"]):
            stats = g.groupby(x)[y].agg(["mean", "min", "max"]).sort_index()
            m = stats["mean"]
            # the range of the repetitions around each mean: a cell whose trials disagree shows it
            err = [(m - stats["min"]).values * 100, (stats["max"] - m).values * 100]
            ax.errorbar(m.index, m.values * 100, yerr=err, marker="o", capsize=3, label=f"{key[0]}, {key[1]} B")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + " (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)
    return written
