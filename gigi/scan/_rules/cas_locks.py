"""A lock made of a word a compare-and-swap sets: a function that swaps a member of the lock
it is handed from a value to a non-zero one (nginx's ``ngx_atomic_cmp_set(mtx->lock, 0,
ngx_pid)``, a ``compare_exchange`` on ``&lock->state``) takes that lock, one that swaps it
back to zero (``ngx_atomic_cmp_set(mtx->lock, ngx_pid, 0)``) gives it back, whatever the
functions and the lock are named. A swap retried in a loop that also sleeps, yields or waits
is the wait for the lock (a spin, then a semaphore); a swap retried only because the word
changed meanwhile is not. A function that touches nothing of another resource but the lock
it holds (the slab pool whose mutex it is) works on the lock: what the recall proposed there
on that resource is not kept."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import SLEEPS, Candidate, records_of
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site

CAS = re.compile(r"compare_and_swap|cmp_?set|compare_?exchange|(^|_)cas(_|$)|test_and_set", re.I)
ZERO = re.compile(r"^\(?\s*(0|0u|0l|false|NULL|nullptr)\s*\)?$", re.I)
MEMBER = re.compile(r"^&?\s*\(?\s*([A-Za-z_]\w*)\s*(->|\.)\s*([A-Za-z_]\w*)\s*\)?$")


def locks_by_compare_and_swap(found: Found) -> Found:
    kept = {(c.function, c.kind, c.resource) for c in found.kept()}
    new: dict[str, object] = {}
    sites: list[Site] = []
    folded: dict[str, str] = {}  # function -> the lock whose state it touches
    for fn in found.functions.values():
        swaps = [
            (call, *_swapped(fn, call))
            for call in fn.calls
            if CAS.search(call.callee) and not _counts(call)
        ]
        words = {w for _, w, _ in swaps if w}
        if len(words) != 1 or any(not w for _, w, _ in swaps):
            continue
        record = next(iter(words)).split(".", 1)[0]
        holder = swaps[0][2]  # the object: which lock, the one the function is handed
        directions = {_direction(call) for call, _, _ in swaps}
        if len(directions) != 1:
            continue
        kind = directions.pop()
        first = min(call.line for call, _, _ in swaps)
        # taken where the swap succeeded: in the branch a successful swap takes (if (cas(...))
        # return;), not after it, where the swap failed and the loop goes round again
        won = [
            b.line
            for b in fn.branches
            if b.side == 0 and any(CAS.search(c) for c in b.cond_calls) and b.line > first
        ]
        at = min(won) if kind == "ACQUIRE" and won else first
        events = [(kind, at, f"swaps {next(iter(words))} {_how(kind)}")]
        if kind == "ACQUIRE":
            spin = [
                lp
                for lp in fn.loops
                if any(lp.line <= call.line <= lp.end_line for call, _, _ in swaps)
                and any(SLEEPS.search(c) for c in lp.body_calls)
            ]
            if spin:
                outer = min(spin, key=lambda lp: lp.line)
                events.append(("WAIT", outer.line, "retries the swap, sleeping or waiting"))
        for kind_, line, why in events:
            if (fn.name, kind_, record) in kept:
                continue
            if record not in found.by_name and record not in new:
                reason = f"a word {fn.name} takes or gives back by compare-and-swap"
                new[record] = found_by(record, fn, "exclusive", "locks", reason)
            c = Candidate(fn.file, fn.name, line, kind_, record, holder, "1", "heuristic", why)
            sites.append(Site(c, True, f"verified: {why}"))
            folded[fn.name] = record
    if not sites:
        return found
    out = []
    for c, ok, why in found.sites:
        lock = folded.get(c.function)
        g = found.by_name.get(c.resource)
        if ok and lock and g is not None and c.resource != lock:
            fn = found.functions[(c.file, c.function)]
            # what the function touches of that resource is the lock's state alone
            mine = records_of(g)
            if {a.record for a in fn.accesses if a.record in mine} <= {lock}:
                ok, why = False, f"touches only {lock}'s state of {c.resource}: the lock's event"
        out.append(Site(c, ok, why))
    return replace(found, resources=(*found.resources, *new.values()), sites=(*out, *sites))


def _swapped(fn, call) -> tuple[str, str]:
    """record.member the swap works on and the parameter it is a member of, when it is a
    member of what FN is handed; else ("", "")."""
    m = MEMBER.match(call.args[0].strip()) if call.args else None
    params = {n for _, n in fn.params}
    if m is None or m.group(1) not in params:
        return "", ""
    record = next(
        (a.record for a in fn.accesses if a.base == m.group(1) and a.member == m.group(3)), ""
    )
    return (f"{record}.{m.group(3)}", m.group(1)) if record else ("", "")


def _counts(call) -> bool:
    """Whether the swap steps a count (``cmp_set(&mtx->wait, wait, wait - 1)``): the new
    value is the old one plus or minus something, not a lock word's value."""
    if len(call.args) < 3:
        return False
    old, new = call.args[1].strip(), call.args[2]
    named = re.fullmatch(r"[A-Za-z_]\w*", old) and re.search(rf"\b{re.escape(old)}\b", new)
    return bool(named and re.search(r"[-+]", new))


def _direction(call) -> str:
    """ACQUIRE for a swap to a non-zero value (or a test-and-set), RELEASE for one back to
    zero."""
    if "test_and_set" in call.callee.lower() or len(call.args) < 3:
        return "ACQUIRE"
    return "RELEASE" if ZERO.match(call.args[2].strip()) else "ACQUIRE"


def _how(kind: str) -> str:
    return "to a value of its own: the lock taken" if kind == "ACQUIRE" else "back to zero"
