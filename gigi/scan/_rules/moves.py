"""A function that acquires or releases a resource touches its data as part of that: its
accesses are not a USE of their own. Data it moves through a call (a copy, a read, a write)
into what it took, after the take, or out of what it gives back, before the release, is:
filling a block just allocated, or draining a buffer before it goes back, uses it; and so
does the copy an append makes into the bytes it then takes by moving the length past
them."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._rules._found import Found, Site
from gigi.scan._verify import APPENDED

WHY = "the function acquires or releases; its accesses are part of that"


def uses_inside_a_move(found: Found) -> Found:
    moves: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for c, ok, why in found.sites:
        if ok and c.kind in ("ACQUIRE", "RELEASE"):
            kind = "APPEND" if why.startswith(APPENDED) else c.kind
            moves.setdefault((c.file, c.function, c.resource), []).append((kind, c.line))
    out = []
    for c, ok, why in found.sites:
        around = moves.get((c.file, c.function, c.resource))
        if ok and c.kind == "USE" and around and not _moves_data(c, around):
            out.append(Site(c, False, WHY))
        else:
            out.append(Site(c, ok, why))
    return replace(found, sites=tuple(out))


def _moves_data(c, around: list[tuple[str, int]]) -> bool:
    """Whether the USE C moves data through a call (its reason names one: ``memcpy()``)
    after the function's take or before its release, or is the copy of an append."""
    if any(kind == "APPEND" for kind, _ in around):
        return True
    if "()" not in c.why:
        return False
    return any(
        kind == "ACQUIRE" and c.line > line or kind == "RELEASE" and c.line < line
        for kind, line in around
    )
