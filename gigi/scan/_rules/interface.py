"""A helper private to its file (static in C) whose every caller performs the same event on
the same resource is part of their event: it is recorded once, where callers see it
(pcacheUnpin inside sqlite3PcacheRelease)."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._rules._found import Found, Site

# what the C libraries' assert() calls when it fails (glibc, BSD and macOS, MSVC)
ASSERTS = re.compile(r"^(__assert_fail|__assert|__assert_rtn|__assert2|_assert|_wassert)$")


def at_the_interface(found: Found) -> Found:
    return replace(found, sites=covered_by_callers(found, found.sites, found.sites))


def covered_by_callers(found: Found, sites, events_of) -> tuple[Site, ...]:
    """SITES, each kept one at a static helper rejected where every caller of the helper
    performs the same event on the same resource (one of the kept EVENTS_OF)."""
    callers: dict[tuple[str, str], set[str]] = {}
    for fn in found.functions.values():
        # a call an assertion makes (assert(fetch(p, k) == pg)) checks; it calls for nothing
        asserts = {c.line for c in fn.calls if ASSERTS.match(c.callee)}
        for call in fn.calls:
            if call.line not in asserts:
                callers.setdefault((fn.file, call.callee), set()).add(fn.name)
    events = {(c.file, c.function, c.kind, c.resource) for c, ok, _ in events_of if ok}
    out = []
    for c, ok, why in sites:
        fn = found.functions.get((c.file, c.function))
        by = callers.get((c.file, c.function), set()) - {c.function}
        if (
            ok
            and fn is not None
            and fn.internal
            and by
            and all((c.file, f, c.kind, c.resource) in events for f in by)
        ):
            ok, why = False, f"part of the {c.kind} of its callers ({', '.join(sorted(by))})"
        out.append(Site(c, ok, why))
    return tuple(out)
