"""Theodolite's load generator: simulated sensors, one ActivePowerRecord per sensor and period.

Sensors are split over worker processes (sensor i goes to worker i mod W). Each worker
paces itself against the schedule: record k of a worker is due at ``t0 + k / rate_w`` and
carries that instant as its event timestamp, so every sensor emits exactly once per period
and the total rate is exactly ``sensors / period`` for as long as the machine keeps up. A
worker that falls behind sends what is overdue at once, and the parent reports the shortfall.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable

import numpy as np

from streamscale.errors import TopicNotFound
from streamscale.loadgen.config import SHORTFALL_TOLERANCE, GeneratorConfig, GeneratorResult, delivery_kept_up
from streamscale.loadgen.worker import CATCH_UP_S, Shared, worker_process
from streamscale.observe import prometheus

LEAD_S = 0.1  # from the last worker's readiness to the schedule's start: time for each to see it
READY_TIMEOUT_S = 60.0  # a worker not ready by then starts late (its shortfall is reported)


def schedule_origin(cfg: GeneratorConfig) -> tuple[float, int]:
    """A schedule's origin from now: (monotonic t0, the stamp of record 0 in epoch ms)."""
    wall_ms = cfg.start_time_ms if cfg.start_time_ms is not None else time.time() * 1000 + LEAD_S * 1000
    return time.monotonic() + LEAD_S, int(wall_ms)


