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


def _kernels():
    """Compile (or load from numba's cache) the streaming kernel."""
    import numba
    from numba import types
    from numba.typed import Dict

    key2 = types.UniTuple(types.int64, 2)
    key3 = types.UniTuple(types.int64, 3)
    pair = types.UniTuple(types.int64, 2)

    @numba.njit(cache=True)
    def _unlink(h, prev, nxt, heads, key):
        p, n = prev[h], nxt[h]
        if p != NONE:
            nxt[p] = n
        if n != NONE:
            prev[n] = p
        ht = heads[key]
        head = n if ht[0] == h else ht[0]
        tail = p if ht[1] == h else ht[1]
        if head == NONE:
            del heads[key]
        else:
            heads[key] = (head, tail)

    @numba.njit(cache=True)
    def _link(h, prev, nxt, heads, key):
        nxt[h] = NONE
        if key in heads:
            ht = heads[key]
            prev[h] = ht[1]
            nxt[ht[1]] = h
            heads[key] = (ht[0], h)
        else:
            prev[h] = NONE
            heads[key] = (h, h)

    @numba.njit(cache=True)
    def pair_chunk(
        kind,
        res,
        obj,
        task,
        amount,
        seq,
        slots,
        free,
        nfree,
        k_heads,
        t_heads,
        out_acq,
        out_rel,
        out_amt,
    ):
        # slots columns: 0 seq, 1 task, 2 remaining, 3 res, 4 obj, 5 prev_k, 6 next_k,
        # 7 prev_t, 8 next_t
        n_out = 0
        for i in range(kind.shape[0]):
            a = amount[i]
            if a == 0:
                continue
            k2 = (res[i], obj[i])
            if kind[i] == ACQUIRE:
                nfree -= 1
                h = free[nfree]
                slots[h, 0] = seq[i]
                slots[h, 1] = task[i]
                slots[h, 2] = a
                slots[h, 3] = res[i]
                slots[h, 4] = obj[i]
                _link(h, slots[:, 5], slots[:, 6], k_heads, k2)
                _link(h, slots[:, 7], slots[:, 8], t_heads, (res[i], obj[i], task[i]))
                continue
            if kind[i] != RELEASE:
                continue
            k3 = (res[i], obj[i], task[i])
            left = a
            while left > 0:
                if k3 in t_heads:
                    h = t_heads[k3][0]
                elif k2 in k_heads:
                    h = k_heads[k2][0]
                else:
                    out_acq[n_out] = NONE
                    out_rel[n_out] = seq[i]
                    out_amt[n_out] = left
                    n_out += 1
                    break
                take = min(left, slots[h, 2])
                out_acq[n_out] = slots[h, 0]
                out_rel[n_out] = seq[i]
                out_amt[n_out] = take
                n_out += 1
                slots[h, 2] -= take
                left -= take
                if slots[h, 2] == 0:
                    _unlink(h, slots[:, 5], slots[:, 6], k_heads, k2)
                    _unlink(
                        h,
                        slots[:, 7],
                        slots[:, 8],
                        t_heads,
                        (slots[h, 3], slots[h, 4], slots[h, 1]),
                    )
                    free[nfree] = h
                    nfree += 1
        return n_out, nfree

    def new_dicts():
        return Dict.empty(key2, pair), Dict.empty(key3, pair)

    return pair_chunk, new_dicts


_KERNELS = None


class HoldPairer:
    """Streaming pairing: ``feed`` batches in ``seq`` order, then ``finish`` for open holds."""

    def __init__(self, capacity: int = 1024) -> None:
        global _KERNELS
        if _KERNELS is None:
            _KERNELS = _kernels()
        self._pair_chunk, new_dicts = _KERNELS
        self._k_heads, self._t_heads = new_dicts()
        self._slots = np.full((capacity, 9), NONE, dtype=np.int64)
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self._nfree = capacity

    @property
    def open_holds(self) -> int:
        return len(self._slots) - self._nfree

    def _reserve(self, n: int) -> None:
        if self._nfree >= n:
            return
        old = len(self._slots)
        new = max(old * 2, old - self._nfree + n)
        slots = np.full((new, 9), NONE, dtype=np.int64)
        slots[:old] = self._slots
        free = np.empty(new, dtype=np.int64)
        free[: self._nfree] = self._free[: self._nfree]
        added = np.arange(new - 1, old - 1, -1, dtype=np.int64)
        free[self._nfree : self._nfree + len(added)] = added
        self._slots, self._free = slots, free
        self._nfree += len(added)

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
        n_acq = int(np.count_nonzero(kind == ACQUIRE))
        self._reserve(n_acq)
        cap = self.open_holds + n_acq + (len(kind) - n_acq) + 1
        out = [np.empty(cap, dtype=np.int64) for _ in range(3)]
        n, self._nfree = self._pair_chunk(
            kind,
            *(np.ascontiguousarray(x, dtype=np.int64) for x in (resource, obj, task, amount, seq)),
            self._slots,
            self._free,
            self._nfree,
            self._k_heads,
            self._t_heads,
            *out,
        )
        return tuple(o[:n] for o in out)

    def finish(self):
        """The holds still open, ``(acquire_seq, -1, remaining)``, in ``acquire_seq`` order."""
        used = np.ones(len(self._slots), dtype=bool)
        used[self._free[: self._nfree]] = False
        open_ = self._slots[used]
        open_ = open_[np.argsort(open_[:, 0], kind="stable")]
        return open_[:, 0].copy(), np.full(len(open_), NONE, dtype=np.int64), open_[:, 2].copy()
