"""Growing when full is the slow way to get a unit: a function that takes units, with a branch
taken when a count reaches the limit it is compared with (``if (arr->nelts == arr->nalloc)``,
``if (buf->used + n > buf->size)``) that makes more room by a call and raises that limit
(``arr->nalloc = new_size``), WAITs in that branch, before the take that follows (or within
it). Both sides are members of one record, and the branch raises the other side: a test of a
count against a limit that the branch leaves alone (a refusal, an error) is no growth, nor is
a branch that only reports."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import GUARD, REPORTS, Candidate
from gigi.scan._parse import Branch, Function
from gigi.scan._rules._found import Found, Site

COMPARES = re.compile(r"(==|>=|<=|(?<![-<>])>(?!>)|(?<![<])<(?![<=]))")
# a limit is set anew (doubled, or to the size just made); a count is stepped (``+=``, ``++``)
RAISES = ("=", "*=", "<<=")


def grows_when_full(found: Found) -> Found:
    takes: dict[tuple[str, str], list[tuple[int, str]]] = {}
    waits = set()
    for c, ok, _ in found.sites:
        if ok and c.kind == "ACQUIRE":
            takes.setdefault((c.file, c.function), []).append((c.line, c.resource))
        elif ok and c.kind == "WAIT":
            waits.add((c.file, c.function))
    out = []
    for key, taken in sorted(takes.items()):
        fn = found.functions.get(key)
        if fn is None or key in waits:
            continue
        last = max(line for line, _ in taken)
        for b in fn.branches:
            grown = _grows(fn, b) if b.line <= last else None
            if grown is None:
                continue
            count, limit, call = grown
            resource = taken[-1][1]
            why = f"branch taken when {count} reaches {limit} ({b.cond}): grows it, around {call}"
            c = Candidate(fn.file, fn.name, b.line, "WAIT", resource, "", "1", "heuristic", why)
            out.append(Site(c, True, f"verified: {why}"))
            break
    return replace(found, sites=(*found.sites, *out))


def _grows(fn: Function, b: Branch) -> tuple[str, str, str] | None:
    """(count, limit, the call that makes room) when B is taken on a count compared with a
    limit of the same record that B raises, around a call; else None."""
    if not COMPARES.search(b.cond):
        return None
    more = [c for c in b.body_calls if not REPORTS.search(c) and not GUARD.search(c)]
    if not more or any(b.line <= line <= b.end_line for line, _, _ in fn.returns):
        return None
    raised = {
        a.target
        for a in fn.assigns
        if b.line <= a.line <= b.end_line
        and a.op in RAISES
        and a.target in b.cond_members
        and not CONSTANT.fullmatch(a.text.split("=", 1)[-1].strip())
    }
    # each comparison of the condition on its own (``a && b``: two tests, not one)
    clauses = [c for c in re.split(r"&&|\|\|", b.cond) if COMPARES.search(c)]
    for limit in sorted(raised):
        record, name = limit.split(".", 1)
        for m in b.cond_members:
            count = m.split(".", 1)[1]
            if m == limit or m.split(".", 1)[0] != record:
                continue
            if any(_names(c, count) and _names(c, name) for c in clauses):
                return count, name, more[0]
    return None


# a value a limit is not raised to: a literal, a named constant, a truth value
CONSTANT = re.compile(r"-?\d+\w*|[A-Z][A-Z0-9_]*|true|false|NULL|nullptr")


def _names(text: str, member: str) -> bool:
    return re.search(rf"\b{re.escape(member)}\b", text) is not None
