"""What an execution is set in: the embedded Kafka its spec asks for, the Kafka connector its runs
use, and the notes said before it starts (runs too short for their windows, results measured on
another broker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamscale import terminal
from streamscale.benchmark.plan import Plan
from streamscale.benchmark.spec import Spec
from streamscale.errors import ConfigError
from streamscale.pipelines.jobref import display_name


def broker_change_note(out_dir: Path, env: dict) -> str | None:
    """One line when the results already in ``out_dir`` were measured on another kind of broker
    (an external cluster against the embedded one, say), else None."""
    path = Path(out_dir) / "environment.json"
    try:
        before = str(json.loads(path.read_text()).get("broker", ""))
    except (OSError, ValueError, AttributeError):
        return None

    def kind(text: str) -> str:
        return text.split(" at ", 1)[0].strip()

    now = str(env.get("broker", ""))
    if not before or kind(before) == kind(now):
        return None
    return (
        f"the experiments already in {out_dir} ran on {kind(before)}; the ones run now run on {kind(now)}: "
        "their figures are not directly comparable"
    )


def short_for_windows(plan: Plan) -> str | None:
    """Why the runs are too short for their pipeline's windows, if they are: windows that close
    within a run make the lag jump once per window slide, which the trend fits out only over two
    whole periods after the warm-up (streamscale.experiment.slo.fit_periodic)."""
    ex = plan.runs
    if plan.load.sets_window:
        return None  # the window is the load: one period per load, no single rule
    period = plan.window_period_s
    if not period or period > ex.duration_s or ex.duration_s - ex.warmup_s >= 2 * period:
        return None
    return (
        f"{display_name(plan.sut)}'s windows close every {period:g} s; {ex.duration_s:g} s runs with "
        f"{ex.warmup_s:g} s warm-up fit the lag trend over less than two of those periods, so a window "
        f"closing near a run's end can pass for growth: duration_s ≥ warmup_s + {2 * period:g} fits the "
        "jump out"
    )


def embedded_kafka(spec: Spec, log_dir: Path):
    """The embedded Kafka a spec asks for: one broker, or a cluster of ``broker.brokers`` nodes."""
    from streamscale.broker import EmbeddedBroker
    from streamscale.broker.cluster import EmbeddedCluster

    rf = spec.replication_factor(embedded=True)
    if rf > spec.broker.brokers:
        raise ConfigError(
            f"benchmark.topics.replication_factor {rf} needs as many brokers: set broker.brokers "
            f"(now {spec.broker.brokers}), or give an external cluster with -b"
        )
    if spec.broker.brokers > 1:
        return EmbeddedCluster(spec.broker.brokers, log_dir=log_dir, security=spec.broker.security)
    return EmbeddedBroker(log_dir=log_dir, security=spec.broker.security)


@dataclass(frozen=True)
class OnHosts:
    """Where a run on a cluster of hosts finds it."""

    master: str
    bootstrap: str
    shared: str
    broker_pids: list[int]
    said: str
    worker_pids: tuple = ()  # the workers' daemons, whose descendants are the executors
    started: object = None  # the HostsCluster this run started (None: `cluster start`'s): watched


@contextmanager
def hosts_cluster(spec: Spec, log_dir: Path) -> Iterator[OnHosts]:
    """The cluster of hosts a spec's ``cluster:`` asks for: the one `streamscale cluster start` left
    running (it must have that shape), else one started here and stopped when the block ends."""
    from streamscale.hosts.cluster import HostsCluster
    from streamscale.hosts.daemon import hosts_status

    c = spec.cluster
    shape = (c.workers, c.worker_cores, c.brokers)
    running = hosts_status()
    if running is not None:
        if running.shape() != shape:
            raise ConfigError(
                f"cluster: asks for {c.workers} workers of {c.worker_cores} cores and {c.brokers} brokers; the "
                f"cluster running has {running.workers} of {running.worker_cores} and {running.brokers}: match it, "
                "or stop it (`streamscale cluster stop`)"
            )
        workers = tuple(h["pid"] for h in running.hosts if h["role"] == "worker" and h["pid"])
        said = "the cluster `streamscale cluster start` started"
        yield OnHosts(running.master_url, running.bootstrap, running.shared, [], said, workers)
        return
    terminal.console().print(
        f"starting a Spark master, {c.workers} workers and {c.brokers} brokers on hosts of their own …"
    )
    with HostsCluster(c.workers, c.worker_cores, c.brokers, log_dir, c.worker_memory) as hosts:
        said = f"hosts of their own, started in {hosts.started_s:.0f} s (master {hosts.master_url})"
        workers = tuple(h.pid for h in hosts.role("worker"))
        yield OnHosts(hosts.master_url, hosts.bootstrap, str(hosts.shared), hosts.kafka.pids(), said, workers, hosts)