class LoadGenerator:
    """Start/stop the worker processes; samples the rate sent and the records in flight every second.

    Use ``run()`` for a blocking run, or ``start()`` / ``stop()`` around other work.
    """

    def __init__(self, cfg: GeneratorConfig, on_second: Callable[[dict], None] | None = None):
        self.cfg = cfg
        self.on_second = on_second
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list = []
        self._sent = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._ok = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._failed = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._done = [self._ctx.Value("d", 0.0, lock=False) for _ in range(cfg.workers)]
        self._cpu = [self._ctx.Value("d", 0.0, lock=False) for _ in range(cfg.workers)]
        self._ready = [self._ctx.Value("b", 0, lock=False) for _ in range(cfg.workers)]
        # the schedule's origin, (monotonic t0, stamp of record 0 in epoch ms): 0 until every worker is ready
        self._schedule = self._ctx.Array("d", 2, lock=False)
        self._errors = self._ctx.Queue()
        self._per_second: list[float] = []
        self._in_flight: list[int] = []
        self._sample_t: list[float] = []
        self._monitor: threading.Thread | None = None
        self._t0 = 0.0
        self._t0_wall_ms = 0
        self._t_end: float | None = None
        self._first_error: str | None = None

    # counters --------------------------------------------------------------------------
    def sent(self) -> int:
        return sum(v.value for v in self._sent)

    def delivered(self) -> int:
        return sum(v.value for v in self._ok)

    def failed(self) -> int:
        return sum(v.value for v in self._failed)

    def running(self) -> bool:
        return any(p.is_alive() for p in self._procs)

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> LoadGenerator:
        self.launch()
        return self.begin(*schedule_origin(self.cfg))

    def launch(self) -> LoadGenerator:
        """Its workers started and ready, waiting for :meth:`begin` to give their schedule's origin."""
        from streamscale.broker.access import BrokerAccess

        with BrokerAccess(self.cfg.connection) as access:
            if not access.topic_exists(self.cfg.topic):
                access.check_allowed(self.cfg.topic, "write")  # hidden by the ACLs, or missing
                raise TopicNotFound(
                    f"topic '{self.cfg.topic}' does not exist on {self.cfg.bootstrap}: "
                    "create it first (streamscale topic create)"
                )
            if dict(self.cfg.connection.properties).get("sasl.username"):
                access.check_allowed(self.cfg.topic, "write")
        for w in range(self.cfg.workers):
            p = self._ctx.Process(
                target=worker_process,
                name=f"streamscale-loadgen-{w}",
                daemon=True,
                args=(self.cfg, w, self._shared(w)),
            )
            p.start()
            self._procs.append(p)
        try:
            self._await_ready()
        except BaseException:  # interrupted while they start: they stop, not wait for a schedule
            self.stop(10)
            raise
        return self

    def begin(self, t0: float, wall_ms: int) -> LoadGenerator:
        """The schedule starts at monotonic ``t0``, record 0 stamped ``wall_ms``. It starts once every
        worker can send: a spawned worker's imports take 1-4 s on a busy machine, and one that started
        behind its schedule would send its first seconds in one burst and, in a short run, fall short
        of it by its lateness."""
        self._t0, self._t0_wall_ms = t0, int(wall_ms)
        self._schedule[1], self._schedule[0] = self._t0_wall_ms, self._t0  # t0 last: the workers wait for it
        self._monitor = threading.Thread(target=self._watch, daemon=True)
        self._monitor.start()
        return self

    def _await_ready(self) -> None:
        """Until each worker has imported its code, made its producer and its records' maker, or
        has ended (its failure is :meth:`worker_failure`'s), for at most READY_TIMEOUT_S."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not self._stop.is_set():
            if all(r.value or not p.is_alive() for r, p in zip(self._ready, self._procs)):
                return
            time.sleep(0.01)

    def clock(self):
        """When each of its records is sent, for another input's ``ref:``: before :meth:`begin`,
        on the origin the referring generator's schedule shares with it (:class:`LoadGenerators`)."""
        from streamscale.loadgen.fields import RefClock

        cfg = self.cfg
        return RefClock(
            self._t0_wall_ms or None,
            tuple(cfg.worker_rate(w) for w in range(cfg.workers)),
            tuple(cfg.worker_limit(w) for w in range(cfg.workers)),
        )

    def _shared(self, w: int) -> Shared:
        return Shared(
            self._stop,
            self._sent[w],
            self._ok[w],
            self._failed[w],
            self._done[w],
            self._cpu[w],
            self._ready[w],
            self._schedule,
            self._errors,
            os.getpid(),
        )

    def _watch(self) -> None:
        while time.monotonic() < self._t0 and self.running():
            time.sleep(0.01)
        # The rate per second counts records sent, not acknowledged: the producers batch for
        # 200 ms, so acknowledgements arrive in bursts and a one-second count of them swings by a
        # fifth either way at a steady rate. Whether delivery keeps up is the records in flight.
        last_n, last_t = self.sent(), time.monotonic()
        while self.running():
            while self.running() and time.monotonic() - last_t < 1.0:
                time.sleep(0.02)
            if not self.running():
                break  # a partial last second would read as a shortfall
            t = time.monotonic()
            n, delivered, failed = self.sent(), self.delivered(), self.failed()
            rate = (n - last_n) / (t - last_t) if t > last_t else 0.0
            in_flight = max(0, n - delivered - failed)
            self._per_second.append(rate)
            self._in_flight.append(in_flight)
            self._sample_t.append(t)
            last_n, last_t = n, t
            prometheus.generated_total.set(delivered)
            prometheus.generated_rate.set(rate)
            prometheus.generated_target.set(self.cfg.target_rate)
            if self.on_second:
                self.on_second(
                    {
                        "elapsed_s": t - self._t0,
                        "rate": rate,
                        "target_rate": self.cfg.target_rate,
                        "sent": n,
                        "delivered": delivered,
                        "in_flight": in_flight,
                        "failed": failed,
                        "behind": self.behind(),
                    }
                )
        ends = [v.value for v in self._done if v.value > 0]
        self._t_end = max(ends) if len(ends) == len(self._done) else time.monotonic()

    def worker_failure(self) -> str | None:
        """What ended a worker that failed (its one-line report, or its exit code); None while
        none did."""
        codes = [p.exitcode for p in self._procs if p.exitcode not in (None, 0)]
        if not codes:
            return None
        self._read_errors()
        return self._first_error or f"a load generator worker exited with code {codes[0]}"

    def _read_errors(self) -> None:
        """Keep the first error the workers reported (the queue is drained)."""
        while not self._errors.empty():
            msg = self._errors.get_nowait()
            self._first_error = self._first_error or msg

    def behind(self) -> int:
        """Records the schedule says should have been sent by now but were not."""
        if not self.cfg.throttle:
            return 0
        elapsed = time.monotonic() - self._t0
        if self.cfg.duration_s is not None:
            elapsed = min(elapsed, self.cfg.duration_s)
        due = int(elapsed * self.cfg.target_rate)
        if self.cfg.records is not None:
            due = min(due, self.cfg.records)
        return max(0, due - self.sent())

    def stop(self, timeout: float = 90.0) -> GeneratorResult:
        self._stop.set()
        return self.wait(timeout)

    def finish(self) -> GeneratorResult:
        """Stop once the workers have sent their duration's schedule (the catch-up second a worker
        behind gets included), not before: a run's load window opens after the schedule starts (the
        query starts in between), so a stop at the window's end cut the schedule's last moments off
        (15 of a 3 s run's 300 records on a busy machine). Without a duration, at once."""
        if self.cfg.duration_s:
            end = self._t0 + self.cfg.duration_s + CATCH_UP_S + 0.5
            for p in self._procs:
                p.join(max(0.0, end - time.monotonic()))
        return self.stop()

    def wait(self, timeout: float | None = None) -> GeneratorResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        for p in self._procs:
            p.join(None if deadline is None else max(0.1, deadline - time.monotonic()))
        for p in self._procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        if self._monitor is not None:
            self._monitor.join(5)
        self._read_errors()
        return self.result()

    def result(self) -> GeneratorResult:
        end = self._t_end or time.monotonic()
        dur = max(end - self._t0, 1e-9)
        delivered = self.delivered()
        achieved = delivered / dur
        # The last second is often partial; judge the steady state on the full seconds: sent on
        # schedule, and acknowledged as fast as sent (the records in flight do not grow).
        steady = self._per_second[1:] if len(self._per_second) > 2 else self._per_second
        if self.cfg.throttle:
            on_schedule = (
                float(np.median(steady)) >= (1 - SHORTFALL_TOLERANCE) * self.cfg.target_rate if steady else False
            )
            kept_up = delivery_kept_up(self._sample_t[1:], self._in_flight[1:], self.cfg.target_rate)
            reached = on_schedule and kept_up
            if self.cfg.records is not None and not steady:
                reached = True  # finished within its first second
        else:
            reached = True
        return GeneratorResult(
            self.cfg.target_rate,
            self.sent(),
            delivered,
            self.failed(),
            dur,
            achieved,
            reached and self.failed() == 0,
            list(self._per_second),
            self._first_error,
            sum(v.value for v in self._cpu),
            max(self._in_flight, default=0),
        )

    def run(self) -> GeneratorResult:
        self.start()
        try:
            return self.wait()
        except KeyboardInterrupt:
            return self.stop()

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def generate(cfg: GeneratorConfig, on_second=None) -> GeneratorResult:
    return LoadGenerator(cfg, on_second).run()


