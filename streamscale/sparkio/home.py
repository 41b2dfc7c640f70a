"""The Spark home of the sessions and standalone clusters streamscale starts: pyspark's own, less
the copy of pyspark that Spark hands its Python workers.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) at the head of every Python
worker's path. Python keeps no bytecode for a module imported from a zip: each Python process Spark
starts (a worker daemon per kind of work, each worker it forks, a streaming query's source runner)
compiled the parts of pyspark it imports again, 1-2 CPU-s a process. The home made here links
pyspark's ``bin``, ``sbin`` and ``jars`` and has no ``python/lib``: the workers import the pyspark
installed beside streamscale (the same release as the jars, its bytecode compiled once):
``benchmarks/python_workers.py`` measures what it saves.

A ``SPARK_HOME`` the user set is theirs and is kept; ``STREAMSCALE_SPARK_HOME=0`` uses pyspark's
own directory as before.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HOME_ENV = "STREAMSCALE_SPARK_HOME"
LINKED = ("bin", "sbin", "jars")


def pyspark_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def spark_home() -> Path:
    """The home for a Spark JVM started here (made on first use, once per pyspark release); pyspark's
    own directory when it cannot be made (a read-only installation) or is turned off."""
    pkg = pyspark_dir()
    if os.environ.get(HOME_ENV, "1") == "0":
        return pkg
    from pyspark.version import __version__

    home = Path(sys.prefix) / "share" / "streamscale" / f"spark-home-{__version__}"
    if _whole(home, pkg):
        return home
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=home.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the installation's other users start sessions too
        for name in LINKED:
            (tmp / name).symlink_to(pkg / name, target_is_directory=True)
        try:
            tmp.rename(home)  # atomic: a process starting a session beside us sees all of it or none
        except OSError:  # made by another process meanwhile (or a stale, broken one is in the way)
            shutil.rmtree(tmp, ignore_errors=True)
            if not _whole(home, pkg):
                shutil.rmtree(home, ignore_errors=True)
                return pkg
    except OSError:
        return pkg
    return home


def _whole(home: Path, pkg: Path) -> bool:
    return all((home / n).is_symlink() and (home / n).resolve() == (pkg / n).resolve() for n in LINKED)
