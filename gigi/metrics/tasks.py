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


def _kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def sweep(ts, typ, pair, amount, res_of_pair, n_res):
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
        for i in range(ts.shape[0]):
            t, p, r = ts[i], pair[i], res_of_pair[pair[i]]
            # the clocks of resource r at t
            a_now = a_acc[r] + (t - since[r] if waiters[r] > 0 else 0)
            k = typ[i]
            if k == HOLD_START or k == HOLD_END:
                s_now = s_acc[p] + (t - since[r] if waiters[r] == 1 and pair_sum[r] == p else 0)
                held[p] += units[p] * ((a_now - a_last[p]) - (s_now - s_last[p]))
                a_last[p] = a_now
                s_last[p] = s_now
                units[p] += amount[i] if k == HOLD_START else -amount[i]
            elif k == USE:
                if waiters[r] > 1 or (waiters[r] == 1 and pair_sum[r] != p):
                    used[p] += amount[i]
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

    return sweep


_SWEEP = None


def task_shares(ts, typ, pair, amount, res_of_pair, n_res: int):
    """See the module docstring. The boundaries must be sorted by ``(ts, typ)``; ``pair`` is
    the dense (resource, task) id of each and ``res_of_pair`` each pair's resource code.
    Every hold must end (open ones at the trace end). Returns ``(held, used)`` per pair."""
    global _SWEEP
    if _SWEEP is None:
        _SWEEP = _kernel()
    as64 = [np.ascontiguousarray(x, dtype=np.int64) for x in (ts, typ, pair, amount, res_of_pair)]
    return _SWEEP(*as64, n_res)


def boundaries(waits: dict, holds: dict, uses: dict):
    """Sorted sweep input from the waits ``(pair, start, end)``, holds ``(pair, start, end,
    amount)`` and USEs ``(pair, ts, amount)``, each a dict of equal-length arrays."""
    nw, nh, nu = len(waits["pair"]), len(holds["pair"]), len(uses["pair"])
    ts = np.concatenate([waits["end"], holds["end"], waits["start"], holds["start"], uses["ts"]])
    typ = np.concatenate(
        [
            np.full(nw, WAIT_END, np.int64),
            np.full(nh, HOLD_END, np.int64),
            np.full(nw, WAIT_START, np.int64),
            np.full(nh, HOLD_START, np.int64),
            np.full(nu, USE, np.int64),
        ]
    )
    pair = np.concatenate(
        [waits["pair"], holds["pair"], waits["pair"], holds["pair"], uses["pair"]]
    )
    ones = np.ones(nw, np.int64)
    amount = np.concatenate([ones, holds["amount"], ones, holds["amount"], uses["amount"]])
    if len(ts) and int(ts.max()) - int(ts.min()) < (2**63 - 1) // 8:
        order = np.argsort((ts - ts.min()) * 8 + typ)  # one key: time, then type
    else:
        order = np.lexsort((typ, ts))
    return ts[order], typ[order], pair[order], amount[order]
