"""`autoscale reproduce`: the exact latency percentiles, Kafka's random deal, the reduced run's files."""

import csv
import json
import math

import numpy as np
import pytest

from streamscale.autoscaler.latency import Segments, latency_segments
from streamscale.autoscaler.reproduce import COLUMNS, PAPER, ReproduceSpec, random_equal_count, reproduce


def _segments(rng, runs=40):
    slope = rng.choice([-0.3, -0.01, 0.0, 0.02, 0.5], runs) * rng.uniform(0.5, 2, runs)
    start = rng.choice([0.0, 5.0, 12.0, -3.0], runs)
    count = rng.integers(1, 400, runs)
    return Segments(slope, start, count)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("q", [50, 90, 99])
def test_segment_percentiles_equal_numpy_on_the_expanded_samples(seed, q):
    seg = _segments(np.random.default_rng(seed))
    samples = seg.expand()
    assert len(samples) == seg.total()
    pos = samples[samples > 0]
    assert seg.count_above(0.0) == len(pos)
    assert seg.count_above(4.0) == int((samples > 4.0).sum())
    assert seg.percentile(q, positive_only=True) == pytest.approx(
        np.percentile(pos, q, method="inverted_cdf"), abs=1e-6
    )
    assert seg.percentile(q, positive_only=False) == pytest.approx(
        np.percentile(samples, q, method="inverted_cdf"), abs=1e-6
    )


def test_bytes_sampling_is_one_sample_per_byte():
    # one consumer (C-bar 10 B/s) with two partitions of 8 B/s for one 30 s iteration: the paper's
    # example, l = (0.1 - 0.0625) i for bytes i = 0 .. 479
    seg = latency_segments([{0: 8.0, 1: 8.0}], [{0: 0, 1: 0}], 10.0, sampling="bytes")
    samples = seg.expand()
    assert len(samples) == 480
    assert samples[:3] == pytest.approx([0.0, 0.0375, 0.075])
    assert samples[-1] == pytest.approx(0.0375 * 479)


def test_random_equal_count_deals_evenly_and_differently():
    rng = np.random.default_rng(0)
    a = random_equal_count(32, 20, rng)
    counts = np.bincount(list(a.values()))
    assert sorted(a) == list(range(32)) and sorted(counts.tolist()) == [1] * 8 + [2] * 12  # the paper's example
    assert random_equal_count(32, 20, rng) != a  # random: a new deal per draw


def test_reduced_reproduction_writes_every_figure_with_its_spread(tmp_path):
    spec = ReproduceSpec.model_validate(
        {"latency": {"draws": 4, "measurements": 30}, "packing": {"partitions": 40, "measurements": 40, "streams": 2}}
    )
    reproduce(spec, tmp_path)
    with open(tmp_path / "reproduction.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == COLUMNS == ["figure", "paper", "measured", "low", "high"]
    assert [row["figure"] for row in rows] == list(PAPER)  # one row per figure, in the order
    for row in rows:
        low, med, high = float(row["low"]), float(row["measured"]), float(row["high"])
        assert low <= med <= high and math.isfinite(float(row["paper"]))
    mwf = next(row for row in rows if row["figure"] == "VI-C p90 latency of MWF")
    assert 4.0 < float(mwf["measured"]) < 5.0  # rebalanced bytes wait up to the 5 s rebalance
    with open(tmp_path / "reproduction-variants.csv") as f:
        variants = list(csv.DictReader(f))
    assert list(variants[0]) == COLUMNS
    assert {v["figure"].split(" [")[1].rstrip("]") for v in variants} >= {
        "NFD opens consumer 0 first",
        "p90 over all samples, zeros included",
    }
    assert float(next(v for v in variants if "p90 over all" in v["figure"])["measured"]) == 0.0
    details = json.loads((tmp_path / "reproduction.json").read_text())
    assert [d["figure"] for d in details["figures"]] == list(PAPER)
    assert all(isinstance(d["in_spread"], bool) and d["draws"] >= 2 for d in details["figures"])
    for name in ("reproduction_figures.png", "reproduction_latency.png", "report.html"):
        assert (tmp_path / name).stat().st_size > 1000


def test_spec_refuses_bad_values():
    from pydantic import ValidationError

    for bad in (
        {"latency": {"draws": 0}},
        {"latency": {"bin_capacity": float("nan")}},
        {"latency": {"bin_capacity": 200, "consumer_capacity": 133}},
        {"packing": {"deltas": [float("inf")]}},
        {"latency": {"over": "some"}},
        {"unknown": 1},
        {"packing": {"initial": "random"}},
    ):
        with pytest.raises(ValidationError):
            ReproduceSpec.model_validate(bad)


def test_cli_reproduce_with_the_quick_example(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "streamscale")
    quick = Path(__file__).parents[2] / "examples" / "autoscaler" / "reproduce-quick.yaml"
    res = subprocess.run(
        [exe, "autoscale", "reproduce", "--spec", str(quick), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "VI-C p90 latency of MWF" in res.stdout and (tmp_path / "reproduction.csv").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("latency: {draws: -1}\n")
    res = subprocess.run(
        [exe, "autoscale", "reproduce", "--spec", str(bad), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "draws" in res.stderr and "Traceback" not in res.stderr
