"""Kafka logs written and read for the tests of the Python source, independently of it."""


def transactional_log(bootstrap: str, topic: str, partitions: int, txns: int, seed: int) -> dict[int, list[int]]:
    """Transactions of random sizes over every partition, one in five aborted: offsets of the
    committed data records per partition (markers and aborted records leave gaps)."""
    import random

    from confluent_kafka import Producer

    rng = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 2})
    p.init_transactions(30)
    committed: dict[int, list[int]] = {q: [] for q in range(partitions)}
    for _ in range(txns):
        delivered: list[tuple[int, int]] = []
        p.begin_transaction()
        for _ in range(rng.randint(1, 40)):
            p.produce(
                topic,
                value=b"v",
                partition=rng.randrange(partitions),
                on_delivery=lambda err, m, delivered=delivered: delivered.append((m.partition(), m.offset())),
            )
        p.flush(30)
        if rng.random() < 0.2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            for part, off in delivered:
                committed[part].append(off)
    return {q: sorted(v) for q, v in committed.items()}


def reference_read(bootstrap: str, topic: str, partitions: int, ends: dict[int, int]) -> dict[int, list[int]]:
    """What one plain read_committed consumer reads front to back: the independent reference.
    (The embedded broker does not filter aborted records from read_committed fetches; a Kafka
    broker does. The reference follows whichever broker runs the test.)"""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reference",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
    out: dict[int, list[int]] = {q: [] for q in range(partitions)}
    try:
        while any(c.position([TopicPartition(topic, q)])[0].offset < ends[q] for q in range(partitions) if ends[q]):
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append(m.offset())
    finally:
        c.close()
    return out
