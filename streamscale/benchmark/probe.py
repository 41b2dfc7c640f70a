"""A quick capacity probe: how many records/s a pipeline processes on k cores, measured once.

A backlog of generated records is written to a fresh topic (while the first Spark session starts);
then, per core count, the pipeline drains it on ``local[k]`` in micro-batches of a streaming run's
size (``availableNow`` with a cap per batch). The rate is records over the summed batch durations
of the batches after the first: the first pays the cold start (Python workers, their imports, the
first producer), so no separate warm-up query runs before it — an experiment's warm-up query, run
before each drain, took 9.7 and 11.8 s of a 58 s probe and left the rates where they were. With
``warm_batches`` the application runs its first batches on every CPU and is confined to k CPUs
only then (a cold JVM confined to one CPU from the start rated 25,000 rising to 48,000 records/s
over five batches), and the rate comes from the batches after the one running at that moment.
No verdict comes from here: the probe only chooses which loads an execution tests
(``streamscale demo``); the SLO machinery of the execution decides.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field

from streamscale.broker import BrokerAccess
from streamscale.errors import ConfigError, SparkError


@dataclass
class Probe:
    cores: int
    rate: float  # records/s over the rated batches (those after the `unrated` ones)
    records: int  # records those batches read
    batches: int
    # (records, ms) of every batch that read records, the unrated included: the spread behind `rate`
    per_batch: list[tuple[int, int]] = field(default_factory=list)
    unrated: int = 1  # the first batches of per_batch that `rate` leaves out (cold, or not confined)


def start_backlog(bootstrap: str, topic: str, records: int, sensors: int = 10_000):
    """Start generating ``records`` records, as fast as the generator goes (event times still follow
    the schedule of ``sensors`` readings per second); the generator runs in processes of its own."""
    from streamscale.loadgen import GeneratorConfig, LoadGenerator

    return LoadGenerator(
        GeneratorConfig(bootstrap, topic, sensors=sensors, workers=1, records=records, throttle=False)
    ).start()


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
    sessions=None,
    warm_batches: int = 0,
) -> list[Probe]:
    """One ``Probe`` per core count, all reading the same backlog (each from the beginning) of
    ``records`` from ``sensors`` sensors (the number of keys a windowed pipeline aggregates).
    ``sessions``: a :class:`~streamscale.experiment.sessions.SparkSessions` to take the sessions
    from (a keeping one holds the last core count's session for what runs next, as the demo's
    first experiment); default: each session stopped after its drain. ``warm_batches`` (with
    ``confine``): the application runs its first batches on every CPU and is confined to k CPUs
    only then; the rate comes from the batches after the one running at that moment."""
    from streamscale.experiment.sessions import SparkSessions
    from streamscale.pipelines import make_pipeline

    params = {**(params or {}), "max_offsets_per_trigger": batch_records}
    make_pipeline(uc, params)  # a bad parameter fails before anything starts
    run_id = uuid.uuid4().hex[:8]
    topic, out_topic = f"probe-{run_id}", f"probe-out-{run_id}"
    results: list[Probe] = []
    with BrokerAccess(bootstrap) as access:
        access.create_topics({topic: partitions, out_topic: partitions})
        gen = None
        try:
            # the backlog is generated while the first session starts (its JVM takes ~7 s)
            gen = start_backlog(bootstrap, topic, records, sensors)
            sessions = sessions if sessions is not None else SparkSessions()
            late = confine and warm_batches > 0  # confined after the warm batches, not from the start
            for k in cores:
                name = f"streamscale-probe-{k}"
                with sessions.session(f"local[{k}]", name, cpus=k if confine and not late else None) as spark:
                    if gen is not None:
                        got, gen = gen.wait(600).delivered, None
                        if got < records:
                            raise ConfigError(f"capacity probe: the broker took {got:,} of {records:,} records")
                    run = make_pipeline(uc, params).start(spark, bootstrap, topic, out_topic, available_now=True)
                    try:
                        rated_from = 1
                        if late:
                            rated_from = _confine_after(run, warm_batches, lambda k=k: sessions.confine(k), records) + 1
                        run.await_available(300)
                    finally:
                        run.stop()
                results.append(rate_batches(k, run.batches, rated_from, records))
                if on_probe is not None:
                    on_probe(results[-1])
        finally:
            if gen is not None:  # a session failed to start: the generator is not left running
                gen.stop()
            # after the Spark applications that read them stopped (a kept session's readers of them
            # are idle: its query stopped)
            with contextlib.suppress(Exception):
                access.delete_topics([topic, out_topic])
    return results


def rate_batches(cores: int, batches: list, rated_from: int, records: int) -> Probe:
    """The probe's figure from a drain's batches (``input_rows``, ``batch_ms`` each, in order):
    records over busy time of the batches from index ``rated_from`` on that read records."""
    steady = [b for b in batches[rated_from:] if b.input_rows]
    if not steady:
        raise ConfigError(
            f"capacity probe: no batch of the {records:,} records was left to rate after "
            f"{rated_from} batches: give it more records"
        )
    n = sum(b.input_rows for b in steady)
    busy = sum(b.batch_ms for b in steady) / 1000
    per_batch = [(b.input_rows, b.batch_ms) for b in batches if b.input_rows]
    return Probe(cores, n / busy if busy > 0 else 0.0, n, len(steady), per_batch, len(per_batch) - len(steady))


def _confine_after(run, n: int, confine, records: int, timeout: float = 300.0) -> int:
    """Call ``confine`` once ``run`` completed ``n`` batches; return how many it had completed then
    (the batch running at that moment ran partly unconfined and is not rated)."""
    deadline = time.monotonic() + timeout
    while True:
        run.poll()
        if len(run.batches) >= n:
            confine()
            return len(run.batches)
        if run.exception() is not None:
            raise SparkError(f"capacity probe: {run.exception()}")
        if not run.main_query.isActive:
            raise ConfigError(f"capacity probe: {records:,} records took fewer than {n + 2} batches: give it more")
        if time.monotonic() > deadline:
            raise ConfigError(f"capacity probe: {n} batches did not finish within {timeout:.0f} s")
        time.sleep(0.02)  # a batch takes a second or more: this is when the next one has barely begun
