"""SparkSession set-up that works on a fresh machine: Java check, worker interpreter, loopback."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socketserver
import subprocess
import sys
import traceback
from pathlib import Path

from streamscale.broker.connection import kafka_log_path
from streamscale.errors import JavaMissing, SparkError
from streamscale.processes import new_children_killed_on_error
from streamscale.sparkio.driveropts import with_driver_options
from streamscale.sparkio.home import spark_home
from streamscale.sparkio.logpath import spark_log_on_stderr, spark_log_path

MIN_JAVA = 17

# Spark's Kafka connector keeps each query's consumers and the records they fetched ahead in pools
# keyed by the query's own group id, for 5 minutes after their last use. A session that runs query
# after query (a benchmark's kept session, the tests') kept every stopped query's: the driver's
# heap grew by ~18 MB per 200,000-record query (12 queries: 480,000 ConsumerRecords retained,
# 200 MB of byte arrays; `jmap -histo:live`), and a windowed-output benchmark ran out of its 1 GiB
# after ~22 queries. 30 s still spans any batch interval a run of these pipelines has; the user's
# own settings win.
SESSION_DEFAULTS = {
    "spark.kafka.consumer.cache.timeout": "30s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "10s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "30s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "10s",
}


def java_version() -> int:
    """Major version of the `java` that Spark will start (JAVA_HOME first, then PATH)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaMissing(
            "Spark needs Java 17 or newer and no `java` was found: install it "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise JavaMissing(f"could not read the version of {java}: {out.stderr.strip()[:200]}")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise JavaMissing(
            f"Spark needs Java {MIN_JAVA}+, but {java} is Java {major}: install "
            "openjdk-17-jre-headless (or newer) or point JAVA_HOME at one"
        )
    return major


def prepare_environment() -> None:
    """Environment that PySpark needs here: workers use this interpreter, Spark binds to loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # pyspark's home, less the zipped pyspark that workers would recompile (streamscale.sparkio.home)
    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    kafka_log_path()  # fixed before the JVM starts: its Python workers' Kafka clients log there too


_JVM_LOG: list[str | None] = [None]  # where this process's JVM writes, once it has been started here


@contextlib.contextmanager
def _stderr_to(path: Path):
    """The process's file descriptor 2 points at ``path`` while the JVM starts, so the JVM, and the
    Python workers it starts later, write their WARN lines, stack traces and worker tracebacks of
    stopped queries there for their whole life; this process's stderr is restored afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def build_session(
    master: str = "local[2]",
    app_name: str = "streamscale",
    conf: dict | None = None,
    shuffle_partitions: int | None = None,
    ui: bool = False,
    python_source: bool = True,
):
    """A SparkSession with the streamscale Kafka data source registered (``python_source=False``:
    registered on first use by :mod:`streamscale.sparkio.io` instead, see :func:`use_python_source`).

    Spark's and Java's output goes to :func:`spark_log_path` (``spark.streamscale_log`` on the
    session), unless ``STREAMSCALE_SPARK_LOG=-`` keeps it on stderr.
    """
    java_version()
    prepare_environment()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    if active is not None and active.master != master:
        # getOrCreate would hand back the running session whatever master was asked for: a run
        # "on the cluster" would then measure the local session (and stopping it, stop the caller's)
        raise SparkError(
            f"a Spark session on {active.master} already runs in this process: stop it before starting one on {master}"
        )
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in _session_conf(master, conf, shuffle_partitions, ui).items():
        builder = builder.config(k, str(v))
    _quiet_accumulator_servers()
    with _jvm_stopped_if_its_start_fails():
        if spark_log_on_stderr() or SparkContext._gateway is not None:
            spark = builder.getOrCreate()  # the JVM runs already (or the user wants its output on stderr)
        else:
            log = spark_log_path()
            with _stderr_to(log):
                spark = builder.getOrCreate()
            _JVM_LOG[0] = str(log)
    spark.streamscale_log = _JVM_LOG[0]  # the JVM outlives a stopped session: its log stays the same
    spark.sparkContext.setLogLevel(os.environ.get("STREAMSCALE_SPARK_LOG_LEVEL", "WARN"))
    if python_source:
        use_python_source(spark)
    return spark


