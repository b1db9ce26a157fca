"""A function the code calls only from slow paths is one itself: where every call to it
stands inside a branch found to be a WAIT (a new block allocated when no block has room), or
is a step named for making room inside a wait loop (a connection evicted, the clock hand
swept, a spin on a header's lock waited out), the callee is the slow way to get a unit of
the same resource, and WAITs for it on every call. A function also called on an ordinary
path is not; nor one that only reports (a log line on the slow path); nor the other calls
inside a wait loop, which are what it retries or the ordinary steps of each round."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import GUARD, REPORTS, Candidate, lifecycle
from gigi.scan._rules._found import Found, Site

# what a step of a wait loop that makes room is named for
MAKES_ROOM = re.compile(r"evict|drain|sweep|reclaim|purge|wait|sleep|grow|expand|spill", re.I)


def slow_path_callees(found: Found) -> Found:
    # every verified WAIT's span: the branch or loop that starts at its line
    # function -> (start, end, resource, a loop's)
    spans: dict[str, list[tuple[int, int, str, bool]]] = {}
    for c, ok, _ in found.sites:
        fn = found.functions.get((c.file, c.function))
        if not ok or c.kind != "WAIT" or fn is None:
            continue
        ends = [(b.end_line, False) for b in fn.branches if b.line == c.line]
        ends += [(lp.end_line, True) for lp in fn.loops if lp.line == c.line]
        if ends:
            end, loop = max(ends)
            spans.setdefault(fn.name, []).append((c.line, end, c.resource, loop))
    by_name = {f.name: f for f in found.functions.values()}
    inside: dict[str, set[str]] = {}  # callee -> the resources of the slow paths it is on
    outside: set[str] = set()  # callees called on some ordinary path
    for fn in found.functions.values():
        for call in fn.calls:
            if call.callee not in by_name or call.callee == fn.name:
                continue
            # in a loop, only a step named for making room (the rest are what it retries,
            # or the ordinary steps of each round)
            on = {
                r
                for a, b, r, loop in spans.get(fn.name, ())
                if a <= call.line <= b and (not loop or MAKES_ROOM.search(call.callee))
            }
            if on:
                inside.setdefault(call.callee, set()).update(on)
            else:
                outside.add(call.callee)
    waiting = {c.function for c, ok, _ in found.sites if ok and c.kind == "WAIT"}
    out = []
    for name, resources in sorted(inside.items()):
        callee = by_name[name]
        short = name.split("::")[-1]
        if (
            name in outside
            or name in waiting
            or len(resources) != 1
            or REPORTS.search(short)
            or GUARD.search(short)
            or lifecycle(short)
            or callee.internal  # a file's own helper: its callers' WAITs say it
        ):
            continue
        (resource,) = resources
        why = f"called only on the slow paths of {resource}'s WAITs"
        c = Candidate(callee.file, name, callee.line, "WAIT", resource, "", "1", "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))
    return replace(found, sites=(*found.sites, *out))
