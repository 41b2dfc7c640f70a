"""Load generator throughput into the embedded broker.

    .venv/bin/python benchmarks/loadgen_throughput.py [--records 1000000] [--target 150000]

1. Unthrottled, finite: N records with 1 and with 2 worker processes -> records/s.
2. Throttled at --target records/s with 2 workers for 10 s -> achieved rate per second, and whether
   the generator says it reached the target (and, at twice what the machine can do, that it says it did not).
3. Throttled at the rates of streaming experiments (10k, 20k, 60k records/s, 1 worker, 8 s): the
   generator's CPU time, percent of one CPU and per record, the way records are sent today (in bulk)
   against one by one (``GeneratorConfig.bulk=False``), alternating, ``--repeat`` times: the share of
   a small machine Spark does not get.
4. Described records: a 6-field record (sequence, zipf key, double, int, event time, 100-byte
   payload) against the sensor reading at the same rates (20k, 60k records/s, 1 worker, 8 s,
   alternating, ``--repeat`` times): CPU per record and their ratio.
5. Replay: a 10,000-line JSON-lines sample (key copies, event time re-stamped), unthrottled, one
   process: records/s delivered.
6. Raw replay: a 10,000-record capture of a topic (``streamscale capture``; ~110-byte values, keys),
   without headers and with two headers a record, alternating, ``--repeat`` times, unthrottled, one
   process: records/s delivered (records with headers go one produce() call each: librdkafka's
   batch call takes none).

7. Avro: the 6-field record in Avro (derived schema; plain and in Confluent's wire format) against
   the same fields in JSON at 20k and 60k records/s (1 worker, 8 s, alternating, ``--repeat``
   times): CPU per record and the ratio to JSON's.

``--only records`` runs parts 4 to 7 alone; ``--only raw`` part 6; ``--only avro`` part 7.
"""

from __future__ import annotations

import argparse
import statistics

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--target", type=int, default=150_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["records", "raw", "avro"], default=None)
    args = ap.parse_args()
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        if args.only == "avro":
            avro_records(args, broker, access)
            return
        if args.only is None:
            sensor_parts(args, broker, access)
        if args.only != "raw":
            described_records(args, broker, access)
            replay(args, broker, access)
        raw_replay(args, broker, access)
        if args.only != "raw":
            avro_records(args, broker, access)


SIX_FIELDS = {
    "key": "user",
    "fields": {
        "seq": {"type": "long", "gen": "sequence"},
        "user": {"type": "string", "gen": "zipf:100000,1.1"},
        "amount": {"type": "double", "gen": "uniform:0,1000"},
        "n": {"type": "int", "gen": "uniform:1,10"},
        "at": {"type": "timestamp", "gen": "now"},
        "payload": {"type": "string", "gen": "bytes:100"},
    },
}


def cpu_per_record(args, broker, access, specs: dict, rate: int, topics: str, said: str = "") -> dict:
    """The generator's CPU per record (µs) of each records spec (name -> spec; None: sensor
    readings), throttled at ``rate`` for 8 s in one process, the specs alternating (their order
    reversed every other round), ``args.repeat`` rounds; each run printed as it ends."""
    per_record: dict[str, list[float]] = {k: [] for k in specs}
    for i in range(args.repeat):
        for kind in list(specs) if i % 2 == 0 else list(reversed(specs)):
            topic = f"{topics}-{rate}-{kind}-{i}"
            access.create_topic(topic, args.partitions)
            r = generate(
                GeneratorConfig(
                    broker.bootstrap, topic, sensors=rate, workers=1, duration_s=8, records_spec=specs[kind]
                )
            )
            per_record[kind].append(r.cpu_s / max(r.delivered, 1) * 1e6)
            print(
                f"throttled at {rate:,}/s, 1 process, {said}{kind}: {per_record[kind][-1]:.2f} us a record "
                f"(achieved {r.achieved_rate:,.0f}/s, reached target: {r.reached_target})",
                flush=True,
            )
    return per_record


def described_records(args, broker, access) -> None:
    from streamscale.loadgen.recordspec import records_spec

    six = records_spec(SIX_FIELDS, "benchmark")
    # the same record with a 4-byte payload: how much of the difference is the record's size
    small = records_spec(
        {**SIX_FIELDS, "fields": {**SIX_FIELDS["fields"], "payload": {"type": "string", "gen": "bytes:4"}}}, "benchmark"
    )
    specs = {"sensor": None, "six": six, "six-4B": small}
    for rate in (20_000, 60_000):
        per_record = cpu_per_record(args, broker, access, specs, rate, "records")
        a, b, c = per_record["six"], per_record["sensor"], per_record["six-4B"]
        pairs = [x / y for x, y in zip(a, b)]
        small_pairs = [x / y for x, y in zip(c, b)]
        print(
            f"  at {rate:,}/s: 6 fields {statistics.median(a):.2f} us a record ({min(a):.2f}-{max(a):.2f}), "
            f"sensor reading {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}): ratio "
            f"{statistics.median(pairs):.2f} (pairs {min(pairs):.2f}-{max(pairs):.2f}; target at most 1.5); "
            f"with a 4-byte payload {statistics.median(c):.2f}, ratio {statistics.median(small_pairs):.2f}",
            flush=True,
        )


