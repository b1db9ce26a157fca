"""The numba half of ``gigi.metrics.pairing`` (imported only when pairing runs).

Open holds are slots in flat arrays, threaded on two doubly linked lists: one per
``(resource, object)`` in acquire order, and one per ``(resource, object, task)``. The heads and
tails of the lists live in two open-addressing hash tables (plain arrays, so the kernel runs
without the GIL and its state carries from batch to batch); a list that empties leaves its
table, so memory follows the holds open at once, not the length of the trace.
"""

from __future__ import annotations

import numba
import numpy as np

NONE = -1
ACQUIRE, RELEASE = 1, 3

# Slot fields: rows of one int64 array.
SEQ, TASK, REMAINING, RES, OBJ, PREV_K, NEXT_K, PREV_T, NEXT_T = range(9)
FIELDS = 9

# Hash table cell states.
EMPTY, USED, GONE = 0, 1, 2


class Table:
    """An open-addressing table from three int64 keys to (head, tail); grown between batches."""

    def __init__(self, capacity: int = 1024) -> None:
        self.keys = np.zeros((capacity, 3), np.int64)
        self.ends = np.zeros((capacity, 2), np.int64)
        self.state = np.zeros(capacity, np.int8)
        self.meta = np.zeros(2, np.int64)  # [used cells, gone cells]

    def grow(self) -> None:
        """Rehash: double when over a quarter used, else just sweep out the gone cells."""
        cap = len(self.state)
        used = int(self.meta[0])
        new_cap = cap * 2 if used * 4 > cap else cap
        keys = np.zeros((new_cap, 3), np.int64)
        ends = np.zeros((new_cap, 2), np.int64)
        state = np.zeros(new_cap, np.int8)
        _rehash(self.keys, self.ends, self.state, keys, ends, state)
        self.keys, self.ends, self.state = keys, ends, state
        self.meta[:] = (used, 0)


@numba.njit(cache=True)
def _hash(a, b, c, mask):
    h = np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)
    h ^= np.uint64(b) * np.uint64(0xC2B2AE3D27D4EB4F) + (h >> np.uint64(29))
    h ^= np.uint64(c) * np.uint64(0x165667B19E3779F9) + (h >> np.uint64(32))
    h ^= h >> np.uint64(31)
    return np.int64(h & np.uint64(mask))


@numba.njit(cache=True)
def _find(keys, state, a, b, c):
    mask = state.shape[0] - 1
    i = _hash(a, b, c, mask)
    while True:
        s = state[i]
        if s == EMPTY:
            return NONE
        if s == USED and keys[i, 0] == a and keys[i, 1] == b and keys[i, 2] == c:
            return i
        i = (i + 1) & mask


@numba.njit(cache=True)
def _insert(keys, ends, state, meta, a, b, c, head, tail):
    mask = state.shape[0] - 1
    i = _hash(a, b, c, mask)
    while state[i] == USED:
        i = (i + 1) & mask
    if state[i] == GONE:
        meta[1] -= 1
    state[i] = USED
    meta[0] += 1
    keys[i, 0], keys[i, 1], keys[i, 2] = a, b, c
    ends[i, 0], ends[i, 1] = head, tail


@numba.njit(cache=True)
def _delete(keys, ends, state, meta, i):
    """Empty cell ``i``, shifting later cells of its probe run back (no tombstones)."""
    mask = state.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if state[j] == EMPTY:
            break
        home = _hash(keys[j, 0], keys[j, 1], keys[j, 2], mask)
        # Cell j may move to i unless its home lies cyclically in (i, j].
        if (i <= j and (home <= i or home > j)) or (i > j and home <= i and home > j):
            keys[i, 0], keys[i, 1], keys[i, 2] = keys[j, 0], keys[j, 1], keys[j, 2]
            ends[i, 0], ends[i, 1] = ends[j, 0], ends[j, 1]
            i = j
    state[i] = EMPTY
    meta[0] -= 1


@numba.njit(cache=True)
def _rehash(keys, ends, state, new_keys, new_ends, new_state):
    meta = np.zeros(2, np.int64)
    for i in range(state.shape[0]):
        if state[i] == USED:
            _insert(
                new_keys,
                new_ends,
                new_state,
                meta,
                keys[i, 0],
                keys[i, 1],
                keys[i, 2],
                ends[i, 0],
                ends[i, 1],
            )


