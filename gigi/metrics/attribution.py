"""Victim-to-culprit attribution, with blame passed down chains of waits (wPerf's cascade).

Time is cut into segments at every boundary of a WAIT, a hold or a timed USE. In each segment,
every task that waits for a resource R spreads the segment's length over the other tasks that
hold or use R then, in proportion to the units they hold. When such a holder is itself waiting
for another resource R2 at that moment, its share passes on to R2's holders, and so on down the
chain (a task is never blamed twice along one chain). A share that finds no holder at the end
of a chain stays with the last task (it was waiting on something no task holds: I/O, a timer);
a wait that finds no holder at all is unattributed (nobody held the resource: it was idle or
simply empty). Blame along a chain adds up to the raw wait.

``attribute`` is the plain-Python sweep; its output rows are
``(wait_seq, resource, victim, culprit, culprit_resource, depth, blame_ns)``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

MAX_DEPTH = 4


@dataclass
class Intervals:
    """Parallel arrays of intervals ``[start, end)`` of tasks on resources."""

    resource: np.ndarray
    task: np.ndarray
    start: np.ndarray
    end: np.ndarray
    weight: np.ndarray  # units held (holders); 1 for waits
    seq: np.ndarray  # the WAIT's events.seq (waits); unused for holders

    def __len__(self) -> int:
        return len(self.start)


def attribute(waits: Intervals, holders: Intervals) -> list[tuple]:
    """Blame rows for every WAIT in ``waits``; see the module docstring."""
    # Boundaries: (time, order, kind, index); at one instant ends come before starts.
    points = []
    for i in range(len(waits)):
        if waits.end[i] > waits.start[i]:
            points.append((int(waits.start[i]), 1, 0, i))
            points.append((int(waits.end[i]), 0, 0, i))
    for i in range(len(holders)):
        if holders.end[i] > holders.start[i] and holders.weight[i] > 0:
            points.append((int(holders.start[i]), 1, 1, i))
            points.append((int(holders.end[i]), 0, 1, i))
    points.sort()
    held: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    waiting: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # task -> res -> n
    active_waits: dict[int, tuple[int, int]] = {}
    blame: dict[tuple, float] = defaultdict(float)

    def spread(
        res: int,
        task: int,
        mass: float,
        seq: int,
        victim: int,
        wait_res: int,
        visited: frozenset,
        depth: int,
    ) -> bool:
        """Give ``mass`` to the holders of ``res`` other than ``visited``; False if none."""
        holders_now = {t: w for t, w in held[res].items() if w > 0 and t not in visited}
        if not holders_now:
            return False
        total = sum(holders_now.values())
        for culprit, w in holders_now.items():
            share = mass * w / total
            onward = [r for r, n in waiting[culprit].items() if n > 0 and r != res]
            if onward and depth < MAX_DEPTH:
                part = share / len(onward)
                for r2 in onward:
                    if not spread(
                        r2, culprit, part, seq, victim, wait_res, visited | {culprit}, depth + 1
                    ):
                        blame[(seq, wait_res, victim, culprit, res, depth)] += part
            else:
                blame[(seq, wait_res, victim, culprit, res, depth)] += share
        return True

    prev_t = None
    for t, order, kind, i in points:
        if prev_t is not None and t > prev_t and active_waits:
            length = t - prev_t
            for w, (res, task) in active_waits.items():
                seq = int(waits.seq[w])
                spread(res, task, float(length), seq, task, res, frozenset({task}), 0)
        prev_t = t
        if kind == 0:
            res, task = int(waits.resource[i]), int(waits.task[i])
            if order == 1:
                active_waits[i] = (res, task)
                waiting[task][res] += 1
            else:
                active_waits.pop(i, None)
                waiting[task][res] -= 1
        else:
            res, task = int(holders.resource[i]), int(holders.task[i])
            held[res][task] += int(holders.weight[i]) * (1 if order == 1 else -1)
    return [(*key, value) for key, value in blame.items() if value > 0]


def _points(waits: Intervals, holders: Intervals):
    """Sweep points as arrays, sorted by time with ends before starts at one instant."""
    wv = waits.end > waits.start
    hv = (holders.end > holders.start) & (holders.weight > 0)
    wi, hi = np.nonzero(wv)[0], np.nonzero(hv)[0]
    time = np.concatenate([waits.start[wi], waits.end[wi], holders.start[hi], holders.end[hi]])
    start = np.concatenate(
        [np.ones(len(wi)), np.zeros(len(wi)), np.ones(len(hi)), np.zeros(len(hi))]
    ).astype(np.int64)
    kind = np.concatenate([np.zeros(2 * len(wi)), np.ones(2 * len(hi))]).astype(np.int64)
    idx = np.concatenate([wi, wi, hi, hi]).astype(np.int64)
    order = np.lexsort((idx, kind, start, time))
    return (
        np.ascontiguousarray(time[order], dtype=np.int64),
        kind[order],
        start[order],
        idx[order],
    )


def attribute_fast(waits: Intervals, holders: Intervals) -> list[tuple]:
    """``attribute``, as a numba sweep: the same rows (blame to within float rounding)."""
    from gigi.metrics._attribution_kernel import sweep

    as64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    w, c, r, d, v = sweep(
        *_points(waits, holders),
        as64(waits.resource),
        as64(waits.task),
        as64(holders.resource),
        as64(holders.task),
        as64(holders.weight),
    )
    return [
        (
            int(waits.seq[wi]),
            int(waits.resource[wi]),
            int(waits.task[wi]),
            int(ci),
            int(ri),
            int(di),
            float(vi),
        )
        for wi, ci, ri, di, vi in zip(w, c, r, d, v, strict=True)
        if vi > 0
    ]
