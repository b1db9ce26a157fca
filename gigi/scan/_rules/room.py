"""A function that returns at once unless a resource's free units are few, and otherwise
makes room in a loop (closing idle connections, evicting entries), is the slow way to a
unit: its loop WAITs, wherever the function is called from. The guard is its first test: a
free count compared with a threshold (``if (cycle->free_connection_n > cycle->connection_n
/ 16 || ...) return;``); what it does past the guard is the room it makes."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import INVERSE, Candidate, lifecycle, reports_on
from gigi.scan._parse import Function
from gigi.scan._rules._found import Found, Site

COMPARES = re.compile(r"(>=|<=|(?<![-<>])>(?!>)|(?<![<])<(?![<=]))")


def makes_room_when_low(found: Found) -> Found:
    counted: dict[str, str] = {}  # record.member -> the resource whose count it is
    for g in found.resources:
        for m in g.members:
            if INVERSE.search(m.name):
                counted.setdefault(f"{m.record}.{m.name}", g.name)
    waiting = {c.function for c, ok, _ in found.sites if ok and c.kind == "WAIT"}
    out = []
    for fn in found.functions.values():
        short = fn.name.split("::")[-1]
        if fn.name in waiting or lifecycle(short) or reports_on(short):
            continue
        room = _room(fn, counted)
        if room is None:
            continue
        line, resource, member = room
        why = f"makes room when {member} is low (its guard returns while enough are free)"
        c = Candidate(fn.file, fn.name, line, "WAIT", resource, "", "1", "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))
    return replace(found, sites=(*found.sites, *out))


def _room(fn: Function, counted: dict[str, str]) -> tuple[int, str, str] | None:
    """(the loop's line, the resource, the free count) when FN's first test returns while
    a free count is high and a loop past it does the work; else None."""
    if not fn.branches:
        return None
    guard = min(fn.branches, key=lambda b: b.line)
    if guard.side != 0 or guard.path[:-1] or not COMPARES.search(guard.cond):
        return None
    returns = [r for r in fn.returns if guard.line <= r[0] <= guard.end_line]
    if not returns or any(srcs for _, srcs, _ in returns):
        return None  # it must leave, handing nothing back
    free = [m for m in guard.cond_members if m in counted]
    loops = [lp for lp in fn.loops if lp.line > guard.end_line and lp.body_calls]
    if not free or not loops:
        return None
    return loops[0].line, counted[free[0]], free[0].split(".", 1)[1]