def avro_records(args, broker, access) -> None:
    from streamscale.loadgen.recordspec import records_spec

    specs = {
        "json": records_spec(SIX_FIELDS, "benchmark"),
        "avro": records_spec({**SIX_FIELDS, "encoding": "avro"}, "benchmark"),
        "avro-confluent": records_spec({**SIX_FIELDS, "encoding": "avro", "wire": "confluent"}, "benchmark"),
    }
    for rate in (20_000, 60_000):
        per_record = cpu_per_record(args, broker, access, specs, rate, "avro", "6 fields in ")
        js = per_record["json"]
        for kind in ("avro", "avro-confluent"):
            a = per_record[kind]
            pairs = [x / y for x, y in zip(a, js, strict=True)]
            print(
                f"  at {rate:,}/s: {kind} {statistics.median(a):.2f} us a record ({min(a):.2f}-{max(a):.2f}), "
                f"JSON {statistics.median(js):.2f} ({min(js):.2f}-{max(js):.2f}): ratio "
                f"{statistics.median(pairs):.2f} (pairs {min(pairs):.2f}-{max(pairs):.2f}; target at most 1.5)",
                flush=True,
            )


def replay(args, broker, access) -> None:
    import json
    import random
    import tempfile
    from pathlib import Path

    from streamscale.loadgen.recordspec import records_spec

    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as d:
        sample = Path(d) / "sample.jsonl"
        t = 1_700_000_000_000
        lines = []
        for i in range(10_000):
            t += rng.randint(0, 20)
            doc = {"user": f"u{rng.randint(0, 999)}", "at": t - rng.choice([0, 0, 0, 1500]), "amount": rng.random()}
            lines.append(json.dumps({**doc, "item": f"i{i % 97}", "qty": rng.randint(1, 5)}))
        sample.write_text("\n".join(lines) + "\n")
        spec = records_spec({"replay": str(sample), "key": "user", "event_time": "at", "key_copies": 10}, "benchmark")
        rates = []
        for i in range(args.repeat):
            topic = f"replay-{i}"
            access.create_topic(topic, args.partitions)
            n = 2_000_000
            r = generate(
                GeneratorConfig(
                    broker.bootstrap, topic, sensors=n, workers=1, records=n, throttle=False, records_spec=spec
                )
            )
            assert r.delivered == n and r.failed == 0
            rates.append(r.achieved_rate)
            print(f"replay of 10,000 lines, 1 process, unthrottled: {r.achieved_rate:,.0f} records/s", flush=True)
        print(
            f"  replay: median {statistics.median(rates):,.0f} records/s ({min(rates):,.0f}-{max(rates):,.0f}); "
            "target at least 200,000",
            flush=True,
        )


def raw_replay(args, broker, access) -> None:
    import tempfile
    from pathlib import Path

    from confluent_kafka import Producer

    from streamscale.loadgen.raw import capture
    from streamscale.loadgen.recordspec import records_spec

    samples = {}
    with tempfile.TemporaryDirectory() as d:
        for kind in ("no headers", "2 headers"):
            src = f"raw-src-{kind[0]}"
            access.create_topic(src, args.partitions)
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
            for i in range(10_000):
                heads = [("trace", b"%016x" % i), ("origin", b"bench")] if kind == "2 headers" else None
                p.produce(src, b"%08d|" % i + b"x" * 100, b"user-%d" % (i % 1000), headers=heads)
            p.flush(60)
            samples[kind] = Path(d) / f"{src}.parquet"
            capture(broker.bootstrap, src, 10_000, samples[kind])
        rates: dict[str, list[float]] = {k: [] for k in samples}
        for i in range(args.repeat):
            for kind, path in samples.items():
                topic = f"raw-replay-{kind[0]}-{i}"
                access.create_topic(topic, args.partitions)
                n = 1_000_000
                spec = records_spec({"replay": str(path), "raw": True}, "benchmark")
                cfg = GeneratorConfig(broker.bootstrap, topic, sensors=n, workers=1, records=n, throttle=False,
                                      records_spec=spec)  # fmt: skip
                r = generate(cfg)
                assert r.delivered == n and r.failed == 0
                rates[kind].append(r.achieved_rate)
                print(f"raw replay of a 10,000-record capture, {kind}: {r.achieved_rate:,.0f} records/s", flush=True)
    for kind, got in rates.items():
        print(
            f"  raw replay, {kind}: median {statistics.median(got):,.0f} records/s "
            f"({min(got):,.0f}-{max(got):,.0f}); target at least 200,000",
            flush=True,
        )