@numba.njit(cache=True)
def _link(h, prev, nxt, keys, ends, state, meta, a, b, c):
    nxt[h] = NONE
    i = _find(keys, state, a, b, c)
    if i == NONE:
        prev[h] = NONE
        _insert(keys, ends, state, meta, a, b, c, h, h)
    else:
        tail = ends[i, 1]
        prev[h] = tail
        nxt[tail] = h
        ends[i, 1] = h


@numba.njit(cache=True)
def _unlink(h, prev, nxt, keys, ends, state, meta, a, b, c):
    p, n = prev[h], nxt[h]
    if p != NONE:
        nxt[p] = n
    if n != NONE:
        prev[n] = p
    i = _find(keys, state, a, b, c)
    if ends[i, 0] == h:
        ends[i, 0] = n
    if ends[i, 1] == h:
        ends[i, 1] = p
    if ends[i, 0] == NONE:
        _delete(keys, ends, state, meta, i)


@numba.njit(cache=True, nogil=True)
def pair_chunk(
    kind,
    res,
    obj,
    task,
    amount,
    seq,
    start,
    slots,
    free,
    nfree,
    k_keys,
    k_ends,
    k_state,
    k_meta,
    t_keys,
    t_ends,
    t_state,
    t_meta,
    out_acq,
    out_rel,
    out_amt,
    n_out,
):
    """Pair events ``start:`` of one batch, appending pairs to out_* from ``n_out``.

    Returns (pairs written in all, free slots left, where it stopped): it stops before an
    ACQUIRE when no slot is free or a table is half full, for the caller to grow them and call
    again from there; -1 when the batch is done.
    """
    s_seq, s_task, s_rem = slots[SEQ], slots[TASK], slots[REMAINING]
    s_res, s_obj = slots[RES], slots[OBJ]
    prev_k, next_k, prev_t, next_t = slots[PREV_K], slots[NEXT_K], slots[PREV_T], slots[NEXT_T]
    k_cap, t_cap = k_state.shape[0], t_state.shape[0]
    for i in range(start, kind.shape[0]):
        a = amount[i]
        if a == 0:
            continue
        r, o, t = res[i], obj[i], task[i]
        if kind[i] == ACQUIRE:
            if (
                nfree == 0
                or (k_meta[0] + k_meta[1] + 1) * 2 > k_cap
                or (t_meta[0] + t_meta[1] + 1) * 2 > t_cap
            ):
                return n_out, nfree, i
            nfree -= 1
            h = free[nfree]
            s_seq[h] = seq[i]
            s_task[h] = t
            s_rem[h] = a
            s_res[h] = r
            s_obj[h] = o
            _link(h, prev_k, next_k, k_keys, k_ends, k_state, k_meta, r, o, 0)
            _link(h, prev_t, next_t, t_keys, t_ends, t_state, t_meta, r, o, t)
            continue
        if kind[i] != RELEASE:
            continue
        left = a
        while left > 0:
            j = _find(t_keys, t_state, r, o, t)
            if j != NONE:
                h = t_ends[j, 0]
            else:
                j = _find(k_keys, k_state, r, o, 0)
                if j == NONE:
                    out_acq[n_out] = NONE
                    out_rel[n_out] = seq[i]
                    out_amt[n_out] = left
                    n_out += 1
                    break
                h = k_ends[j, 0]
            take = min(left, s_rem[h])
            out_acq[n_out] = s_seq[h]
            out_rel[n_out] = seq[i]
            out_amt[n_out] = take
            n_out += 1
            s_rem[h] -= take
            left -= take
            if s_rem[h] == 0:
                _unlink(h, prev_k, next_k, k_keys, k_ends, k_state, k_meta, r, o, 0)
                _unlink(
                    h,
                    prev_t,
                    next_t,
                    t_keys,
                    t_ends,
                    t_state,
                    t_meta,
                    s_res[h],
                    s_obj[h],
                    s_task[h],
                )
                free[nfree] = h
                nfree += 1
    return n_out, nfree, NONE
