"""UC1 database storage: stateless; parse, transform, write every record to a side effect.

Sinks: ``log`` (one line per record, as Theodolite's UC1 logs them: into a file beside Spark's log
by default, since 5,000 records/s are 300,000 terminal lines a minute; ``log_file: "-"``: stdout),
``none`` (Spark's noop),
``sqlite`` (one table, batch inserts in ``foreachBatch``, exactly once: a batch id table in the
same transaction makes a replayed batch a no-op), ``jdbc`` (Spark's JDBC writer; the driver jar
must be on the classpath) and ``kafka`` (the transformed record to the output topic).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import model_validator

from streamscale.errors import ConfigError
from streamscale.pipelines.base import Pipeline, PipelineParams, Query


class UC1Params(PipelineParams):
    sink: Literal["log", "none", "sqlite", "jdbc", "kafka"] = "log"
    log_file: str | None = None  # sink log: None, a file in streamscale's log folder; "-": stdout
    db_path: str = "uc1.sqlite"
    jdbc_url: str | None = None
    table: str = "active_power"

    @model_validator(mode="after")
    def _check(self):
        if self.sink == "jdbc" and not self.jdbc_url:
            raise ValueError("sink 'jdbc' needs jdbc_url")
        if not self.table.isidentifier():
            raise ValueError(f"table name '{self.table}' is not a plain identifier")
        return self


class SQLiteBatchWriter:
    """foreachBatch target: all rows of a batch and its id in one transaction."""

    def __init__(self, path: str, table: str):
        self.path, self.table = path, table
        with sqlite3.connect(path) as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (identifier TEXT NOT NULL, "
                "timestamp INTEGER NOT NULL, valueInW REAL NOT NULL, valueInKW REAL NOT NULL, "
                "kafka_partition INTEGER NOT NULL, kafka_offset INTEGER NOT NULL)"
            )
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table}_batches (batch_id INTEGER PRIMARY KEY, "
                "records INTEGER NOT NULL, written_at REAL NOT NULL)"
            )

    def __call__(self, batch_df, batch_id: int) -> None:
        rows = batch_df.select(
            "identifier", "timestamp", "valueInW", "valueInKW", "kafka_partition", "kafka_offset"
        ).toArrow()
        db = sqlite3.connect(self.path, timeout=60)
        try:
            with db:  # one transaction: the rows and the batch id, or neither
                if db.execute(f"SELECT 1 FROM {self.table}_batches WHERE batch_id = ?", (batch_id,)).fetchone():
                    return  # Spark replays the last batch after a restart: already written
                cols = [rows.column(i).to_pylist() for i in range(rows.num_columns)]
                db.executemany(f"INSERT INTO {self.table} VALUES (?, ?, ?, ?, ?, ?)", zip(*cols))
                db.execute(f"INSERT INTO {self.table}_batches VALUES (?, ?, ?)", (batch_id, rows.num_rows, time.time()))
        finally:
            db.close()


def records_log_path() -> Path:
    """Where the log sink writes by default: beside Spark's own log, one file per process."""
    return Path(tempfile.gettempdir()) / "streamscale-logs" / f"uc1-records-{os.getpid()}.log"


class LogBatchWriter:
    """foreachBatch target: each record's line appended to a file ("-": stdout)."""

    def __init__(self, path: str | None):
        self.path = None if path == "-" else Path(path) if path else records_log_path()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, batch_df, batch_id: int) -> None:
        lines = (r["line"] + "\n" for r in batch_df.select("line").toLocalIterator())
        if self.path is None:
            sys.stdout.writelines(lines)
            sys.stdout.flush()
            return
        with open(self.path, "a") as f:
            f.writelines(lines)


class UC1(Pipeline):
    name = "uc1"
    params_model = UC1Params
    windowed = False

    def describe(self) -> str:
        p = self.params
        side = {
            "log": f"log each record to {'stdout' if p.log_file == '-' else p.log_file or records_log_path()}",
            "none": "discard (noop)",
            "sqlite": f"SQLite {p.db_path} table {p.table} (batch insert, exactly once)",
            "jdbc": f"JDBC {p.jdbc_url} table {p.table}",
            "kafka": "Kafka output topic",
        }[p.sink]
        return "\n".join(
            [
                "UC1 database storage (stateless, no shuffle)",
                "  Source: Kafka input topic -> decode ActivePowerRecord (malformed -> dead-letter topic)",
                "  --> filter malformed",
                "  --> map: add valueInKW, format log line (value-only)",
                f"  --> forEach: {side}",
            ]
        )

    def send_time_field(self) -> str | None:
        return "timestamp"  # the reading's own, in the output line (the generator's send time)

    def logical_plan(self):
        from streamscale.pipelines.plans import uc1_plan

        return uc1_plan()

    def build(self, spark, records):
        from pyspark.sql import functions as F

        return records.select(
            "identifier",
            "timestamp",
            "valueInW",
            (F.col("valueInW") / 1000.0).alias("valueInKW"),
            "kafka_partition",
            "kafka_offset",
            # a JSON encoder: an identifier with a quote or backslash stays valid JSON
            F.to_json(F.struct("identifier", "timestamp", "valueInW")).alias("line"),
        )

    def write(self, q: Query) -> tuple:
        df = self.build(q.spark, self.read_input(q))
        w = df.writeStream.option("checkpointLocation", q.checkpoint).trigger(**q.trigger).queryName(q.name)
        p = self.params
        if p.sink == "kafka":
            return self.sink(df, q.bootstrap, q.output_topic, q.checkpoint, q.trigger, q.impl, q.name), {}
        if p.sink == "none":
            return w.format("noop").start(), {}
        if p.sink == "log":
            return w.foreachBatch(LogBatchWriter(p.log_file)).start(), {}
        if p.sink == "sqlite":
            return w.foreachBatch(SQLiteBatchWriter(p.db_path, p.table)).start(), {}
        if p.sink == "jdbc":
            return w.foreachBatch(functools.partial(_write_jdbc, p.jdbc_url, p.table)).start(), {}
        raise ConfigError(f"unknown UC1 sink {p.sink}")  # pragma: no cover - validated by the params model

    def sink(self, out_df, bootstrap, output_topic, checkpoint, trigger, kafka_impl, query_name):
        from pyspark.sql import functions as F

        from streamscale.sparkio.io import WriteQuery, write_kafka

        out = out_df.select(F.col("identifier").alias("key"), F.col("line").alias("value"))
        return write_kafka(out, bootstrap, output_topic, WriteQuery(checkpoint, trigger, name=query_name), kafka_impl)


def _write_jdbc(url: str, table: str, batch_df, _batch_id) -> None:
    try:
        batch_df.drop("line").write.jdbc(url, table, mode="append")
    except Exception as exc:  # noqa: BLE001 - a missing driver is a config problem
        if "No suitable driver" in str(exc):
            raise ConfigError(f"no JDBC driver for {url} on Spark's classpath (add it with spark.jars)") from exc
        raise
