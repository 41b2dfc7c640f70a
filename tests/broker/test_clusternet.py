"""Network namespaces and links a run made are written down with its process id, so that what a
SIGKILLed run leaves is removed by the next one; a SIGTERMed command cleans up as Ctrl-C does."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.broker.clusternet import ClusterNetwork, namespaces_available, remove_stale_networks

EXE = str(Path(sys.executable).parent / "streamscale")


def names(kind: str) -> set[str]:
    cmd = ["ip", "netns", "list"] if kind == "netns" else ["ip", "-o", "link", "show"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    if kind == "netns":
        return {line.split()[0] for line in out.splitlines() if line.strip()}
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCALE_STATE_DIR", str(tmp_path))
    return tmp_path / "networks"


def test_a_network_whose_maker_died_is_removed_by_the_next_run(ledger):
    ok, why = namespaces_available()
    if not ok:
        pytest.skip(why)
    before_ns, before_links = names("netns"), names("link")
    # made by a process that is gone: a child that exits at once
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    net = ClusterNetwork(2).create()
    record = ledger / f"{net.tag}.json"
    assert json.loads(record.read_text())["pid"] == os.getpid()
    record.write_text(json.dumps({"pid": child.pid, "items": net.planned()}))
    net.created = []  # as if its maker were SIGKILLed: nobody destroys it
    assert names("netns") > before_ns and net.bridge in names("link")
    assert remove_stale_networks() == 1
    assert names("netns") == before_ns and names("link") == before_links
    assert not record.exists()


def test_a_live_makers_network_is_left_alone_and_its_own_destroy_forgets_it(ledger):
    ok, why = namespaces_available()
    if not ok:
        pytest.skip(why)
    net = ClusterNetwork(1).create()
    try:
        assert remove_stale_networks() == 0 and net.netns(1) in names("netns")
    finally:
        net.destroy()
    assert net.netns(1) not in names("netns") and not list(ledger.glob("*.json"))


def test_a_sigtermed_command_ends_as_ctrl_c_does(tmp_path, broker, topic_factory):
    import signal
    import time

    topic = topic_factory(1)
    env = {**os.environ, "STREAMSCALE_STATE_DIR": str(tmp_path), "STREAMSCALE_METRICS_PORT": "-1"}
    p = subprocess.Popen(
        [EXE, "generate", "-s", "100", "--topic", topic, "-b", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        line = ""
        while ("records/s" not in line or "target" in line) and time.monotonic() < deadline:
            line = p.stderr.readline()  # its first second's figures: the workers run
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
