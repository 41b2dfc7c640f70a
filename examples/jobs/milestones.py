"""Each sensor's milestones: a row every ``every`` readings of a sensor (its 100th, 200th, ...),
counted in state of its own with ``transformWithState`` (Spark's arbitrary state, API v2) in
RocksDB, Spark's state store for such state (milestones.yaml sets it)."""

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StructField, StructType

OUTPUT = "identifier STRING, readings LONG"
COUNT = StructType([StructField("readings", LongType(), True)])


class Milestones(StatefulProcessor):
    def __init__(self, every: int):
        self.every = every

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", COUNT)

    def handleInputRows(self, key, rows, timerValues):
        before = self.count.get()[0] if self.count.exists() else 0
        after = before + sum(1 for _ in rows)
        self.count.update((after,))
        for reached in range((before // self.every + 1) * self.every, after + 1, self.every):
            yield Row(identifier=key[0], readings=reached)

    def close(self) -> None:
        pass


def milestones(readings, params):
    every = int(params.get("every", 100))
    out = readings.groupBy("identifier").transformWithState(
        statefulProcessor=Milestones(every), outputStructType=OUTPUT, outputMode="Append", timeMode="None"
    )
    return out.withColumnRenamed("identifier", "key").selectExpr("key", "key AS identifier", "readings")
