"""A helper private to its file (static in C) whose every caller performs the same event on
the same resource is part of their event: it is recorded once, where callers see it
(pcacheUnpin inside sqlite3PcacheRelease)."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._rules._found import Found, Site


def at_the_interface(found: Found) -> Found:
    callers: dict[tuple[str, str], set[str]] = {}
    for fn in found.functions.values():
        for call in fn.calls:
            callers.setdefault((fn.file, call.callee), set()).add(fn.name)
    events = {(c.file, c.function, c.kind, c.resource) for c, ok, _ in found.sites if ok}
    out = []
    for c, ok, why in found.sites:
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
    return replace(found, sites=tuple(out))