class LoadGenerators:
    """One generator per input of a job of several inputs, launched in order (each ``ref:`` is bound
    to the schedule of the input it names, launched before it), all on one schedule origin, and
    stopped the other way round (a click is sent while its impression's generator still runs); one
    result for them all."""

    def __init__(self, configs: list[tuple[str, GeneratorConfig]]):
        self.configs = configs
        self.gens: list[LoadGenerator] = []

    def start(self) -> LoadGenerators:
        import dataclasses

        clocks: dict = {}
        try:
            for name, cfg in self.configs:
                if cfg.refs:
                    cfg = dataclasses.replace(cfg, refs={n: clocks[n] for n in cfg.refs})
                self.gens.append(LoadGenerator(cfg).launch())
                clocks[name] = self.gens[-1].clock()
        except BaseException:  # one that does not start (its topic missing): the others stop too
            self.stop()
            raise
        # One origin for all, set once every worker of every input is ready: a click's impression is
        # stamped within its MAX_S before it from the first record to the last, however long the
        # referring input's workers took to start.
        t0, wall_ms = schedule_origin(self.configs[0][1])
        for g in self.gens:
            g.begin(t0, wall_ms)
        return self

    def worker_failure(self) -> str | None:
        return next((f for f in (g.worker_failure() for g in self.gens) if f), None)

    def stop(self, timeout: float = 90.0) -> GeneratorResult:
        return combined([g.stop(timeout) for g in reversed(self.gens)][::-1])

    def finish(self) -> GeneratorResult:
        """Each stopped once it has sent its duration's schedule (:meth:`LoadGenerator.finish`)."""
        return combined([g.finish() for g in reversed(self.gens)][::-1])

    def wait(self, timeout: float | None = None) -> GeneratorResult:
        """Until each has sent what it was asked to (a count or a duration)."""
        return combined([g.wait(timeout) for g in reversed(self.gens)][::-1])


def combined(results: list[GeneratorResult]) -> GeneratorResult:
    """Several generators' results as one: counts and rates added, reached only where each reached."""
    n = max((len(r.per_second) for r in results), default=0)
    per_second = [sum(r.per_second[i] for r in results if i < len(r.per_second)) for i in range(n)]
    return GeneratorResult(
        sum(r.target_rate for r in results),
        sum(r.sent for r in results),
        sum(r.delivered for r in results),
        sum(r.failed for r in results),
        max((r.duration_s for r in results), default=0.0),
        sum(r.achieved_rate for r in results),
        all(r.reached_target for r in results),
        per_second,
        next((r.first_error for r in results if r.first_error), None),
        sum(r.cpu_s for r in results),
        sum(r.max_in_flight for r in results),
    )
