"""Physical planning: where repartitions go, and the sub-topologies they cut the plan into.

A stateful operator needs its input partitioned by its key. Sources are (Kafka partitions by key),
value-only operators keep that, key-changing ones lose it. Rules:

1. No repartition where the key is unchanged since the source or the last repartition (inference;
   Kafka Streams does this with and without optimization).
2. Optimized: when a key-changing operator feeds *several* stateful operators that each need a
   repartition, one repartition is pushed up right after the key change and shared (the blog's
   two-aggregation example); unoptimized, each stateful operator gets its own repartition directly
   before its groupByKey, duplicating the data.

``optimize=None`` (the default) decides per key change what is faster on Spark: rule 2 only where
one of the aggregations it feeds cannot combine partially. Spark's own per-aggregation shuffle
carries partial aggregates, the shared one every raw record: with aggregations that all combine,
merging made Spark 0.51-0.67x as fast (docs/performance.md); where one does not, raw records
cross its shuffle anyway and one shared shuffle replaces several. True forces rule 2 (Kafka
Streams' choice: its repartition topics carry raw records either way), False turns it off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamscale.topology.plan import LogicalPlan, Node


@dataclass
class PhysicalPlan:
    name: str
    optimized: bool  # rule 2 applied somewhere
    nodes: list[Node]
    repartitions: list[Node]
    subtopologies: list[list[Node]] = field(default_factory=list)

    @property
    def sinks(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "to"]


def _clone(plan: LogicalPlan) -> list[Node]:
    mapping: dict[int, Node] = {}
    for n in plan.nodes:  # creation order is topological
        mapping[n.id] = Node(
            n.id,
            n.kind,
            [mapping[p.id] for p in n.parents],
            list(n.keys),
            fn=n.fn,
            topic=n.topic,
            label=n.label,
            window=n.window,
            store=n.store,
            combinable=n.combinable,
        )
        for p in mapping[n.id].parents:
            p.children.append(mapping[n.id])
    return list(mapping.values())


def _stream_parent(n: Node) -> Node:
    return n.parents[0]  # a join's first parent is the stream, the second the table


def _partitioned(n: Node, memo: dict[int, bool]) -> bool:
    """Is the stream leaving ``n`` partitioned by its key?"""
    if n.id in memo:
        return memo[n.id]
    if n.kind in ("source", "repartition", "aggregate", "table"):
        ok = True  # an aggregate's output is keyed by the same key it was grouped by
    elif n.key_changing:
        ok = False
    else:
        ok = _partitioned(_stream_parent(n), memo)
    memo[n.id] = ok
    return ok


def _insert_after(parent: Node, children: list[Node], r: Node) -> None:
    for c in children:
        c.parents = [r if p is parent else p for p in c.parents]
        parent.children.remove(c)
        r.children.append(c)
    parent.children.append(r)


def _aggregate_of(g: Node) -> Node:
    agg = g
    while agg.children and agg.kind != "aggregate":
        agg = agg.children[0]
    return agg


def physical_plan(plan: LogicalPlan, optimize: bool | None = None) -> PhysicalPlan:
    """Repartitions placed; ``optimize``: True/False force rule 2, None chooses per key change."""
    nodes = _clone(plan)
    next_id = max(n.id for n in nodes) + 1
    memo: dict[int, bool] = {}
    needing = [g for g in nodes if g.kind == "groupByKey" and not _partitioned(_stream_parent(g), memo)]
    repartitions: list[Node] = []

    def new_repartition(parent: Node, label: str) -> Node:
        nonlocal next_id
        r = Node(next_id, "repartition", [parent], list(parent.keys), label=label)
        r.topic = f"{plan.name}-{label}-repartition"
        next_id += 1
        repartitions.append(r)
        nodes.append(r)
        return r

    handled: set[int] = set()
    if optimize is not False:
        # group the stateful operators by the key change they descend from
        by_origin: dict[int, list[Node]] = {}
        origin_of: dict[int, Node] = {}
        for g in needing:
            k = _stream_parent(g)
            while not k.key_changing:
                k = _stream_parent(k)
            by_origin.setdefault(k.id, []).append(g)
            origin_of[k.id] = k
        for kid, groups in by_origin.items():
            if len(groups) < 2:
                continue
            if optimize is None and all(_aggregate_of(g).combinable for g in groups):
                continue  # Spark's partial aggregation beats one shared shuffle of raw records
            k = origin_of[kid]
            r = new_repartition(k, k.name)
            r.explicit = True  # materialised once and shared (compile: explicit repartition)
            _insert_after(k, list(k.children), r)
            handled.update(g.id for g in groups)
    for g in needing:
        if g.id in handled:
            continue
        parent = _stream_parent(g)
        agg = _aggregate_of(g)
        r = new_repartition(parent, agg.store or g.name)
        r.explicit = False  # the aggregation's own exchange performs it
        _insert_after(parent, [g], r)
    ordered = _topological(nodes)
    phys = PhysicalPlan(plan.name, any(r.explicit for r in repartitions), ordered, repartitions)
    phys.subtopologies = _subtopologies(ordered)
    return phys


def _topological(nodes: list[Node]) -> list[Node]:
    out, seen = [], set()

    def visit(n: Node) -> None:
        if n.id in seen:
            return
        for p in n.parents:
            visit(p)
        seen.add(n.id)
        out.append(n)

    for n in sorted(nodes, key=lambda n: n.id):
        visit(n)
    return out


def _subtopologies(nodes: list[Node]) -> list[list[Node]]:
    """Connected components once every repartition's outgoing edges are cut (they are topics)."""
    parent = {n.id: n.id for n in nodes}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for n in nodes:
        for p in n.parents:
            if p.kind != "repartition":
                parent[find(n.id)] = find(p.id)
        if n.kind == "repartition" and len(n.children) > 1:  # one source of the topic feeds all its readers
            for c in n.children[1:]:
                parent[find(c.id)] = find(n.children[0].id)
    groups: dict[int, list[Node]] = {}
    for n in nodes:
        groups.setdefault(find(n.id), []).append(n)
    return sorted(groups.values(), key=lambda g: min(x.id for x in g))


