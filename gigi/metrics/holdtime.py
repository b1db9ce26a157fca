"""Duration distributions per group (holds or waits, per resource or per resource and task):
quantiles and a log2-bucket histogram (numba).

Quantile P (in percent) of n durations is the ``ceil(P * n / 100)``-th smallest (1-based), in
integer arithmetic so that the SQL twin (``sql/hold_time.sql``, and the same over the waits)
finds the very same value. Bucket b of the histogram counts ``2**(b-1) <= ns < 2**b`` (bucket 0:
0 ns). The durations are sorted once, group-major, on one int64 key (group in the high bits)
when the two fit together, else by a stable two-key sort; the kernel then walks each group's
run once.
"""

from __future__ import annotations

import numpy as np

PERCENTS = (50, 90, 99)
BUCKETS = 64


def _kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def bucket_of(x):
        if x <= 0:
            return 0
        b = 0
        for shift in (32, 16, 8, 4, 2, 1):
            if x >> shift:
                x >>= shift
                b += shift
        return b + 1 if x else 0

    @numba.njit(cache=True, nogil=True)
    def distribution(counts, ns_sorted, percents, buckets):
        n_res = counts.shape[0]
        quant = np.zeros((n_res, percents.shape[0] + 1), np.int64)  # quantiles, then max
        hist = np.zeros((n_res, buckets), np.int64)
        start = 0
        for r in range(n_res):
            n = counts[r]
            if n > 0:
                for j in range(percents.shape[0]):
                    k = max((percents[j] * n + 99) // 100, 1) - 1
                    quant[r, j] = ns_sorted[start + k]
                quant[r, percents.shape[0]] = ns_sorted[start + n - 1]
                if buckets:
                    for i in range(start, start + n):
                        hist[r, min(bucket_of(ns_sorted[i]), buckets - 1)] += 1
            start += n
        return quant, hist

    return distribution


_DISTRIBUTION = None


def _sorted_by_group(res: np.ndarray, ns: np.ndarray, n_res: int) -> np.ndarray:
    """The durations sorted by group, then by value."""
    if len(ns) == 0:
        return ns
    top = int(ns.max())
    shift = max(top.bit_length(), 1)
    if (max(n_res - 1, 0) << shift) < 2**62 and int(ns.min()) >= 0:
        key = (res << shift) | ns
        key.sort()
        return key & ((1 << shift) - 1)
    order = np.lexsort((ns, res))
    return ns[order]


def hold_time(res, hold_ns, n_res: int, histogram: bool = True):
    """Per group code (a resource, or a resource and task): count, quantiles (``PERCENTS``)
    and max, and the log2 histogram (no columns when ``histogram`` is false). Serves holds
    and waits alike."""
    global _DISTRIBUTION
    if _DISTRIBUTION is None:
        _DISTRIBUTION = _kernel()
    res = np.ascontiguousarray(res, dtype=np.int64)
    ns = np.ascontiguousarray(hold_ns, dtype=np.int64)
    counts = np.bincount(res, minlength=n_res).astype(np.int64)
    quant, hist = _DISTRIBUTION(
        counts,
        _sorted_by_group(res, ns, n_res),
        np.array(PERCENTS, dtype=np.int64),
        BUCKETS if histogram else 0,
    )
    return counts, quant, hist
