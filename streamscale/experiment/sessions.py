"""The Spark sessions experiments run in: one afresh per experiment, or the last one kept for the next.

A fresh session per experiment is the benchmark method's default (each experiment independent of
the one before). Its price on a small machine is the start of the session's Python processes: an
experiment's warm-up query took 14 s in a fresh session confined to one CPU and 2-3 s in the same
session again (``/tmp`` script, three warm-ups in one session, docs/performance.md). Kept
(``keep=True``; a spec's ``execution.reuse_spark``, the demo), the session of one experiment serves
the next with the same master, configuration and CPUs, and only a change of those, a failure or
:meth:`SparkSessions.close` stops it. There is at most one session: Spark runs one per process.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from streamscale.errors import SparkDied

log = logging.getLogger(__name__)


class SparkSessions:
    """Hands out Spark sessions; with ``keep``, the last one is kept for a next use with the same
    settings. Use as a context manager (or call :meth:`close`) so a kept session is stopped."""

    def __init__(self, keep: bool = False):
        self.keep = keep
        self._spark = None
        self._key: tuple | None = None
        self._cpus: int | None = None
        self.started = 0  # sessions started: what a test of the keeping can count
        self.warmed = False  # whether the current session's workers were warmed (warm_up_workers)
        self._after_close: list = []  # run once the session is stopped (see :meth:`after_close`)

    @property
    def kept(self) -> bool:
        """Whether a session lives on for the next use."""
        return self._spark is not None

    @property
    def cpus(self) -> int | None:
        """The CPUs the current session is confined to (None: none, or no session)."""
        return self._cpus

    def would_start(self, master: str, conf: dict | None = None, cpus: int | None = None) -> bool:
        """Whether :meth:`session` with these settings would start a session (none is kept for them)."""
        return self._spark is None or _key(master, conf, cpus) != self._key

    def after_close(self, fn) -> None:
        """Run ``fn`` once the current session has stopped: e.g. delete the topics of a run whose
        stopped queries may still have a task reading them, which a deleted topic would keep
        retrying for a minute in a task slot the next run needs."""
        self._after_close.append(fn)

    @contextlib.contextmanager
    def session(self, master: str, app_name: str, conf: dict | None = None, cpus: int | None = None) -> Iterator:
        """A session on ``master`` with ``conf``, its application confined to ``cpus`` CPUs (None: not
        confined). Kept for the next use when ``keep`` and the block ended without an exception: a
        failed run leaves the session in a state nobody knows, so it is stopped."""
        key = _key(master, conf, cpus)
        if self._spark is not None and key != self._key:
            self.close()
        if self._spark is None:
            self._start(master, app_name, conf, cpus, key)
        ok = False
        try:
            yield self._spark
            ok = True
        except Exception as exc:
            from streamscale.sparkio.session import jvm_alive, jvm_death_reason

            if not jvm_alive():  # what failed was the JVM under the block: say so, not py4j's error
                reason = jvm_death_reason()
                self.close()
                raise SparkDied(reason) from exc
            raise
        finally:
            if not (ok and self.keep):
                self.close()

    def _start(self, master: str, app_name: str, conf: dict | None, cpus: int | None, key: tuple) -> None:
        from streamscale.sparkio.session import build_session

        spark = build_session(master, app_name, conf=conf, python_source=False)
        self._spark, self._key, self._cpus, self.warmed = spark, key, cpus, False
        self.started += 1
        if cpus is not None:
            from streamscale.experiment.cpus import confine_spark

            try:
                confine_spark(spark, cpus)
            except BaseException:
                self.close()
                raise

    def confine(self, cpus: int) -> None:
        """Confine the current session's application to ``cpus`` CPUs from now on (a session started
        unconfined, e.g. to warm the JVM on every CPU first); it is kept as a session on ``cpus``."""
        from streamscale.experiment.cpus import confine_spark

        if self._spark is None or self._key is None:
            raise RuntimeError("no Spark session to confine")
        confine_spark(self._spark, cpus)
        self._key, self._cpus = (*self._key[:2], cpus), cpus

    def close(self) -> None:
        """Stop the session (if any), remove what its stopped queries left, free its CPUs."""
        spark, cpus = self._spark, self._cpus
        self._spark = self._key = self._cpus = None
        self.warmed = False
        if spark is None:
            self._run_after_close()
            return
        from streamscale.pipelines.run import remove_stopped_checkpoints
        from streamscale.sparkio.session import forget_dead_jvm, jvm_alive

        try:
            if jvm_alive():
                _stop(spark)
            else:  # nothing to stop; the next session starts a new JVM
                forget_dead_jvm()
        finally:
            remove_stopped_checkpoints()
            if cpus is not None:
                from streamscale.experiment.cpus import release_spark

                release_spark()
            self._run_after_close()

    def _run_after_close(self) -> None:
        pending, self._after_close = self._after_close, []
        for fn in pending:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - cleanup: the rest still runs
                log.warning("cleanup after the Spark session failed: %s", exc)

    def __enter__(self) -> SparkSessions:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _key(master: str, conf: dict | None, cpus: int | None) -> tuple:
    return master, tuple(sorted((str(k), str(v)) for k, v in (conf or {}).items())), cpus


JVM_EXIT_S = 10.0  # how long a JVM whose gateway failed while stopping may take to exit


def _stop(spark) -> None:
    """Stop ``spark``; a JVM that dies meanwhile has nothing left to stop. A SIGTERM sent to the
    whole process group (``timeout``, a service manager) ends the JVM beside this process, which
    ends like Ctrl-C: py4j's error from the dying JVM would replace its clean exit by a traceback."""
    from py4j.protocol import Py4JError

    from streamscale.sparkio.session import forget_dead_jvm, jvm_exits

    try:
        spark.stop()
    except Py4JError:
        if not jvm_exits(JVM_EXIT_S):
            raise
        forget_dead_jvm()
