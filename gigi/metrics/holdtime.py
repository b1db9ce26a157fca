"""Hold-time distribution per resource: quantiles and a log2-bucket histogram (numba).

Quantile P (in percent) of n hold times is the ``ceil(P * n / 100)``-th smallest (1-based), in
integer arithmetic so that the SQL twin (``sql/hold_time.sql``) finds the very same value.
Bucket b of the histogram counts holds of ``2**(b-1) <= hold_ns < 2**b`` ns (bucket 0: 0 ns).
"""

from __future__ import annotations

import numpy as np

PERCENTS = (50, 90, 99)
BUCKETS = 64


def _kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def hold_time(res, hold_ns, n_res, percents, buckets):
        order = np.argsort(hold_ns, kind="mergesort")  # by hold time ...
        order = order[np.argsort(res[order], kind="mergesort")]  # ... then by resource
        counts = np.zeros(n_res, np.int64)
        for i in range(res.shape[0]):
            counts[res[i]] += 1
        quant = np.zeros((n_res, percents.shape[0] + 1), np.int64)  # quantiles, then max
        hist = np.zeros((n_res, buckets), np.int64)
        start = 0
        for r in range(n_res):
            n = counts[r]
            for j in range(percents.shape[0]):
                if n > 0:
                    k = max((percents[j] * n + 99) // 100, 1) - 1
                    quant[r, j] = hold_ns[order[start + k]]
            if n > 0:
                quant[r, percents.shape[0]] = hold_ns[order[start + n - 1]]
            for i in range(start, start + n if buckets else start):
                h = hold_ns[order[i]]
                b = 0
                while h > 0 and b < buckets - 1:
                    h >>= 1
                    b += 1
                hist[r, b] += 1
            start += n
        return counts, quant, hist

    return hold_time


_HOLD_TIME = None


def hold_time(res, hold_ns, n_res: int, histogram: bool = True):
    """Per group code (a resource, or a resource and task): count, quantiles (``PERCENTS``)
    and max, and the log2 histogram (no columns when ``histogram`` is false). Serves holds
    and waits alike."""
    global _HOLD_TIME
    if _HOLD_TIME is None:
        _HOLD_TIME = _kernel()
    return _HOLD_TIME(
        np.ascontiguousarray(res, dtype=np.int64),
        np.ascontiguousarray(hold_ns, dtype=np.int64),
        n_res,
        np.array(PERCENTS, dtype=np.int64),
        BUCKETS if histogram else 0,
    )
