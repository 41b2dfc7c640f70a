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

A windowed pipeline's warm batches also close windows (``backlog_parts``): the backlog's first
part spaces each sensor's readings one window period apart, so that every warm batch after the
first closes one window of every sensor; the rest follows a window's lateness later at one reading
per second and closes none in the rated batches, which start one batch later (the batch after
the one that closed the last warm window is slow too). Without it no window closed in the probe (its
readings spanned 6 s of event time), and the first experiment after it paid for the JIT's first
closes: its batches that closed windows took 2.1-3.7 s against 1.3-1.8 s in the experiments after
it (UC2 on one core, 10 s windows, nine demos), a hump in the lag that left its run undecided.
"""

from __future__ import annotations

import contextlib
import threading
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


@dataclass(frozen=True)
class BacklogPart:
    records: int
    period_s: float  # each sensor's readings this far apart in event time
    start_ms: int | None = None  # the first reading's event time (None: now)


def backlog_parts(
    records: int,
    sensors: int,
    batch_records: int,
    warm_batches: int = 0,
    window_s: float = 0.0,
    lateness_s: float = 0.0,
    now_ms: int | None = None,
) -> list[BacklogPart]:
    """The probe's backlog: one part at one reading per sensor and second; with ``warm_batches``
    and a window period ``window_s`` (the slide of a sliding window), two: the warm batches'
    records with readings ``window_s`` x ``batch_records`` / ``sensors`` apart (each batch spans a
    window period), starting at a window boundary, then the rest ``lateness_s`` after the warm
    span's end at one reading per second (its first batch closes the warm span's last window)."""
    warm = warm_batches * batch_records
    if not (warm_batches > 0 and window_s > 0 and 0 < warm < records):
        return [BacklogPart(records, 1.0)]
    window_ms = int(round(window_s * 1000))
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    t0 = now_ms - now_ms % window_ms  # Spark's windows start at multiples of their length
    return [
        BacklogPart(warm, window_s * batch_records / sensors, t0),
        BacklogPart(records - warm, 1.0, t0 + warm_batches * window_ms + int(round(lateness_s * 1000))),
    ]


class Backlog:
    """A backlog's parts generated one after the other (each part's records after the last one's
    in every partition), as fast as the generator goes, in processes of their own."""

    def __init__(self, bootstrap, topic: str, parts: list[BacklogPart], sensors: int):
        self._args, self._parts, self._sensors = (bootstrap, topic), parts, sensors
        self._gen = None
        self._delivered = 0
        self._error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Backlog:
        self._start(self._parts[0])  # a missing topic fails here, in the caller's thread
        self._thread.start()
        return self

    def _start(self, part: BacklogPart) -> None:
        from streamscale.loadgen import GeneratorConfig, LoadGenerator

        bootstrap, topic = self._args
        cfg = GeneratorConfig(
            bootstrap,
            topic,
            sensors=self._sensors,
            period_s=part.period_s,
            workers=1,
            records=part.records,
            throttle=False,
            start_time_ms=part.start_ms,
        )
        self._gen = LoadGenerator(cfg).start()

    def _run(self) -> None:
        try:
            for i, part in enumerate(self._parts):
                if i:
                    if self._stopped.is_set():
                        return
                    self._start(part)
                got = self._gen.wait(600).delivered
                self._delivered += got
                if got < part.records:
                    return  # the next part would follow a gap: the caller sees the shortfall
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            self._error = e

    def wait(self, timeout: float = 600) -> int:
        """The records the broker took, once every part is written (or one fell short); a part
        still being written after ``timeout`` is stopped (its shortfall is the caller's to say)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.stop()
        if self._error is not None:
            raise self._error
        return self._delivered

    def stop(self) -> None:
        self._stopped.set()
        if self._gen is not None:
            self._gen.stop()
        self._thread.join(90)
        if self._gen is not None:  # the next part, had it started meanwhile
            self._gen.stop()


def start_backlog(bootstrap: str, topic: str, records: int, sensors: int = 10_000, parts=None) -> Backlog:
    """Start generating ``records`` records (in ``parts``, default one part at one reading per sensor
    and second), as fast as the generator goes; the generator runs in processes of its own."""
    return Backlog(bootstrap, topic, parts or [BacklogPart(records, 1.0)], sensors).start()


@dataclass(frozen=True)
class ProbeLoad:
    """The probe's backlog: ``records`` from ``sensors`` sensors (the number of keys a windowed
    pipeline aggregates) on ``partitions``, read in batches of ``batch_records``; ``confine``: each
    session confined to its core count's CPUs, after its first ``warm_batches`` batches, which run
    on every CPU (0: from the start)."""

    records: int = 120_000
    batch_records: int = 20_000
    partitions: int = 4
    sensors: int = 10_000
    confine: bool = True
    warm_batches: int = 0


def probe_capacity(
    bootstrap: str,
    cores: list[int],
    uc: str = "uc1",
    params: dict | None = None,
    load: ProbeLoad = ProbeLoad(),  # noqa: B008 - frozen, never changed
    on_probe=None,
    sessions=None,
) -> list[Probe]:
    """One ``Probe`` per core count, all reading the same backlog (each from the beginning).
    ``sessions``: a :class:`~streamscale.experiment.sessions.SparkSessions` to take the sessions
    from (a keeping one holds the last core count's session for what runs next, as the demo's
    first experiment); default: each session stopped after its drain. With ``load.warm_batches``
    the rate comes from the batches after the one running when the session was confined."""
    from streamscale.experiment.sessions import SparkSessions
    from streamscale.pipelines import make_pipeline

    params = {**(params or {}), "max_offsets_per_trigger": load.batch_records}
    pipeline = make_pipeline(uc, params)  # a bad parameter fails before anything starts
    grid = pipeline.window_grid_ms() if getattr(pipeline, "windowed", False) else None
    parts = backlog_parts(
        load.records,
        load.sensors,
        load.batch_records,
        load.warm_batches if load.confine else 0,
        grid[1] / 1000 if grid else 0.0,
        pipeline.lateness_ms() / 1000 if grid else 0.0,
    )
    run_id = uuid.uuid4().hex[:8]
    topics = (f"probe-{run_id}", f"probe-out-{run_id}")
    results: list[Probe] = []
    with BrokerAccess(bootstrap) as access:
        access.create_topics({t: load.partitions for t in topics})
        gen = None
        try:
            # the backlog is generated while the first session starts (its JVM takes ~7 s)
            gen = start_backlog(bootstrap, topics[0], load.records, load.sensors, parts)
            sessions = sessions if sessions is not None else SparkSessions()
            for k in cores:
                results.append(_drain(k, (uc, params), bootstrap, topics, load, len(parts), sessions, gen))
                gen = None
                if on_probe is not None:
                    on_probe(results[-1])
        finally:
            if gen is not None:  # a session failed to start: the generator is not left running
                gen.stop()
            # after the Spark applications that read them stopped (a kept session's readers of them
            # are idle: its query stopped)
            with contextlib.suppress(Exception):
                access.delete_topics(list(topics))
    return results


def _drain(k: int, sut: tuple, bootstrap, topics: tuple, load: ProbeLoad, parts: int, sessions, gen) -> Probe:
    """One core count's drain of the backlog (``gen``: its generator, still running for the first)."""
    from streamscale.pipelines import make_pipeline

    late = load.confine and load.warm_batches > 0  # confined after the warm batches, not from the start
    cpus = k if load.confine and not late else None
    with sessions.session(f"local[{k}]", f"streamscale-probe-{k}", cpus=cpus) as spark:
        if gen is not None:
            got = gen.wait(600)
            if got < load.records:
                raise ConfigError(f"capacity probe: the broker took {got:,} of {load.records:,} records")
        run = make_pipeline(*sut).start(spark, bootstrap, *topics, available_now=True)
        try:
            rated_from = 1
            if late:
                rated_from = confine_after(run, load.warm_batches, lambda: sessions.confine(k), load.records) + 1
                # the batch after the one that closed the last warm window is slow too
                rated_from += parts - 1
            run.await_available(300)
        finally:
            run.stop()
    return rate_batches(k, run.batches, rated_from, load.records)


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


def confine_after(run, n: int, confine, records: int, timeout: float = 300.0) -> int:
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
