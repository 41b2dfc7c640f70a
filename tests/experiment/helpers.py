"""Synthetic micro-batch runs (lag samples, batches' progress) for the tests of what judges them."""

from datetime import UTC

import numpy as np


def sawtooth_run(rate=20_000.0, batch_s=5.3, seconds=60, growth=0.0, jitter=0.0, seed=1):
    """A micro-batch query reading ``rate`` records/s that arrive at ``rate`` (+ ``growth``):
    1 s lag samples and the batches' progress (start timestamp, duration, end offsets)."""
    from datetime import datetime
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    t0_wall = 1_800_000_000.0
    arrival = lambda t: (rate + growth) * t  # noqa: E731 - records on the topic by time t
    batches, commits, t, done = [], [(0.0, 0)], 0.0, 0
    while t < seconds:
        dur = batch_s * (1 + jitter * rng.uniform(-1, 1))
        # a batch takes what has arrived when it starts, at most what the query can process in it
        end_offset = min(int(arrival(t)), done + int(rate * dur))
        batches.append(
            {
                "input_rows": max(end_offset - done, 1),
                "batch_ms": int(dur * 1000),
                "timestamp": datetime.fromtimestamp(t0_wall + t, UTC).isoformat().replace("+00:00", "Z"),
                "end_offsets": {"in": {"0": end_offset // 2, "1": end_offset - end_offset // 2}},
            }
        )
        t += dur
        done = end_offset
        commits.append((t, done))
    samples = []
    for s in range(seconds + 1):
        committed = max(c for ct, c in commits if ct <= s)
        end = int(arrival(s))
        samples.append(SimpleNamespace(t_s=float(s), lag=end - committed, end_total=end, committed_total=committed))
    return samples, batches, t0_wall


def slow_batch_run(rate=67_000.0, capacity=88_500.0, seconds=31, slow_at=4.0, slow_s=4.0):
    """A query that keeps up with ``rate`` (it processes ``capacity`` records/s, 0.3 s a batch
    besides, at most 100,000 records a batch: ~70,000/s when behind) except for one batch starting
    after ``slow_at`` that takes ``slow_s`` longer; the records that piled up meanwhile are drained
    after it, slowly (~3,000/s), all through the run."""
    from datetime import datetime
    from types import SimpleNamespace

    t0_wall = 1_800_000_000.0
    batches, commits, t, done, slowed = [], [(0.0, 0)], 0.0, 0, False
    while t < seconds:
        rows = min(int(rate * t) - done, 100_000)
        dur = 0.3 + rows / capacity
        if t >= slow_at and not slowed:
            dur, slowed = dur + slow_s, True
        ts = datetime.fromtimestamp(t0_wall + t, UTC).isoformat().replace("+00:00", "Z")
        batches.append(
            {
                "input_rows": max(rows, 1),
                "batch_ms": int(dur * 1000),
                "timestamp": ts,
                "end_offsets": {"in": {"0": done + rows}},
            }
        )
        t, done = t + dur, done + rows
        commits.append((t, done))
    samples = []
    for sec in range(seconds + 1):
        committed = max(c for ct, c in commits if ct <= sec)
        end = int(rate * sec)
        samples.append(SimpleNamespace(t_s=float(sec), lag=end - committed, end_total=end, committed_total=committed))
    return samples, batches, t0_wall
