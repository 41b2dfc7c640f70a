"""A benchmark on an embedded cluster: the spec's `broker.brokers` and replicated topics."""

from __future__ import annotations

import csv
import json

import pytest

from streamscale.benchmark.execution import run_execution
from streamscale.benchmark.setting import embedded_kafka
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from tests.benchmark.helpers import spec_dict
from tests.conftest import shortfall


def _spec(brokers: int | None = None, **topics):
    d = spec_dict(load={"type": "sensors", "values": [1000]}, resources={"type": "cores", "values": [1]})
    d["benchmark"]["topics"].update(topics)
    if brokers is not None:
        d["broker"] = {"brokers": brokers}
    return parse_spec(d)


def test_a_spec_asks_for_a_cluster_and_replicated_topics():
    from streamscale.broker import EmbeddedBroker
    from streamscale.broker.cluster import EmbeddedCluster

    one, three = _spec(), _spec(3)
    assert (one.replication_factor(embedded=True), one.replication_factor(embedded=False)) == (1, 1)
    # a cluster's topics are replicated as a production cluster's, up to 3; an external one's as the spec says
    assert (three.replication_factor(embedded=True), three.replication_factor(embedded=False)) == (3, 1)
    assert _spec(5).replication_factor(embedded=True) == 3
    assert _spec(3, replication_factor=2).replication_factor(embedded=False) == 2
    assert _spec(3, min_insync_replicas=2).benchmark.topics.config() == {"min.insync.replicas": "2"}
    assert isinstance(embedded_kafka(one, None), EmbeddedBroker)
    assert isinstance(embedded_kafka(three, None), EmbeddedCluster)
    with pytest.raises(ConfigError, match="needs as many brokers: set broker.brokers"):
        embedded_kafka(_spec(replication_factor=3), None)  # parses: an external cluster may hold it
    with pytest.raises(ConfigError, match="min_insync_replicas cannot exceed replication_factor"):
        _spec(3, replication_factor=2, min_insync_replicas=3)
    with pytest.raises(ConfigError, match="broker.brokers"):
        _spec(12)


@pytest.mark.spark
@pytest.mark.slow
def test_a_benchmark_runs_on_an_embedded_cluster_with_replicated_topics(tmp_path, monkeypatch):
    from streamscale.broker.access import BrokerAccess

    created: list[dict] = []
    create = BrokerAccess.create_topics

    def spy(self, topics, replication_factor=1, config=None, exist_ok=False):
        create(self, topics, replication_factor, config, exist_ok)
        # what the cluster holds, not what was asked of it
        created.append(self.partition_layout(list(topics)))

    monkeypatch.setattr(BrokerAccess, "create_topics", spy)
    spec = _spec(3, min_insync_replicas=2)
    summary = run_execution(spec, tmp_path)
    env = json.loads((tmp_path / "environment.json").read_text())
    assert env["broker"].startswith("embedded cluster of 3 nodes") and "replication factor 3" in env["topics"]
    sut_topics = [layout for layout in created if any(t.startswith("input-") for t in layout)]
    assert sut_topics, created
    for layout in sut_topics:
        for parts in layout.values():
            assert all(len(replicas) == 3 and len(isr) == 3 for _, replicas, isr in parts.values())
    [row] = list(csv.DictReader(open(tmp_path / "experiments.csv")))
    # invalid only for the generator's shortfall (a busy machine), and records were processed
    assert row["valid"] == "True" or shortfall(row)
    assert int(row["processed_records"]) > 0
    assert summary["experiments_run"] == 1