def _gateway_proc():
    """The JVM process pyspark holds as its gateway (None: none yet)."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


@contextlib.contextmanager
def _jvm_stopped_if_its_start_fails():
    """A session's start that ends in an exception leaves no JVM to nobody, killed by its process:

    - one pyspark launched but does not hold yet (a Ctrl-C or SIGTERM while it waits for the JVM to
      answer): its main thread fails to report its port (pyspark removed the folder on the way
      out), its gateway thread keeps it alive, and it ignores SIGINT;
    - on a Ctrl-C or SIGTERM, the one pyspark took but no SparkContext runs on yet: pyspark forgets
      it too (a later session here starts another), so the stop does not rest on the JVM noticing
      this process's end.

    A JVM pyspark holds is otherwise left: a later session reuses it, and pyspark ends it on exit."""
    from pyspark import SparkContext

    with new_children_killed_on_error("pyspark-shell", kept=lambda: {p.pid} if (p := _gateway_proc()) else set()):
        try:
            yield
        except (KeyboardInterrupt, SystemExit):
            proc = _gateway_proc()
            if proc is not None and SparkContext._active_spark_context is None:
                SparkContext._gateway = SparkContext._jvm = None
                proc.kill()
                proc.wait()
            raise


def _session_conf(master: str, conf: dict | None, shuffle_partitions: int | None, ui: bool) -> dict:
    """Every setting a session starts with: streamscale's, then the caller's ``conf`` over them."""
    settings = {
        "spark.ui.enabled": str(ui).lower(),
        "spark.driver.host": os.environ.get("SPARK_DRIVER_HOST", "127.0.0.1"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if master.startswith("local"):
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if shuffle_partitions is None:
        # One shuffle partition per task slot on a local master: each costs a state-store commit
        # and a Python writer task per micro-batch, fixed costs that set the batch time of a
        # streaming run (UC2 at 20,000/s on local[2]: median batch 2.35 s with 4, 1.63 s with 2).
        # A cluster's slots are not known before the session exists: twice the driver's cores.
        shuffle_partitions = _cores(master) if master.startswith("local") else max(2, _cores(master) * 2)
    settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    conf = with_driver_options({**SESSION_DEFAULTS, **(conf or {})}, master)  # and the class-data archive
    jars = spark_kafka_jars()
    if jars:
        # Spark's Kafka connector for format("kafka"), installed by `make install`: on the driver's
        # classpath and shipped to every executor (a standalone cluster's workers too)
        conf["spark.jars"] = ",".join([*([conf["spark.jars"]] if conf.get("spark.jars") else []), *map(str, jars)])
    return {**settings, **conf}


def codegen_compiles(spark) -> int:
    """Janino compiles of generated code so far in the session's JVM (Spark's codegen metrics). A
    query that compiles in every batch pays for it in each, and runs code the JIT has not seen."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def use_python_source(spark) -> None:
    """Register the ``streamscale-kafka`` data source on ``spark`` once. Registration costs seconds
    however early it runs, so a session of Spark's own connector skips it."""
    from streamscale.sparkio.kafka import KafkaDataSource

    jsession = spark._jsparkSession
    if getattr(spark, "_streamscale_python_source", None) is not jsession:
        spark.dataSource.register(KafkaDataSource)
        spark._streamscale_python_source = jsession
    # Spark finds a Python data source by name in the *active* session of the calling JVM thread
    # (DataSource.lookupDataSource), and each Python thread has its own JVM thread (pinned mode),
    # which may have none: a query started from another thread, or after py4j replaced the
    # thread's connection, failed with DATA_SOURCE_NOT_FOUND although the source was registered.
    set_active = getattr(getattr(spark, "_jvm", None), "SparkSession", None)
    if set_active is not None:
        set_active.setActiveSession(jsession)


SPARK_KAFKA_LIBS_ENV = "STREAMSCALE_SPARK_KAFKA_LIBS"


def has_spark_avro() -> bool:
    """Whether Spark's Avro functions were installed beside its Kafka connector."""
    return any(j.name.startswith("spark-avro_") for j in spark_kafka_jars())


def spark_kafka_jars() -> list[Path]:
    """Spark's Kafka connector and its runtime dependencies as installed (``make install``), or none."""
    env = os.environ.get(SPARK_KAFKA_LIBS_ENV)
    libs = Path(env) if env else Path(sys.prefix) / "share" / "streamscale" / "spark-kafka"
    return sorted(libs.glob("*.jar")) if libs.is_dir() else []


def _quiet_accumulator_servers() -> None:
    """PySpark's accumulator server (a socketserver thread in this process) prints a traceback to
    stderr (EOFError) when the JVM closes its connection as a session stops: the normal end of a
    session, written to the Spark log like the JVM's own output (unless that is stderr)."""
    from pyspark import accumulators

    def handle_error(self, request, client_address):
        if spark_log_on_stderr():
            return socketserver.BaseServer.handle_error(self, request, client_address)
        try:
            with open(_JVM_LOG[0] or spark_log_path(), "a") as f:
                f.write(f"accumulator server ({client_address}): {traceback.format_exc()}")
        except OSError:
            pass

    for name in ("AccumulatorTCPServer", "AccumulatorUnixServer"):
        cls = getattr(accumulators, name, None)
        if cls is not None:
            cls.handle_error = handle_error


def _jvm_proc():
    """This process's Spark JVM as pyspark's gateway started it (None: none, or not known)."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def jvm_alive() -> bool:
    """Whether this process's Spark JVM (started by pyspark's gateway) is running; True when none
    was started here or its process is not known (a JVM given to pyspark from outside)."""
    proc = _jvm_proc()
    return proc is None or proc.poll() is None


def jvm_exits(timeout_s: float) -> bool:
    """Whether this process's Spark JVM has exited or does within ``timeout_s`` (False where its
    process is not known)."""
    proc = _jvm_proc()
    if proc is None:
        return False
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def jvm_death_reason() -> str:
    """Why this process's Spark JVM exited, as far as its exit code and its log's end say."""
    proc = _jvm_proc()
    code = proc.poll() if proc is not None else None
    log = _JVM_LOG[0]
    tail = ""
    if log:
        with contextlib.suppress(OSError), open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - (1 << 20)))
            tail = f.read().decode("utf-8", "replace")
    if "java.lang.OutOfMemoryError" in tail:
        return f"Spark's JVM ran out of memory (java.lang.OutOfMemoryError in {log})"
    return f"Spark's JVM exited (code {code})" + (f"; its log: {log}" if log else "")


def forget_dead_jvm() -> None:
    """Drop pyspark's handles on a JVM that exited, so that the next session starts a new one."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    with contextlib.suppress(Exception):
        gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None


def _cores(master: str) -> int:
    m = re.match(r"local\[(\d+|\*)", master)
    if m:
        return os.cpu_count() or 2 if m.group(1) == "*" else int(m.group(1))
    return os.cpu_count() or 2
