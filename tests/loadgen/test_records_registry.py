import json

import numpy as np
import pytest

from streamscale.benchmark.plan import resolve
from streamscale.errors import ConfigError
from streamscale.loadgen import ActivePowerRecord, Encoder, SensorRegistry, ValueDistribution


@pytest.mark.parametrize("enc", ["json", "csv"])
def test_record_round_trip(enc):
    r = ActivePowerRecord("s_12", 1_700_000_000_123, 0.1 + 0.2)
    assert ActivePowerRecord.decode(r.encode(enc), enc) == r  # doubles survive exactly


def test_json_is_theodolite_shape():
    doc = json.loads(Encoder("json").encode('s"q', 5, 1.5))
    assert doc == {"identifier": 's"q', "timestamp": 5, "valueInW": 1.5}


def test_distributions():
    rng = np.random.default_rng(1)
    assert ValueDistribution.parse("constant:7").sample(rng, 3) == [7.0] * 3
    u = ValueDistribution.parse("uniform:10,20").sample(rng, 1000)
    assert 10 <= min(u) and max(u) <= 20
    n = ValueDistribution.parse("normal:100,5").sample(rng, 5000)
    assert abs(np.mean(n) - 100) < 1
    for bad in ["uniform:5", "poisson:1", "uniform:3,1", "normal:1,-1"]:
        with pytest.raises(ConfigError):
            ValueDistribution.parse(bad)


@pytest.mark.parametrize("levels,children", [(1, 4), (2, 4), (3, 4), (3, 2)])
def test_registry_shape(levels, children):
    reg = SensorRegistry.build(levels, children)
    sensors = reg.sensors()
    assert len(sensors) == children**levels == reg.num_sensors
    assert sensors == [f"s_{i}" for i in range(children**levels)]
    groups = reg.groups()
    assert len(groups) == sum(children**d for d in range(levels))  # full tree of inner nodes
    anc = reg.ancestors()
    assert all(len(a) == levels and a[-1] == "root" for a in anc.values())
    # every group's sensors: children^(levels - depth) of them
    per_group = {}
    for chain in anc.values():
        for g in chain:
            per_group[g] = per_group.get(g, 0) + 1
    assert per_group["root"] == children**levels


def test_registry_file_round_trip(tmp_path):
    reg = SensorRegistry.build(2, 3)
    back = SensorRegistry.load(reg.write(tmp_path / "r.json"))
    assert (back.levels, back.children) == (2, 3)
    assert back.ancestors() == reg.ancestors()
    with pytest.raises(ConfigError):
        SensorRegistry.load('{"nope": 1}')


def test_an_irregular_registry_loads_with_its_real_depth_and_sensor_count():
    import json

    from streamscale.errors import ConfigError
    from streamscale.loadgen.registry import SensorRegistry

    tree = {
        "topLevelSensor": {
            "identifier": "root",
            "children": [
                {"identifier": "s_a"},
                {
                    "identifier": "g1",
                    "children": [{"identifier": "g2", "children": [{"identifier": "s_b"}]}, {"identifier": "s_c"}],
                },
            ],
        }
    }
    r = SensorRegistry.load(json.dumps(tree))
    assert (r.levels, r.children, r.num_sensors) == (3, 2, 3)  # the first child is a sensor at depth 1
    assert r.ancestors() == {"s_a": ["root"], "s_b": ["g2", "g1", "root"], "s_c": ["g1", "root"]}
    for bad in (
        '{"topLevelSensor": {"children": []}}',
        '{"topLevelSensor": {"identifier": "r", "children": [7]}}',
        '{"topLevelSensor": {"identifier": "r", "children": "s_0"}}',
    ):
        with pytest.raises(ConfigError, match="not a sensor registry"):
            SensorRegistry.load(bad)


def test_any_number_of_sensors_fills_groups_of_four_and_the_last_level_partly():
    # 6 sensors: 2 levels (4 < 6 <= 16); the first group full, the second with the rest
    reg = SensorRegistry.build(0, 4, sensors=6)
    assert (reg.levels, reg.num_sensors) == (2, 6)
    assert reg.ancestors() == {
        "s_0": ["g.0", "root"],
        "s_1": ["g.0", "root"],
        "s_2": ["g.0", "root"],
        "s_3": ["g.0", "root"],
        "s_4": ["g.1", "root"],
        "s_5": ["g.1", "root"],
    }
    assert reg.groups() == ["g.0", "g.1", "root"]
    # 18: three levels; g.0 holds 16 in four full groups, g.1 the last 2 in one group
    reg = SensorRegistry.build(0, 4, sensors=18)
    assert (reg.levels, reg.num_sensors) == (3, 18)
    assert reg.ancestors()["s_17"] == ["g.1.0", "g.1", "root"]
    assert reg.groups() == ["g.0", "g.0.0", "g.0.1", "g.0.2", "g.0.3", "g.1", "g.1.0", "root"]
    # a power of four is the full tree of Henning and Hasselbring's Theodolite
    assert SensorRegistry.build(0, 4, sensors=16).to_json() == SensorRegistry.build(2, 4).to_json()
    with pytest.raises(ConfigError, match="1 to 10 million"):
        SensorRegistry.build(0, 4, sensors=0)


def test_a_uc4_benchmark_steps_its_load_by_sensors():
    from streamscale.benchmark.spec import parse_spec
    from streamscale.pipelines import make_pipeline

    spec = parse_spec(
        {
            "name": "u4",
            "benchmark": {"sut": "uc4", "params": {"window_s": 10}},
            "execution": {"load": {"type": "sensors", "values": [5_000]}, "resources": {"values": [1]}},
        }
    )
    s = resolve(spec).point(5_000, 1)
    assert s.params["sensors"] == 5_000 and s.rate == 5_000
    assert make_pipeline("uc4", s.params).registry.num_sensors == 5_000
