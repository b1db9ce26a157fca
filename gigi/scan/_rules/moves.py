"""A function that acquires or releases a resource touches its data as part of that: its
accesses are not a USE of their own."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._rules._found import Found, Site

WHY = "the function acquires or releases; its accesses are part of that"


def uses_inside_a_move(found: Found) -> Found:
    moves = {
        (c.file, c.function, c.resource)
        for c, ok, _ in found.sites
        if ok and c.kind in ("ACQUIRE", "RELEASE")
    }
    return replace(
        found,
        sites=tuple(
            Site(c, False, WHY)
            if ok and c.kind == "USE" and (c.file, c.function, c.resource) in moves
            else Site(c, ok, why)
            for c, ok, why in found.sites
        ),
    )
