"""The environment an execution ran in (versions, machine, broker, Spark master), written to its
results as environment.json when it starts and shown in its report."""

from __future__ import annotations

import os
import platform
import sys
import time
from importlib import metadata


def _embedded_kafka() -> str:
    try:
        from streamscale.broker.kafka_server import kafka_version

        return f"embedded Apache Kafka {kafka_version()} (KRaft, one node)"
    except Exception:  # noqa: BLE001 - informational only
        return "embedded Apache Kafka"


def environment(runs=None, bootstrap: str | None = None, embedded_broker: bool = True) -> dict:
    """Versions, machine and targets of an execution (written to environment.json when it starts);
    ``runs``: its plan's (streamscale.benchmark.plan.Runs), where the Spark master comes from."""

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
    env["broker"] = (_embedded_kafka() if embedded_broker else "external") + (f" at {bootstrap}" if bootstrap else "")
    if runs is not None:
        env["spark_master"] = (
            runs.master
            if runs.master
            else ("local[k] (k = cores under test)" if runs.resource_type == "cores" else "see spec")
        )
    return env
