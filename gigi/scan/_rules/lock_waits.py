"""A loop that calls a lock function again until what the call said lets it go on is the slow
way to that lock: its WAIT, at the loop, on the lock (``do { free = LWLockWaitForVar(&l->lock,
&l->at, at, &at); } while (!free && at < upto)``; ``while (trylock(m) != 0) yield();``).
What the call said is its result or what it wrote through an argument, read by the loop's
condition (or, in a loop that never ends by itself, by a test inside it). A loop that walks a
table of locks, taking each once, is no retry, nor one that calls again only when a signal
interrupted the call; a loop that takes a lock for each round of its work, and tests
something else, waits for that, not for the lock.

A lock function of the code's own with such a slow way inside (LWLockAcquire sleeps until
the lock is free) is waited in by the function whose job is to take a lock of its own naming
through it (``LWLockAcquire(&WALInsertLocks[i].l.lock)``): a WAIT on that lock at the call,
before its ACQUIRE."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import Candidate, ResourceGuess, walks
from gigi.scan._rules._code import loops_around
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.locks import lock_found, lock_kinds, lock_of, retries_on_interrupt


def waits_around_locks(found: Found) -> Found:
    have = {(c.file, c.function, c.line, c.kind) for c, ok, _ in found.sites if ok}
    guesses: dict[str, ResourceGuess] = {}
    out = []
    for fn in found.functions.values():
        for call in fn.calls:
            kinds = lock_kinds(call)
            if not kinds or "RELEASE" in kinds or retries_on_interrupt(fn, call):
                continue
            loop = _retried_by(fn, call)
            lock = lock_of(fn, call) if loop is not None else ""
            if not lock or (fn.file, fn.name, loop.line, "WAIT") in have:
                continue
            if lock not in found.by_name and lock not in guesses:
                guesses[lock] = lock_found(lock, fn, call, f"waited for by {fn.name}")
            why = f"a loop calls {call.callee} on {lock} again until what it says lets it on"
            c = Candidate(fn.file, fn.name, loop.line, "WAIT", lock, "", "1", "heuristic", why)
            out.append(Site(c, True, f"verified: {why}"))
            have.add((fn.file, fn.name, loop.line, "WAIT"))
    out += _slow_inside(found, [*found.sites, *out], have)
    return replace(
        found,
        resources=(*found.resources, *guesses.values()),
        sites=(*found.sites, *out),
        locks=found.locks | set(guesses),
    )


def _slow_inside(found: Found, sites: list, have: set) -> list:
    """WAITs at the ACQUIREs of a lock the scan found by its API (``found.locks``) that are a
    call to a lock function of the code's own which waits inside."""
    waits = {c.function for c, ok, _ in sites if ok and c.kind == "WAIT"}
    out = []
    for c, ok, _ in sites:
        if not ok or c.kind != "ACQUIRE" or c.resource not in found.locks:
            continue
        fn = found.functions.get((c.file, c.function))
        slow = [
            call
            for call in (fn.calls if fn else ())
            if call.line == c.line and call.callee in waits and call.callee != c.function
        ]
        if not slow or (c.file, c.function, c.line, "WAIT") in have:
            continue
        why = f"{slow[0].callee}, which it calls to take {c.resource}, waits inside for it"
        w = replace(c, kind="WAIT", object_expr="", why=why)
        out.append(Site(w, True, f"verified: {why}"))
        have.add((c.file, c.function, c.line, "WAIT"))
    return out


def _retried_by(fn, call):
    """The innermost loop around CALL that does not walk and repeats on what CALL said: its
    condition calls it, or reads a local the call set (its result, or through ``&local``);
    a loop that never ends by itself, a test of the call inside it. None when there is none."""
    for lp in sorted(loops_around(fn, call.line), key=lambda lp: lp.line, reverse=True):
        if walks(fn, lp):
            continue
        said = {a.target for a in fn.assigns if a.line == call.line and call.callee in a.calls}
        said |= {a.strip()[1:].strip() for a in call.args if a.strip().startswith("&")}
        if call.callee in lp.cond_calls or said & set(lp.cond_locals):
            return lp
        if lp.infinite and any(
            call.callee in b.cond_calls and lp.line <= b.line <= lp.end_line for b in fn.branches
        ):
            return lp
    return None
