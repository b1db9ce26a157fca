"""The numba sweep behind ``gigi.metrics.attribution.attribute_fast`` (same rules as the
plain-Python ``attribute``; a property test compares them).

Between two sweep points every open wait's blame grows by the segment's length times fixed
fractions: the shares of each culprit along the chains the wait leads to. Those fractions
change only when something they were read from changes: the holders of a key or of a
resource, or the keys a culprit waits for. So each open wait keeps its fractions and the time
it was last settled, and registers with what it read; a point settles and recomputes only the
waits registered with what that point changes. A point then costs what it touches, not the
number of open waits: a queue of waiters behind one long holder costs nothing until the holder
lets go.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.typed import Dict

MAX_DEPTH = 4
STACK = 4096
GARBAGE = 1 << 18  # stale registrations let pile up before they are collected, about

INNER = types.DictType(types.int64, types.int64)
BLAME_KEY = types.UniTuple(types.int64, 4)


@numba.njit(cache=True)
def _register(deps, entity, w, generation):
    if entity not in deps:
        deps[entity] = Dict.empty(types.int64, types.int64)
    deps[entity][w] = generation


@numba.njit(cache=True)
def _collect(deps, active, gen):
    """Drop the registrations of waits that have ended or been recomputed since (an entity
    no point touches again keeps them otherwise); the live ones left."""
    live = 0
    for table in deps:
        gone = []
        for entity, inner in table.items():
            stale = [w for w, g in inner.items() if active[w] == 0 or gen[w] != g]
            for w in stale:
                del inner[w]
            if len(inner) == 0:
                gone.append(entity)
            live += len(inner)
        for entity in gone:
            del table[entity]
    return live


@numba.njit(cache=True)
def _stack():
    """The chain stack: resource, mass, depth, fallback (task, res, depth), visited tasks;
    and the visited tasks of the entry being spread."""
    return (
        np.empty(STACK, np.int64),
        np.empty(STACK, np.float64),
        np.empty(STACK, np.int64),
        np.empty((STACK, 3), np.int64),
        np.empty((STACK, MAX_DEPTH + 2), np.int64),
        np.empty(MAX_DEPTH + 2, np.int64),
    )


@numba.njit(cache=True)
def _fractions(w, w_key, w_task, held, held_res, waiting, key_res, key_obj, gen, deps, stack):
    """Wait ``w``'s blame per ns now: rows (culprit, culprit resource, depth) and their
    fractions; registers ``w`` (at its generation) with every key, resource and task it read.
    ``deps`` is (by key, by resource, by task); ``stack`` is ``_stack()``, reused."""
    dep_key, dep_res, dep_task = deps
    g = gen[w]
    s_res, s_mass, s_depth, s_fb, s_seen, seen = stack
    tasks_buf = np.empty(64, np.int64)
    weights_buf = np.empty(64, np.int64)
    rows = np.empty((16, 3), np.int64)
    fracs = np.empty(16, np.float64)
    n_rows = 0
    s_res[0] = w_key[w]
    s_mass[0] = 1.0
    s_depth[0] = 0
    s_fb[0, 0] = -1
    s_seen[0, 0] = w_task[w]
    top = 1
    while top > 0:
        top -= 1
        res, mass, depth = s_res[top], s_mass[top], s_depth[top]
        fb0, fb1, fb2 = s_fb[top, 0], s_fb[top, 1], s_fb[top, 2]
        for k in range(depth + 1):
            seen[k] = s_seen[top, k]
        n = 0
        total = 0
        # the holders of the object waited for, else of any of the resource
        _register(dep_key, res, w, g)
        if key_obj[res] != 0 and res in held and len(held[res]) > 0:
            pool = held[res]
        else:
            _register(dep_res, key_res[res], w, g)
            if key_res[res] in held_res:
                pool = held_res[key_res[res]]
            else:
                pool = Dict.empty(types.int64, types.int64)
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
                if n_rows == fracs.shape[0]:
                    rows = np.concatenate((rows, rows))
                    fracs = np.concatenate((fracs, fracs))
                rows[n_rows, 0], rows[n_rows, 1], rows[n_rows, 2] = fb0, fb1, fb2
                fracs[n_rows] = mass
                n_rows += 1
            continue
        for j in range(n):
            culprit = tasks_buf[j]
            share = mass * weights_buf[j] / total
            onward = 0
            if depth < MAX_DEPTH:
                _register(dep_task, culprit, w, g)
                if culprit in waiting:
                    for r2, cnt in waiting[culprit].items():
                        if cnt > 0 and r2 != res:
                            onward += 1
            if onward == 0 or top + onward >= STACK:
                if n_rows == fracs.shape[0]:
                    rows = np.concatenate((rows, rows))
                    fracs = np.concatenate((fracs, fracs))
                rows[n_rows, 0], rows[n_rows, 1], rows[n_rows, 2] = culprit, key_res[res], depth
                fracs[n_rows] = share
                n_rows += 1
                continue
            for r2, cnt in waiting[culprit].items():
                if cnt > 0 and r2 != res:
                    s_res[top] = r2
                    s_mass[top] = share / onward
                    s_depth[top] = depth + 1
                    s_fb[top, 0] = culprit
                    s_fb[top, 1] = key_res[res]
                    s_fb[top, 2] = depth
                    s_seen[top, : depth + 1] = seen[: depth + 1]
                    s_seen[top, depth + 1] = culprit
                    top += 1
    return rows[:n_rows].copy(), fracs[:n_rows].copy()


@numba.njit(cache=True)
def _settle(w, t, since, rows, fracs, blame):
    """Add wait ``w``'s blame from ``since[w]`` to ``t``, at its current fractions."""
    length = float(t - since[w])
    if length > 0:
        r, f = rows[w], fracs[w]
        for j in range(f.shape[0]):
            key = (w, r[j, 0], r[j, 1], r[j, 2])
            blame[key] = blame.get(key, 0.0) + length * f[j]
    since[w] = t


