import pytest

from tests.cli.helpers import run


@pytest.fixture
def state(tmp_path):
    """A state folder of the command's own (no broker of another test's), whose broker is stopped."""
    env = {"STREAMSCALE_STATE_DIR": str(tmp_path), "STREAMSCALE_BOOTSTRAP_SERVERS": ""}
    yield env
    # `broker stop` finds a broker or cluster by the state file `broker start` writes; without one
    # it has nothing to stop, and a command's start (~0.5 CPU-s) is saved on most tests
    if any((tmp_path / name).exists() for name in ("broker.json", "cluster.json")):
        run("broker", "stop", env=env)
