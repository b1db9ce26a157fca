"""A loop that waits only on one of its branches waits there, not over the whole loop: when
every call in the loop's body that blocks, sleeps, waits or does I/O sits in one branch of an
if inside it, the loop's other passes do work (PostgreSQL's AdvanceXLInsertBuffer initializes
WAL pages one pass at a time, and only when the page to reuse is not yet written out does it
wait for the write), and a wait over the whole loop would count that work as waiting. The
WAIT moves to the innermost such branch. Not when the loop's own condition blocks (each test
of it is the wait), nor when no call in the body blocks, nor when the other side of that
branch's if leaves the loop (a queue full: drop and return, else wait for room): then every
pass that goes round waits, and the loop is the one wait."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import BLOCKING
from gigi.scan._parse import Function, Loop
from gigi.scan._rules._found import Found, Site


def waits_on_their_slow_branch(found: Found) -> Found:
    out = []
    for site in found.sites:
        c, ok, why = site
        fn = found.functions.get((c.file, c.function))
        loop = next((lp for lp in fn.loops if lp.line == c.line), None) if fn else None
        branch = _slow_branch(fn, loop) if ok and c.kind == "WAIT" and loop else None
        if branch is None:
            out.append(site)
            continue
        moved = replace(c, line=branch.line)
        out.append(Site(moved, True, f"{why}; it waits only in the branch at line {branch.line}"))
    return replace(found, sites=tuple(out))


def _slow_branch(fn: Function, loop: Loop):
    """The innermost branch inside ``loop`` that holds every call of its body that blocks,
    or None."""
    if any(BLOCKING.search(x) for x in loop.cond_calls):
        return None
    header = {loop.end_line if loop.form == "do" else loop.line}
    lines = [
        x.line
        for x in fn.calls
        if loop.line <= x.line <= loop.end_line
        and x.line not in header
        and BLOCKING.search(x.callee)
    ]
    if not lines:
        return None
    inside = [
        b
        for b in fn.branches
        if b.block
        and not any(BLOCKING.search(x) for x in b.cond_calls)  # its test blocks, every pass
        and loop.line < b.line
        and b.end_line < loop.end_line
        and all(b.line <= x <= b.end_line for x in lines)
    ]
    branch = min(inside, key=lambda b: b.end_line - b.line, default=None)
    if branch is not None and any(
        b.exits for b in fn.branches if b.if_id == branch.if_id and b.side != branch.side
    ):
        return None
    return branch
