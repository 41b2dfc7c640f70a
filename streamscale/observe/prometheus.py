"""Prometheus metrics (prometheus_client) that every long-running streamscale command exposes on
loopback while it works. Names and meanings are listed in docs/metrics.md.

The metrics live in one process-wide registry; :func:`serve` starts the HTTP endpoint once per
process (port from ``--metrics-port`` / ``$STREAMSCALE_METRICS_PORT``, default 9464, or a free
port when that one is taken). Recording into a metric is cheap and happens whether or not the
endpoint was started.
"""

from __future__ import annotations

import os
import socket
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, start_http_server

from streamscale.ports import free_port

DEFAULT_PORT = 9464
REGISTRY = CollectorRegistry(auto_describe=True)

# load generation
generated_total = Gauge(
    "streamscale_generated_records_total", "Records the load generator had delivered", registry=REGISTRY
)
generated_rate = Gauge("streamscale_generated_records_per_second", "Records sent in the last second", registry=REGISTRY)
generated_target = Gauge(
    "streamscale_generated_target_records_per_second", "The generator's target rate", registry=REGISTRY
)
# the system under test
processed_total = Counter(
    "streamscale_processed_records", "Input records the SUT processed (all micro-batches)", registry=REGISTRY
)
processed_rate = Gauge(
    "streamscale_processed_records_per_second",
    "Spark's processedRowsPerSecond of the latest micro-batch",
    registry=REGISTRY,
)
batch_duration = Gauge(
    "streamscale_microbatch_duration_seconds", "Duration of the latest micro-batch", registry=REGISTRY
)
dropped_total = Counter("streamscale_dropped_records", "Late records dropped by windowed pipelines", registry=REGISTRY)
lag = Gauge(
    "streamscale_consumer_lag_records",
    "Consumer lag of the SUT per input partition",
    ["topic", "partition"],
    registry=REGISTRY,
)
lag_total = Gauge(
    "streamscale_consumer_lag_total_records", "Consumer lag of the SUT over all partitions", registry=REGISTRY
)
lag_trend = Gauge(
    "streamscale_lag_trend_records_per_second",
    "Slope of the linear regression of total lag over the samples of this experiment so far",
    registry=REGISTRY,
)
lag_samples = Counter("streamscale_lag_samples", "Lag samples taken", registry=REGISTRY)
experiment = Info("streamscale_experiment", "The experiment being run", registry=REGISTRY)
experiments_total = Counter("streamscale_experiments", "Experiments finished", ["verdict"], registry=REGISTRY)
# autoscaler
consumers = Gauge("streamscale_autoscaler_consumers", "Consumers in the autoscaled group", registry=REGISTRY)
rscore = Gauge("streamscale_autoscaler_rscore", "Rscore (Eq. 11) of the latest reassignment", registry=REGISTRY)
iterations_total = Counter(
    "streamscale_autoscaler_iterations", "Controller iterations", ["reassigned"], registry=REGISTRY
)
moved_total = Counter(
    "streamscale_autoscaler_moved_partitions", "Partitions moved between consumers", registry=REGISTRY
)
reassign_seconds = Gauge("streamscale_autoscaler_reassign_seconds", "Δt4 of the latest reassignment", registry=REGISTRY)
write_speed = Gauge(
    "streamscale_autoscaler_write_speed_bytes_per_second", "Measured total write speed", registry=REGISTRY
)
# reliability
rel_sent = Counter(
    "streamscale_reliability_sent_messages", "Messages handed to the producer", ["semantics"], registry=REGISTRY
)
rel_received = Counter(
    "streamscale_reliability_received_messages", "Messages received (M)", ["semantics"], registry=REGISTRY
)
rel_lost = Counter(
    "streamscale_reliability_lost_messages", "Lost messages (L = N - M')", ["semantics"], registry=REGISTRY
)
rel_duplicated = Counter(
    "streamscale_reliability_duplicated_messages", "Duplicates (D = M - M')", ["semantics"], registry=REGISTRY
)

_server_port: int | None = None
_lock = threading.Lock()


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def serve(port: int | None = None) -> int | None:
    """Expose /metrics on 127.0.0.1; returns the port (None when disabled with port < 0)."""
    global _server_port
    with _lock:
        if _server_port is not None:
            return _server_port
        if port is None:
            port = int(os.environ.get("STREAMSCALE_METRICS_PORT", DEFAULT_PORT))
        if port < 0:
            return None
        if port == 0 or not _free(port):
            port = free_port()
        start_http_server(port, addr="127.0.0.1", registry=REGISTRY)
        _server_port = port
        return port


def set_lag(topic: str, per_partition: dict[int, int]) -> None:
    for p, v in per_partition.items():
        lag.labels(topic, str(p)).set(v)
    lag_total.set(sum(per_partition.values()))
