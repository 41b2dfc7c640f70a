"""Consumer-group assignment as iterated bin packing (§IV and §VI-A of Landau, Saurabh, Andrade and
Barbosa, *Multi-Objective Optimization of Consumer Group Autoscaling in Message Broker Systems*).

Items are partitions with a measured write speed s_j(t_k) (bytes/s); bins are consumers with
capacity C. An assignment maps every partition to one consumer id (0, 1, 2, ...). Each algorithm
takes the current speeds and the previous iteration's assignment and returns the next one.

* Any-fit baselines adapted to iterations (NFD, FFD, BFD, WFD): items sorted by decreasing speed;
  when an item fits no open bin, the new bin is h(j, k) (Eq. 14): the partition's previous
  consumer if it is not yet used in this iteration, else f(k), the lowest unused consumer (Eq. 12).
* Modified any fit (Algorithm 1, Table II): MWF, MBF (consumers sorted by cumulative speed),
  MWFP, MBFP (sorted by their fastest partition).
* kd_N: Kafka's equal-count assignment over a fixed group of N consumers (capacity ignored).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Mapping

from streamscale.errors import CapacityError  # noqa: F401 - raised here, imported from here by users

Assignment = dict[int, int]  # partition -> consumer


class _Bins:
    """The consumer group being built for iteration k.

    The fit strategies keep an index of the open bins so that a placement does not scan them all
    (10,000 partitions: MWF in milliseconds rather than seconds): worst fit a heap by (load,
    opening order), best fit a sorted list, first fit ("left-most", the lowest consumer index,
    §II-B) a scan in index order. Ties go to the earliest opened bin, as a scan in opening order
    would choose.
    """

    def __init__(self, capacity: float, fit: str):
        if fit not in ("first", "best", "worst", "next"):
            raise ValueError(f"unknown fit strategy {fit}")
        self.capacity = capacity
        self.limit = capacity * (1 + 1e-12)  # keeps sums of floats that equal C exactly from being rejected
        self.fit = fit
        self.load: dict[int, float] = {}  # open consumer -> assigned speed
        self.items: dict[int, list[int]] = {}  # open consumer -> partitions
        self.order: list[int] = []  # consumers in the order they were opened
        self._rank: dict[int, int] = {}  # consumer -> position in opening order
        self._heap: list[tuple[float, int, int]] = []  # worst fit: (load, rank, consumer), lazy
        self._sorted: list[tuple[float, int, int]] = []  # best fit: (load, -rank, consumer)
        self._free = 0  # no consumer below this id is unused

    def open(self, consumer: int) -> None:
        if consumer in self.load:
            raise ValueError(f"consumer {consumer} is already open")
        self.load[consumer] = 0.0
        self.items[consumer] = []
        self._rank[consumer] = len(self.order)
        self.order.append(consumer)
        self._index(consumer, None)

    def _index(self, c: int, old: float | None) -> None:
        if self.fit == "worst":
            heapq.heappush(self._heap, (self.load[c], self._rank[c], c))
        elif self.fit == "best":
            if old is not None:
                del self._sorted[bisect.bisect_left(self._sorted, (old, -self._rank[c], c))]
            bisect.insort(self._sorted, (self.load[c], -self._rank[c], c))

    def fits(self, consumer: int, size: float) -> bool:
        return self.load[consumer] + size <= self.limit

    def put(self, consumer: int, partition: int, size: float) -> None:
        old = self.load[consumer]
        self.load[consumer] = old + size
        self.items[consumer].append(partition)
        self._index(consumer, old)

    def choose_open(self, size: float) -> int | None:
        """The open bin the fit strategy picks for an item, or None if none fits."""
        limit = self.limit
        if self.fit == "next":
            last = self.order[-1] if self.order else None
            return last if last is not None and self.load[last] + size <= limit else None
        if self.fit == "first":
            fitting = [c for c, used in self.load.items() if used + size <= limit]
            return min(fitting) if fitting else None
        if self.fit == "worst":  # the least loaded bin has the most room: if it does not fit, none does
            heap = self._heap
            while heap and heap[0][0] != self.load[heap[0][2]]:
                heapq.heappop(heap)  # an entry left behind by a later put
            return heap[0][2] if heap and heap[0][0] + size <= limit else None
        # best fit: the fullest bin that still fits (bisect near C - size, then check exactly)
        srt = self._sorted
        i = bisect.bisect_right(srt, (limit - size + abs(limit) * 1e-9, float("inf"), 0))
        while i > 0:
            used, _, c = srt[i - 1]
            if used + size <= limit:
                # the earliest opened among equally full bins sits last among them
                return c
            i -= 1
        return None

    def lowest_unused(self) -> int:
        """f(k), Eq. 12. Bins only open within an iteration, so the answer never goes down."""
        while self._free in self.load:
            self._free += 1
        return self._free

    def assignment(self) -> Assignment:
        return {p: c for c, ps in self.items.items() for p in ps}


def _check(speeds: Mapping[int, float], capacity: float) -> None:
    if not capacity > 0:
        raise ValueError(f"capacity must be positive, not {capacity}")
    if not math.isfinite(capacity):
        raise ValueError(f"capacity must be finite, not {capacity}")
    for p, s in speeds.items():
        if not math.isfinite(s):
            raise ValueError(f"partition {p} has a speed that is not a finite number: {s}")
        if s < 0:
            raise ValueError(f"partition {p} has a negative speed {s}")
        if s > capacity:
            raise CapacityError(f"partition {p} writes {s:g} > capacity {capacity:g}: it cannot be assigned")


def any_fit_decreasing(
    speeds: Mapping[int, float],
    capacity: float,
    previous: Assignment | None = None,
    fit: str = "first",
    first_bin: int | None = None,
) -> Assignment:
    """NFD / FFD / BFD / WFD with the bin-creation rule h(j, k).

    ``first_bin``: open this consumer before placing anything (a variant; Eq. 14 read literally
    opens the first consumer by h(j, k) too). An opened bin left empty is not in the assignment.
    """
    _check(speeds, capacity)
    previous = previous or {}
    bins = _Bins(capacity, fit)
    if first_bin is not None and speeds:
        bins.open(first_bin)
    for p in sorted(speeds, key=lambda j: (-speeds[j], j)):
        c = bins.choose_open(speeds[p])
        if c is None:
            g = previous.get(p)
            c = g if g is not None and g not in bins.load else bins.lowest_unused()  # h(j, k), Eq. 14
            bins.open(c)
        bins.put(c, p, speeds[p])
    return bins.assignment()


def modified_any_fit(
    speeds: Mapping[int, float],
    capacity: float,
    previous: Assignment | None = None,
    fit: str = "worst",
    sort: str = "cumulative",
) -> Assignment:
    """Algorithm 1: keep partitions with their consumer where possible, moving the slowest first."""
    _check(speeds, capacity)
    previous = {p: c for p, c in (previous or {}).items() if p in speeds}
    bins = _Bins(capacity, fit)
    groups: dict[int, list[int]] = {}
    for p, c in previous.items():
        groups.setdefault(c, []).append(p)
    unassigned = [p for p in speeds if p not in previous]

    def key(c: int) -> float:
        ps = groups[c]
        return sum(speeds[p] for p in ps) if sort == "cumulative" else max(speeds[p] for p in ps)

    if sort not in ("cumulative", "max_partition"):
        raise ValueError(f"unknown sort strategy {sort}")
    for c in sorted(groups, key=lambda c: (-key(c), c)):  # line 2
        pset = sorted(groups[c], key=lambda p: (-speeds[p], p))  # line 5
        while pset:  # lines 6-13
            p = pset[-1]  # smallest first
            target = bins.choose_open(speeds[p])
            if target is None:
                break
            bins.put(target, p, speeds[p])
            pset.pop()
        if not pset:
            continue
        bins.open(c)  # line 17
        while pset:  # lines 18-24
            p = pset[0]  # biggest first
            if not bins.fits(c, speeds[p]):
                break
            bins.put(c, p, speeds[p])
            pset.pop(0)
        unassigned.extend(pset)  # line 25
    for p in sorted(unassigned, key=lambda j: (-speeds[j], j)):  # lines 27-30
        target = bins.choose_open(speeds[p])
        if target is None:
            target = bins.lowest_unused()
            bins.open(target)
        bins.put(target, p, speeds[p])
    return bins.assignment()


def kafka_equal_count(speeds: Mapping[int, float], consumers: int, previous: Assignment | None = None) -> Assignment:
    """kd_N: an (approximately) equal number of partitions per consumer, blind to speeds (round robin)."""
    if consumers < 1:
        raise ValueError("kd_N needs at least one consumer")
    return {p: i % consumers for i, p in enumerate(sorted(speeds))}


ALGORITHMS: dict[str, Callable[..., Assignment]] = {
    "NFD": lambda s, C, prev=None: any_fit_decreasing(s, C, prev, "next"),
    "FFD": lambda s, C, prev=None: any_fit_decreasing(s, C, prev, "first"),
    "BFD": lambda s, C, prev=None: any_fit_decreasing(s, C, prev, "best"),
    "WFD": lambda s, C, prev=None: any_fit_decreasing(s, C, prev, "worst"),
    "MWF": lambda s, C, prev=None: modified_any_fit(s, C, prev, "worst", "cumulative"),
    "MBF": lambda s, C, prev=None: modified_any_fit(s, C, prev, "best", "cumulative"),
    "MWFP": lambda s, C, prev=None: modified_any_fit(s, C, prev, "worst", "max_partition"),
    "MBFP": lambda s, C, prev=None: modified_any_fit(s, C, prev, "best", "max_partition"),
}


def known_algorithm(name: str) -> str:
    """``name`` if it is one of ALGORITHMS, else a ValueError listing them (for spec validators)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}")
    return name


def consumers_used(assignment: Assignment) -> int:
    return len(set(assignment.values()))


def rscore(speeds: Mapping[int, float], capacity: float, previous: Assignment | None, current: Assignment) -> float:
    """Eq. 11: (1/C) x the write speed of the partitions whose consumer changed between iterations."""
    if not previous:
        return 0.0
    moved = [p for p, c in current.items() if p in previous and previous[p] != c]
    return sum(speeds[p] for p in moved) / capacity
