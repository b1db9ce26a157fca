"""A unit found free by its own state and claimed is taken: a function that walks a
resource's units (a list, or an array of slots) and picks the one whose member says no one
holds it (``if (!f->sentto) target = f``, ``if (slots[i].pid == 0)``), then hands it out
or sets it up for itself (``target->time = now``), ACQUIREs it. A lookup picks a unit by
what the caller asked for (a key equal to a parameter) and takes nothing; a walk that only
counts the free units hands out none; one named for making room (an eviction that finds an
unpinned victim) is the slow path of its callers' WAIT."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import NULL, Candidate, lifecycle, reports_on, walks
from gigi.scan._parse import Function
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.slow_paths import MAKES_ROOM


def claims_free_slots(found: Found) -> Found:
    taking = {(c.file, c.function) for c, ok, _ in found.sites if ok and c.kind == "ACQUIRE"}
    out = []
    for key, fn in sorted(found.functions.items()):
        short = fn.name.split("::")[-1]
        # (one named for making room, a victim found unpinned, is its callers' slow path)
        if key in taking or lifecycle(short) or reports_on(short) or MAKES_ROOM.search(short):
            continue
        claim = _claim(fn, found.owners)
        if claim is None:
            continue
        line, resource, unit, member = claim
        why = f"claims {unit}, found free by its {member}"
        c = Candidate(fn.file, fn.name, line, "ACQUIRE", resource, unit, "1", "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))
    return replace(found, sites=(*found.sites, *out))


def _claim(fn: Function, owners: dict[str, list[str]]) -> tuple[int, str, str, str] | None:
    """(line, resource, the local claimed, the member that said it was free), or None."""
    returned = {s for _, srcs, _ in fn.returns for s in srcs}
    set_up = {a.target_base for a in fn.assigns if a.op == "=" and "." in a.target}
    for loop in fn.loops:
        if not walks(fn, loop):
            continue
        for b in fn.branches:
            if not (loop.line <= b.line <= loop.end_line) or b.side != 0:
                continue
            free = _tested_free(b)
            if free is None:
                continue
            unit, member = free
            record = member.split(".", 1)[0]
            if record not in owners or unit not in loop.cond_locals + b.cond_locals:
                continue
            # picked: kept in a local the function hands out or sets up, or returned there
            picked = {
                a.target
                for a in fn.assigns
                if b.line <= a.line <= b.end_line
                and a.op == "="
                and a.sources == [unit]
                and a.target in fn.locals
            }
            returns_here = any(
                b.line <= line <= b.end_line and srcs == [unit] for line, srcs, _ in fn.returns
            )
            kept = {p for p in picked if p in returned or p in set_up}
            if kept or returns_here:
                obj = next(iter(sorted(kept)), unit)
                return b.line, owners[record][0], obj, member.split(".", 1)[1]
    return None


def _tested_free(b) -> tuple[str, str] | None:
    """(the local, its member) where B's condition says the unit a local points to is held
    by no one: ``!f->sentto``, ``f->owner == NULL``, ``slot->pid == 0``; else None."""
    text = re.sub(r"\s+", "", b.cond)
    for m in b.cond_members:
        name = m.split(".", 1)[1]
        for local in b.cond_locals:
            x = rf"{re.escape(local)}(\[\w+\])?(->|\.){re.escape(name)}"
            if re.fullmatch(rf"!{x}|{x}=={NULL}|{NULL}=={x}", text):
                return local, m
    return None
