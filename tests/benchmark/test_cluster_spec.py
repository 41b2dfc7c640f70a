import pytest

from streamscale.benchmark.plan import resolve
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from tests.benchmark.helpers import spec_dict


def cluster_spec(cluster=None, top=None, **execution):
    ex = {"load": {"type": "rate", "values": [1000]}, "resources": {"type": "executors", "values": [1, 2]}}
    d = spec_dict(**{**ex, **execution})
    d["cluster"] = {"workers": 2, "brokers": 3} if cluster is None else cluster
    d.update(top or {})
    return d


def test_a_cluster_of_hosts_stands_for_the_master_and_its_runs_go_where_it_says():
    spec = parse_spec(cluster_spec())
    assert spec.cluster.workers == 2 and spec.replication_factor(embedded=False) == 3
    plan = resolve(spec).on_cluster("spark://10.9.8.11:7077", "/var/tmp/x/shared/checkpoints")
    point = plan.point(1000, 2)
    assert point.master == "spark://10.9.8.11:7077"
    assert point.spark_conf["spark.executor.instances"] == 2 and point.spark_conf["spark.cores.max"] == 2
    assert plan.checkpoint_root == "/var/tmp/x/shared/checkpoints"
    # the search's and the long runs' plans run there too
    assert plan.search().point(1000, 1).master == plan.long().point(1000, 1).master == point.master
    assert plan.long().checkpoint_root == plan.checkpoint_root


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"top": {"broker": {"brokers": 3}}}, "cluster: brings its own brokers (cluster.brokers); leave out broker:"),
        ({"master": "spark://m:7077"}, "cluster: starts its own Spark master; leave out execution.master"),
        ({"resources": {"type": "cores", "values": [1]}}, "resources: cores on a cluster: a cluster's resource is"),
        ({"resources": {"type": "executors", "values": [1, 3]}}, "3 executors on a cluster of 2 workers"),
        ({"executor_cores": 2}, "executor_cores 2 exceeds cluster.worker_cores 1"),
        ({"checkpoint_dir": "/data/ckpt"}, "checkpoint_dir /data/ckpt on a cluster: leave it out"),
        ({"cluster": {"workers": 0}}, "cluster.workers"),
    ],
)
def test_a_cluster_that_cannot_be_is_refused_in_one_line(change, said):
    with pytest.raises(ConfigError) as err:
        parse_spec(cluster_spec(**change))
    assert said in str(err.value) and "\n" not in str(err.value).strip()


def test_executors_without_a_master_or_a_cluster_are_refused_naming_both():
    d = cluster_spec()
    del d["cluster"]
    with pytest.raises(ConfigError, match=r"needs a master \(spark://host:port or k8s://...\) or a cluster:"):
        parse_spec(d)


def test_a_checkpoint_every_host_reads_is_taken_on_a_cluster():
    spec = parse_spec(cluster_spec(checkpoint_dir="hdfs://nn:8020/ckpt"))
    assert resolve(spec).on_cluster("spark://10.9.8.11:7077", "/var/tmp/s").checkpoint_root == "hdfs://nn:8020/ckpt"
