"""The Spark driver's (and a local standalone cluster's executors') JVM options for the class-data
archive that ``make install`` writes (:mod:`streamscale.sparkio.classdata` says why and how)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ARCHIVE_ENV = "STREAMSCALE_SPARK_CDS"


def archive_path() -> Path:
    return Path(sys.prefix) / "share" / "streamscale" / "spark-driver.jsa"


def driver_java_options() -> str:
    """What the driver's JVM needs to use the archive, or "" without one. The JVM's unified log
    (its warnings, e.g. an archive that does not fit) goes to stderr, the Spark log, not stdout."""
    if os.environ.get(ARCHIVE_ENV, "1") == "0":
        return ""
    path = archive_path()
    if not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xlog:disable -Xlog:all=warning:stderr"


def with_driver_options(conf: dict, master: str = "local") -> dict:
    """``conf`` with the archive's options ahead of the user's own driver options (theirs win); on a
    standalone master on this machine (``spark://127.0.0.1:…``, a cluster of streamscale's or one
    started from the same pyspark) the executors' too: their JVMs run on the driver's classpath, as
    the master's and workers' do. A cluster elsewhere has no such file: nothing added."""
    opts = driver_java_options()
    if not opts:
        return conf
    out = dict(conf)
    keys = ["spark.driver.extraJavaOptions"]
    if re.match(r"spark://(127\.0\.0\.1|localhost):\d+$", master):
        keys.append("spark.executor.extraJavaOptions")
    for key in keys:
        out[key] = f"{opts} {conf.get(key, '')}".strip()
    return out
