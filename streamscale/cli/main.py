"""The ``streamscale`` console script: the root command with every concern's commands registered."""

# the order of registration is the order of `streamscale --help`
# isort: off
from streamscale.cli import loadgen, doctor, benchmark, broker, cluster, autoscale, reliability, topology  # noqa: F401
# isort: on

from streamscale.cli.app import app, register, root

__all__ = ["app", "register", "root"]

if __name__ == "__main__":
    app()
