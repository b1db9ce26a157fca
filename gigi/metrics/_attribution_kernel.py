"""The numba sweep behind ``gigi.metrics.attribution.attribute_fast`` (same rules as the
plain-Python ``attribute``; a property test compares them).

Between two sweep points every open wait's blame grows by the segment's length times fixed
fractions: the shares of each culprit along the chains the wait leads to. Those fractions
change only when something they were read from changes: the holders of a key or of a
resource, or the keys a culprit waits for. So each open wait keeps its fractions and the time
it was last settled, and registers with what it read; a point settles and recomputes only the
waits registered with what that point changes. A point then costs what it touches, not the
number of open waits: a queue of waiters behind one long holder costs nothing until the holder
lets go. The waits touched are recomputed once an instant, after all its points: a million
holds that begin at one instant (a stretch's holds carried over from the one before) cost a
million updates and one recompute, not a million recomputes.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.typed import Dict

MAX_DEPTH = 4
MIN_PASSED = 1 / 32  # as gigi.metrics.attribution's (numba's cache keys on this file alone)
PASSED_LEAST = MIN_PASSED * (1 - 1e-9)
STACK = 4096
GARBAGE = 1 << 18  # stale registrations let pile up before they are collected, about

INNER = types.DictType(types.int64, types.int64)
BLAME_KEY = types.UniTuple(types.int64, 4)


@numba.njit(cache=True, nogil=True)
def _register(deps, entity, w, generation):
    if entity not in deps:
        deps[entity] = Dict.empty(types.int64, types.int64)
    deps[entity][w] = generation


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def _stack():
    """The chain stack: per entry its resource, mass, depth and slices of two flat buffers
    (the tasks it must not come back to; who passed it on, with their parts), and the
    buffers: those tasks; who passed, with their parts, resource and depth. Then scratch:
    a node's holders and their units; (onward key, holder, part) of the holders that wait in
    turn; the rows and fractions found."""
    return (
        np.empty(STACK, np.int64),
        np.empty(STACK, np.float64),
        np.empty(STACK, np.int64),
        np.empty((STACK, 4), np.int64),  # visited offset, length; passers offset, length
        np.empty(1024, np.int64),
        np.empty((1024, 3), np.int64),
        np.empty(1024, np.float64),
        np.empty(64, np.int64),
        np.empty(64, np.int64),
        np.empty(64, np.int64),
        np.empty(64, np.int64),
        np.empty(64, np.float64),
        np.empty((64, 3), np.int64),
        np.empty(64, np.float64),
    )


@numba.njit(cache=True, nogil=True)
def _grown(a, need):
    """``a``, or a copy twice as long as ``need`` when it is shorter."""
    if need <= a.shape[0]:
        return a
    out = np.empty((2 * need,) + a.shape[1:], a.dtype)
    out[: a.shape[0]] = a
    return out


@numba.njit(cache=True, nogil=True)
def _row(rows, fracs, n_rows, culprit, res, depth, frac):
    if n_rows == fracs.shape[0]:
        rows = np.concatenate((rows, rows))
        fracs = np.concatenate((fracs, fracs))
    rows[n_rows, 0], rows[n_rows, 1], rows[n_rows, 2] = culprit, res, depth
    fracs[n_rows] = frac
    return rows, fracs, n_rows + 1


@numba.njit(cache=True, nogil=True)
def _fractions(w, w_key, w_task, held, held_res, waiting, key_res, key_obj, gen, deps, stack):
    """Wait ``w``'s blame per ns now: rows (culprit, culprit resource, depth) and their
    fractions; registers ``w`` (at its generation) with every key, resource and task it read.
    ``deps`` is (by key, by resource, by task); ``stack`` is ``_stack()``, reused."""
    dep_key, dep_res, dep_task = deps
    g = gen[w]
    s_res, s_mass, s_depth, s_at, seen, passers, parts = stack[:7]
    tasks_buf, weights_buf, o_key, o_task, o_part, rows, fracs = stack[7:]
    n_rows = 0
    s_res[0] = w_key[w]
    s_mass[0] = 1.0
    s_depth[0] = 0
    seen[0] = w_task[w]
    s_at[0, 0], s_at[0, 1], s_at[0, 2], s_at[0, 3] = 0, 1, 0, 0
    n_seen, n_passers = 1, 0
    top = 1
    while top > 0:
        top -= 1
        res, mass, depth = s_res[top], s_mass[top], s_depth[top]
        v0, v1, p0, p1 = s_at[top, 0], s_at[top, 1], s_at[top, 2], s_at[top, 3]
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
            for k in range(v0, v0 + v1):
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
        if n == 0:  # nobody to pass it to: it stays with those who passed it
            for k in range(p0, p0 + p1):
                rows, fracs, n_rows = _row(
                    rows, fracs, n_rows, passers[k, 0], passers[k, 1], passers[k, 2], parts[k]
                )
            continue
        n_on = 0
        for j in range(n):
            culprit = tasks_buf[j]
            share = mass * weights_buf[j] / total
            keys = 0
            if depth < MAX_DEPTH:
                _register(dep_task, culprit, w, g)
                if culprit in waiting:
                    for r2, cnt in waiting[culprit].items():
                        if cnt > 0 and r2 != res:
                            keys += 1
            if keys == 0:
                rows, fracs, n_rows = _row(rows, fracs, n_rows, culprit, key_res[res], depth, share)
                continue
            o_key = _grown(o_key, n_on + keys)
            o_task = _grown(o_task, n_on + keys)
            o_part = _grown(o_part, n_on + keys)
            for r2, cnt in waiting[culprit].items():
                if cnt > 0 and r2 != res:
                    o_key[n_on], o_task[n_on], o_part[n_on] = r2, culprit, share / keys
                    n_on += 1
        # the holders waiting for one same key pass their shares on together
        for i in range(n_on):
            k2 = o_key[i]
            first = True
            for i0 in range(i):
                if o_key[i0] == k2:
                    first = False
                    break
            if not first:
                continue
            passed = 0.0
            members = 0
            for i1 in range(i, n_on):
                if o_key[i1] == k2:
                    passed += o_part[i1]
                    members += 1
            if passed < PASSED_LEAST or top + 1 >= STACK:
                for i1 in range(i, n_on):
                    if o_key[i1] == k2:
                        rows, fracs, n_rows = _row(
                            rows, fracs, n_rows, o_task[i1], key_res[res], depth, o_part[i1]
                        )
                continue
            seen = _grown(seen, n_seen + v1 + members)
            passers = _grown(passers, n_passers + members)
            parts = _grown(parts, n_passers + members)
            s_res[top], s_mass[top], s_depth[top] = k2, passed, depth + 1
            s_at[top, 0], s_at[top, 2], s_at[top, 3] = n_seen, n_passers, members
            seen[n_seen : n_seen + v1] = seen[v0 : v0 + v1]
            n_seen += v1
            for i1 in range(i, n_on):
                if o_key[i1] == k2:
                    seen[n_seen] = o_task[i1]
                    n_seen += 1
                    passers[n_passers, 0] = o_task[i1]
                    passers[n_passers, 1] = key_res[res]
                    passers[n_passers, 2] = depth
                    parts[n_passers] = o_part[i1]
                    n_passers += 1
            s_at[top, 1] = n_seen - s_at[top, 0]
            top += 1
    grown = (seen, passers, parts, tasks_buf, weights_buf, o_key, o_task, o_part, rows, fracs)
    return rows[:n_rows].copy(), fracs[:n_rows].copy(), grown


@numba.njit(cache=True, nogil=True)
def _settle(w, t, since, rows, fracs, blame):
    """Add wait ``w``'s blame from ``since[w]`` to ``t``, at its current fractions."""
    length = float(t - since[w])
    if length > 0:
        r, f = rows[w], fracs[w]
        for j in range(f.shape[0]):
            key = (w, r[j, 0], r[j, 1], r[j, 2])
            blame[key] = blame.get(key, 0.0) + length * f[j]
    since[w] = t


