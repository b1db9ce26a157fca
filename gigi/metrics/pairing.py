"""Pairing of ACQUIRE to RELEASE by the rule of trace format v1.

A RELEASE of ``amount`` units of ``(resource, object)`` ends, first, the open holds of the same
task on that ``(resource, object)``, oldest first; what is left ends the oldest open holds of
that ``(resource, object)`` by any task. Amounts are matched first in, first out, so one ACQUIRE
may be ended by several RELEASEs and one RELEASE may end several ACQUIREs: each match is one
pair ``(acquire_seq, release_seq, amount)``. What no RELEASE ends stays open
(``release_seq = -1``); a RELEASE with nothing open to end pairs with ``acquire_seq = -1`` (its
hold began before the trace). ACQUIREs and RELEASEs of 0 units hold nothing and are not paired.

``HoldPairer`` is the streaming numba kernel that ingest feeds batch by batch in ``seq`` order;
its memory is bounded by the holds open at once, not by the length of the trace.
``pair_holds_reference`` is the plain-Python twin the property tests compare it with.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from gigi._interrupts import held

ACQUIRE, RELEASE = 1, 3
NONE = -1


def pair_holds_reference(kind, resource, obj, task, amount, seq) -> list[tuple[int, int, int]]:
    """Plain-Python pairing; returns ``(acquire_seq, release_seq, amount)`` in emission order,
    open holds last in ``acquire_seq`` order.

    >>> pair_holds_reference([1, 1, 3, 3], [0, 0, 0, 0], [0, 0, 0, 0], [7, 8, 9, 7],
    ...                      [2, 1, 1, 1], [0, 1, 2, 3])
    [(0, 2, 1), (0, 3, 1), (1, -1, 1)]
    """
    # One record per hold: [acquire_seq, task, remaining]; per key, holds in acquire order.
    by_key: dict[tuple, deque] = {}
    out: list[tuple[int, int, int]] = []
    for k, r, o, t, a, s in zip(kind, resource, obj, task, amount, seq, strict=True):
        if a == 0 or k not in (ACQUIRE, RELEASE):
            continue
        holds = by_key.setdefault((r, o), deque())
        if k == ACQUIRE:
            holds.append([s, t, a])
            continue
        left = a
        while left > 0:
            h = next((h for h in holds if h[1] == t and h[2] > 0), None)
            if h is None:
                h = next((h for h in holds if h[2] > 0), None)
            if h is None:
                out.append((NONE, s, left))
                break
            take = min(left, h[2])
            out.append((h[0], s, take))
            h[2] -= take
            left -= take
        while holds and holds[0][2] == 0:
            holds.popleft()
    rest = [(h[0], NONE, h[2]) for hs in by_key.values() for h in hs if h[2] > 0]
    return out + sorted(rest)


class HoldPairer:
    """Streaming pairing: ``feed`` batches in ``seq`` order, then ``finish`` for open holds."""

    @held
    def __init__(self, capacity: int = 1024) -> None:
        from gigi.metrics import _pairing_kernel as kernel

        self._pair_chunk = kernel.pair_chunk
        self._by_key, self._by_task = kernel.Table(), kernel.Table()
        self._slots = np.full((kernel.FIELDS, capacity), NONE, dtype=np.int64)
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self._nfree = capacity

    @property
    def open_holds(self) -> int:
        return self._slots.shape[1] - self._nfree

    def _reserve(self, n: int) -> None:
        if self._nfree >= n:
            return
        old = self._slots.shape[1]
        new = max(old * 2, old - self._nfree + n)
        slots = np.full((self._slots.shape[0], new), NONE, dtype=np.int64)
        slots[:, :old] = self._slots
        free = np.empty(new, dtype=np.int64)
        free[: self._nfree] = self._free[: self._nfree]
        added = np.arange(new - 1, old - 1, -1, dtype=np.int64)
        free[self._nfree : self._nfree + len(added)] = added
        self._slots, self._free = slots, free
        self._nfree += len(added)

    @held
    def feed(self, kind, resource, obj, task, amount, seq):
        """Pair one batch (numpy int arrays; ``resource`` as integer codes).

        Returns ``(acquire_seq, release_seq, amount)`` arrays of the pairs the batch closed.
        """
        kind = np.ascontiguousarray(kind, dtype=np.int64)
        sel = (kind == ACQUIRE) | (kind == RELEASE)
        if not sel.all():
            kind, resource, obj, task, amount, seq = (
                np.asarray(x)[sel] for x in (kind, resource, obj, task, amount, seq)
            )
        columns = [
            np.ascontiguousarray(x, dtype=np.int64)
            for x in (kind, resource, obj, task, amount, seq)
        ]
        # Each RELEASE pair ends a hold or the RELEASE: at most open + batch pairs.
        cap = self.open_holds + len(kind) + 1
        out = [np.empty(cap, dtype=np.int64) for _ in range(3)]
        start, n = 0, 0
        while True:
            n, self._nfree, stop = self._pair_chunk(
                *columns,
                start,
                self._slots,
                self._free,
                self._nfree,
                *(
                    getattr(t, f)
                    for t in (self._by_key, self._by_task)
                    for f in ("keys", "ends", "state", "meta")
                ),
                *out,
                n,
            )
            if stop < 0:
                break
            start = stop
            if self._nfree == 0:
                self._reserve(max(1024, self._slots.shape[1]))
            for table in (self._by_key, self._by_task):
                if (table.meta[0] + table.meta[1] + 1) * 2 > len(table.state):
                    table.grow()
        return tuple(o[:n] for o in out)

    @held
    def finish(self):
        """The holds still open, ``(acquire_seq, -1, remaining)``, in ``acquire_seq`` order."""
        from gigi.metrics._pairing_kernel import REMAINING, SEQ

        used = np.ones(self._slots.shape[1], dtype=bool)
        used[self._free[: self._nfree]] = False
        seq, remaining = self._slots[SEQ][used], self._slots[REMAINING][used]
        order = np.argsort(seq, kind="stable")
        return seq[order], np.full(len(seq), NONE, dtype=np.int64), remaining[order]
