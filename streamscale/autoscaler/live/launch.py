"""Running the live autoscaler: monitor and controller in one process, or each on its own."""

from __future__ import annotations

import logging
import re
import signal
import threading
from collections.abc import Callable

from streamscale.autoscaler.live.backend import LocalProcessBackend
from streamscale.autoscaler.live.controller import Controller, Iteration
from streamscale.autoscaler.live.monitor import WriteSpeedMonitor
from streamscale.autoscaler.live.protocol import LiveConfig
from streamscale.broker.access import BrokerAccess
from streamscale.errors import ConfigError

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}


def ensure_topics(cfg: LiveConfig) -> None:
    """Create the coordination topics; the metadata topic needs max_consumers + 1 partitions up front
    (the embedded broker cannot add partitions later)."""
    with BrokerAccess(cfg.connection) as access:
        existing = access.topics()
        missing_src = [t for t in cfg.topics if t not in existing]
        if missing_src:
            raise ConfigError(f"source topics {missing_src} do not exist on {cfg.bootstrap}")
        need = {cfg.speed_topic: 1, cfg.metadata_topic: cfg.max_consumers + 1}
        for topic, parts in need.items():
            if topic in existing and existing[topic] < parts:
                raise ConfigError(
                    f"topic '{topic}' has {existing[topic]} partitions but {parts} are needed "
                    f"(max_consumers={cfg.max_consumers}); delete it or lower --max-consumers"
                )
        access.create_topics({t: p for t, p in need.items() if t not in existing}, exist_ok=True)


def parse_bytes(text: str) -> float:
    """'24000', '24k', '2.3MB', '5MiB' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"not a byte size: {text!r} (examples: 24000, 24k, 2.3MB, 5MiB)")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _stop_on_signals(stop: threading.Event) -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())


def run_monitor(cfg: LiveConfig, duration: float | None = None, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    _stop_on_signals(stop)
    if duration:
        threading.Timer(duration, stop.set).start()
    monitor = WriteSpeedMonitor(cfg)
    try:
        monitor.run(stop)
    finally:
        monitor.close()


def run_controller(
    cfg: LiveConfig,
    duration: float | None = None,
    with_monitor: bool = False,
    keep_consumers: bool = False,
    crash_after: str | None = None,
    on_iteration: Callable[[Iteration, Controller], None] | None = None,
    stop: threading.Event | None = None,
) -> Controller:
    """Run until ``duration`` passes or SIGINT/SIGTERM; then shut the consumers down unless kept."""
    stop = stop or threading.Event()
    _stop_on_signals(stop)
    timer = threading.Timer(duration, stop.set) if duration else None
    if timer:
        timer.daemon = True
        timer.start()
    monitor_thread = None
    if with_monitor:
        monitor_thread = threading.Thread(target=run_monitor, args=(cfg, None, stop), daemon=True)
        monitor_thread.start()
    lease = Lease(cfg)
    controller = Controller(cfg, LocalProcessBackend(cfg.state_dir), crash_after=crash_after)
    try:
        lease.start()
        controller.run(stop, on_iteration)
    finally:
        stop.set()
        try:
            if not keep_consumers:
                controller.shutdown_group()
        finally:
            lease.release()  # kept consumers run on without a lease, stopped consumers need none
            controller.close()
            if monitor_thread is not None:
                monitor_thread.join(timeout=30)
    return controller


class Lease:
    """The controller's lease on its consumers: ``<state_dir>/controller.lease`` touched several
    times per lease period while the controller process lives. Killed outright it stops renewing,
    and its consumers stop within ``controller_lease_secs`` (streamscale.autoscaler.live.consumer);
    a controller restarted within that period renews it and adopts them."""

    def __init__(self, cfg: LiveConfig):
        self.path = cfg.lease_path
        self.every = min(1.0, cfg.controller_lease_secs / 5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True, name="controller-lease")

    def start(self) -> Lease:
        self.path.touch()
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.path.touch()
            except OSError:
                pass  # the state directory went away: the consumers' lease lapses, as it should

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.path.unlink(missing_ok=True)


def setup(cfg: LiveConfig) -> LiveConfig:
    """Check the topics, create the coordination topics and write the shared configuration."""
    ensure_topics(cfg)
    cfg.save()
    return cfg


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
