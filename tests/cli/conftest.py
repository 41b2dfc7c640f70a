import pytest

from tests.cli.helpers import run


@pytest.fixture
def state(tmp_path):
    """A state folder of the command's own (no broker of another test's), whose broker is stopped."""
    env = {"STREAMSCALE_STATE_DIR": str(tmp_path), "STREAMSCALE_BOOTSTRAP_SERVERS": ""}
    yield env
    run("broker", "stop", env=env)
