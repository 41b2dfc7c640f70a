"""The consumer lag of a run, sampled once a second in a background thread: the topic's exact end
offsets minus what the SUT has committed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException

from streamscale.broker import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaError, StreamscaleError
from streamscale.experiment.slo import lag_trend
from streamscale.observe import prometheus

log = logging.getLogger(__name__)


@dataclass
class LagSample:
    t_s: float
    lag: int
    end_total: int
    committed_total: int


class LagSampler:
    """Samples the SUT's consumer lag once per interval in a background thread."""

    def __init__(
        self,
        bootstrap: KafkaConnection | str,
        group: str,
        topic: str,  # several: comma-separated
        interval_s: float = 1.0,
        on_sample: Callable[[LagSample], None] | None = None,
    ):
        self.bootstrap, self.group, self.topic, self.interval_s = bootstrap, group, topic, interval_s
        self.on_sample = on_sample
        self.samples: list[LagSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="lag-sampler")
        self.t0 = 0.0
        self.t0_wall = 0.0  # the same instant on the wall clock: batch times are wall-clock
        self.cpu_s = 0.0
        self.missed = 0  # samples that failed: counted and logged, the sampling goes on
        self._error: BaseException | None = None

    def start(self) -> LagSampler:
        self.t0, self.t0_wall = time.monotonic(), time.time()
        self._thread.start()
        return self

    def sample_once(self, access: BrokerAccess) -> LagSample:
        topics = self.topic.split(",")  # several input topics: their lags add up
        ends = {t: access.end_offsets(t) for t in topics}
        # stamped when the end offsets were read (the delivered rate is their slope over these
        # times): the committed offsets' request after it takes longer on a busy machine
        t_s = round(time.monotonic() - self.t0, 3)
        end_total = done = 0
        for t in topics:
            committed = access.committed_offsets(self.group, t)
            end_total += sum(ends[t].values())
            done += sum(committed.get(p, 0) for p in ends[t])
            prometheus.set_lag(t, {p: e - committed.get(p, 0) for p, e in ends[t].items()})
        prometheus.lag_samples.inc()
        return LagSample(t_s, end_total - done, end_total, done)

    def _run(self) -> None:
        try:
            with BrokerAccess(self.bootstrap) as access:
                nxt = time.monotonic()
                while not self._stop.is_set():
                    c0 = time.thread_time()
                    try:
                        s = self.sample_once(access)
                    except (KafkaError, KafkaException) as e:  # streamscale.errors.KafkaError: broker problems
                        # one second without a sample: the trend interpolates across it. Dying here
                        # left the run's later batches without end offsets to compare with, and the
                        # trend silently covered only the part of the run before (seen at 150,000/s)
                        self.missed += 1
                        log.warning("lag sample at %.1f s failed: %s", time.monotonic() - self.t0, e)
                        s = None
                    self.cpu_s += time.thread_time() - c0
                    if s is not None:
                        self.samples.append(s)
                        if len(self.samples) >= 3:
                            prometheus.lag_trend.set(
                                lag_trend([x.t_s for x in self.samples], [x.lag for x in self.samples], 0)
                            )
                        if self.on_sample:
                            self.on_sample(s)
                    nxt += self.interval_s
                    self._stop.wait(max(0.0, nxt - time.monotonic()))
        except BaseException as e:  # noqa: BLE001 - handed to stop(), which raises it in the run's thread
            self._error = e

    def stop(self, raise_error: bool = True) -> list[LagSample]:
        """The samples; raises what ended the sampling thread early (a run must not be judged on
        the part of it that was sampled before)."""
        self._stop.set()
        self._thread.join(10)
        if self._error is not None and raise_error:
            e, self._error = self._error, None
            if isinstance(e, StreamscaleError):
                raise e
            raise StreamscaleError(f"the lag sampler stopped: {e}") from e
        return self.samples
