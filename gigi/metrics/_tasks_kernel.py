"""The numba half of ``gigi.metrics.tasks`` (imported only when the shares are computed).
At module level, not in a function: numba keys a cached function by its closure too, and a
closure over another kernel pickles differently in every process, so a nested kernel
missed the cache and compiled again on every run."""

from __future__ import annotations

import numba
import numpy as np

# Boundary types, in the order they apply at one instant. Here, not in gigi.metrics.tasks:
# numba compiles them into the kernels as constants, and its cache is stamped with this file.
WAIT_END, HOLD_END, WAIT_START, HOLD_START, USE = range(5)


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
def sweep(key, t0, idbits, times, w_pair, h_pair, h_amount, u_pair, u_amount, res_of_pair, n_res):
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
