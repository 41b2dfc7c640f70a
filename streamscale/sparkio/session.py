"""SparkSession set-up that works on a fresh machine: Java check, worker interpreter, loopback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from streamscale.errors import StreamscaleError

MIN_JAVA = 17


class JavaMissing(StreamscaleError):
    pass


def java_version() -> int:
    """Major version of the `java` that Spark will start (JAVA_HOME first, then PATH)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaMissing("Spark needs Java 17 or newer and no `java` was found: install it "
                          "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise JavaMissing(f"could not read the version of {java}: {out.stderr.strip()[:200]}")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise JavaMissing(f"Spark needs Java {MIN_JAVA}+, but {java} is Java {major}: install "
                          "openjdk-17-jre-headless (or newer) or point JAVA_HOME at one")
    return major


def prepare_environment() -> None:
    """Environment that PySpark needs here: workers use this interpreter, Spark binds to loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def build_session(master: str = "local[2]", app_name: str = "streamscale", conf: dict | None = None,
                  shuffle_partitions: int | None = None, ui: bool = False):
    """A SparkSession with the streamscale Kafka data source registered."""
    java_version()
    prepare_environment()
    from pyspark.sql import SparkSession

    from streamscale.sparkio.kafka import KafkaDataSource

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", str(ui).lower())
               .config("spark.driver.host", os.environ.get("SPARK_DRIVER_HOST", "127.0.0.1"))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    if shuffle_partitions is None:
        shuffle_partitions = max(2, _cores(master) * 2)
    builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for k, v in (conf or {}).items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("STREAMSCALE_SPARK_LOG_LEVEL", "WARN"))
    spark.dataSource.register(KafkaDataSource)
    return spark


def _cores(master: str) -> int:
    m = re.match(r"local\[(\d+|\*)", master)
    if m:
        return os.cpu_count() or 2 if m.group(1) == "*" else int(m.group(1))
    return os.cpu_count() or 2
