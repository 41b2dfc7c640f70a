"""UC4's sensor registry: a full tree of nested groups, ``levels`` deep with ``children`` per node.

The leaves are the sensors the load generator simulates (``s_0`` ... ``s_{k^n - 1}``), so
``levels`` nested groups with 4 children each give 4^n sensors, as in the Theodolite paper; with
``sensors`` given, any number of them: as many levels as 4^n needs to hold them, every group full
but the last ones, which hold the rest (groups of four, the last level partly filled), so that a
benchmark can step UC4's load as finely as the others'. The JSON layout follows Theodolite's
SensorRegistry (``topLevelSensor`` with nested ``children``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError
from streamscale.loadgen.records import sensor_id

REGISTRY_TOPIC = "configuration"
REGISTRY_KEY = b"sensor-registry"


@dataclass
class SensorRegistry:
    levels: int
    children: int
    tree: dict = field(repr=False)

    @classmethod
    def build(cls, levels: int, children: int = 4, sensors: int | None = None) -> SensorRegistry:
        """A tree ``levels`` deep of ``children`` per group (children^levels sensors); with
        ``sensors``, that many, in as few levels as hold them (``levels`` is then ignored)."""
        if children < 1:
            raise ConfigError("each group needs at least 1 child")
        if sensors is not None:
            if not isinstance(sensors, int) or not 1 <= sensors <= 10_000_000:
                raise ConfigError(f"a sensor registry holds 1 to 10 million sensors, not {sensors}")
            levels = 1
            while children > 1 and children**levels < sensors:
                levels += 1
        elif levels < 1:
            raise ConfigError("a sensor registry needs at least 1 level of nested groups")
        elif children**levels > 10_000_000:
            raise ConfigError(f"{children}^{levels} sensors is more than 10 million")
        total = children**levels if sensors is None else sensors

        def node(depth: int, path: str, first: int) -> dict:
            # the sensors first .. first + children^(levels - depth) - 1, those that exist
            if depth == levels:
                ident = sensor_id(first)
                return {"identifier": ident, "name": f"Sensor {ident}"}
            block = children ** (levels - depth - 1)
            kids = [
                node(depth + 1, f"{path}.{i}", first + i * block) for i in range(children) if first + i * block < total
            ]
            ident = "root" if depth == 0 else f"g{path}"
            return {"identifier": ident, "name": f"Group {ident}", "children": kids}

        return cls(levels, children, {"topLevelSensor": node(0, "", 0)})

    @property
    def num_sensors(self) -> int:
        """Leaves of the tree (a loaded registry may be irregular: groups of different depths)."""

        def leaves(n: dict) -> int:
            kids = n.get("children")
            return sum(leaves(c) for c in kids) if kids else 1

        return leaves(self.tree["topLevelSensor"])

    def sensors(self) -> list[str]:
        return list(self.ancestors())

    def parent_pairs(self) -> list[tuple[str, str]]:
        """(child, parent) edges of the tree, sensors and groups alike."""
        out: list[tuple[str, str]] = []

        def walk(n: dict) -> None:
            for c in n.get("children", []):
                out.append((c["identifier"], n["identifier"]))
                walk(c)

        walk(self.tree["topLevelSensor"])
        return out

    def ancestors(self) -> dict[str, list[str]]:
        """sensor id -> every group it contributes to, nearest first, root last."""
        parent = dict(self.parent_pairs())
        out: dict[str, list[str]] = {}
        for s in (c for c in parent if "children" not in self._node(c)):
            chain, cur = [], s
            while cur in parent:
                cur = parent[cur]
                chain.append(cur)
            out[s] = chain
        return out

    def groups(self) -> list[str]:
        return sorted({p for _, p in self.parent_pairs()})

    def _node(self, ident: str) -> dict:
        if not hasattr(self, "_index"):
            idx: dict[str, dict] = {}

            def walk(n: dict) -> None:
                idx[n["identifier"]] = n
                for c in n.get("children", []):
                    walk(c)

            walk(self.tree["topLevelSensor"])
            self._index = idx
        return self._index[ident]

    def to_json(self) -> str:
        return json.dumps(self.tree, separators=(",", ":"))

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path_or_json: str | Path) -> SensorRegistry:
        text = Path(path_or_json).read_text() if not str(path_or_json).lstrip().startswith("{") else str(path_or_json)
        try:
            tree = json.loads(text)
            top = tree["topLevelSensor"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"not a sensor registry: {exc}") from None
        depth = width = 0
        stack = [(top, 0)]
        while stack:  # the deepest leaf and the widest group: registries may be irregular
            n, d = stack.pop()
            if not isinstance(n, dict) or not isinstance(n.get("identifier"), str):
                raise ConfigError(f"not a sensor registry: a node without an 'identifier' string: {str(n)[:80]}")
            kids = n.get("children")
            if kids:
                if not isinstance(kids, list):
                    raise ConfigError(f"not a sensor registry: 'children' of {n['identifier']} is not a list")
                width = max(width, len(kids))
                stack.extend((c, d + 1) for c in kids)
            else:
                depth = max(depth, d)
        return cls(depth, width, tree)

    def publish(self, bootstrap: str, topic: str = REGISTRY_TOPIC) -> None:
        """Write the registry as one record (key ``sensor-registry``) for pipelines to read."""

        from streamscale.broker.access import BrokerAccess

        with BrokerAccess(bootstrap) as access:
            access.create_topic(topic, 1, exist_ok=True)
        errors: list[str] = []
        p = KafkaConnection.of(bootstrap).producer({"enable.idempotence": True, "message.max.bytes": 64 * 1024 * 1024})
        p.produce(
            topic,
            key=REGISTRY_KEY,
            value=self.to_json().encode(),
            on_delivery=lambda err, _m: errors.append(err.str()) if err else None,
        )
        if p.flush(30) or errors:
            raise ConfigError(f"could not publish the sensor registry to '{topic}': {errors or 'timeout'}")