@numba.njit(cache=True, nogil=True)
def _touch(deps, entity, active, gen, marked, todo, n_todo):
    """Queue, to be settled and recomputed, every open wait registered (at its current
    generation) with ``entity``; the registrations are spent."""
    if entity not in deps:
        return todo, n_todo
    for w, g in deps[entity].items():
        if active[w] == 1 and gen[w] == g and marked[w] == 0:
            marked[w] = 1
            todo, n_todo = _queue(todo, n_todo, w)
    del deps[entity]
    return todo, n_todo


@numba.njit(cache=True, nogil=True)
def _queue(todo, n_todo, w):
    if n_todo == todo.shape[0]:
        todo = np.concatenate((todo, todo))
    todo[n_todo] = w
    return todo, n_todo + 1


@numba.njit(cache=True, nogil=True)
def _compute(ws, n, per_wait, trace, state, stack, registered):
    """Read again the fractions of the first ``n`` waits of ``ws`` still open. ``per_wait``:
    (active, marked, gen, rows, fracs); ``trace``: (w_key, w_task, key_res, key_obj);
    ``state``: (held, held_res, waiting, deps)."""
    active, marked, gen, rows, fracs = per_wait
    w_key, w_task, key_res, key_obj = trace
    held, held_res, waiting, deps = state
    for j in range(n):
        w = ws[j]
        marked[w] = 0
        if active[w] == 1:
            gen[w] += 1
            rows[w], fracs[w], grown = _fractions(
                w, w_key, w_task, held, held_res, waiting, key_res, key_obj, gen, deps, stack
            )
            stack = stack[:4] + grown
            registered += 1 + fracs[w].shape[0]  # about
    return stack, registered


