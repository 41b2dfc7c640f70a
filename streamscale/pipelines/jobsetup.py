"""How a user's job is fed and where it writes, beyond its records (:class:`JobSetup`): the
records' fields or Spark's own Kafka columns, the output topic or a sink of Spark's (a format and
its options, or the job's own ``foreachBatch`` function), and the modules it needs beside it.

``decode: raw`` hands the job the DataFrame Spark's Kafka connector gives (``key``, ``value``,
``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``): decoding is
then the job's own, and nothing counts as malformed. The processing latency is measured as for any
job, from each record's Kafka timestamp to the commit of the batch that processed it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from streamscale.errors import ConfigError

DECODES = ("fields", "raw")
FILE_FORMATS = ("parquet", "json", "csv", "orc", "text")


@dataclass(frozen=True)
class JobSetup:
    """``decode``: fields (the records section's, malformed values counted) or raw (Spark's Kafka
    columns); ``sink_format`` / ``sink_options``: a DataStreamWriter format and its options (None:
    the output topic); ``foreach_batch``: FILE.py:FUNC called as ``func(batch_df, batch_id)`` for
    each micro-batch instead; ``py_files``: modules or .zip archives put on the path here and
    shipped with ``addPyFile``; ``output_dir``: where a file sink writes when its options name no
    ``path`` (the run's output folder; None: a folder in the temporary directory)."""

    decode: str = "fields"
    sink_format: str | None = None
    sink_options: tuple[tuple[str, str], ...] = ()
    foreach_batch: str | None = None
    py_files: tuple[str, ...] = ()
    output_dir: str | None = None

    def __post_init__(self):
        if self.decode not in DECODES:
            raise ConfigError(f"decode must be one of {', '.join(DECODES)}, not '{self.decode}'")
        if self.sink_format and self.foreach_batch:
            raise ConfigError("sink: give a format or foreach_batch, not both")

    def is_default(self) -> bool:
        """Whether it asks for nothing but the records' fields into the output topic."""
        return replace(self, output_dir=None) == JobSetup()

    @property
    def own_sink(self) -> bool:
        return bool(self.sink_format or self.foreach_batch)

    def describe_sink(self) -> str:
        if self.foreach_batch:
            return f"foreachBatch {self.foreach_batch.rpartition(':')[2]}()"
        return f"Spark's {self.sink_format} sink"


def add_py_files(files: tuple[str, ...]) -> None:
    """Each module or archive on this process's path (a .py by its folder, a .zip as itself)."""
    for f in files:
        path = Path(f)
        if not path.exists():
            raise ConfigError(f"py_files: {f} does not exist")
        entry = str(path.parent if path.suffix == ".py" else path)
        if entry not in sys.path:
            sys.path.append(entry)


def ship_py_files(spark, files: tuple[str, ...]) -> None:
    """The modules and archives to Spark's Python workers (their path is not this process's)."""
    for f in files:
        spark.sparkContext.addPyFile(str(f))


def foreach_batch_function(ref: str):
    """The user's ``foreachBatch`` function, or a ConfigError saying why it is not there."""
    from streamscale.pipelines import jobref

    try:
        return jobref.load(ref)
    except ConfigError as exc:
        raise ConfigError(f"sink.foreach_batch: {exc}") from None


def check_format(spark, fmt: str) -> None:
    """A ConfigError unless this Spark has a streaming sink of that name (before any load)."""
    jvm = spark._jvm
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, spark._jsparkSession.sessionState().conf()
        )
    except Exception:  # noqa: BLE001 - Py4J wraps Spark's own error: the name is what the user must fix
        raise ConfigError(
            f"sink.format: '{fmt}' is not a data source this Spark has (built in: kafka, parquet, json, csv, "
            "orc, text, noop, console, memory; others need their jars on spark.jars)"
        ) from None


def start_sink(out, mode: str, q, setup: JobSetup, job_name: str):
    """Start the job's output ``out`` into its own sink (format or foreachBatch)."""
    w = out.writeStream.outputMode(mode).option("checkpointLocation", q.checkpoint)
    if setup.foreach_batch:
        w = w.foreachBatch(foreach_batch_function(setup.foreach_batch))
    else:
        options = dict(setup.sink_options)
        if setup.sink_format in FILE_FORMATS and "path" not in options:
            options["path"] = default_sink_path(setup, job_name)
        w = w.format(setup.sink_format)
        for k, v in options.items():
            w = w.option(k, str(v))
    return w.trigger(**q.trigger).queryName(q.name).start()


def default_sink_path(setup: JobSetup, job_name: str) -> str:
    """A file sink's folder when its options name none: one per run, in the run's output folder."""
    import tempfile

    base = Path(setup.output_dir) if setup.output_dir else Path(tempfile.gettempdir()) / "streamscale-sink"
    path = base / f"{job_name}-{int(time.time() * 1000)}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)
