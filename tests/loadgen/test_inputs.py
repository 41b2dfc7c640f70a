"""Several inputs and records that refer to each other: ``ref:`` values against the referenced
schedule worked out by hand, the inputs' checks, and two generators whose clicks all name an
impression that was sent before them."""

import json

import numpy as np
import pytest

from streamscale.errors import ConfigError
from streamscale.loadgen import GeneratorConfig
from streamscale.loadgen.fields import Chunk, GenError, RefClock, parse
from streamscale.loadgen.generator import LoadGenerators
from streamscale.loadgen.inputs import InputSpec, resolve_inputs
from streamscale.loadgen.recordspec import records_spec
from tests.pipelines.helpers import read_topic

IMPRESSIONS = {"id": {"type": "string", "gen": "sequence"}, "at": {"type": "timestamp", "gen": "now"}}


def clicks(gen: str = "ref:imp.id,5", type_: str = "string") -> dict:
    return {"fields": {"n": {"type": "long", "gen": "sequence"}, "imp": {"type": type_, "gen": gen},
                       "at": {"type": "timestamp", "gen": "now"}}}  # fmt: skip


def specs(**over) -> dict:
    d = {"imp": {"share": 0.75, "records": {"fields": IMPRESSIONS}}, "click": {"share": 0.25, "records": clicks()}}
    d.update(over)
    return {name: InputSpec.model_validate(v) for name, v in d.items()}


def test_a_ref_names_records_stamped_within_max_s_before_the_send_time():
    # two workers of 10 records/s from t0 = 0: worker w's record k is number 2k + w, stamped k * 100 ms
    clock = RefClock(0, (10.0, 10.0), (None, None))
    rng = np.random.default_rng(3)
    got = clock.numbers(np.full(20_000, 10_000), 2.0, rng)
    # stamped within [8,000, 10,000] ms: k from 80 to 100 of each worker
    assert set(got.tolist()) == {2 * k + w for k in range(80, 101) for w in (0, 1)}


def test_a_ref_before_the_first_or_after_the_last_record_names_that_record():
    rng = np.random.default_rng(1)
    assert set(RefClock(5_000, (10.0,), (None,)).numbers(np.full(50, 1_000), 2.0, rng).tolist()) == {0}
    # worker 0 sends 50 records (its last stamped 4,900 ms): a click at 10 s names record 49
    assert set(RefClock(0, (10.0,), (50,)).numbers(np.full(50, 10_000), 2.0, rng).tolist()) == {49}


def test_a_ref_is_written_as_the_referenced_fields_type():
    g = parse("ref:imp.id,5", "string")
    g.clock = RefClock(0, (1000.0,), (None,))
    tokens, plain = g.draw(Chunk(np.arange(3), np.array([0, 0, 0]), np.random.default_rng(0)))
    assert tokens == [b'"0"'] * 3 and plain == [b"0"] * 3
    n = parse("ref:imp.id,5", "long")
    n.clock = RefClock(0, (1000.0,), (None,))
    assert n.draw(Chunk(np.arange(2), np.array([0, 0]), np.random.default_rng(0))) == ([b"0", b"0"], None)


@pytest.mark.parametrize(
    "gen,type_,says",
    [("ref:imp", "string", "needs an input"), ("ref:imp.id", "long", "needs an input"),
     ("ref:imp.id,x", "long", "needs an input"), ("ref:imp.id,5", "double", "type long, int or string"),
     ("ref:imp.id,-1", "long", "MAX_S")],
)  # fmt: skip
def test_a_ref_that_cannot_be_read_says_why(gen, type_, says):
    with pytest.raises(GenError, match=says):
        parse(gen, type_)


def test_inputs_start_referenced_first_and_take_their_decode_default():
    d = specs()
    order = resolve_inputs({"click": d["click"], "imp": d["imp"]}, "raw")
    assert order.names == ["imp", "click"] and {i.decode for i in order} == {"raw"}
    assert [i.rate(1000) for i in order] == [750, 250]


@pytest.mark.parametrize(
    "over,says",
    [
        ({"click": {"share": 0.5, "records": clicks()}}, "sum to 1, not 0.75 \\+ 0.5 = 1.25"),
        ({"click": {"share": 0, "records": clicks()}, "imp": {"share": 1, "records": {"fields": IMPRESSIONS}}},
         "positive fraction"),
        ({"click": {"share": 0.25, "records": clicks("ref:views.id,5")}}, "names no input"),
        ({"click": {"share": 0.25, "records": clicks("ref:imp.nope,5")}}, "imp has no field nope"),
        ({"click": {"share": 0.25, "records": clicks("ref:imp.at,5", "long")}}, "gen: sequence"),
        ({"click": {"share": 0.25, "records": clicks("ref:imp.id,5", "long")}}, "imp is long, imp.id is string"),
        ({"click": {"share": 0.25, "records": clicks("ref:click.n,5", "long")}}, "its own input"),
        ({"imp": {"share": 0.75, "records": {"fields": {**IMPRESSIONS, "c": {"type": "long", "gen": "ref:click.n,1"}}}},
          "click": {"share": 0.25, "records": clicks()}}, "in a circle"),
    ],
)  # fmt: skip
def test_bad_inputs_say_what_is_wrong(over, says):
    with pytest.raises(ValueError, match=says):
        resolve_inputs(specs(**over))


def test_a_load_of_records_that_refer_to_an_input_it_does_not_send_is_refused():
    with pytest.raises(ConfigError, match="names the input imp, which this load does not send"):
        GeneratorConfig("localhost:9092", topic="t", records_spec=records_spec(clicks(), "t"))


def test_every_generated_click_names_an_impression_sent_at_most_max_s_before(broker, topic_factory):
    imp_topic, click_topic = topic_factory(2), topic_factory(1)
    imp = records_spec({"fields": IMPRESSIONS}, "imp")
    click = records_spec(clicks("ref:imp.id,1.5"), "click")
    gens = LoadGenerators([
        ("imp", GeneratorConfig(broker.bootstrap, imp_topic, sensors=2000, workers=2, duration_s=3, records_spec=imp)),
        ("click", GeneratorConfig(broker.bootstrap, click_topic, sensors=500, duration_s=3, records_spec=click,
                                  refs={"imp": None})),
    ]).start()  # fmt: skip
    res = gens.wait(60)
    assert res.target_rate == 2500 and res.delivered == 7500
    shown = {r["id"]: r["at"] for r in (json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, imp_topic, 2))}
    got = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, click_topic, 1)]
    assert len(shown) == 6000 and len(got) == 1500
    # both schedules start together, however long the clicks' worker took to start: the last clicks
    # still name impressions sent within 1.5 s, not the last impression long before
    assert min(c["at"] for c in got) == min(shown.values())
    assert all(c["imp"] in shown and 0 <= c["at"] - shown[c["imp"]] <= 1500 for c in got)
    assert len({c["imp"] for c in got}) > 1000  # spread over the impressions, not one named over and over