@numba.njit(cache=True, nogil=True)
def sweep(
    p_time, p_kind, p_start, p_idx, w_key, w_task, h_key, h_task, h_weight, key_res, key_obj, every
):
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
    todo = np.empty(64, np.int64)  # waits touched: to settle and recompute
    fresh = np.empty(64, np.int64)  # waits begun: to compute
    n_todo, n_fresh = 0, 0
    stack = _stack()
    per_wait = (active, marked, gen, rows, fracs)
    trace = (w_key, w_task, key_res, key_obj)
    state = (held, held_res, waiting, deps)
    registered, live = 0, 0  # registrations made, and live at the last collection
    blame = Dict.empty(BLAME_KEY, types.float64)  # (wait, culprit, culprit res, depth) -> ns
    for p in range(p_time.shape[0]):
        t = p_time[p]
        i = p_idx[p]
        before = p_time[p - 1] if p > 0 else t
        if before != t and n_todo > 0 and (every == 0 or t // every != before // every):
            # the waits touched are settled at the old fractions up to the instant before
            # (up to the cell's end when reading a cell at a time), and read again from there
            upto = before if every == 0 else (before // every + 1) * every
            for j in range(n_todo):
                w = todo[j]
                if active[w] == 1:
                    _settle(w, upto, since, rows, fracs, blame)
            stack, registered = _compute(todo, n_todo, per_wait, trace, state, stack, registered)
            n_todo = 0
        if p_kind[p] == 0:
            r, task = w_key[i], w_task[i]
            todo, n_todo = _touch(deps[2], task, active, gen, marked, todo, n_todo)
            if task not in waiting:
                waiting[task] = Dict.empty(types.int64, types.int64)
            inner = waiting[task]
            if p_start[p] == 1:
                inner[r] = inner.get(r, 0) + 1
                active[i] = 1
                since[i] = t
                marked[i] = 1
                fresh, n_fresh = _queue(fresh, n_fresh, i)
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
            todo, n_todo = _touch(deps[0], k, active, gen, marked, todo, n_todo)
            todo, n_todo = _touch(deps[1], key_res[k], active, gen, marked, todo, n_todo)
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
        if p + 1 < p_time.shape[0] and p_time[p + 1] == t:
            continue  # the waits begun are read once, after all the instant's points
        stack, registered = _compute(fresh, n_fresh, per_wait, trace, state, stack, registered)
        n_fresh = 0
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
