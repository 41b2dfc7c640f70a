"""The Spark home of our sessions: Python workers import the installed pyspark, not Spark's zip."""

import os
import sys
from pathlib import Path

import pytest

from streamscale.sparkio import home


def test_the_home_links_pyspark_and_has_no_zipped_pyspark(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.delenv(home.HOME_ENV, raising=False)
    pkg = home.pyspark_dir()
    assert (pkg / "python" / "lib" / "pyspark.zip").is_file()  # what the home leaves out
    made = home.spark_home()
    assert made.parent == tmp_path / "share" / "streamscale" and made != pkg
    assert sorted(p.name for p in made.iterdir()) == ["bin", "jars", "sbin"]
    assert (made / "bin" / "spark-submit").is_file() and any((made / "jars").glob("spark-core_*.jar"))
    assert not (made / "python").exists()
    assert home.spark_home() == made  # made once, then found
    assert not [p for p in made.parent.iterdir() if p.name.startswith(".spark-home-")]  # no half-made copy left

    # a home left broken (pyspark moved, a link lost) is replaced, not used
    (made / "jars").unlink()
    assert home.spark_home() in (made, pkg)
    assert home.spark_home() == made and (made / "jars").resolve() == (pkg / "jars").resolve()

    monkeypatch.setenv(home.HOME_ENV, "0")
    assert home.spark_home() == pkg


def test_an_installation_that_cannot_hold_it_uses_pysparks_own(monkeypatch, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    monkeypatch.setattr(sys, "prefix", str(ro))
    monkeypatch.delenv(home.HOME_ENV, raising=False)
    try:
        if os.access(ro, os.W_OK):  # root writes anywhere: make the share directory a file instead
            ro.chmod(0o755)
            (ro / "share").write_text("")
        assert home.spark_home() == home.pyspark_dir()
    finally:
        ro.chmod(0o755)


@pytest.mark.spark
def test_python_workers_import_the_installed_pyspark(spark):
    jvm_home = spark.sparkContext._jvm.java.lang.System.getenv("SPARK_HOME")
    assert jvm_home == str(home.spark_home())

    def where(_):
        import os

        import pyspark
        from pyspark import SparkFiles

        # the path still names the home's python/lib/pyspark.zip, which is not there; archives a
        # job shipped with addPyFile (benchmark.py_files) sit in the session's own files folder
        shipped = SparkFiles.getRootDirectory()
        zips = [p for p in sys.path if p.endswith(".zip") and os.path.exists(p) and not p.startswith(shipped)]
        return [(pyspark.__file__, zips)]

    [(imported, zips)] = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert Path(imported).parent == home.pyspark_dir() and zips == []


def test_a_sessions_kafka_consumer_pools_let_stopped_queries_go(spark):
    # each query's pooled consumers and fetched records stay 5 minutes by Spark's default: a kept
    # session that ran query after query filled its heap (streamscale.sparkio.session.SESSION_DEFAULTS)
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.kafka.consumer.fetchedData.cache.timeout") == "30s"
    assert conf.get("spark.kafka.consumer.cache.timeout") == "30s"
