"""Victim-to-culprit attribution, with blame passed down chains of waits (wPerf's cascade).

Time is cut into segments at every boundary of a WAIT, a hold or a timed USE. In each segment,
every task that waits for a resource R spreads the segment's length over the other tasks that
hold or use R then, in proportion to the units they hold: the holders of the same object when
the wait names one (object != 0) and somebody holds it, else the holders of any of R. When such
a holder is itself waiting for something else at that moment, its share passes on to that
thing's holders, and so on down the chain; the holders waiting for one same thing pass their
shares on together, and a chain never comes back to a task that passed it on. A share that
finds no holder at the end of a chain stays with the tasks that passed it (they were waiting on
something no task holds: I/O, a timer); so does a share under ``MIN_PASSED`` of the wait. So
the work of one wait is at most ``MAX_DEPTH / MIN_PASSED`` steps of a chain, however many tasks
hold what it waits for and wait in turn (the backends of a server around its log, each holding
some and waiting for the rest, would otherwise cost the holders to the power of the depth);
a wait that finds no holder at all is unattributed (nobody held the resource: it was idle or
simply empty). Blame along a chain adds up to the raw wait.

A wait's fractions (the share of it each culprit takes) are read when it begins, and again
whenever something they depend on has changed. In a large trace (``read_every``) they are read
again only at the boundaries of cells of ``every`` ns, from the state the cell's last instant
left: a wait is blamed as a sampling profiler would see it, its holders read at its start and
then once a cell, and its blame still adds up to the wait. A trace of millions of boundaries
a second (a server's locks, taken and let go within a microsecond, by backends each waiting
behind the others) otherwise cost a reading of every open wait's chain at every boundary:
hours for seconds of trace.

``attribute`` is the plain-Python sweep; its output rows are
``(wait_seq, resource, victim, culprit, culprit_resource, depth, blame_ns)``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from gigi._interrupts import held

MAX_DEPTH = 4
MIN_PASSED = 1 / 32  # the least share of a wait passed on down a chain
PASSED_LEAST = MIN_PASSED * (1 - 1e-9)  # the same, whatever order its parts were added in
EXACT_EVENTS = 1 << 22  # events up to which a trace's fractions are read at every instant
CELLS = 1 << 20  # cells of time a larger trace's fractions are read in, at most


def read_every(events: int, span: int) -> int:
    """The ``every`` of a trace of ``events`` over ``span`` ns: 0 (every instant) up to
    ``EXACT_EVENTS``, else the span cut into ``CELLS``."""
    return 0 if events <= EXACT_EVENTS else max(1, span // CELLS)


@dataclass
class Intervals:
    """Parallel arrays of intervals ``[start, end)`` of tasks on resources."""

    resource: np.ndarray
    task: np.ndarray
    start: np.ndarray
    end: np.ndarray
    weight: np.ndarray  # units held (holders); 1 for waits
    seq: np.ndarray  # the WAIT's events.seq (waits); unused for holders
    object: np.ndarray | None = None  # which instance; None: all 0

    def __len__(self) -> int:
        return len(self.start)


def _keys(waits: Intervals, holders: Intervals):
    """Dense ids of (resource, object) for waits and holders, and each id's resource and
    object."""

    def obj(iv: Intervals) -> np.ndarray:
        return iv.object if iv.object is not None else np.zeros(len(iv), np.int64)

    res = np.concatenate([waits.resource, holders.resource]).astype(np.int64)
    ob = np.concatenate([obj(waits), obj(holders)]).astype(np.int64)
    # one 1-D key per (resource, object): objects numbered first, as they may be any int64
    obj_values, obj_code = np.unique(ob, return_inverse=True)
    n_res = int(res.max()) + 1 if len(res) else 1
    uniq, inverse = np.unique(obj_code.reshape(-1) * n_res + res, return_inverse=True)
    inverse = inverse.reshape(-1)
    n = len(waits)
    return (
        inverse[:n].astype(np.int64),
        inverse[n:].astype(np.int64),
        (uniq % n_res).astype(np.int64),
        obj_values[uniq // n_res].astype(np.int64) if len(uniq) else np.zeros(0, np.int64),
    )


def attribute(waits: Intervals, holders: Intervals, every: int = 0) -> list[tuple]:
    """Blame rows for every WAIT in ``waits``; see the module docstring (``every``: the
    cells of time in which fractions are re-read, 0 for every instant)."""
    w_key, h_key, key_res, key_obj = _keys(waits, holders)
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
    held_key: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    held_res: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    waiting: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # task -> key -> n
    active_waits: dict[int, int] = {}
    blame: dict[tuple, float] = defaultdict(float)

    def holders_of(key: int, visited: frozenset) -> dict[int, int]:
        """Holders of the object waited for if it has any, else of the whole resource."""
        pool = held_key[key]
        if key_obj[key] == 0 or not any(u > 0 for u in pool.values()):
            pool = held_res[int(key_res[key])]
        return {t: u for t, u in pool.items() if u > 0 and t not in visited}

    def spread(
        key: int,
        mass: float,
        out: dict,
        seq: int,
        victim: int,
        wait_res: int,
        visited: frozenset,
        depth: int,
    ) -> bool:
        """Give ``mass`` (a share of the wait) of each ns to the holders of ``key`` other
        than ``visited``, into ``out``; False if none."""
        holders_now = holders_of(key, visited)
        if not holders_now:
            return False
        total = sum(holders_now.values())
        res = int(key_res[key])
        onward: dict[int, list[tuple[int, float]]] = {}  # key -> (culprit, part) waiting on it
        for culprit, units in holders_now.items():
            share = mass * units / total
            keys = [k for k, n in waiting[culprit].items() if n > 0 and k != key]
            if not keys or depth >= MAX_DEPTH:
                out[(seq, wait_res, victim, culprit, res, depth)] += share
                continue
            for k2 in keys:
                onward.setdefault(k2, []).append((culprit, share / len(keys)))
        for k2, parts in onward.items():
            passed = 0.0
            for _, part in parts:
                passed += part
            on = visited | {culprit for culprit, _ in parts}
            if passed < PASSED_LEAST or not spread(
                k2, passed, out, seq, victim, wait_res, on, depth + 1
            ):
                for culprit, part in parts:
                    out[(seq, wait_res, victim, culprit, res, depth)] += part
        return True

    def fractions(w: int, key: int) -> dict[tuple, float]:
        out: dict[tuple, float] = defaultdict(float)
        task = int(waits.task[w])
        seq, res = int(waits.seq[w]), int(key_res[key])
        spread(key, 1.0, out, seq, task, res, frozenset({task}), 0)
        return out

    def segment(a: int, b: int) -> None:
        for w in active_waits:
            for k, f in cached[w].items():
                blame[k] += (b - a) * f

    # an instant's points all apply before its fractions are read (those of the waits begun
    # then, and with ``every`` 0 all of them); with ``every``, the others' are read again at
    # the first cell boundary past an instant, when another instant follows in a later cell
    cached: dict[int, dict[tuple, float]] = {}
    prev = None
    n = 0
    while n < len(points):
        t = points[n][0]
        if prev is not None:
            if every > 0 and t // every != prev // every:
                upto = (prev // every + 1) * every
                segment(prev, upto)
                for w, key in active_waits.items():
                    cached[w] = fractions(w, key)
                segment(upto, t)
            else:
                segment(prev, t)
        begun = []
        while n < len(points) and points[n][0] == t:
            _, order, kind, i = points[n]
            n += 1
            if kind == 0:
                key, task = int(w_key[i]), int(waits.task[i])
                if order == 1:
                    active_waits[i] = key
                    waiting[task][key] += 1
                    begun.append(i)
                else:
                    active_waits.pop(i, None)
                    cached.pop(i, None)
                    waiting[task][key] -= 1
            else:
                key, task = int(h_key[i]), int(holders.task[i])
                delta = int(holders.weight[i]) * (1 if order == 1 else -1)
                held_key[key][task] += delta
                held_res[int(key_res[key])][task] += delta
        for w in active_waits if every == 0 else begun:
            cached[w] = fractions(w, active_waits[w])
        prev = t
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


@held
def attribute_fast(waits: Intervals, holders: Intervals, every: int = 0) -> Blame:
    """``attribute``, as a numba sweep: the same rows (blame to within float rounding), as
    arrays (``.rows()`` gives ``attribute``'s tuples)."""
    from gigi.metrics._attribution_kernel import sweep

    as64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    w_key, h_key, key_res, key_obj = _keys(waits, holders)
    w, c, r, d, v = sweep(
        *_points(waits, holders),
        as64(w_key),
        as64(waits.task),
        as64(h_key),
        as64(holders.task),
        as64(holders.weight),
        as64(key_res),
        as64(key_obj),
        int(every),
    )
    keep = v > 0
    w, c, r, d, v = w[keep], c[keep], r[keep], d[keep], v[keep]
    objects = as64(waits.object)[w] if waits.object is not None else np.zeros(len(w), np.int64)
    return Blame(
        as64(waits.seq)[w], as64(waits.resource)[w], objects, as64(waits.task)[w], c, r, d, v
    )


@dataclass
class Blame:
    """Blame rows as parallel arrays (``attribute``'s tuples, column by column)."""

    wait_seq: np.ndarray
    resource: np.ndarray
    object: np.ndarray  # of the wait
    victim: np.ndarray
    culprit: np.ndarray
    culprit_resource: np.ndarray
    depth: np.ndarray
    blame_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.wait_seq)

    def rows(self) -> list[tuple]:
        return list(
            zip(
                *(x.tolist() for x in (self.wait_seq, self.resource, self.victim, self.culprit)),
                *(x.tolist() for x in (self.culprit_resource, self.depth, self.blame_ns)),
                strict=True,
            )
        )
