"""A kind of input a user adds: a toy one registered through the public registry, taken by the
spec, the plan's feeds, the decoding contract and the generator's spawned workers with no other
edit; and the spec's one-line refusals around it."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition

from streamscale.benchmark.plan import resolve
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.loadgen.kinds import KINDS, InputKind, KindMaker, register_kind
from streamscale.loadgen.recordspec import records_spec
from tests.benchmark.helpers import spec_dict

JOB = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "totals.py"


class _Counts(KindMaker):
    def __init__(self, step: int, worker: int, workers: int):
        self.step, self.worker, self.workers = step, worker, workers

    def make(self, k0, k1, send_ms):
        numbers = (np.arange(k0, k1) * self.workers + self.worker) * self.step
        values = [b'{"n":%d,"sent":%d}' % (n, t) for n, t in zip(numbers.tolist(), send_ms.tolist(), strict=True)]
        return [b"%d" % (n % 10) for n in numbers.tolist()], values


@register_kind  # at import: the generator's spawned workers import this module to unpickle the kind
class Counter(InputKind):
    """Record number i of the run holds n = i x step, keyed by its last digit, and its send time."""

    word = "counter"

    def __init__(self, options):
        super().__init__(options)
        self.step = options.get("step", 1)
        if not isinstance(self.step, int) or self.step < 1:
            raise ValueError(f"step must be a whole number >= 1, not {self.step!r}")

    def columns(self):
        return [("n", "long"), ("sent", "timestamp")]

    def send_time_field(self):
        return "sent"

    def maker(self, encoding, seed, worker, workers):
        return _Counts(self.step, worker, workers)


def _spec(records: dict):
    d = spec_dict(load={"type": "rate", "values": [1000]}, resources={"type": "cores", "values": [1]})
    d["benchmark"] = {**d["benchmark"], "sut": f"{JOB}:totals", "params": {}, "records": records}
    return parse_spec(d)


def test_a_registered_kind_is_a_spec_word_and_the_plans_feed_decodes_its_columns():
    assert KINDS["counter"] is Counter
    plan = resolve(_spec({"kind": "counter", "options": {"step": 3}}))
    (feed,) = plan.pipeline(plan.point(1000, 1, "")).feeds()
    assert feed.records.columns() == [("n", "long"), ("sent", "timestamp")]
    assert feed.records.value_ddl() == "`n` BIGINT, `sent` BIGINT"
    assert feed.records.send_time_field() == "sent"
    assert feed.shape(1000, 1, 1.0) == (1000, 1.0)  # one key a record a second, as described records


@pytest.mark.parametrize(
    ("records", "words"),
    [
        ({"kind": "nope"}, "kind 'nope' is not a registered kind of input (counter"),
        ({"kind": "counter", "options": {"step": 0}}, "kind 'counter', options: step must be a whole number >= 1"),
        ({"kind": "counter", "fields": {"a": {"type": "long", "gen": "sequence"}}}, "fields do not apply"),
        ({"kind": "counter", "encoding": "csv"}, "writes its records as json, not csv"),
        ({"options": {"step": 2}, "fields": {"a": {"type": "long", "gen": "sequence"}}}, "options apply to a kind"),
    ],
)
def test_a_kind_the_spec_cannot_take_is_one_line_naming_it(records, words):
    with pytest.raises(ConfigError) as err:
        _spec(records)
    assert words in str(err.value) and "\n" not in str(err.value).strip()


def test_the_generators_spawned_workers_make_a_kinds_records_each_once(broker, topic_factory):
    topic = topic_factory(2)
    spec = records_spec({"kind": "counter", "options": {"step": 3}}, "test")
    t0 = time.time() * 1000
    cfg = GeneratorConfig(broker.bootstrap, topic=topic, sensors=50_000, records=3_000, workers=2, records_spec=spec)
    res = generate(cfg)
    assert (res.sent, res.delivered, res.failed) == (3_000, 3_000, 0)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kinds", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got, deadline = [], time.monotonic() + 30
    try:
        while len(got) < 3_000 and time.monotonic() < deadline:
            got += [m for m in consumer.consume(10_000, 0.2) if m.error() is None]
    finally:
        consumer.close()
    values = [json.loads(m.value()) for m in got]
    assert sorted(v["n"] for v in values) == list(range(0, 9_000, 3))
    assert all(m.key() == str(v["n"] % 10).encode() for m, v in zip(got, values, strict=True))
    assert all(t0 - 1000 <= v["sent"] <= time.time() * 1000 for v in values)


class _Broken(InputKind):
    word = "broken"

    def columns(self):
        return {"bad_type": [("n", "decimal")], "raises": None, "none": []}[self.options["how"]]


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("bad_type", "kind 'broken': column n has type decimal, not one of string, long"),
        ("raises", "kind 'broken': its columns failed: TypeError"),
        ("none", "kind 'broken' says no columns"),
    ],
)
def test_a_kind_whose_columns_are_wrong_is_one_line(how, words):
    register_kind(_Broken)
    try:
        with pytest.raises(ConfigError) as err:
            _spec({"kind": "broken", "options": {"how": how}})
    finally:
        KINDS.pop("broken")
    assert words in str(err.value) and "\n" not in str(err.value).strip()


def test_an_installed_packages_kind_is_found_by_its_entry_point(tmp_path, monkeypatch):
    # a package as pip installs it: its module and a dist-info declaring the kind's word
    (tmp_path / "toykinds.py").write_text(
        "from streamscale.loadgen.kinds import InputKind\n"
        "class Pings(InputKind):\n"
        "    word = 'pings'\n"
        "    def columns(self):\n"
        "        return [('ping', 'long')]\n"
    )
    info = tmp_path / "toykinds-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toykinds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[streamscale.kinds]\npings = toykinds:Pings\nbad = toykinds:Nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        plan = resolve(_spec({"kind": "pings"}))
        (feed,) = plan.pipeline(plan.point(1000, 1, "")).feeds()
        assert feed.records.columns() == [("ping", "long")] and KINDS["pings"].__module__ == "toykinds"
        with pytest.raises(ConfigError, match=r"kind 'bad' \(toykinds:Nope\) failed to import: AttributeError"):
            _spec({"kind": "bad"})
    finally:
        KINDS.pop("pings", None)
