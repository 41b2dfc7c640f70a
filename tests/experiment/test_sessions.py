"""Which Spark session an experiment gets: afresh each time, or the last one kept for the same
settings; a failure, a change of settings or close stops it (with a stand-in for Spark: what is
checked is the keeping, not Spark)."""

import pytest

import streamscale.experiment.cpus as cpus
import streamscale.sparkio.session as session_mod
from streamscale.experiment.sessions import SparkSessions


class FakeSpark:
    def __init__(self, master, conf):
        self.master, self.conf, self.stopped = master, conf, False

    def stop(self):
        self.stopped = True


@pytest.fixture
def spark_log(monkeypatch):
    log = []

    def build(master, app_name, conf=None, python_source=True):
        assert not python_source  # registered when a run reads with it (sparkio.io), not for every session
        s = FakeSpark(master, conf)
        log.append(("start", master, s))
        return s

    monkeypatch.setattr(session_mod, "build_session", build)
    monkeypatch.setattr(cpus, "confine_spark", lambda spark, k: log.append(("confine", k, spark)))
    monkeypatch.setattr(cpus, "release_spark", lambda: log.append(("release",)))
    return log


def test_without_keeping_every_use_starts_and_stops_its_own(spark_log):
    s = SparkSessions()
    with s.session("local[1]", "a", cpus=1) as one:
        assert not one.stopped
    with s.session("local[1]", "a", cpus=1) as two:
        pass
    assert one is not two and one.stopped and two.stopped and s.started == 2
    assert [e[0] for e in spark_log] == ["start", "confine", "release", "start", "confine", "release"]


def test_kept_sessions_serve_the_same_settings_and_change_with_them(spark_log):
    with SparkSessions(keep=True) as s:
        with s.session("local[1]", "probe", cpus=1) as a:
            s.warmed = True
        with s.session("local[1]", "uc2", {}, cpus=1) as b:  # another name, same settings
            assert s.warmed
        assert a is b and not a.stopped and s.started == 1
        with s.session("local[2]", "uc2", cpus=2) as c:
            assert a.stopped and not s.warmed  # one Spark per process: the old one stops first
        with s.session("local[2]", "uc2", {"spark.x": 1}, cpus=2) as d:
            assert c.stopped
        assert not d.stopped and s.started == 3
    assert d.stopped and spark_log[-1] == ("release",)


def test_a_failure_inside_stops_the_kept_session(spark_log):
    s = SparkSessions(keep=True)
    with pytest.raises(RuntimeError), s.session("local[1]", "a", cpus=1) as a:
        raise RuntimeError("the run failed")
    assert a.stopped and ("release",) in spark_log
    with s.session("local[1]", "a", cpus=1) as b:
        assert b is not a
    s.close()


def test_a_session_confined_later_is_kept_as_one_on_those_cpus(spark_log):
    with SparkSessions(keep=True) as s:
        assert s.would_start("local[1]", cpus=1) and s.cpus is None
        with s.session("local[1]", "probe") as a:  # on every CPU first, to warm up
            assert s.would_start("local[1]", cpus=1) and not s.would_start("local[1]")
            s.confine(1)
        assert not s.would_start("local[1]", cpus=1) and s.cpus == 1
        assert s.would_start("local[1]", {"spark.x": "1"}, cpus=1)  # other settings: another session
        with s.session("local[1]", "uc2", cpus=1) as b:
            pass
        assert a is b and s.started == 1 and ("confine", 1, a) in spark_log
    assert spark_log[-1] == ("release",)  # confined, so its CPUs are given back when it stops


def test_confining_without_a_session_is_an_error():
    with pytest.raises(RuntimeError, match="no Spark session"):
        SparkSessions(keep=True).confine(1)


def test_work_after_close_runs_once_when_the_session_is_gone_and_survives_a_failure(caplog):
    calls = []

    def fails():
        calls.append("fails")
        raise RuntimeError("broker gone")

    s = SparkSessions(keep=True)
    s.after_close(fails)
    s.after_close(lambda: calls.append("deleted"))
    assert calls == [] and not s.kept
    s.close()
    assert calls == ["fails", "deleted"]  # the second ran although the first failed
    assert "cleanup after the Spark session failed: broker gone" in caplog.text
    s.close()
    assert calls == ["fails", "deleted"]  # once


_DEATH = """
import os, signal, sys
from pyspark import SparkContext
from streamscale.errors import SparkDied
from streamscale.experiment.sessions import SparkSessions

s = SparkSessions(keep=True)
try:
    with s.session("local[1]", "dies") as spark:
        assert spark.range(5).count() == 5
        os.kill(SparkContext._gateway.proc.pid, signal.SIGKILL)
        SparkContext._gateway.proc.wait()
        spark.range(5).count()
    print("no error")
except SparkDied as e:
    print("died:", e)
with s.session("local[1]", "again") as spark:  # a new JVM
    print("again:", spark.range(7).count())
s.close()
"""


@pytest.mark.spark
def test_a_dead_jvm_is_said_and_the_next_session_starts_a_new_one(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "STREAMSCALE_SPARK_LOG": str(tmp_path / "spark.log")}
    p = subprocess.Popen(
        [sys.executable, "-c", _DEATH],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, err[-2000:]
    lines = out.splitlines()
    assert lines[0].startswith("died: Spark's JVM exited (code -9)"), out
    assert lines[1] == "again: 7", out
