"""A wait loop that retries a call that ACQUIREs some resource waits for that resource,
whatever structure its condition reads, and in whatever function it stands
(sqlite3BtreeBeginTrans retries sqlite3PagerBegin: it waits for the pager's lock). Such loops
in functions the recall gave no resource are proposed here and verified as any WAIT is.

What the loop got at last, the function has: it ACQUIREs the resource too when it returns
what the retried call returned (memcached's do_item_alloc_pull, retrying slabs_alloc), or
hands that call its own parameter where the call takes what it is handed (PostgreSQL's
LWLockAcquire, retrying LWLockAttemptLock(lock)), and gives none of it back."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import Candidate, links_of, misses, records_of
from gigi.scan._rules._code import CHECKS, handed_param, returns_result_of
from gigi.scan._rules._found import Found, Site
from gigi.scan._verify import verify


def waits_for_what_they_retry(found: Found) -> Found:
    acquires: dict[str, set[str]] = {}
    for c, ok, _ in found.sites:
        if ok and c.kind == "ACQUIRE":
            acquires.setdefault(c.function.split("::")[-1], set()).add(c.resource)

    def retried(loop, own: str | None) -> tuple[str, str] | None:
        calls = set(loop.body_calls + loop.cond_calls)
        if own is not None and (mine := sorted(x for x in calls if own in acquires.get(x, ()))):
            return mine[0], own  # it retries its own resource's acquisition
        hits = sorted((x, r) for x in calls for r in acquires.get(x, ()) if r != own)
        return hits[0] if len({r for _, r in hits}) == 1 else None

    out = []
    waits = set()
    for c, ok, why in found.sites:
        fn = found.functions.get((c.file, c.function))
        loop = next((lp for lp in fn.loops if lp.line == c.line), None) if fn else None
        if c.kind == "WAIT":
            waits.add((c.file, c.function, c.line))
            hit = retried(loop, c.resource) if ok and loop is not None else None
            if hit is not None:
                c = replace(c, resource=hit[1])
                why = f"{why}; it retries {hit[0]}, an ACQUIRE of {hit[1]}"
        out.append(Site(c, ok, why))
    for fn in found.functions.values():
        for loop in fn.loops:
            if (fn.file, fn.name, loop.line) in waits or (hit := retried(loop, None)) is None:
                continue
            callee, resource = hit
            g = found.by_name[resource]
            c = Candidate(
                fn.file,
                fn.name,
                loop.line,
                "WAIT",
                resource,
                "",
                "1",
                "heuristic",
                f"loop retrying {callee}, an ACQUIRE of {resource}",
            )
            v = verify(c, fn, records_of(g), True, links_of(g))
            if not v.ok and (after := _after_a_miss(fn, loop, callee)):
                why = f"verified: it retries {callee} after {after} when {callee} gave nothing"
                out.append(Site(replace(c, why=why[len("verified: ") :]), True, why))
                continue
            out.append(Site(c, v.ok, f"{v.reason}; it retries {callee}" if v.ok else v.reason))
    return replace(found, sites=(*out, *_kept(found, out)))


def _kept(found: Found, sites: list[Site]) -> list[Site]:
    """The ACQUIREs of functions whose verified wait loops retry an ACQUIRE: of what the
    loop's call returned, when the function returns it, or of the parameter it hands a
    call that takes what it is handed; never where the function gives the resource back."""
    has: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (file, function) -> (kind, res)
    handed: dict[str, dict[str, set[int]]] = {}  # callee -> resource -> parameter positions
    for c, ok, _ in sites:
        if not ok:
            continue
        has.setdefault((c.file, c.function), set()).add((c.kind, c.resource))
        callee = found.functions.get((c.file, c.function))
        if c.kind == "ACQUIRE" and callee:
            at = {i for i, (_, n) in enumerate(callee.params) if n and n == c.object_expr}
            handed.setdefault(c.function, {}).setdefault(c.resource, set()).update(at)
    out = []
    for c, ok, why in sites:
        hit = re.search(r"\bit retries (\w+)", why) if ok and c.kind == "WAIT" else None
        if hit is None:
            continue
        fn = found.functions[(c.file, c.function)]
        mine = has.get((c.file, c.function), set())
        if ("ACQUIRE", c.resource) in mine or ("RELEASE", c.resource) in mine:
            continue
        callee = hit.group(1)
        loop = next((lp for lp in fn.loops if lp.line == c.line), None)
        calls = [
            x
            for x in fn.calls
            if x.callee == callee and loop and loop.line <= x.line <= loop.end_line
        ]
        if not calls:
            continue
        at = handed.get(callee, {}).get(c.resource, set())
        obj = next((o for x in calls if (o := handed_param(fn, x, at))), "")
        if obj:
            how = f"it hands {obj} to {callee}, which takes it, until it is had"
        elif "*" in fn.return_type and returns_result_of(fn, callee):  # not a status code
            how = f"it returns what {callee} acquired, once it gave something"
            obj = next(
                (a.target for a in fn.assigns if callee in a.calls and a.target in fn.locals),
                "",
            )
        else:
            continue
        a = replace(c, kind="ACQUIRE", line=calls[-1].line, object_expr=obj, why=how)
        out.append(Site(a, True, f"verified: {how}"))
        mine.add(("ACQUIRE", c.resource))
    return out


def _after_a_miss(fn, loop, callee: str) -> str:
    """What a loop calls to make room before it retries CALLEE (an eviction, a reclaim:
    memcached's do_item_alloc_pull pulls the LRU's tail when slabs_alloc gave nothing), or
    "": the call in a branch of the loop taken when what CALLEE returned holds nothing. A
    loop that calls CALLEE for each of many things, and makes nothing of a miss, is not a
    retry."""
    got = {
        a.target
        for a in fn.assigns
        if callee in a.calls and loop.line <= a.line <= loop.end_line and a.target in fn.locals
    }
    for b in fn.branches:
        if not loop.line <= b.line <= loop.end_line:
            continue
        if any(misses(b, x) for x in got):
            other = [c for c in b.body_calls if c != callee and not CHECKS.search(c)]
            if other:
                return other[0]
    return ""
