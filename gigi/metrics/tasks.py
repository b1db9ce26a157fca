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

from gigi._interrupts import held


def _i64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.int64)


@held
def task_shares(waits: dict, holds: dict, uses: dict, res_of_pair, n_res: int):
    """See the module docstring. ``waits`` has arrays ``pair, start, end``, ``holds`` ``pair,
    start, end, amount`` and ``uses`` ``pair, ts, amount``; ``pair`` is the dense (resource,
    task) id and ``res_of_pair`` each pair's resource code. Every hold must end (open ones at
    the trace end). Returns ``(held, used)`` per pair.

    The boundaries are put in order by one sort of packed int64 keys (time, type, index in
    the source array); when the trace's span leaves too few bits for the time, by its rank
    among the distinct times instead."""
    from gigi.metrics._tasks_kernel import pack, sweep

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
