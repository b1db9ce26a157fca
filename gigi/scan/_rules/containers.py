"""A pool kept in a generic container (a list or vector library's, its elements untyped) shows
itself by the wait for room in it: a function that sleeps, or waits on a condition, while
the container's size (a call: ``sblist_getsize(childs)``, ``list_length(q->items)``) is at
or past a limit (``>= config->maxclients``) WAITs for a unit of it. Then adding to that same
container (``sblist_add(childs, ...)``) takes a unit and deleting from it gives one back,
wherever the code does so. Without the wait, a container is only a collection: no rule
reads its adds and deletes."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import LIMIT, Candidate, sleeps
from gigi.scan._parse import Function
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site

# a call that says how many a container holds, compared with a limit: size(c) >= limit
SIZE = r"\w*(?:size|count|length|len|num|items)\w*"
FULL = re.compile(rf"\b({SIZE})\s*\(\s*&?\s*([A-Za-z_][\w.>\s-]*?)\s*\)\s*(>=|>|==)\s*(.+)$", re.I)
ADDS = re.compile(r"(^|_)(add|push|insert|append|put)(_|$)", re.I)
DELETES = re.compile(r"(^|_)(delete|del|remove|pop|erase|take)(_|$)", re.I)


def pools_in_containers(found: Found) -> Found:
    waits: list[tuple[Function, int, str, str]] = []  # function, line, container, condition
    for fn in found.functions.values():
        for line, cond in _waiting(fn):
            container = _full(cond)
            if container:
                waits.append((fn, line, container, cond))
    if not waits:
        return found
    have = {(c.function, c.kind) for c in found.kept()}
    guesses = {}
    out = []

    def site(fn, line, kind, container, why):
        if (fn.name, kind) in have:
            return
        have.add((fn.name, kind))
        c = Candidate(fn.file, fn.name, line, kind, container, "", "1", "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))

    for fn, line, container, cond in waits:
        if container not in found.by_name and container not in guesses:
            why = f"a container {fn.name} waits for room in ({cond})"
            guesses[container] = found_by(container, fn, "pool", "units", why)
        site(fn, line, "WAIT", container, f"waits while {container} is full ({cond})")
    full = {c for _, _, c, _ in waits}
    for fn in found.functions.values():
        moves = [
            (call, "ACQUIRE" if ADDS.search(call.callee) else "RELEASE")
            for call in fn.calls
            if call.args
            and _container(call.args[0]) in full
            and (ADDS.search(call.callee) or DELETES.search(call.callee))
        ]
        added = [c.line for c, kind in moves if kind == "ACQUIRE"]
        for call, kind in moves:
            held = _container(call.args[0])
            # a delete in a branch after the add, when what followed failed, is an undo
            if kind == "RELEASE" and call.path and added and min(added) < call.line:
                continue
            verb = "adds to" if kind == "ACQUIRE" else "deletes from"
            site(fn, call.line, kind, held, f"{verb} {held} ({call.callee})")
    return replace(
        found, resources=(*found.resources, *guesses.values()), sites=(*found.sites, *out)
    )


def _waiting(fn: Function):
    """(line, condition) of each loop and branch of FN that waits: one that sleeps or waits
    on a condition variable (``sleeps`` names both)."""
    for lp in fn.loops:
        if any(sleeps(c) for c in lp.body_calls):
            yield lp.line, lp.cond
    for b in fn.branches:
        if b.side == 0 and any(sleeps(c) for c in b.body_calls):
            yield b.line, b.cond


def _full(cond: str) -> str:
    """The container COND finds full: its size, by a call, at or past a limit (a member or
    setting named for one, or a constant), else ""."""
    for part in re.split(r"&&|\|\|", cond):
        m = FULL.search(part.strip())  # (a macro, sblist_getsize, is no call)
        if not m:
            continue
        limit = m.group(4)
        if LIMIT.search(limit) or re.fullmatch(r"\(?\s*[A-Z_][A-Z0-9_]*\s*\)?|\d+", limit.strip()):
            return _container(m.group(2))
    return ""


def _container(arg: str) -> str:
    """A container named by an argument: a variable, or the last member of a path
    (``q -> items``: items), spaces and an address taken aside."""
    text = re.sub(r"\s+", "", arg).lstrip("&")
    if not re.fullmatch(r"[A-Za-z_][\w.>-]*", text):
        return ""
    return re.split(r"->|\.", text)[-1]
