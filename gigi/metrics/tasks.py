"""Per task and resource: what the task held and used while *other* tasks waited (numba).

For each (resource, task) pair, ``task_shares`` sweeps the boundaries of every WAIT and hold
of the resource in time order, once, and returns:

- ``held_while_others_waited``: unit-ns of the task's holds that fall in instants when at
  least one other task was waiting for the same resource;
- ``used_while_others_waited``: units of the task's USEs at such instants.

Intervals are half-open, ``[start, end)``: at one instant, ends come before starts and USEs
after both. Rather than visit every open hold at every boundary, the sweep keeps two running
clocks per resource: ``A``, the time at least one task waited, and per pair ``S``, the time
that pair's task was the *only* one waiting. A pair's held-while-others-waited grows by its
units times ``dA - dS`` between two changes of its units, so every boundary costs O(1).
The twin is ``gigi/metrics/sql/task_shares.sql``.
"""

from __future__ import annotations

import numpy as np

# Boundary types, in the order they apply at one instant.
WAIT_END, HOLD_END, WAIT_START, HOLD_START, USE = range(5)


def _kernels():
    import numba

    @numba.njit(cache=True, nogil=True)
    def fill(key, i, src, typ, t0, idbits):
        for j in range(src.shape[0]):
            key[i + j] = ((src[j] - t0) << (idbits + 3)) | (typ << idbits) | j
        return i + src.shape[0]

    @numba.njit(cache=True, nogil=True)
    def pack(w_start, w_end, h_start, h_end, u_ts, t0, idbits):
        """One int64 key per boundary: time since t0, then type, then index in its source."""
        nw, nh = w_start.shape[0], h_start.shape[0]
        key = np.empty(2 * nw + 2 * nh + u_ts.shape[0], np.int64)
        i = fill(key, 0, w_end, WAIT_END, t0, idbits)
        i = fill(key, i, h_end, HOLD_END, t0, idbits)
        i = fill(key, i, w_start, WAIT_START, t0, idbits)
        i = fill(key, i, h_start, HOLD_START, t0, idbits)
        fill(key, i, u_ts, USE, t0, idbits)
        return key

    @numba.njit(cache=True, nogil=True)
    def sweep(
        key, t0, idbits, times, w_pair, h_pair, h_amount, u_pair, u_amount, res_of_pair, n_res
    ):
        n_pairs = res_of_pair.shape[0]
        units = np.zeros(n_pairs, np.int64)  # units the pair's task holds now
        waiting = np.zeros(n_pairs, np.int64)  # its open waits now
        a_last = np.zeros(n_pairs, np.int64)  # A when the pair was last settled
        s_last = np.zeros(n_pairs, np.int64)
        s_acc = np.zeros(n_pairs, np.int64)  # time the pair's task waited alone, settled
        held = np.zeros(n_pairs, np.int64)
        used = np.zeros(n_pairs, np.int64)
        waiters = np.zeros(n_res, np.int64)  # tasks (pairs) with an open wait
        pair_sum = np.zeros(n_res, np.int64)  # sum of their pair ids: the one, when alone
        a_acc = np.zeros(n_res, np.int64)
        since = np.zeros(n_res, np.int64)  # when A or the lone waiter's S last advanced
        mask = (1 << idbits) - 1
        ranked = times.shape[0] > 0
        for i in range(key.shape[0]):
            x = key[i]
            j, k, code = x & mask, (x >> idbits) & 7, x >> (idbits + 3)
            t = times[code] if ranked else code + t0
            if k == WAIT_END or k == WAIT_START:
                p, amt = w_pair[j], 1
            elif k == USE:
                p, amt = u_pair[j], u_amount[j]
            else:
                p, amt = h_pair[j], h_amount[j]
            r = res_of_pair[p]
            # the clocks of resource r at t
            a_now = a_acc[r] + (t - since[r] if waiters[r] > 0 else 0)
            if k == HOLD_START or k == HOLD_END:
                s_now = s_acc[p] + (t - since[r] if waiters[r] == 1 and pair_sum[r] == p else 0)
                held[p] += units[p] * ((a_now - a_last[p]) - (s_now - s_last[p]))
                a_last[p] = a_now
                s_last[p] = s_now
                units[p] += amt if k == HOLD_START else -amt
            elif k == USE:
                if waiters[r] > 1 or (waiters[r] == 1 and pair_sum[r] != p):
                    used[p] += amt
            else:  # a wait begins or ends: advance the clocks, then change who waits
                if waiters[r] > 0:
                    a_acc[r] = a_now
                    if waiters[r] == 1:
                        s_acc[pair_sum[r]] += t - since[r]
                since[r] = t
                if k == WAIT_START:
                    waiting[p] += 1
                    if waiting[p] == 1:
                        waiters[r] += 1
                        pair_sum[r] += p
                else:
                    waiting[p] -= 1
                    if waiting[p] == 0:
                        waiters[r] -= 1
                        pair_sum[r] -= p
        return held, used

    return pack, sweep


_KERNELS = None


def _i64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.int64)


def task_shares(waits: dict, holds: dict, uses: dict, res_of_pair, n_res: int):
    """See the module docstring. ``waits`` has arrays ``pair, start, end``, ``holds`` ``pair,
    start, end, amount`` and ``uses`` ``pair, ts, amount``; ``pair`` is the dense (resource,
    task) id and ``res_of_pair`` each pair's resource code. Every hold must end (open ones at
    the trace end). Returns ``(held, used)`` per pair.

    The boundaries are put in order by one sort of packed int64 keys (time, type, index in
    the source array); when the trace's span leaves too few bits for the time, by its rank
    among the distinct times instead."""
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _kernels()
    pack, sweep = _KERNELS
    stamps = [_i64(x) for x in (waits["start"], waits["end"], holds["start"], holds["end"])]
    stamps.append(_i64(uses["ts"]))
    n = max(len(x) for x in stamps)
    idbits = max(n.bit_length(), 1)
    lo = min((int(x.min()) for x in stamps if len(x)), default=0)
    hi = max((int(x.max()) for x in stamps if len(x)), default=0)
    times = np.zeros(0, np.int64)
    if hi - lo >= 1 << (63 - idbits - 3):
        times = np.unique(np.concatenate(stamps))
        stamps, lo = [np.searchsorted(times, x) for x in stamps], 0
    key = pack(*stamps, lo, idbits)
    key.sort()
    return sweep(
        key,
        lo,
        idbits,
        times,
        _i64(waits["pair"]),
        _i64(holds["pair"]),
        _i64(holds["amount"]),
        _i64(uses["pair"]),
        _i64(uses["amount"]),
        _i64(res_of_pair),
        n_res,
    )
