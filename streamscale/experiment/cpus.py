"""Cores as CPUs: a local Spark application confined to k of the machine's CPUs.

``local[k]`` only caps Spark's concurrent tasks; the driver, its Python planner and the Python
workers still spread over every CPU, so on a small machine 1 and 2 "cores" measure the same thing.
Confining the whole application (the JVM and every process it starts: Python daemon, workers,
streaming source runner) to k CPUs makes the resource what a container's CPU limit is in
Theodolite's Kubernetes setting. Linux only (``sched_setaffinity``); elsewhere nothing is pinned
and the caller is told so.
"""

from __future__ import annotations

import os

from streamscale.processes import stat_fields


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def children_map() -> dict[int, list[int]]:
    """Parent process id -> its children's ids, read from /proc."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(stat_fields(int(entry))[1])
        except (OSError, ValueError, IndexError):
            continue  # the process ended meanwhile
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(root: int) -> list[int]:
    """``root`` first, then every process descended from it."""
    kids = children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def pin_tree(root: int, cpus: set[int]) -> int:
    """Every thread of ``root`` and its descendants onto ``cpus``; returns the threads pinned.
    Threads and processes started later inherit the mask of their (pinned) parent; two passes
    catch those started while the first ran."""
    pinned: set[int] = set()
    for _ in range(2):
        for pid in process_tree(root):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(int(tid), cpus)
                    pinned.add(int(tid))
                except (OSError, ValueError):
                    pass  # the thread ended meanwhile
    return len(pinned)


def jvm_pid(spark=None) -> int | None:
    from pyspark import SparkContext

    gateway = getattr(spark.sparkContext, "_gateway", None) if spark is not None else SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return proc.pid if proc is not None else None


def release_spark() -> None:
    """This process's Spark JVM (and what it started) back onto every CPU: the JVM outlives a
    stopped session and serves the next one."""
    pid = jvm_pid()
    cpus = available_cpus()
    if pid is not None and cpus and os.path.isdir("/proc"):
        pin_tree(pid, set(cpus))


def confine_spark(spark, cores: int) -> set[int] | None:
    """The local Spark application of ``spark`` onto its last ``cores`` CPUs (the first ones stay
    the likelier home of the broker and the load generator); all CPUs back when ``cores`` is at
    least their number. None where CPUs cannot be pinned (not Linux, or not a local JVM)."""
    cpus = available_cpus()
    pid = jvm_pid(spark)
    if not cpus or pid is None or not os.path.isdir("/proc"):
        return None
    chosen = set(cpus[-cores:]) if cores < len(cpus) else set(cpus)
    pin_tree(pid, chosen)
    return chosen


def machine_ticks(stat_text: str | None = None) -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat's first line
    (idle and iowait are not busy); None where there is no /proc/stat."""
    try:
        text = stat_text if stat_text is not None else open("/proc/stat").read()
        fields = [int(x) for x in text.split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user]
    total = sum(fields[:8])
    return total - fields[3] - (fields[4] if len(fields) > 4 else 0), total


def busy_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """Percent of all the machine's CPUs busy between two ``machine_ticks`` readings (NaN: unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return float("nan")
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])
