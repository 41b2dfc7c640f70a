"""`streamscale reliability run spec.yaml`: every semantics x size x fault x repetition, then
trials.csv, summary.csv/json and the paper's figures (loss vs delay, loss vs loss rate,
duplicates vs loss rate)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from streamscale.broker.connection import KafkaConnection, build_connection, masked
from streamscale.errors import ConfigError
from streamscale.reliability.spec import NetemFault, NoFault, ReliabilitySpec
from streamscale.reliability.testbeds import ExternalTestbed, NetemTestbed, ProxyTestbed
from streamscale.reliability.tester import TrialResult, run_trial


def _testbed_kind(fault) -> str:
    return "netem" if isinstance(fault, NetemFault) else "proxy"


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
    if bootstrap and any(not isinstance(f, NoFault) for f in faults):
        raise ConfigError(
            "faults need the embedded broker behind the fault proxy (or in a netem namespace); "
            "with --bootstrap-servers only `kind: none` can run, because an external cluster "
            "advertises its own addresses and clients would bypass the proxy"
        )
    if any(isinstance(f, NetemFault) for f in faults):
        from streamscale.reliability.netem import require_netem

        require_netem()
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = spec.model_dump(mode="json")
    saved["kafka"]["properties"] = masked(saved["kafka"]["properties"])  # results keep no credential
    (out_dir / "spec.json").write_text(json.dumps(saved, indent=2))
    results: list[TrialResult] = []
    total = len(faults) * len(spec.semantics) * len(spec.sizes) * spec.repetitions
    beds: dict[str, object] = {}
    csv_path = out_dir / "trials.csv"
    csv_path.unlink(missing_ok=True)
    try:
        for fault in faults:
            kind = "external" if bootstrap else _testbed_kind(fault)
            if kind not in beds:
                beds[kind] = (
                    ExternalTestbed(bootstrap, properties)
                    if kind == "external"
                    else NetemTestbed(out_dir / "broker-logs", properties)
                    if kind == "netem"
                    else ProxyTestbed(out_dir / "broker-logs", seed=0, properties=properties)
                )
            bed = beds[kind]
            for size in spec.sizes:
                for semantics in spec.semantics:
                    for rep in range(spec.repetitions):
                        r = run_trial(
                            bed,
                            semantics,
                            spec.messages,
                            size,
                            fault,
                            spec.partitions,
                            spec.rate,
                            rep,
                            spec.transaction_messages,
                            spec.send_timeout_s,
                            spec.receive_timeout_s,
                        )
                        results.append(r)
                        _append(csv_path, r)
                        progress(
                            f"[{len(results)}/{total}] {semantics:<13} {size:>4} B  {fault.label():<32} "
                            f"alpha={r.alpha:.6f} beta={r.beta:.6f}  (L={r.lost}, D={r.duplicated}, "
                            f"{r.accounted_rate:,.0f} msg/s accounted)"
                            + ("  [broker data lost]" if r.broker_restarted else "")
                        )
    finally:
        for bed in beds.values():
            bed.close()
    df = pd.DataFrame([r.row() for r in results])
    summary = (
        df.groupby(["semantics", "size", "fault"], sort=False)
        .agg(
            trials=("alpha", "size"),
            alpha=("alpha", "mean"),
            beta=("beta", "mean"),
            lost=("lost", "sum"),
            duplicated=("duplicated", "sum"),
            acked_but_lost=("acked_but_lost", "sum"),
            accounted_rate=("accounted_rate", "mean"),
            broker_restarted=("broker_restarted", "any"),
        )
        .reset_index()
    )
    summary.to_csv(out_dir / "summary.csv", index=False)
    (out_dir / "summary.json").write_text(json.dumps(summary.to_dict(orient="records"), indent=2, default=float))
    plot(df, out_dir)
    return df


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
            m = g.groupby(x)[y].mean().sort_index()
            ax.plot(m.index, m.values * 100, marker="o", label=f"{key[0]}, {key[1]} B")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + " (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)
    return written
