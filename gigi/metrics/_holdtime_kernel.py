"""The numba half of ``gigi.metrics.holdtime`` (imported only when a distribution is
computed). At module level, not in a function: numba keys a cached function by its closure
too, and a closure over another kernel pickles differently in every process, so a nested
kernel missed the cache and compiled again on every run."""

from __future__ import annotations

import numba
import numpy as np


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
