"""Each record's latency at the output topic (streamscale.experiment.outlatency), on records whose
timestamps are chosen by hand."""

from datetime import UTC, datetime

from streamscale.experiment.outlatency import OutputLatency, field_pattern, latency_spans, send_time_ms
from streamscale.experiment.processing import processing_bounds


class Msg:
    def __init__(self, topic, value: bytes, ts: int):
        self._t, self._v, self._ts = topic, value, ts

    def error(self):
        return None

    def topic(self):
        return self._t

    def value(self):
        return self._v

    def timestamp(self):
        return (1, self._ts)


class Batch:
    def __init__(self, start_ms: int, batch_ms: int):
        self.timestamp = datetime.fromtimestamp(start_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
        self.batch_ms = batch_ms
        self.processing_latency = self.processing_max_ms = None


T0 = 1_764_660_000_000  # 2025-12-02T07:20:00Z


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_send_time_is_read_as_a_number_or_as_spark_writes_a_timestamp():
    p = field_pattern("at")
    assert send_time_ms(b'{"a":1,"at":1764660000123}', p) == 1764660000123
    assert send_time_ms(f'{{"at": "{iso(T0 + 123)}", "b": 2}}'.encode(), p) == T0 + 123
    assert send_time_ms(b'{"other":1}', p) is None and send_time_ms(b'{"at":"soon"}', p) is None


def test_each_output_record_is_traced_to_the_inputs_sent_with_its_stamp():
    lat = OutputLatency("127.0.0.1:1", ("in", "out"), "at")
    # two inputs stamped T0 reached Kafka at T0+10 and T0+30; one stamped T0+1 at T0+40
    lat.take([
        Msg("in", f'{{"at":{T0}}}'.encode(), T0 + 10),
        Msg("in", f'{{"at":{T0}}}'.encode(), T0 + 30),
        Msg("in", f'{{"at":{T0 + 1}}}'.encode(), T0 + 40),
    ])  # fmt: skip
    # their outputs (the stamp as Spark's to_json writes a timestamp) at T0+100 and T0+1100; one
    # without the field; one whose stamp no input had (not traced: left out)
    lat.take([
        Msg("out", f'{{"at":"{iso(T0)}"}}'.encode(), T0 + 100),
        Msg("out", f'{{"at":"{iso(T0 + 1)}"}}'.encode(), T0 + 1100),
        Msg("out", b'{"x":1}', T0 + 1200),
        Msg("out", f'{{"at":"{iso(T0 + 7)}"}}'.encode(), T0 + 1300),
    ])  # fmt: skip
    assert lat.read == 4 and lat.unreadable == 1
    out, low, high, weight = lat.latencies()
    assert list(out) == [T0 + 100, T0 + 1100] and list(low) == [70, 1060] and list(high) == [90, 1060]
    first, second = Batch(T0, 500), Batch(T0 + 600, 1000)  # ends at T0+500 and T0+1600
    lat.attach([first, second])
    assert first.processing_latency == [(69.0, 91.0, 1.0)] and first.processing_max_ms == 91.0
    assert second.processing_latency == [(1059.0, 1061.0, 1.0)]
    assert processing_bounds([first, second], 0.5) == (69.0, 91.0)


def test_a_poll_of_many_records_is_read_in_part_each_standing_for_its_share():
    lat = OutputLatency("127.0.0.1:1", ("in", "out"), "at", kafka_stamp=True)
    lat.take([Msg("out", f'{{"at":{T0 + i}}}'.encode(), T0 + i + 5) for i in range(1000)])
    out, low, high, weight = lat.latencies()
    assert len(out) == 100 and set(weight) == {10.0} and set(low) == set(high) == {5.0}  # decode raw: exact


def test_spans_are_whole_milliseconds_a_bound_known_within_one():
    import numpy as np

    spans = latency_spans(np.array([0.4, 5.0, 5.0]), np.array([0.4, 7.2, 7.2]), np.array([1.0, 2.0, 0.5]))
    assert spans == [(0.0, 2.0, 1.0), (4.0, 9.0, 2.5)]
