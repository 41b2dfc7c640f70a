"""Where Spark's, Java's and Python libraries' output goes: a module of its own, without the
session's imports (the Kafka client), so that every command can route its log records there at
start-up for nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def spark_log_path() -> Path:
    """Where the JVM's and the Python workers' output goes ($STREAMSCALE_SPARK_LOG, or a file per
    process in the temp directory)."""
    given = os.environ.get("STREAMSCALE_SPARK_LOG")
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / "streamscale-logs" / f"spark-{os.getpid()}.log"


def spark_log_on_stderr() -> bool:
    """Whether the user keeps that output on stderr ($STREAMSCALE_SPARK_LOG=-)."""
    return os.environ.get("STREAMSCALE_SPARK_LOG") == "-"
