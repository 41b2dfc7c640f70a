"""The Spark driver's class-data archive: written by the install, used by every session."""

from pathlib import Path

import pytest

from streamscale.sparkio import driveropts


def test_the_archive_options_come_first_and_a_users_own_follow(monkeypatch, tmp_path):
    jsa = tmp_path / "spark-driver.jsa"
    monkeypatch.setattr(driveropts, "archive_path", lambda: jsa)
    monkeypatch.delenv(driveropts.ARCHIVE_ENV, raising=False)
    assert driveropts.with_driver_options({"a": 1}) == {"a": 1}  # none installed: nothing added
    jsa.write_bytes(b"x")
    got = driveropts.with_driver_options({"spark.driver.extraJavaOptions": "-Dmine=1"})
    opts = got["spark.driver.extraJavaOptions"].split()
    assert opts[0] == f"-XX:SharedArchiveFile={jsa}" and opts[-1] == "-Dmine=1"
    # the JVM's warnings (an archive that does not fit) go to stderr, which is the Spark log
    assert "-Xlog:all=warning:stderr" in opts
    assert "spark.executor.extraJavaOptions" not in got  # local: the driver is the only JVM
    # a standalone master on this machine: its executors run on the same classpath
    got = driveropts.with_driver_options({"spark.executor.extraJavaOptions": "-Dx=2"}, "spark://127.0.0.1:7077")
    assert got["spark.executor.extraJavaOptions"].split()[::3] == [f"-XX:SharedArchiveFile={jsa}", "-Dx=2"]
    for elsewhere in ("spark://10.0.0.5:7077", "k8s://https://api:6443", "spark://127.0.0.1:7077,h2:7077"):
        assert "spark.executor.extraJavaOptions" not in driveropts.with_driver_options({}, elsewhere)
    monkeypatch.setenv(driveropts.ARCHIVE_ENV, "0")
    assert driveropts.with_driver_options({}) == {}


@pytest.mark.spark
def test_the_installed_archive_is_mapped_by_the_sessions_jvm(spark):
    path = driveropts.archive_path()
    if not path.is_file():
        pytest.fail(f"`make install` writes {path}; it is missing (see .venv/class-data.log)")
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={path}" in args
    # a JVM that cannot use the archive says so in this one line (and starts without it)
    log = Path(spark.streamscale_log).read_text(errors="replace") if spark.streamscale_log else ""
    assert "Unable to use shared archive" not in log