def describe(phys: PhysicalPlan) -> str:
    """Kafka Streams' Topology#describe() format."""
    lines = ["Topologies:"]
    shown: set[int] = set()
    for i, sub in enumerate(phys.subtopologies):
        lines.append(f"   Sub-topology: {i}")
        members = {n.id for n in sub}
        for n in sub:
            ins = [p for p in n.parents]
            if n.kind == "repartition":  # sink into the repartition topic
                lines.append(f"    Sink: {n.name}-sink (topic: {n.topic})")
                lines.append(f"      <-- {', '.join(p.name for p in ins)}")
                continue
            # the first reader of a repartition topic starts with that topic's source
            for p in ins:
                if p.kind == "repartition" and p.id not in members and p.id not in shown:
                    shown.add(p.id)
                    lines.append(f"    Source: {p.name}-source (topics: [{p.topic}])")
                    lines.append(f"      --> {', '.join(c.name for c in p.children)}")
            if n.kind in ("source", "table"):
                kind, extra = "Source", f"(topics: [{n.topic}])"
            elif n.kind == "to":
                kind, extra = "Sink", f"(topic: {n.topic})"
            else:
                kind, extra = "Processor", f"(stores: [{n.store}])" if n.store else "(stores: [])"
            lines.append(f"    {kind}: {n.name} {extra}" + (f"  # {n.label}" if n.label else ""))
            outs = [c.name + ("-sink" if c.kind == "repartition" else "") for c in n.children]
            if outs:
                lines.append(f"      --> {', '.join(outs)}")
            srcs = [(p.name + "-source") if p.kind == "repartition" else p.name for p in ins]
            if srcs:
                lines.append(f"      <-- {', '.join(srcs)}")
    return "\n".join(lines)


