"""A USE is a unit worked through while it is held, between its ACQUIRE and its RELEASE: on a
resource no function takes from nor gives back to, there is no hold for it to sit in, and the
record whose members it touches is a context the code passes around (a request, a server's
configuration), not a resource with units. Such uses are rejected, saying so."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._rules._found import Found, Site


def uses_within_holds(found: Found) -> Found:
    moved = {c.resource for c, ok, _ in found.sites if ok and c.kind in ("ACQUIRE", "RELEASE")}
    return replace(
        found,
        sites=tuple(
            Site(
                c,
                False,
                f"no function takes a unit of {c.resource} or gives one back: "
                "a use of it sits in no hold",
            )
            if ok and c.kind == "USE" and c.resource not in moved
            else Site(c, ok, why)
            for c, ok, why in found.sites
        ),
    )
