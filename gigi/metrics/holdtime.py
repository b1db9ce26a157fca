"""Duration distributions per group (holds or waits, per resource or per resource and task):
quantiles and a log2-bucket histogram (numba).

Quantile P (in percent) of n durations is the ``ceil(P * n / 100)``-th smallest (1-based), in
integer arithmetic so that the SQL twin (``sql/hold_time.sql``, and the same over the waits)
finds the very same value. Bucket b of the histogram counts ``2**(b-1) <= ns < 2**b`` (bucket 0:
0 ns).

Nothing is sorted when the groups are few (per resource): one pass counts every group's
durations in up to 2**16 equal-width bins of ``ns >> shift``, which gives the counts, the
maxima, the log2 histogram (a bin above the first lies inside one power of two) and the bin of
every wanted rank; when ``shift`` is not zero a second pass gathers the durations of only those
bins (and the first bin, for its log2 buckets), and the wanted ranks are picked from them.
Many groups (per resource and task) instead sort once, group-major, on one int64 key (group in
the high bits), and walk each group's run once.
"""

from __future__ import annotations

import numpy as np

PERCENTS = (50, 90, 99)
BUCKETS = 64
FINE_BITS = 16  # bins per group in the counting path, at most 2**FINE_BITS
FINE_CELLS = 1 << 22  # groups x bins the counting path may allocate (32 MiB)


def _kernels():
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
    def from_sorted(counts, ns_sorted, percents, buckets):
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

    @numba.njit(cache=True, nogil=True)
    def by_counting(res, ns, n_res, shift, bins, percents, buckets):
        n_p = percents.shape[0]
        fine = np.zeros((n_res, bins), np.int64)
        quant = np.zeros((n_res, n_p + 1), np.int64)
        for i in range(ns.shape[0]):  # pass 1: counts per bin, and the maxima
            g, v = res[i], ns[i]
            fine[g, v >> shift] += 1
            if v > quant[g, n_p]:
                quant[g, n_p] = v
        counts = np.zeros(n_res, np.int64)
        hist = np.zeros((n_res, max(buckets, 1)), np.int64)
        first = 1 if shift else 0  # the first bin's log2 buckets need its values
        for g in range(n_res):
            for b in range(first, bins):
                c = fine[g, b]
                if c:
                    counts[g] += c
                    if buckets:
                        h = shift + bucket_of(b)
                        hist[g, min(h, buckets - 1)] += c
            counts[g] += fine[g, 0] * first
        # the bin and the rank within it of every wanted quantile
        qbin = np.zeros((n_res, n_p), np.int64)
        qrank = np.zeros((n_res, n_p), np.int64)
        for g in range(n_res):
            n = counts[g]
            if n == 0:
                continue
            seen, b = 0, 0
            for j in range(n_p):  # percents ascending, so the bins are too
                k = max((percents[j] * n + 99) // 100, 1) - 1
                while seen + fine[g, b] <= k:
                    seen += fine[g, b]
                    b += 1
                qbin[g, j], qrank[g, j] = b, k - seen
        if shift == 0:
            for g in range(n_res):
                if counts[g]:
                    for j in range(n_p):
                        quant[g, j] = qbin[g, j]
            return counts, quant, hist[:, :buckets]
        # pass 2: gather the values of the wanted bins (each bin once), and log2 the first bin
        slot = np.full((n_res, bins), -1, np.int64)
        n_slots, size = 0, 0
        for g in range(n_res):
            for j in range(n_p):
                b = qbin[g, j]
                if counts[g] and slot[g, b] < 0:
                    slot[g, b] = n_slots
                    n_slots += 1
                    size += fine[g, b]
        start = np.zeros(n_slots + 1, np.int64)
        for g in range(n_res):
            for b in range(bins):
                s = slot[g, b]
                if s >= 0:
                    start[s + 1] = fine[g, b]
        for s in range(n_slots):
            start[s + 1] += start[s]
        fill = start[:-1].copy()
        values = np.empty(size, np.int64)
        for i in range(ns.shape[0]):
            g, v = res[i], ns[i]
            b = v >> shift
            s = slot[g, b]
            if s >= 0:
                values[fill[s]] = v
                fill[s] += 1
            if b == 0 and buckets:
                hist[g, min(bucket_of(v), buckets - 1)] += 1
        for s in range(n_slots):
            values[start[s] : start[s + 1]].sort()
        for g in range(n_res):
            if counts[g]:
                for j in range(n_p):
                    quant[g, j] = values[start[slot[g, qbin[g, j]]] + qrank[g, j]]
        return counts, quant, hist[:, :buckets]

    return from_sorted, by_counting


_KERNELS = None


def _sorted_by_group(res: np.ndarray, ns: np.ndarray, n_res: int) -> np.ndarray:
    """The durations sorted by group, then by value."""
    top = int(ns.max())
    shift = max(top.bit_length(), 1)
    if (max(n_res - 1, 0) << shift) < 2**62 and int(ns.min()) >= 0:
        key = (res << shift) | ns
        key.sort()
        return key & ((1 << shift) - 1)
    order = np.lexsort((ns, res))
    return ns[order]


def _fine_bits(n_res: int) -> int:
    """Bits of the counting path's bins per group, or 0 when the groups are too many."""
    bits = min(FINE_BITS, (FINE_CELLS // max(n_res, 1)).bit_length() - 1)
    return bits if bits >= 8 else 0


def hold_time(res, hold_ns, n_res: int, histogram: bool = True):
    """Per group code (a resource, or a resource and task): count, quantiles (``PERCENTS``)
    and max, and the log2 histogram (no columns when ``histogram`` is false). Serves holds
    and waits alike."""
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _kernels()
    from_sorted, by_counting = _KERNELS
    res = np.ascontiguousarray(res, dtype=np.int64)
    ns = np.ascontiguousarray(hold_ns, dtype=np.int64)
    percents = np.array(PERCENTS, dtype=np.int64)
    buckets = BUCKETS if histogram else 0
    bits = _fine_bits(n_res)
    if len(ns) == 0 or (bits and int(ns.min()) >= 0):
        top = int(ns.max()) if len(ns) else 0
        shift = max(top.bit_length() - bits, 0)
        return by_counting(res, ns, n_res, shift, (top >> shift) + 1, percents, buckets)
    counts = np.bincount(res, minlength=n_res).astype(np.int64)
    quant, hist = from_sorted(counts, _sorted_by_group(res, ns, n_res), percents, buckets)
    return counts, quant, hist