@numba.njit(cache=True)
def _touch(deps, entity, t, active, gen, marked, todo, n_todo, since, rows, fracs, blame):
    """Settle, up to ``t``, every open wait registered (at its current generation) with
    ``entity``, and queue it to be recomputed; the registrations are spent."""
    if entity not in deps:
        return todo, n_todo
    for w, g in deps[entity].items():
        if active[w] == 1 and gen[w] == g and marked[w] == 0:
            _settle(w, t, since, rows, fracs, blame)
            marked[w] = 1
            if n_todo == todo.shape[0]:
                todo = np.concatenate((todo, todo))
            todo[n_todo] = w
            n_todo += 1
    del deps[entity]
    return todo, n_todo


@numba.njit(cache=True)
def sweep(p_time, p_kind, p_start, p_idx, w_key, w_task, h_key, h_task, h_weight, key_res, key_obj):
    n_waits = w_key.shape[0]
    held = Dict.empty(types.int64, INNER)  # key (resource, object) -> task -> units held
    held_res = Dict.empty(types.int64, INNER)  # resource -> task -> units held
    waiting = Dict.empty(types.int64, INNER)  # task -> key -> active waits
    deps = (  # key / resource / task -> wait -> generation it registered at
        Dict.empty(types.int64, INNER),
        Dict.empty(types.int64, INNER),
        Dict.empty(types.int64, INNER),
    )
    rows = Dict.empty(types.int64, types.int64[:, :])  # open wait -> its fractions' rows
    fracs = Dict.empty(types.int64, types.float64[:])
    active = np.zeros(n_waits, np.int8)
    marked = np.zeros(n_waits, np.int8)
    gen = np.zeros(n_waits, np.int64)
    since = np.zeros(n_waits, np.int64)
    todo = np.empty(64, np.int64)
    stack = _stack()
    registered, live = 0, 0  # registrations made, and live at the last collection
    blame = Dict.empty(BLAME_KEY, types.float64)  # (wait, culprit, culprit res, depth) -> ns
    for p in range(p_time.shape[0]):
        t = p_time[p]
        i = p_idx[p]
        n_todo = 0
        if p_kind[p] == 0:
            r, task = w_key[i], w_task[i]
            todo, n_todo = _touch(
                deps[2], task, t, active, gen, marked, todo, n_todo, since, rows, fracs, blame
            )
            if task not in waiting:
                waiting[task] = Dict.empty(types.int64, types.int64)
            inner = waiting[task]
            if p_start[p] == 1:
                inner[r] = inner.get(r, 0) + 1
                active[i] = 1
                since[i] = t
                marked[i] = 1
                if n_todo == todo.shape[0]:
                    todo = np.concatenate((todo, todo))
                todo[n_todo] = i
                n_todo += 1
            else:
                if active[i] == 1:
                    _settle(i, t, since, rows, fracs, blame)
                    active[i] = 0
                    del rows[i]
                    del fracs[i]
                inner[r] = inner.get(r, 0) - 1
                if inner[r] == 0:
                    del inner[r]
                if len(inner) == 0:
                    del waiting[task]
        else:
            k, task = h_key[i], h_task[i]
            todo, n_todo = _touch(
                deps[0], k, t, active, gen, marked, todo, n_todo, since, rows, fracs, blame
            )
            todo, n_todo = _touch(
                deps[1],
                key_res[k],
                t,
                active,
                gen,
                marked,
                todo,
                n_todo,
                since,
                rows,
                fracs,
                blame,
            )
            delta = h_weight[i] if p_start[p] == 1 else -h_weight[i]
            for table, r in ((held, k), (held_res, key_res[k])):
                if r not in table:
                    table[r] = Dict.empty(types.int64, types.int64)
                inner = table[r]
                inner[task] = inner.get(task, 0) + delta
                if inner[task] == 0:
                    del inner[task]
                if len(inner) == 0:
                    del table[r]
        for j in range(n_todo):
            w = todo[j]
            marked[w] = 0
            if active[w] == 1:
                gen[w] += 1
                rows[w], fracs[w] = _fractions(
                    w, w_key, w_task, held, held_res, waiting, key_res, key_obj, gen, deps, stack
                )
                registered += 1 + fracs[w].shape[0]  # about
        if registered > 2 * live + GARBAGE:
            live = _collect(deps, active, gen)
            registered = live
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
