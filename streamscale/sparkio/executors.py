"""Which executors a Spark application has, as Spark itself lists them (its status store: each
executor's id, host and cores), not as its settings asked for them."""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Executor:
    id: str
    host: str
    cores: int

    def __str__(self) -> str:
        return f"{self.id}@{self.host} ({self.cores} core{'' if self.cores == 1 else 's'})"


def executor_list(spark) -> list[Executor]:
    """The application's live executors but the driver, in id order; empty where Spark's status
    store cannot be read (a stopped context)."""
    try:
        found = spark.sparkContext._jsc.sc().statusStore().executorList(True)
        summaries = [found.apply(i) for i in range(found.size())]
        out = [
            Executor(str(e.id()), str(e.hostPort()).rsplit(":", 1)[0], int(e.totalCores()))
            for e in summaries
            if str(e.id()) != "driver" and e.isActive()
        ]
    except Exception as exc:  # noqa: BLE001 - the list is a figure: without it the run says none
        log.debug("could not read the executors: %s", exc)
        return []
    return sorted(out, key=lambda e: (len(e.id), e.id))


def said(executors: list[Executor]) -> str:
    """The executors as a results column: ``id@host (n cores)`` apart by "; "."""
    return "; ".join(map(str, executors))
