"""A quick capacity probe: how many records/s a pipeline processes on k cores, measured once.

A backlog of generated records is written to a fresh topic first; then, per core count, the
pipeline drains it on ``local[k]`` in micro-batches of a streaming run's size (``availableNow``
with a cap per batch). The rate is records over the summed batch durations of every batch after
the first: the first pays the cold start (Python workers, their imports, the first producer), so
no separate warm-up query runs before it — an experiment's warm-up query, run before each drain,
took 9.7 and 11.8 s of a 58 s probe and left the rates where they were (two demos' probes each
way: 52,840 / 40,096 and 51,546 / 38,640 records/s on 2 / 1 cores without it, 55,402 / 40,717
and 51,840 / 35,386 with it). No verdict comes from here: the probe only chooses which loads an
execution tests (``streamscale demo``); the SLO machinery of the execution decides.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field

from streamscale.broker import BrokerAccess
from streamscale.errors import ConfigError


@dataclass
class Probe:
    cores: int
    rate: float  # records/s over the batches after the first
    records: int  # records those batches read
    batches: int
    # (records, ms) of every batch that read records, the first included: the spread behind `rate`
    per_batch: list[tuple[int, int]] = field(default_factory=list)


def fill_backlog(bootstrap: str, topic: str, records: int, sensors: int = 10_000) -> int:
    """``records`` generated records, as fast as the generator goes (event times still follow the
    schedule of ``sensors`` readings per second). Returns how many the broker acknowledged."""
    from streamscale.loadgen import GeneratorConfig, LoadGenerator

    gen = LoadGenerator(
        GeneratorConfig(bootstrap, topic, sensors=sensors, workers=1, records=records, throttle=False)
    ).start()
    return gen.wait(600).delivered


def probe_capacity(
    bootstrap: str,
    cores: list[int],
    uc: str = "uc1",
    params: dict | None = None,
    records: int = 120_000,
    batch_records: int = 20_000,
    partitions: int = 4,
    on_probe=None,
    confine: bool = True,
    sensors: int = 10_000,
) -> list[Probe]:
    """One ``Probe`` per core count, all reading the same backlog (each from the beginning) of
    ``records`` from ``sensors`` sensors (the number of keys a windowed pipeline aggregates)."""
    from streamscale.experiment.cpus import confine_spark, release_spark
    from streamscale.pipelines import make_pipeline
    from streamscale.pipelines.base import remove_stopped_checkpoints
    from streamscale.sparkio.session import build_session

    params = {**(params or {}), "max_offsets_per_trigger": batch_records}
    make_pipeline(uc, params)  # a bad parameter fails before anything starts
    run_id = uuid.uuid4().hex[:8]
    topic, out_topic = f"probe-{run_id}", f"probe-out-{run_id}"
    results: list[Probe] = []
    with BrokerAccess(bootstrap) as access:
        access.create_topics({topic: partitions, out_topic: partitions})
        try:
            got = fill_backlog(bootstrap, topic, records, sensors)
            if got < records:
                raise ConfigError(f"capacity probe: the broker took {got:,} of {records:,} records")
            for k in cores:
                spark = build_session(f"local[{k}]", f"streamscale-probe-{k}")
                try:
                    if confine:
                        confine_spark(spark, k)
                    run = make_pipeline(uc, params).start(spark, bootstrap, topic, out_topic, available_now=True)
                    try:
                        run.await_available(300)
                    finally:
                        run.stop()
                    steady = [b for b in run.batches[1:] if b.input_rows]
                    n = sum(b.input_rows for b in steady)
                    busy = sum(b.batch_ms for b in steady) / 1000
                    per_batch = [(b.input_rows, b.batch_ms) for b in run.batches if b.input_rows]
                    results.append(Probe(k, n / busy if busy > 0 else 0.0, n, len(steady), per_batch))
                    if on_probe is not None:
                        on_probe(results[-1])
                finally:
                    spark.stop()
                    remove_stopped_checkpoints()
                    if confine:
                        release_spark()
        finally:
            with contextlib.suppress(Exception):  # after the Spark applications that read them stopped
                access.delete_topics([topic, out_topic])
    return results
