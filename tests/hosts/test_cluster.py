import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.hosts.cluster import HostsCluster, why_not
from streamscale.hosts.host import ASIDE, Host, under_tmp
from streamscale.processes import running

ROOT_ONLY = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


def test_a_hosts_command_runs_in_its_namespace_with_its_own_tmp_and_cpus(tmp_path):
    host = Host("worker", "worker-1", "10.1.2.12", "ssc-x-2", tmp_path / "w1", [1], ["venv"])
    cmd = host.command(["java", "-version"])
    assert cmd[:4] == ["ip", "netns", "exec", "ssc-x-2"]
    assert cmd[-5:] == ["taskset", "-c", "1", "java", "-version"]
    # the machine's /tmp set aside, the host's own in its place, the install brought back
    assert cmd[cmd.index("host") + 1 :][:4] == [
        str(ASIDE),
        str(tmp_path / "w1" / "tmp"),
        "venv",
        "--",
    ]
    floating = Host("broker", "broker-1", "10.1.2.14", "ssc-x-4", tmp_path / "b1")
    assert "taskset" not in floating.command(["java"])


def test_what_lies_under_tmp_is_named_relative_to_it():
    assert under_tmp(["/tmp/a/venv", "/usr/lib/jvm", "/tmp", "/tmp/a/venv/share"]) == ["a/venv", "a/venv/share"]


@ROOT_ONLY
@pytest.mark.spark
def test_a_stateful_job_on_two_worker_hosts_runs_one_executor_on_each_and_its_totals_are_exact(tmp_path):
    from confluent_kafka import Producer

    from streamscale.broker import BrokerAccess

    rng = random.Random(7)
    records = [(f"k{rng.randrange(50)}", rng.randrange(1, 1000)) for _ in range(20_000)]
    reference: dict[str, int] = {}
    for key, amount in records:  # the totals, counted here
        reference[key] = reference.get(key, 0) + amount
    with HostsCluster(workers=2, brokers=1, log_dir=tmp_path / "logs") as c:
        with BrokerAccess(c.bootstrap) as access:
            access.create_topic("amounts", partitions=4)
        producer = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "linger.ms": 20})
        for key, amount in records:
            producer.produce("amounts", key=key, value=f"{key},{amount}")
            producer.poll(0)
        assert producer.flush(30) == 0
        del producer  # destroyed with its connections before the hosts go, not retrying them after
        checkpoint = c.shared / "checkpoints" / "totals"
        out = tmp_path / "result.json"
        args = [c.master_url, c.bootstrap, "amounts", str(checkpoint), str(out)]
        subprocess.run([sys.executable, str(Path(__file__).with_name("onhosts.py")), *args], check=True, timeout=300)
        result = json.loads(out.read_text())
        assert result["finished"] and result["totals"] == reference
        workers = sorted(h.ip for h in c.role("worker"))
        # one executor of one core on each worker host, as Spark itself lists them
        assert sorted(host for _, host, _ in result["executors"]) == workers
        assert all(cores == 1 for *_, cores in result["executors"])
        # the executors reached the driver at this machine's address on the hosts' bridge, not loopback
        assert result["driver_host"] == c.network.prefix + ".1"
        # and nothing of the driver's they need (its RPC, its block manager) listens on loopback
        assert result["driver_listens"] == [c.network.prefix + ".1"]
        # the executors wrote the state into the folder every host shares
        assert list((checkpoint / "state").rglob("*.delta"))
        daemons = [h.pid for h in c.hosts]
        network = c.network.planned()
    assert not [pid for pid in daemons if running(pid)]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [item for item in network if item.startswith("netns:") and item[6:] in names]
    assert not (tmp_path / "logs" / "work").exists() or list((tmp_path / "logs" / "work").rglob("stderr"))
