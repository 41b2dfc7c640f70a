"""read_range without Spark: cached per-partition readers continue, seek back and forth, stop on gaps."""

import pytest

from streamscale.broker.connection import KafkaConnection
from streamscale.sparkio import kafka
from streamscale.sparkio.kafka import SourceConfig, read_range
from tests.conftest import produce
from tests.sparkio.helpers import reference_read, transactional_log


@pytest.fixture(autouse=True)
def _close_readers():
    # readers created in this process must be gone before the session deletes their topics
    yield
    kafka._close_clients()


def offsets(cfg, topic, start, end):
    return [o for rb in read_range(cfg, topic, 0, start, end) for o in rb.column("offset").to_pylist()]


def test_ranges_in_any_order_are_exact(broker, topic_factory):
    topic = topic_factory(1)
    produce(broker.bootstrap, topic, ((None, b"%d" % i, 0) for i in range(3000)))
    cfg = SourceConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    for start, end in [(0, 100), (100, 1200), (1200, 1201), (50, 80), (2000, 3000), (1201, 2000), (0, 3000)]:
        assert offsets(cfg, topic, start, end) == list(range(start, end))


def test_ranges_ending_on_transaction_markers(broker, topic_factory):
    from confluent_kafka import Producer

    topic = topic_factory(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for _ in range(3):  # offsets 0-9 data, 10 marker, 11-20 data, 21 marker, 22-31 data, 32 marker
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=b"%d" % i, partition=0)
        p.commit_transaction(30)
    cfg = SourceConfig.from_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
            "kafka.isolation.level": "read_committed",
            "pollTimeoutMs": "20000",
        }
    )
    assert offsets(cfg, topic, 0, 11) == list(range(10))
    assert offsets(cfg, topic, 11, 22) == list(range(11, 21))
    assert offsets(cfg, topic, 22, 33) == list(range(22, 32))  # ends on the marker: must not hang


def test_missing_records_are_an_error_not_a_hang(broker, topic_factory):
    topic = topic_factory(1)
    produce(broker.bootstrap, topic, ((None, b"x", 0) for _ in range(10)))
    cfg = SourceConfig.from_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "pollTimeoutMs": "2000"}
    )
    with pytest.raises(Exception, match="no progress|out of range|no longer"):
        offsets(cfg, topic, 5, 20)  # the end is beyond the log


def test_two_workers_alternating_with_skips_and_seeks_read_each_record_once(broker, access, topic_factory, monkeypatch):
    # Spark hands a group's task to whichever Python worker is free: each worker's reader is then
    # behind by the ranges the other read (skip from the queue, or seek past SKIP_LIMIT) or
    # ahead after a restart (seek back). Every committed record once, in order, whatever the path.
    import random

    from streamscale.sparkio import readers

    monkeypatch.setattr(readers, "SKIP_LIMIT", 30)  # force the seek path as well as the skip path
    topic = topic_factory(3)
    committed = transactional_log(broker.bootstrap, topic, 3, txns=120, seed=7)
    ends = access.end_offsets(topic, "read_committed")
    reference = reference_read(broker.bootstrap, topic, 3, ends)
    assert all(set(committed[q]) <= set(reference[q]) for q in range(3))
    conn = KafkaConnection(broker.bootstrap, (("isolation.level", "read_committed"),))
    workers = [readers.GroupReader(conn, readers.reader_conf(conn)) for _ in range(2)]
    rng = random.Random(3)
    try:
        for restart in range(2):  # the second pass starts over from 0: a restart rewinds every reader
            pos = {q: 0 for q in range(3)}
            seen: dict[int, list[int]] = {q: [] for q in range(3)}
            while any(pos[q] < ends[q] for q in range(3)):
                ranges = []
                for q in range(3):
                    end = min(ends[q], pos[q] + rng.choice([1, 7, 25, 60]))
                    ranges.append((topic, q, pos[q], end))
                    pos[q] = end
                for runs in rng.choice(workers).read(ranges, 20, True):
                    for (_, part), msgs in runs:
                        assert {m.partition() for m in msgs} == {part}
                        seen[part].extend(m.offset() for m in msgs)
            assert seen == reference, f"pass {restart}"
    finally:
        for w in workers:
            w.close()


