"""`streamscale cluster`: a Spark cluster and a Kafka cluster on hosts of their own on this machine."""

from __future__ import annotations

import typer

from streamscale.cli.app import cluster_app, out


@cluster_app.command("start")
def cluster_start(
    workers: int = typer.Option(2, "--workers", min=1, max=16, help="Spark workers, each on a host of its own"),
    worker_cores: int = typer.Option(1, "--worker-cores", min=1, help="Cores of each worker (its own CPUs)"),
    brokers: int = typer.Option(3, "--brokers", min=1, max=9, help="Kafka brokers, each on a host of its own"),
):
    """Start a Spark master, WORKERS workers and BROKERS Kafka brokers, each on a host of its own (a
    network namespace, a private /tmp, a worker's own CPUs), in the background (root only). Every
    command finds its brokers as it finds the embedded broker; a spec's runs on executors use its
    master (execution.master) and its shared folder for checkpoints."""
    from streamscale.hosts.daemon import start_daemon

    out.print(f"starting a Spark master, {workers} workers and {brokers} brokers on hosts of their own …")
    info = start_daemon(workers, worker_cores, brokers)
    out.print(
        f"cluster running in {info.started_s:g} s: master [bold]{info.master_url}[/], brokers [bold]{info.bootstrap}[/]"
    )
    out.print(f"shared folder {info.shared}; logs in {info.log_dir}; stop it with `streamscale cluster stop`")


@cluster_app.command("status")
def cluster_status():
    """Each host's role, address, process and state. Exit code 0 if running, 1 if not."""
    from streamscale.hosts.daemon import hosts_status
    from streamscale.processes import running

    info = hosts_status()
    if info is None:
        out.print("no cluster running")
        raise typer.Exit(1)
    out.print(f"cluster: master {info.master_url}, brokers {info.bootstrap}, shared folder {info.shared}")
    for h in info.hosts:
        state = "running" if h["pid"] and running(h["pid"]) else "down"
        out.print(f"  {h['name']:<10} {h['role']:<7} {h['address']:<15} pid {h['pid']}\tcpus {h['cpus']}\t{state}")


@cluster_app.command("stop")
def cluster_stop():
    """Stop the cluster `cluster start` started: every host, its namespaces and folders."""
    from streamscale.hosts.daemon import stop_daemon

    info = stop_daemon()
    if info is None:
        out.print("no cluster running")
    else:
        out.print(f"stopped the cluster of master {info.master_url} (keeper pid {info.keeper_pid})")
