"""Results as the runner writes them, made by hand for the tests of what reads them, and a checker
whose verdict is given, and the drain of a job whose batches cost what the test says."""

from dataclasses import dataclass
from types import SimpleNamespace

from streamscale.benchmark.results import ExperimentResult
from streamscale.benchmark.slos import Observation, SloVerdict


def fake_result(load, res, rep, passed):
    return ExperimentResult(
        f"load{load:g}_res{res}_rep{rep}",
        load,
        res,
        rep,
        load,
        load,
        True,
        True,
        0.0,
        load * 0.01,
        passed,
        0,
        0.0,
        True,
        passed,
        0,
        100,
        0.1,
        1.0,
    )


def spec_dict(**execution):
    ex = {
        "load": {"type": "sensors", "values": [1000, 2000]},
        "resources": {"type": "cores", "values": [1, 2]},
        "duration_s": 14,
        "warmup_s": 5,
        "strategy": {"name": "full", "lower_bound": False},
    }
    ex.update(execution)
    ex.setdefault("max_duration_s", ex["duration_s"])  # runs end at their duration unless a test says
    return {
        "name": "e2e",
        "benchmark": {"sut": "uc1", "params": {"sink": "none"}, "topics": {"partitions": 4}, "loadgen": {"workers": 1}},
        "execution": ex,
    }


def capacity_spec(name, strategy, resources=(1,), loads=(20_000,), configs=None):
    """A UC1 capacity spec at load type rate (30 s runs, 5 s warm-up, one repetition): the shape of
    the executions the tests of what reads their results write with a fake experiment."""
    from streamscale.benchmark.spec import parse_spec

    ex = {
        "metric": "capacity",
        "load": {"type": "rate", "values": list(loads)},
        "resources": {"type": "cores", "values": list(resources)},
        "duration_s": 30,
        "warmup_s": 5,
        "repetitions": 1,
        "strategy": strategy,
        **({"configs": configs} if configs else {}),
    }
    return parse_spec({"name": name, "benchmark": {"sut": "uc1", "params": {"sink": "none"}}, "execution": ex})


@dataclass(frozen=True)
class Fixed:
    """An SLO checker whose verdict is given."""

    name: str
    verdict: str
    notes: tuple = ()
    undecided_note: str = ""

    def check(self, obs, confidence):
        return SloVerdict(self.name, 1.0, None, None, 1.0, self.verdict, self.notes, self.undecided_note)


NO_RUN = Observation(lag=[], batches=[], t0_wall=None, warmup_s=0.0)  # what a Fixed checker ignores


def drained_job(fixed_s: float, per_record_s: float, cold_s: float = 5.0, calls=None, cap: int | None = None):
    """A drain of a job whose batch of n records takes fixed_s + n * per_record_s (its first: cold_s
    more), reading ``records`` in batches of at most ``batch`` (and ``cap``: its own limit)."""

    def run_drain(guess, records, batch):
        if calls is not None:
            calls.append((guess, records, batch))
        batch = min(batch, cap or batch)
        sizes = [batch] * (records // batch) + ([records % batch] if records % batch else [])
        ms = [round((fixed_s + n * per_record_s) * 1000) for n in sizes]
        ms[0] += round(cold_s * 1000)
        batches = [{"input_rows": n, "batch_ms": t} for n, t in zip(sizes, ms, strict=True)]
        return SimpleNamespace(
            batches=batches,
            processed_records=records,
            undrained=0,
            ran_s=sum(ms) / 1000,
            wall_s=sum(ms) / 1000 + 5,
            rated_from=None,
        )

    return run_drain