def to_dot(phys: PhysicalPlan) -> str:
    out = [
        f'digraph "{phys.name}{"" if phys.optimized else "-unoptimized"}" {{',
        "  rankdir=TB;",
        '  node [shape=box, fontname="Helvetica", fontsize=10];',
    ]
    for i, sub in enumerate(phys.subtopologies):
        out.append(f'  subgraph cluster_{i} {{ label="Sub-topology {i}"; style=rounded;')
        for n in sub:
            shape = "cylinder" if n.kind in ("source", "table", "to", "repartition") else "box"
            label = n.name + (f"\\n{n.label}" if n.label else "") + (f"\\n{n.topic}" if n.topic else "")
            out.append(f'    "{n.name}" [label="{label}", shape={shape}];')
        out.append("  }")
    for n in phys.nodes:
        for p in n.parents:
            style = ' [style=dashed, label="repartition topic"]' if p.kind == "repartition" else ""
            out.append(f'  "{p.name}" -> "{n.name}"{style};')
    out.append("}")
    return "\n".join(out) + "\n"


def _columns(phys: PhysicalPlan) -> dict[int, float]:
    """Each node's x: leaves side by side in depth-first order, every other node above the mean of
    its children."""
    xs: dict[int, float] = {}
    leaves = 0

    def place(n) -> float:
        nonlocal leaves
        if n.id not in xs:
            kids = list(n.children)
            if not kids:
                xs[n.id] = float(leaves)
                leaves += 1
            else:
                xs[n.id] = sum(place(c) for c in kids) / len(kids)
        return xs[n.id]

    for n in phys.nodes:
        if not n.parents:
            place(n)
    return xs


def render_png(phys: PhysicalPlan, path) -> None:
    """Draw the physical plan (layered by depth, one colour per sub-topology) with networkx + matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    g = nx.DiGraph()
    sub_of = {n.id: i for i, sub in enumerate(phys.subtopologies) for n in sub}
    depth: dict[int, int] = {}
    for n in phys.nodes:
        depth[n.id] = 1 + max((depth[p.id] for p in n.parents), default=-1)
        g.add_node(n.name, layer=depth[n.id])
        for p in n.parents:
            g.add_edge(p.name, n.name, repartition=p.kind == "repartition")
    xs = _columns(phys)
    pos = {n.name: (xs[n.id], -depth[n.id]) for n in phys.nodes}
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(phys.nodes) ** 0.5 * 3), 1.1 * (max(depth.values()) + 2)))
    colors = plt.cm.Set2.colors
    labels = {n.name: f"{n.kind}\n{n.label or n.topic or ''}"[:40] for n in phys.nodes}
    nx.draw_networkx_nodes(
        g,
        pos,
        ax=ax,
        node_size=2600,
        node_shape="s",
        node_color=[colors[sub_of[n.id] % len(colors)] for n in phys.nodes],
    )
    plain = [(u, v) for u, v, d in g.edges(data=True) if not d["repartition"]]
    dashed = [(u, v) for u, v, d in g.edges(data=True) if d["repartition"]]
    nx.draw_networkx_edges(g, pos, edgelist=plain, ax=ax, arrows=True, node_size=2600)
    nx.draw_networkx_edges(
        g, pos, edgelist=dashed, ax=ax, arrows=True, style="dashed", edge_color="red", node_size=2600
    )
    nx.draw_networkx_labels(g, pos, labels, ax=ax, font_size=7)
    ax.set_title(
        f"{phys.name} ({'optimized' if phys.optimized else 'not optimized'}): "
        f"{len(phys.subtopologies)} sub-topologies, {len(phys.repartitions)} repartition topics "
        "(dashed)",
        fontsize=9,
    )
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