def sensor_parts(args, broker, access) -> None:
    best = 0.0
    for workers in (1, 2):
        topic = f"unthrottled-{workers}"
        access.create_topic(topic, args.partitions)
        r = generate(
            GeneratorConfig(
                broker.bootstrap, topic, sensors=100_000, workers=workers, records=args.records, throttle=False
            )
        )
        assert r.delivered == args.records and r.failed == 0
        best = max(best, r.achieved_rate)
        print(
            f"unthrottled, {workers} process(es): {r.achieved_rate:12,.0f} records/s "
            f"({r.delivered:,} delivered, {r.failed} failed)"
        )
    for target in (args.target, int(best * 2)):
        topic = f"throttled-{target}"
        access.create_topic(topic, args.partitions)
        r = generate(GeneratorConfig(broker.bootstrap, topic, sensors=target, workers=2, duration_s=10))
        per_s = ", ".join(f"{x / 1000:.0f}k" for x in r.per_second)
        print(
            f"throttled at {target:,}/s, 2 processes: achieved {r.achieved_rate:,.0f}/s; per second [{per_s}]; "
            f"reached target: {r.reached_target}"
        )
    for rate in (10_000, 20_000, 60_000):
        per_record: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.repeat):
            for bulk in (True, False) if i % 2 == 0 else (False, True):
                topic = f"cpu-{rate}-{bulk}-{i}"
                access.create_topic(topic, args.partitions)
                r = generate(GeneratorConfig(broker.bootstrap, topic, sensors=rate, workers=1, duration_s=8, bulk=bulk))
                per_record[bulk].append(r.cpu_s / max(r.delivered, 1) * 1e6)
                print(
                    f"throttled at {rate:,}/s, 1 process, {'bulk' if bulk else 'one by one'}: "
                    f"{100 * r.cpu_s / 8:.0f} % of a CPU, {per_record[bulk][-1]:.2f} us a record "
                    f"(achieved {r.achieved_rate:,.0f}/s, reached target: {r.reached_target})",
                    flush=True,
                )
        b, e = per_record[True], per_record[False]
        pairs = [x / y for x, y in zip(b, e)]
        print(
            f"  at {rate:,}/s: bulk {statistics.median(b):.2f} us a record ({min(b):.2f}-{max(b):.2f}), "
            f"one by one {statistics.median(e):.2f} ({min(e):.2f}-{max(e):.2f}): bulk takes "
            f"{statistics.median(b) / statistics.median(e):.0%} of the CPU per record (pairs "
            f"{statistics.median(pairs):.0%}, {min(pairs):.0%}-{max(pairs):.0%})",
            flush=True,
        )

    # what is left to save: librdkafka's own work per record (prebuilt records, the
    # generator's producer settings, the same hand-over and steps), counted like the above
    floors = [handover_floor(broker.bootstrap, access, 60_000, args.partitions, i) for i in range(args.repeat)]
    print(
        f"librdkafka alone at 60,000/s (prebuilt records, produce_batch per partition, 1 process): "
        f"{statistics.median(floors):.2f} us a record ({min(floors):.2f}-{max(floors):.2f})",
        flush=True,
    )


def handover_floor(bootstrap: str, access, rate: int, partitions: int, i: int, seconds: float = 8.0) -> float:
    """CPU per record (µs, every thread of this process) of handing prebuilt records to librdkafka
    at ``rate`` in 50 ms steps, one produce_batch per partition, and of librdkafka sending them."""
    import time

    from streamscale.broker.connection import KafkaConnection
    from streamscale.loadgen.config import PRODUCER_DEFAULTS

    topic = f"floor-{rate}-{i}"
    access.create_topic(topic, partitions)
    producer = KafkaConnection.of(bootstrap).producer(
        {"delivery.report.only.error": True, "on_delivery": lambda err, msg: None}, defaults=PRODUCER_DEFAULTS
    )
    step = rate // 20
    prebuilt = [
        {"value": b'{"identifier":"s%d","timestamp":1795000000000,"valueInW":1234.5678}' % k, "key": b"s%d" % k}
        for k in range(step)
    ]
    per_partition = [prebuilt[p::partitions] for p in range(partitions)]
    t0, c0, sent = time.monotonic(), time.process_time(), 0
    while sent < rate * seconds:
        for p, records in enumerate(per_partition):
            producer.produce_batch(topic, [dict(r) for r in records], partition=p)  # a dict per record, as sent
        sent += step
        producer.poll(0)
        wait = t0 + sent / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    producer.flush(30)
    return (time.process_time() - c0) / sent * 1e6


if __name__ == "__main__":
    from _main import run

    run(main)
