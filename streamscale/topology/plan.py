"""Logical plan: operators, their parents, and whether they change the record key.

Records are DataFrame rows; the key is a list of key columns that each stream carries along.
Value-only operators (filter, mapValues, flatMapValues, peek, a stream-table join that only adds
columns) keep the key; map, selectKey and flatMap change it, as in Kafka Streams' DSL. Each
operator holds the DataFrame function that implements it, so the same plan can be described,
optimized and compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

KEY_CHANGING = {"map", "selectKey", "flatMap"}
STATEFUL = {"aggregate"}
KIND_PREFIX = {  # Kafka Streams' processor name prefixes
    "source": "KSTREAM-SOURCE",
    "filter": "KSTREAM-FILTER",
    "mapValues": "KSTREAM-MAPVALUES",
    "map": "KSTREAM-MAP",
    "selectKey": "KSTREAM-KEY-SELECT",
    "flatMap": "KSTREAM-FLATMAP",
    "flatMapValues": "KSTREAM-FLATMAPVALUES",
    "join": "KSTREAM-JOIN",
    "groupByKey": "KSTREAM-GROUPBYKEY",
    "windowedBy": "KSTREAM-WINDOWED",
    "aggregate": "KSTREAM-AGGREGATE",
    "to": "KSTREAM-SINK",
    "repartition": "KSTREAM-REPARTITION",
    "table": "KTABLE-SOURCE",
}


@dataclass(eq=False)
class Node:
    id: int
    kind: str
    parents: list[Node]
    keys: list[str]
    fn: Callable | None = None  # DataFrame -> DataFrame (aggregate: (df, keys, window) -> df)
    topic: str | None = None  # source / sink / table topic
    label: str = ""
    window: Callable | None = None  # windowedBy: () -> Column
    store: str | None = None  # state store of a stateful operator
    explicit: bool = False  # repartition: materialised and shared (else the aggregation shuffles)
    combinable: bool = True  # aggregate: combines partially before a shuffle (Spark's built-ins do)
    children: list[Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{KIND_PREFIX[self.kind]}-{self.id:010d}"

    @property
    def key_changing(self) -> bool:
        return self.kind in KEY_CHANGING

    @property
    def stateful(self) -> bool:
        return self.kind in STATEFUL


class LogicalPlan:
    def __init__(self, name: str):
        self.name = name
        self.nodes: list[Node] = []
        self._ids = count()

    def _add(self, kind: str, parents: list[Node], keys: list[str], **kw) -> Node:
        node = Node(next(self._ids), kind, parents, list(keys), **kw)
        for p in parents:
            p.children.append(node)
        self.nodes.append(node)
        return node

    def stream(self, topic: str, keys: list[str]) -> Stream:
        return Stream(self, self._add("source", [], keys, topic=topic))

    def table(self, topic: str, keys: list[str], fn: Callable) -> Node:
        """A table (e.g. the UC4 sensor registry); ``fn(spark)`` builds its DataFrame."""
        return self._add("table", [], keys, topic=topic, fn=fn)

    @property
    def sources(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "source"]

    @property
    def sinks(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "to"]


@dataclass
class Stream:
    plan: LogicalPlan
    node: Node

    def _then(self, kind: str, fn=None, keys=None, label: str = "", **kw) -> Stream:
        keys = self.node.keys if keys is None else keys
        return Stream(self.plan, self.plan._add(kind, [self.node], keys, fn=fn, label=label, **kw))

    # value-only
    def filter(self, fn: Callable, label: str = "") -> Stream:
        return self._then("filter", fn, label=label)

    def map_values(self, fn: Callable, label: str = "") -> Stream:
        return self._then("mapValues", fn, label=label)

    def flat_map_values(self, fn: Callable, label: str = "") -> Stream:
        return self._then("flatMapValues", fn, label=label)

    def join(self, table: Node, fn: Callable, label: str = "") -> Stream:
        """Stream-table join on the table's key; adds the table's columns, keeps the stream's key."""
        node = self.plan._add("join", [self.node, table], self.node.keys, fn=fn, label=label)
        return Stream(self.plan, node)

    # key-changing
    def select_key(self, keys: list[str], fn: Callable | None = None, label: str = "") -> Stream:
        return self._then("selectKey", fn, keys=keys, label=label)

    def map(self, fn: Callable, keys: list[str], label: str = "") -> Stream:
        return self._then("map", fn, keys=keys, label=label)

    def flat_map(self, fn: Callable, keys: list[str], label: str = "") -> Stream:
        return self._then("flatMap", fn, keys=keys, label=label)

    # stateful
    def group_by_key(self) -> Stream:
        return self._then("groupByKey")

    def windowed_by(self, window: Callable, label: str = "") -> Stream:
        return self._then("windowedBy", window=window, label=label)

    def aggregate(self, fn: Callable, store: str, label: str = "", combinable: bool = True) -> Stream:
        """``combinable``: Spark can aggregate partially before the shuffle (count, sum, min, max,
        avg, variance, ...); false for e.g. collect_list or a pandas aggregation UDF."""
        if self.node.kind not in ("groupByKey", "windowedBy"):
            raise ValueError("aggregate() follows group_by_key() or windowed_by()")
        window = self.node.window if self.node.kind == "windowedBy" else None
        return self._then("aggregate", fn, label=label, window=window, store=store, combinable=combinable)

    def to(self, topic: str) -> Node:
        return self.plan._add("to", [self.node], self.node.keys, topic=topic)
