"""Which Kafka topics a streaming DataFrame reads: the ``subscribe`` option of each streaming source
at the leaves of its analysed plan, for Spark's connector and streamscale's Python source alike
(both take the topic as ``subscribe``). A job given several inputs may build its output from some
of them only; the rest never reach its plan, so nothing would read their records.
"""

from __future__ import annotations

SUBSCRIBE = "subscribe"


def topics_read(df) -> set[str] | None:
    """The topics ``df``'s streaming sources subscribe to (several comma-separated ones split), or
    None where the plan cannot be read (a Spark Connect session has no JVM plan here)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        leaves = jdf.queryExecution().analyzed().collectLeaves()
        found: set[str] = set()
        for i in range(leaves.length()):
            found.update(_subscribed(leaves.apply(i)))
    except Exception:  # noqa: BLE001 - a plan Spark will not show: no claim about what it reads
        return None
    return found


def _subscribed(leaf) -> list[str]:
    """A leaf's subscribed topics: a DataSource V2 streaming relation's options, or a V1 one's."""
    value = None
    name = leaf.getClass().getSimpleName()
    if name == "StreamingRelationV2":
        value = leaf.extraOptions().get(SUBSCRIBE)
    elif name == "StreamingRelation":
        option = leaf.dataSource().options().get(SUBSCRIBE)
        value = option.get() if option.isDefined() else None
    return [t.strip() for t in str(value).split(",") if t.strip()] if value else []
