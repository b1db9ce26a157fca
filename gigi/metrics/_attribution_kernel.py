"""The numba sweep behind ``gigi.metrics.attribution.attribute_fast`` (same rules as the
plain-Python ``attribute``; a property test compares them)."""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.typed import Dict

MAX_DEPTH = 4
STACK = 4096

INNER = types.DictType(types.int64, types.int64)
BLAME_KEY = types.UniTuple(types.int64, 4)


@numba.njit(cache=True)
def sweep(p_time, p_kind, p_start, p_idx, w_key, w_task, h_key, h_task, h_weight, key_res, key_obj):
    held = Dict.empty(types.int64, INNER)  # key (resource, object) -> task -> units held
    held_res = Dict.empty(types.int64, INNER)  # resource -> task -> units held
    waiting = Dict.empty(types.int64, INNER)  # task -> key -> active waits
    active = Dict.empty(types.int64, types.int64)  # wait index -> 1
    empty = Dict.empty(types.int64, types.int64)
    blame = Dict.empty(BLAME_KEY, types.float64)  # (wait, culprit, culprit res, depth) -> ns
    # Chain stack: resource, mass, depth, fallback (task, res, depth), visited tasks.
    s_res = np.empty(STACK, np.int64)
    s_mass = np.empty(STACK, np.float64)
    s_depth = np.empty(STACK, np.int64)
    s_fb = np.empty((STACK, 3), np.int64)
    s_seen = np.empty((STACK, MAX_DEPTH + 2), np.int64)
    tasks_buf = np.empty(1024, np.int64)
    weights_buf = np.empty(1024, np.int64)
    prev = p_time[0] if p_time.shape[0] else 0
    for p in range(p_time.shape[0]):
        t = p_time[p]
        if t > prev and len(active) > 0:
            length = float(t - prev)
            for w in active.keys():
                top = 0
                s_res[0] = w_key[w]
                s_mass[0] = length
                s_depth[0] = 0
                s_fb[0, 0] = -1
                s_seen[0, 0] = w_task[w]
                top = 1
                while top > 0:
                    top -= 1
                    res, mass, depth = s_res[top], s_mass[top], s_depth[top]
                    fb0, fb1, fb2 = s_fb[top, 0], s_fb[top, 1], s_fb[top, 2]
                    seen = s_seen[top, : depth + 1].copy()
                    n = 0
                    total = 0
                    # the holders of the object waited for, else of any of the resource
                    if key_obj[res] != 0 and res in held and len(held[res]) > 0:
                        pool = held[res]
                    elif key_res[res] in held_res:
                        pool = held_res[key_res[res]]
                    else:
                        pool = empty
                    for task, units in pool.items():
                        if units <= 0:
                            continue
                        skip = False
                        for k in range(depth + 1):
                            if seen[k] == task:
                                skip = True
                        if skip:
                            continue
                        if n == tasks_buf.shape[0]:
                            tasks_buf = np.concatenate((tasks_buf, tasks_buf))
                            weights_buf = np.concatenate((weights_buf, weights_buf))
                        tasks_buf[n] = task
                        weights_buf[n] = units
                        total += units
                        n += 1
                    if n == 0:
                        if fb0 >= 0:
                            key = (w, fb0, fb1, fb2)
                            blame[key] = blame.get(key, 0.0) + mass
                        continue
                    for j in range(n):
                        culprit = tasks_buf[j]
                        share = mass * weights_buf[j] / total
                        onward = 0
                        if depth < MAX_DEPTH and culprit in waiting:
                            for r2, cnt in waiting[culprit].items():
                                if cnt > 0 and r2 != res:
                                    onward += 1
                        if onward == 0 or top + onward >= STACK:
                            key = (w, culprit, key_res[res], depth)
                            blame[key] = blame.get(key, 0.0) + share
                            continue
                        for r2, cnt in waiting[culprit].items():
                            if cnt > 0 and r2 != res:
                                s_res[top] = r2
                                s_mass[top] = share / onward
                                s_depth[top] = depth + 1
                                s_fb[top, 0] = culprit
                                s_fb[top, 1] = key_res[res]
                                s_fb[top, 2] = depth
                                s_seen[top, : depth + 1] = seen
                                s_seen[top, depth + 1] = culprit
                                top += 1
        prev = t
        i = p_idx[p]
        if p_kind[p] == 0:
            r, task = w_key[i], w_task[i]
            if task not in waiting:
                waiting[task] = Dict.empty(types.int64, types.int64)
            inner = waiting[task]
            if p_start[p] == 1:
                active[i] = 1
                inner[r] = inner.get(r, 0) + 1
            else:
                if i in active:
                    del active[i]
                inner[r] = inner.get(r, 0) - 1
                if inner[r] == 0:
                    del inner[r]
        else:
            k, task = h_key[i], h_task[i]
            delta = h_weight[i] if p_start[p] == 1 else -h_weight[i]
            for table, r in ((held, k), (held_res, key_res[k])):
                if r not in table:
                    table[r] = Dict.empty(types.int64, types.int64)
                inner = table[r]
                inner[task] = inner.get(task, 0) + delta
                if inner[task] == 0:
                    del inner[task]
    n = len(blame)
    out_w = np.empty(n, np.int64)
    out_c = np.empty(n, np.int64)
    out_r = np.empty(n, np.int64)
    out_d = np.empty(n, np.int64)
    out_v = np.empty(n, np.float64)
    j = 0
    for key, value in blame.items():
        out_w[j], out_c[j], out_r[j], out_d[j] = key
        out_v[j] = value
        j += 1
    return out_w, out_c, out_r, out_d, out_v
