"""A class-data archive for the Spark driver's JVM (Java's AppCDS), made once by ``make install``.

Starting a Spark session loads some 10,000 classes from pyspark's jars and compiles the code that
runs first; on 2 CPUs that cost 10 s and 23 CPU-s for a session start and its first trivial job.
With the classes mapped from an archive written by one earlier JVM (``-XX:ArchiveClassesAtExit``)
the same took 6.5 s and 13 CPU-s (measured 2026-11-26, Java 17, local[1]). Every run, test and
experiment starts at least one session, so the archive is made at install time, never at run time.

The archive fits one JDK and one pyspark: a JVM that finds it does not fit (another JDK, an
upgraded pyspark) says so in one warning line, in the Spark log like the JVM's other output, and
starts as it would without it. ``STREAMSCALE_SPARK_CDS=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from streamscale.sparkio.driveropts import ARCHIVE_ENV, archive_path


def _workload(spark) -> None:
    """What a run's session does first: batch jobs, JSON decoding, a windowed streaming aggregation
    with a watermark and its state store; so that their classes are in the archive."""
    import tempfile

    from pyspark.sql import functions as F

    spark.range(1000).selectExpr("id % 7 AS k", "id AS v").groupBy("k").sum("v").collect()
    schema = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"
    with tempfile.TemporaryDirectory(prefix="streamscale-cds-") as tmp:
        src = Path(tmp) / "in"
        src.mkdir()
        (src / "part.json").write_text(
            "".join(f'{{"identifier":"s_{i % 10}","timestamp":{i * 100},"valueInW":{i}.5}}\n' for i in range(1000))
        )
        rows = (
            spark.readStream.schema(schema)
            .json(str(src))
            .withColumn("ts", F.timestamp_millis("timestamp"))
            .withWatermark("ts", "1 second")
            .groupBy(F.window("ts", "10 seconds"), "identifier")
            .agg(F.avg("valueInW"), F.count("*"))
        )
        q = (
            rows.writeStream.format("memory")
            .queryName("streamscale_cds")
            .outputMode("append")
            .option("checkpointLocation", str(Path(tmp) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        q.stop()


def build_archive() -> int:
    """Write the archive (``make install``): one session runs :func:`_workload`, and its JVM writes
    the classes it loaded as it exits. Written beside its place and moved there when whole."""
    from pyspark import SparkContext

    from streamscale.broker.classdata import keep_archive
    from streamscale.sparkio.session import build_session

    path = archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    os.environ[ARCHIVE_ENV] = "0"  # not the old archive's options while the new one is made
    spark = build_session(
        "local[2]",
        "streamscale-class-data",
        conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={tmp} -Xlog:disable -Xlog:all=off"},
        python_source=False,
    )
    try:
        _workload(spark)
    finally:
        spark.stop()
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        code = None
        if proc is not None:  # the archive is written as the JVM exits: wait for it
            proc.stdin.close()
            code = proc.wait(300)
    if not keep_archive(tmp, path, code in (0, None)):
        print(f"the JVM wrote no class-data archive; Spark sessions start without one ({tmp})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(build_archive())
