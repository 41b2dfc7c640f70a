"""Where a cluster's executors reach the driver: the master's host read from its URL, and this
machine's address on the route towards it (a host of its own: a network namespace behind a veth
pair, whose far end is the only address of ours it can reach)."""

import os
import subprocess
import uuid

import pytest

from streamscale.benchmark.plan import resolve
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from streamscale.sparkio.address import driver_conf, master_host, route_address


def cluster_spec(master: str = "spark://127.0.0.1:7077", resources: str = "executors", **execution) -> dict:
    """A UC1 spec on ``master``, its ``resources`` 1 and 2, more ``execution`` settings over it."""
    ex = {
        "master": master,
        "load": {"type": "rate", "values": [1000]},
        "resources": {"type": resources, "values": [1, 2]},
        **execution,
    }
    return {"name": "cluster", "benchmark": {"sut": "uc1"}, "execution": ex}


@pytest.mark.parametrize(
    ("master", "host"),
    [
        ("local[2]", None),
        ("spark://10.0.0.5:7077", "10.0.0.5"),
        ("spark://m1.example:7077,m2.example:7077", "m1.example"),
        ("k8s://https://api.example:6443", "api.example"),
        ("k8s://api.example:6443", "api.example"),
        ("spark://[fd00::5]:7077", "fd00::5"),
    ],
)
def test_the_masters_host_is_read_from_its_url(master, host):
    assert master_host(master) == host


def test_a_local_master_keeps_the_sessions_loopback_and_a_given_address_wins():
    assert driver_conf("local[2]") == {}
    assert driver_conf("spark://127.0.0.1:7077") == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    assert driver_conf("spark://127.0.0.1:7077", "10.1.2.3")["spark.driver.host"] == "10.1.2.3"
    with pytest.raises(ConfigError, match="master host no-such-host.invalid: not found"):
        route_address("no-such-host.invalid")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_the_driver_address_is_ours_on_the_route_towards_a_master_on_a_host_of_its_own():
    ns, a, b = f"ss-{uuid.uuid4().hex[:6]}", f"sa{uuid.uuid4().hex[:6]}", f"sb{uuid.uuid4().hex[:6]}"
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        _ip("link", "set", b, "netns", ns)
        _ip("addr", "add", "10.231.7.1/24", "dev", a)
        _ip("link", "set", a, "up")
        _ip("-n", ns, "addr", "add", "10.231.7.2/24", "dev", b)
        _ip("-n", ns, "link", "set", b, "up")
        assert route_address("10.231.7.2") == "10.231.7.1"  # not 127.0.0.1: the master's host reaches it
        spec = cluster_spec("spark://10.231.7.2:7077", checkpoint_dir="hdfs://10.231.7.2:8020/ckpt")
        plan = resolve(parse_spec(spec))
        conf = plan.session_conf(plan.point(1000, 1))
        assert conf["spark.driver.host"] == "10.231.7.1" and conf["spark.driver.bindAddress"] == "10.231.7.1"
        assert conf["spark.executor.instances"] == 1  # the point's own settings beside them
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def test_a_kubernetes_master_without_an_image_is_refused_in_one_line():
    spec = cluster_spec("k8s://https://api.example:6443", checkpoint_dir="s3a://bucket/ckpt")
    with pytest.raises(ConfigError) as exc:
        parse_spec(spec)
    said = str(exc.value)
    assert "a Kubernetes run needs the container image" in said and "spark.kubernetes.container.image" in said
    assert said.count("\n") <= 1  # the spec's name line and this one
    spec["execution"]["spark_conf"] = {"spark.kubernetes.container.image": "registry.example/streamscale:1"}
    assert parse_spec(spec).execution.spark_conf["spark.kubernetes.container.image"].endswith(":1")
    spec["execution"]["spark_conf"] = {"kubernetes.image": "x"}
    with pytest.raises(ConfigError, match="execution.spark_conf.kubernetes.image: Spark's settings start with"):
        parse_spec(spec)


def test_a_checkpoint_on_a_cluster_must_be_on_storage_every_host_reads(tmp_path):
    def spec(**execution):
        return parse_spec(cluster_spec(**{"master": "spark://10.0.0.5:7077", **execution}))

    with pytest.raises(ConfigError, match="checkpoint would be a temporary folder on the driver, which executors"):
        spec()
    with pytest.raises(ConfigError, match="checkpoint would be file:/mnt/x"):
        spec(checkpoint_dir="file:/mnt/x")
    assert spec(checkpoint_dir="hdfs://nn:8020/ckpt").execution.checkpoint_dir == "hdfs://nn:8020/ckpt"
    assert spec(checkpoint_dir="/mnt/shared", checkpoint_shared=True).execution.checkpoint_shared
    # a master on this machine's loopback: every host is this machine
    assert spec(master="spark://127.0.0.1:7077").execution.checkpoint_dir is None
    assert spec(master="spark://localhost:7077").execution.checkpoint_dir is None
    assert spec(master="spark://[::1]:7077").execution.checkpoint_dir is None
    with pytest.raises(ConfigError, match="checkpoint would be file:///mnt/x"):
        spec(checkpoint_dir="file:///mnt/x")


def test_a_runs_checkpoint_lies_under_its_root():
    from streamscale.pipelines.run import remove_checkpoint, run_checkpoint

    assert run_checkpoint("streamscale-x-", "hdfs://nn:8020/ckpt/").startswith("hdfs://nn:8020/ckpt/streamscale-x-")
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        for given, folder in (
            (f"{root}/a/b", f"{root}/a/b"),
            (f"file://{root}/c", f"{root}/c"),
            (f"file:{root}/d", f"{root}/d"),
        ):
            path = run_checkpoint("streamscale-x-", given)
            assert os.path.isdir(path) and path.startswith(folder + "/streamscale-x-")
            remove_checkpoint(path)
            assert not os.path.exists(path)


def test_a_run_on_fewer_executors_than_asked_says_which_ran():
    from streamscale.benchmark.experiment_runner import missing_executors
    from streamscale.sparkio.executors import Executor

    spec = cluster_spec()
    plan = resolve(parse_spec(spec))
    one = Executor("0", "10.0.0.2", 1)
    assert missing_executors(plan, plan.point(1000, 2), [one]) == (
        "1 of the 2 executors asked for were live when the load ended (0@10.0.0.2 (1 core))"
    )
    assert missing_executors(plan, plan.point(1000, 1), [one]) == ""
    assert missing_executors(plan, plan.point(1000, 2), []).startswith("0 of the 2 executors asked for")


def test_cores_on_a_cluster_master_are_refused_in_one_line():
    spec = cluster_spec(resources="cores")
    with pytest.raises(ConfigError, match=r"resources: cores on the cluster master spark://127.0.0.1:7077: a cluster"):
        parse_spec(spec)
    spec["execution"]["master"] = "local[4]"
    assert parse_spec(spec).execution.resources.type == "cores"
