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
Many groups (per resource and task), or bins many more than the durations (a few hundred waits
over thousands of resource and task pairs: zeroing and walking millions of empty bins cost a
diagnosis of 10k events 60 ms), instead sort once, group-major, on one int64 key (group in the
high bits), and walk each group's run once.
"""

from __future__ import annotations

import numpy as np

from gigi._interrupts import held

PERCENTS = (50, 90, 99)
BUCKETS = 64
FINE_BITS = 16  # bins per group in the counting path, at most 2**FINE_BITS
FINE_CELLS = 1 << 22  # groups x bins the counting path may allocate (32 MiB)
# ... and at most this many a duration (or FINE_FLOOR in all): beyond, the sort is cheaper
CELLS_PER_DURATION = 8
FINE_FLOOR = 1 << 18


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


@held
def hold_time(res, hold_ns, n_res: int, histogram: bool = True):
    """Per group code (a resource, or a resource and task): count, quantiles (``PERCENTS``)
    and max, and the log2 histogram (no columns when ``histogram`` is false). Serves holds
    and waits alike."""
    from gigi.metrics._holdtime_kernel import by_counting, from_sorted

    res = np.ascontiguousarray(res, dtype=np.int64)
    ns = np.ascontiguousarray(hold_ns, dtype=np.int64)
    percents = np.array(PERCENTS, dtype=np.int64)
    buckets = BUCKETS if histogram else 0
    bits = _fine_bits(n_res)
    if len(ns) == 0 or (bits and int(ns.min()) >= 0):
        top = int(ns.max()) if len(ns) else 0
        shift = max(top.bit_length() - bits, 0)
        bins = (top >> shift) + 1
        if len(ns) == 0 or n_res * bins <= max(CELLS_PER_DURATION * len(ns), FINE_FLOOR):
            return by_counting(res, ns, n_res, shift, bins, percents, buckets)
    counts = np.bincount(res, minlength=n_res).astype(np.int64)
    quant, hist = from_sorted(counts, _sorted_by_group(res, ns, n_res), percents, buckets)
    return counts, quant, hist
