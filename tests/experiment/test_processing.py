from datetime import UTC, datetime

import pytest

T0 = 1_800_000_000.0


def _batch(end_s, spans, batch_ms=1200):
    start = datetime.fromtimestamp(T0 + end_s - batch_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
    rows = sum(n for _, _, n in spans)
    return {"timestamp": start, "batch_ms": batch_ms, "input_rows": rows, "processing_latency": spans}


def test_a_runs_percentile_lies_between_its_records_low_and_high_bounds_hand_worked():
    from streamscale.experiment.processing import processing_bounds, processing_percentile_ms

    batches = [
        _batch(5.0, [(9_000.0, 9_050.0, 1_000)]),  # in the warm-up: left out
        _batch(20.0, [(100.0, 150.0, 60), (950.0, 1_000.0, 6)]),
        _batch(22.0, [(120.0, 170.0, 30), (1_900.0, 1_950.0, 4)]),
        {"timestamp": "not a time", "batch_ms": 5, "input_rows": 0, "processing_latency": None},
    ]
    # 100 records after the warm-up: the 95th lowest of the lows is 950, of the highs 1,000; the
    # 50th: 100 and 150; the 97th: 1,900 and 1,950
    assert processing_bounds(batches, 0.95, T0, 10.0) == (950.0, 1_000.0)
    assert processing_bounds(batches, 0.5, T0, 10.0) == (100.0, 150.0)
    assert processing_bounds(batches, 0.97, T0, 10.0) == (1_900.0, 1_950.0)
    assert processing_percentile_ms(batches, 0.95, T0, 10.0) == 1_000.0
    # without a warm-up every batch counts: 1,100 records, the 1,045th
    assert processing_bounds(batches, 0.95) == (9_000.0, 9_050.0)
    assert processing_bounds(batches[3:]) is None and processing_percentile_ms([]) is None


def test_each_batchs_processing_p95_and_the_trend_fitted_from_those_after_the_warm_up():
    from streamscale.experiment.processing import batch_processing_ms, processing_trend
    from streamscale.experiment.slo import fit

    # a batch's records at two latencies: its p95 is the high bound of the 950th record
    batches = [
        _batch(2.0 + 1.5 * i, [(900.0, 950.0, 900), (950.0 + 100 * i, 1_000.0 + 100 * i, 100)]) for i in range(20)
    ]
    batches.append({"timestamp": batches[0]["timestamp"], "batch_ms": 5, "input_rows": 0, "processing_latency": None})
    got = batch_processing_ms(batches, T0)
    assert len(got) == 20  # the batch that read nothing has no latency
    for i, (t, p) in enumerate(got):
        assert t == pytest.approx(2.0 + 1.5 * i)
        assert p == 1_000.0 + 100 * i
    after = [(t, p) for t, p in got if t >= 10.0]
    trend = processing_trend(batches, T0, warmup_s=10.0)
    assert trend.n == len(after) == 14 and trend.slope == pytest.approx(fit(*zip(*after)).slope)
