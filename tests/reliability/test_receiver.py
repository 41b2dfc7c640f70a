"""The receiver reads what the cluster holds, not what one answer about its end said."""

from __future__ import annotations

from streamscale.broker.access import BrokerAccess
from streamscale.reliability import receiver
from streamscale.reliability.sender import ID_DIGITS
from tests.conftest import produce


def _records(ids, partitions):
    return [(None, f"{i:0{ID_DIGITS}d}".encode() + b"..", i % partitions) for i in ids]


def _first_answer(monkeypatch, changed) -> list:
    """Make the broker's first answer of end offsets ``changed(ends)``, the later ones true; the
    list of the true answers, as they are asked."""
    real = BrokerAccess.end_offsets
    answers = []

    def first_changed(self, t, isolation="read_uncommitted"):
        ends = real(self, t, isolation)
        answers.append(ends)
        return changed(ends) if len(answers) == 1 else ends

    monkeypatch.setattr(BrokerAccess, "end_offsets", first_changed)
    return answers


def test_end_offsets_that_grow_after_a_stale_answer_are_read_to(broker, topic_factory, monkeypatch):
    topic = topic_factory(partitions=3)
    produce(broker.bootstrap, topic, _records(range(900), 3))
    # a rejoined node's view, as one trial after a healed cut saw it: every partition empty
    answers = _first_answer(monkeypatch, lambda ends: dict.fromkeys(ends, 0))
    ids = receiver.receive(broker.bootstrap, topic, "read_uncommitted", 60)
    assert sorted(ids.tolist()) == list(range(900))  # each once: none lost, none read twice
    assert len(answers) == 3  # the stale one, the true one, and one more that agreed


def test_an_empty_topic_and_a_settled_one_take_two_answers(broker, topic_factory, monkeypatch):
    empty = topic_factory(partitions=2)
    assert receiver.receive(broker.bootstrap, empty, "read_uncommitted", 30).size == 0
    full = topic_factory(partitions=2)
    produce(broker.bootstrap, full, _records(range(100), 2))
    calls = []
    real = BrokerAccess.end_offsets
    monkeypatch.setattr(
        BrokerAccess, "end_offsets", lambda self, t, i="read_uncommitted": calls.append(t) or real(self, t, i)
    )
    assert sorted(receiver.receive(broker.bootstrap, full, "read_uncommitted", 30).tolist()) == list(range(100))
    assert len(calls) == 2


def test_a_partition_the_first_answer_left_out_is_read_from_its_start(broker, topic_factory, monkeypatch):
    topic = topic_factory(partitions=3)
    produce(broker.bootstrap, topic, _records(range(300), 3))
    answers = _first_answer(monkeypatch, lambda ends: {p: e for p, e in ends.items() if p != 2})
    ids = receiver.receive(broker.bootstrap, topic, "read_uncommitted", 60)
    assert sorted(ids.tolist()) == list(range(300)) and len(answers) == 3
