"""Per-resource totals and outstanding over time, in one pass over the events (numba).

``resource_totals`` walks the events in trace order once and returns, per resource code:
WAIT count, total and longest wait (open waits counted to the trace end), ACQUIRE/USE/RELEASE
counts and units, peak and final outstanding, and per time window the outstanding at the
window's end and the ACQUIREs in it. Its twin is ``gigi/metrics/sql/resource_totals.sql``.
"""

from __future__ import annotations

import numpy as np

# Columns of the per-resource result, in order.
TOTALS = (
    "waits",
    "wait_ns",
    "wait_max_ns",
    "acquires",
    "acquired",
    "uses",
    "used",
    "releases",
    "released",
    "peak",
    "final",
)


def _kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def resource_totals(kind, res, amount, ts, dur, n_res, start, end, windows):
        out = np.zeros((n_res, 11), np.int64)
        outstanding = np.zeros(n_res, np.int64)
        level = np.zeros((n_res, windows), np.int64)  # outstanding at each window's end
        rate = np.zeros((n_res, windows), np.int64)  # ACQUIREs in each window
        span = max(end - start, 1)
        w_cur = 0
        for i in range(kind.shape[0]):
            r, k, a = res[i], kind[i], amount[i]
            w = min((ts[i] - start) * windows // span, windows - 1)
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
            elif k == 2:
                out[r, 5] += 1
                out[r, 6] += a
            else:
                out[r, 7] += 1
                out[r, 8] += a
                outstanding[r] -= a
        while w_cur < windows:
            level[:, w_cur] = outstanding
            w_cur += 1
        out[:, 10] = outstanding
        return out, level, rate

    return resource_totals


_RESOURCE_TOTALS = None


def resource_totals(
    kind, res, amount, ts, dur, n_res: int, start: int, end: int, windows: int = 50
):
    """See the module docstring; ``dur`` is -1 for a wait still open at the end."""
    global _RESOURCE_TOTALS
    if _RESOURCE_TOTALS is None:
        _RESOURCE_TOTALS = _kernel()
    as64 = [np.ascontiguousarray(x, dtype=np.int64) for x in (kind, res, amount, ts, dur)]
    return _RESOURCE_TOTALS(*as64, n_res, start, end, windows)
