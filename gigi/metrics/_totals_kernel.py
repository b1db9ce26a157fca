"""The numba half of ``gigi.metrics.totals`` (imported only when totals are computed), at
module level like every kernel: numba keys a cached function by its closure too, so a kernel
nested in a function may miss the cache in every new process."""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True)
def step(kind, res, amount, ts, dur, start, end, out, outstanding, level, rate, square, w_cur):
    """One batch of events, in trace order, into the running state; returns w_cur."""
    windows = level.shape[1]
    span = max(end - start, 1)
    for i in range(kind.shape[0]):
        r, k, a = res[i], kind[i], amount[i]
        w = min(max(ts[i] - start, 0) * windows // span, windows - 1)
        while w_cur < w:  # close windows up to this event's
            level[:, w_cur] = outstanding
            w_cur += 1
        if k == 0:
            d = dur[i] if dur[i] >= 0 else max(end - ts[i], 0)
            out[r, 0] += 1
            out[r, 1] += d
            out[r, 2] = max(out[r, 2], d)
        elif k == 1:
            out[r, 3] += 1
            out[r, 4] += a
            outstanding[r] += a
            out[r, 9] = max(out[r, 9], outstanding[r])
            rate[r, w] += 1
            square[r, w] += float(a) * float(a)
        elif k == 2:
            out[r, 5] += 1
            out[r, 6] += a
        else:
            out[r, 7] += 1
            out[r, 8] += a
            outstanding[r] -= a
            square[r, w] += float(a) * float(a)
    return w_cur
