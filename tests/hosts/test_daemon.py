import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.hosts.cluster import why_not
from streamscale.processes import running

EXE = str(Path(sys.executable).parent / "streamscale")
ROOT_ONLY = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


def run(*args, env):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=180, env={**os.environ, **env})


@pytest.fixture
def state(tmp_path):
    env = {
        "STREAMSCALE_STATE_DIR": str(tmp_path / "state"),
        "STREAMSCALE_HOSTS_DIR": str(tmp_path / "hosts"),  # under /tmp: the hosts still see their folders
        "STREAMSCALE_BOOTSTRAP_SERVERS": "",
        "STREAMSCALE_METRICS_PORT": "-1",
    }
    (tmp_path / "hosts").mkdir()
    yield env
    run("cluster", "stop", env=env)


def gone_from(spaces: list[str], bridge: str) -> list[str]:
    """Which of a cluster's namespaces and its bridge are still there."""
    names, devices = netns().split(), links()
    return [n for n in spaces if n in names] + ([bridge] if f" {bridge}:" in devices else [])


def netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


@ROOT_ONLY
def test_a_cluster_started_in_the_background_is_seen_by_every_command_and_leaves_nothing_however_it_ends(state):
    r = run("cluster", "start", "--workers", "1", "--brokers", "1", env=state)
    assert r.returncode == 0, r.stderr
    info = json.loads((Path(state["STREAMSCALE_STATE_DIR"]) / "hosts.json").read_text())
    assert [h["role"] for h in info["hosts"]] == ["master", "worker", "broker"]
    r = run("cluster", "status", env=state)
    assert r.returncode == 0 and r.stdout.count("running") == 3, r.stdout
    assert info["master_url"] in r.stdout and info["bootstrap"] in r.stdout
    r = run("broker", "status", env=state)  # its broker is where every command finds one
    assert r.returncode == 0 and "1 of 1 brokers up" in r.stdout, r.stdout + r.stderr
    r = run("cluster", "start", env=state)
    assert r.returncode == 8 and "already running" in r.stderr and "Traceback" not in r.stderr
    # a spec on its master: checkpoints in its shared folder by default; no more executors than workers
    spec = Path(state["STREAMSCALE_STATE_DIR"]) / "spec.yaml"
    for values, code in (([1], 0), ([1, 2], 2)):
        spec.write_text(json.dumps(_on_master(info["master_url"], values)))
        r = run("benchmark", "validate", str(spec), env=state)
        assert r.returncode == code, r.stdout + r.stderr
    assert f"2 executors on the cluster at {info['master_url']}, which has 1 workers" in r.stderr
    spaces = [h["netns"] for h in info["hosts"]]
    bridge = "ssb" + spaces[0][3:].split("-")[0]  # ssc<tag>-1: the bridge is ssb<tag>
    assert all(n in netns() for n in spaces) and bridge in links()
    pids = [info["keeper_pid"], *(h["pid"] for h in info["hosts"])]
    os.kill(info["keeper_pid"], signal.SIGKILL)  # the keeper dies as a machine's process can
    folders = Path(state["STREAMSCALE_HOSTS_DIR"])
    # its guardian kills what runs on the hosts, removes their namespaces, the bridge, the folders
    _until(lambda: not any(running(p) for p in pids) and not gone_from(spaces, bridge) and not list(folders.iterdir()))
    assert run("cluster", "status", env=state).returncode == 1
    # started again, and stopped by the command: the same
    r = run("cluster", "start", "--workers", "1", "--brokers", "1", env=state)
    assert r.returncode == 0, r.stderr
    hosts = json.loads((Path(state["STREAMSCALE_STATE_DIR"]) / "hosts.json").read_text())["hosts"]
    spaces = [h["netns"] for h in hosts]
    bridge = "ssb" + spaces[0][3:].split("-")[0]
    r = run("cluster", "stop", env=state)
    assert r.returncode == 0 and "stopped the cluster" in r.stdout
    assert not any(running(h["pid"]) for h in hosts) and not gone_from(spaces, bridge)
    assert not list(Path(state["STREAMSCALE_HOSTS_DIR"]).iterdir())


def _until(cond, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "the killed cluster's hosts were still there"
        time.sleep(0.1)


def _on_master(master: str, executors: list[int]) -> dict:
    return {
        "name": "on-master",
        "benchmark": {"sut": "uc1", "params": {"sink": "none"}},
        "execution": {
            "load": {"type": "rate", "values": [1000]},
            "resources": {"type": "executors", "values": executors},
            "master": master,
        },
    }