def _claim_all(args):
    from streamscale.sparkio import readers

    key, batch, indices, scores = args
    return [(i, readers.claim_group(key, batch, i, scores)) for i in indices], str(readers.claims_path(key))


def test_claims_give_every_group_of_a_batch_to_exactly_one_task():
    # Tasks of one micro-batch claim concurrently from separate processes (as Python workers do):
    # every group is taken by exactly one task; a retried task gets what its first attempt took.
    import uuid
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    from pathlib import Path

    key = uuid.uuid4().hex
    paths: set[str] = set()
    try:
        with ProcessPoolExecutor(4, mp_context=get_context("spawn")) as pool:
            for b in range(6):
                n = 8
                scores = [(b + i) % 3 for i in range(n)]
                jobs = [(key, f"batch-{b}", range(w, n, 4), scores) for w in range(4)]
                answers = list(pool.map(_claim_all, jobs))
                got = dict(pair for part, _ in answers for pair in part)
                assert sorted(got) == list(range(n)) and sorted(got.values()) == list(range(n)), got
                retry = dict(pair for part, _ in pool.map(_claim_all, jobs[::-1]) for pair in part)
                assert retry == got
                paths |= {p for _, p in answers}
        # the processes (no Spark in them) share one claims file; this process may have a Spark
        # session, whose files directory is another one
        [path] = paths
        assert Path(path).exists()
    finally:
        for p in paths:
            Path(p).unlink(missing_ok=True)


def test_claims_of_queries_long_gone_are_swept():
    # Spark ends a query's planner process without always calling stop(): a query's first claim
    # removes the state files nobody touched for CLAIMS_KEEP_S.
    import os
    import time
    import uuid

    from streamscale.sparkio import readers

    readers.claims_dir().mkdir(exist_ok=True)
    old, recent = readers.claims_path(uuid.uuid4().hex), readers.claims_path(uuid.uuid4().hex)
    for f in (old, recent):
        f.write_text("{}")
    gone = time.time() - readers.CLAIMS_KEEP_S - 60
    os.utime(old, (gone, gone))
    key = uuid.uuid4().hex
    try:
        assert readers.claim_group(key, "b", 0, [0, 0]) == 0
        assert not old.exists() and recent.exists()
    finally:
        for k in (key, recent.stem):
            readers.claims_path(k).unlink(missing_ok=True)


def test_a_task_claims_the_group_its_reader_is_positioned_for():
    import uuid

    from streamscale.sparkio import readers

    key = uuid.uuid4().hex
    try:
        # task 0's worker continues group 1 without a seek: it takes group 1, task 1 gets group 0
        assert readers.claim_group(key, "b1", 0, [0, 2]) == 1
        assert readers.claim_group(key, "b1", 1, [2, 0]) == 0
        # no reader positioned anywhere: each task keeps its own group
        assert readers.claim_group(key, "b2", 1, [0, 0, 0]) == 1
        assert readers.claim_group(key, "b2", 0, [0, 0, 0]) == 0
        assert readers.claim_group(key, "b2", 2, [5, 5, 0]) == 2  # the only one left
    finally:
        readers.claims_path(key).unlink(missing_ok=True)


def test_positioned_counts_ranges_a_reader_continues(broker, topic_factory):
    from streamscale.sparkio import readers

    topic = topic_factory(2)
    produce(broker.bootstrap, topic, [(str(i).encode(), b"v", i % 2) for i in range(40)])
    cfg = SourceConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    group = ((topic,), 1, 0)
    ranges = ((topic, 0, 0, 10), (topic, 1, 0, 10))
    assert readers.positioned(cfg.bootstrap, cfg.kafka, group, ranges) == 0  # no reader yet
    got = [o for rb in kafka.read_ranges(cfg, group, ranges) for o in rb.column("offset").to_pylist()]
    assert sorted(got) == sorted(list(range(10)) * 2)
    assert readers.positioned(cfg.bootstrap, cfg.kafka, group, ((topic, 0, 10, 20), (topic, 1, 10, 20))) == 2
    assert readers.positioned(cfg.bootstrap, cfg.kafka, group, ((topic, 0, 10, 20), (topic, 1, 3, 20))) == 1
