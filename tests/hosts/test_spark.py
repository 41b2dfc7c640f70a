import socket

import pytest

from streamscale.hosts import spark as standalone
from streamscale.ports import free_port, port_open


@pytest.mark.spark
def test_a_master_whose_port_was_taken_is_reached_where_it_bound(tmp_path, monkeypatch):
    # another process binds the master's port between its pick and the master's start: Spark moves
    # the master to a free port, and the URL must name that one, not the other process
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(standalone, "free_port", lambda: next(picks, None) or free_port())
        with standalone.StandaloneCluster(workers=0, log_dir=tmp_path / "cluster", timeout=60) as c:
            assert c.port != taken.getsockname()[1]
            assert c.master_url == f"spark://127.0.0.1:{c.port}"
            assert port_open("127.0.0.1", c.port) and port_open("127.0.0.1", c.ui_port)
            assert f"Starting Spark master at {c.master_url}\n" in (tmp_path / "cluster" / "master.log").read_text()
        assert c.procs == []
