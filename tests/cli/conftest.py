import pytest

from streamscale.broker import daemon


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A state folder of the command's own (no broker of another test's), whose broker is stopped."""
    env = {"STREAMSCALE_STATE_DIR": str(tmp_path), "STREAMSCALE_BOOTSTRAP_SERVERS": ""}
    yield env
    # what `broker stop` does, in this process: a command's start (~0.5 CPU-s) saved on each test,
    # most of which started no broker
    monkeypatch.setenv("STREAMSCALE_STATE_DIR", str(tmp_path))
    daemon.daemon_stop()
    daemon.cluster_stop()
