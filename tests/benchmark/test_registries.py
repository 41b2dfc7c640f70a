"""What users add registers in one place: a toy load type, resource type and SLO, each one class
and one call, taken by the spec, the plan, the verdict and the run line with no other edit."""

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import ClassVar

import pytest

from streamscale.benchmark.outcome import final_checkers, look_checkers
from streamscale.benchmark.plan import resolve
from streamscale.benchmark.runline import run_line
from streamscale.benchmark.sloregistry import SLOS, SloKind, register_slo
from streamscale.benchmark.slos import Observation, SloVerdict, judge
from streamscale.benchmark.spec import parse_spec
from streamscale.benchmark.units import (
    LOADS,
    RESOURCES,
    LoadDimension,
    Placed,
    ResourceDimension,
    register_load,
    register_resource,
)
from streamscale.errors import ConfigError
from tests.benchmark.helpers import fake_result, spec_dict


@dataclass(frozen=True)
class KiloRate(LoadDimension):
    """A load in thousands of records/s, for the task samples only."""

    type: ClassVar[str] = "kilo_rate"
    count_unit: ClassVar[str] = "thousand records/s"

    def rate(self, load: float) -> float:
        return 1000 * load

    def apply(self, load, params, pipeline):
        from streamscale.benchmark.units import Applied

        return Applied(dict(params), int(1000 * load), 1000 * load, 1000 * load)


@dataclass(frozen=True)
class Slots(ResourceDimension):
    """Task slots of a local master, unconfined."""

    type: ClassVar[str] = "slots"
    word: ClassVar[str] = "slot"

    def apply(self, n: int) -> Placed:
        return Placed(f"local[{n}]", {})


@dataclass(frozen=True)
class FinalLag:
    """The lag when the run ends at most ``limit`` records."""

    limit: float
    name = "final_lag"

    def check(self, obs, confidence):
        last = obs.lag[-1].lag if obs.lag else 0
        return SloVerdict(self.name, last, None, None, self.limit, "pass" if last <= self.limit else "fail")


@pytest.fixture
def registered():
    register_load(KiloRate)
    register_resource(Slots)

    def make(slos, point, at_end):  # judged once the run is over, where the spec sets it
        return FinalLag(slos.others["final_lag"]) if at_end and "final_lag" in slos.others else None

    register_slo(SloKind("final_lag", make, words=lambda verdict: f"final lag SLO {verdict}"))
    yield
    LOADS.pop("kilo_rate"), RESOURCES.pop("slots"), SLOS.pop("final_lag")


def _spec(**execution):
    return parse_spec(spec_dict(**execution))


def test_a_load_type_and_a_resource_type_registered_are_a_specs_words(registered):
    spec = _spec(load={"type": "kilo_rate", "values": [3]}, resources={"type": "slots", "values": [2]})
    point = resolve(spec).point(3, 2)
    assert (point.rate, point.sensors, point.master, point.cpus) == (3000, 3000, "local[2]", None)
    assert resolve(spec).axes.amount(3) == "~3,000 records/s" and resolve(spec).axes.resources(2) == "2 slots"


def test_what_is_not_registered_is_one_line_naming_what_is():
    with pytest.raises(ConfigError, match="'kilo_rate': the load types are sensors, rate, nested_groups, window_s"):
        _spec(load={"type": "kilo_rate", "values": [3]})
    with pytest.raises(ConfigError, match="'slots': the resource types are cores, executors"):
        _spec(resources={"type": "slots", "values": [1]})
    with pytest.raises(ConfigError, match="final_lag: no such SLO setting"):
        _spec(slos={"final_lag": 100})


def test_an_slo_registered_judges_the_run_and_its_line_says_so(registered):
    spec = _spec(slos={"final_lag": 100})
    assert spec.execution.slos.others == {"final_lag": 100}
    point = resolve(spec).point(1000, 1)
    runs = resolve(spec).runs
    assert "final_lag" in [c.name for c in final_checkers(runs, point)]
    assert "final_lag" not in [c.name for c in look_checkers(runs, point)]  # it judges at the end only
    lag = [SimpleNamespace(t_s=float(t), lag=50 * t, end_total=None, committed_total=None) for t in range(10)]
    obs = Observation(lag=lag, batches=[], t0_wall=None, warmup_s=0.0)
    said = judge(obs, [FinalLag(100)])
    assert said.verdict == "fail" and said.of("final_lag").value == 450
    row = replace(fake_result(1000, 1, 0, passed=False), verdict="fail", slo_verdicts="lag_trend=pass final_lag=fail")
    assert "final lag SLO fail" in run_line(row)
    assert "final_lag" not in [c.name for c in final_checkers(resolve(_spec()).runs, point)]  # not set: not judged
