"""A function that, before it takes a unit, calls one whose job is the slow way to a unit of
the same resource waits there: ``ngx_get_connection`` calls ``ngx_drain_connections``
(which closes idle connections when few are free) and then pops a free connection. The
callee's WAIT happens on every call of the caller, before its ACQUIRE, so the caller WAITs
at that call, as a thin wrapper waits in what it wraps. Not a callee that takes units
itself (then the caller wraps its ACQUIRE, which ``wrappers`` says), nor one named for a
lock (a wait on a lock is the lock API's, as ``pager_wait_on_lock``'s), nor one called after
the take, nor in a caller that already waits for the resource."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import Candidate, names_a_lock_call
from gigi.scan._rules._found import Found, Site


def waits_in_a_callee_first(found: Found) -> Found:
    kinds: dict[str, dict[str, set[str]]] = {}  # function -> resource -> kinds
    takes: dict[tuple[str, str], dict[str, int]] = {}  # function -> resource -> first take
    for c, ok, _ in found.sites:
        if not ok:
            continue
        kinds.setdefault(c.function, {}).setdefault(c.resource, set()).add(c.kind)
        if c.kind == "ACQUIRE":
            at = takes.setdefault((c.file, c.function), {})
            at[c.resource] = min(at.get(c.resource, c.line), c.line)
    out = []
    for key, taken in sorted(takes.items()):
        fn = found.functions.get(key)
        if fn is None:
            continue
        for resource, line in sorted(taken.items()):
            if "WAIT" in kinds[fn.name][resource]:
                continue
            for call in sorted(fn.calls, key=lambda c: c.line):
                got = kinds.get(call.callee, {}).get(resource, set())
                if call.line >= line or call.indirect or call.callee == fn.name:
                    continue
                if names_a_lock_call(call.callee):
                    continue
                if "WAIT" in got and "ACQUIRE" not in got:
                    why = f"waits in {call.callee}, the slow way to a unit, before it takes one"
                    c = Candidate(
                        fn.file, fn.name, call.line, "WAIT", resource, "", "1", "heuristic", why
                    )
                    out.append(Site(c, True, f"verified: {why}"))
                    break
    return replace(found, sites=(*found.sites, *out))
