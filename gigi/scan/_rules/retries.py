"""A wait loop that retries a call that ACQUIREs some resource waits for that resource,
whatever structure its condition reads, and in whatever function it stands
(sqlite3BtreeBeginTrans retries sqlite3PagerBegin: it waits for the pager's lock). Such loops
in functions the recall gave no resource are proposed here and verified as any WAIT is."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import Candidate, links_of, misses, records_of
from gigi.scan._rules._code import CHECKS
from gigi.scan._rules._found import Found, Site
from gigi.scan._verify import verify


def waits_for_what_they_retry(found: Found) -> Found:
    acquires: dict[str, set[str]] = {}
    for c, ok, _ in found.sites:
        if ok and c.kind == "ACQUIRE":
            acquires.setdefault(c.function.split("::")[-1], set()).add(c.resource)

    def retried(loop, own: str | None) -> tuple[str, str] | None:
        calls = set(loop.body_calls + loop.cond_calls)
        if own is not None and any(own in acquires.get(x, ()) for x in calls):
            return None  # it retries its own resource's acquisition
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
    return replace(found, sites=tuple(out))


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
