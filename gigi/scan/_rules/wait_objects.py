"""A WAIT the rules found with no object names the one its function goes on to take: a wait in
a function that takes or gives back, on the same resource, the object a parameter names (one
it never sets) is a wait for that object (``LWLockAcquire(lock, mode)`` sleeps for ``lock``,
then takes it). A wait in a function that moves no object of its own, but is handed exactly
one of the type the resource's other events name by a parameter, waits for that one
(``LWLockWaitForVar(lock, ...)``). Without an object a wait is for the resource as a whole,
and its blame goes to the holders of every one of its objects (each of a server's many
locks), not to those of the one it waited for."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._rules._found import Found, Site


def waits_name_their_object(found: Found) -> Found:
    taken: dict[tuple[str, str, str], set[str]] = {}  # (file, function, resource) -> params
    types: dict[str, set[str]] = {}  # resource -> the types of the parameters it names
    for c, ok, _ in found.sites:
        fn = found.functions.get((c.file, c.function))
        if not ok or c.kind not in ("ACQUIRE", "RELEASE") or fn is None:
            continue
        spelt = _fixed_param(fn, c.object_expr.strip())
        if spelt:
            taken.setdefault((c.file, c.function, c.resource), set()).add(c.object_expr.strip())
            types.setdefault(c.resource, set()).add(spelt)
    out = []
    for c, ok, why in found.sites:
        fn = found.functions.get((c.file, c.function))
        if ok and c.kind == "WAIT" and not c.object_expr.strip() and fn is not None:
            own = taken.get((c.file, c.function, c.resource), set())
            typed = [n for _, n in fn.params if _fixed_param(fn, n) in types.get(c.resource, ())]
            if len(own) == 1:
                obj = next(iter(own))
                how = f"the object is {obj}, which it goes on to take or give back"
            elif not own and len(typed) == 1:
                obj = typed[0]
                how = f"the object is {obj}, of the type {c.resource}'s events name"
            else:
                obj = ""
            if obj:
                c, why = replace(c, object_expr=obj), f"{why}; {how}"
        out.append(Site(c, ok, why))
    return replace(found, sites=tuple(out))


def _fixed_param(fn, name: str) -> str:
    """The type of FN's parameter NAME as spelt without qualifiers, when the function never
    sets it (a pointer or an integer that names one object throughout); else ''."""
    declared = next((t for t, n in fn.params if n and n == name), None)
    if declared is None or any(a.target == name for a in fn.assigns):
        return ""
    spelt = declared.split("|")[0]
    return " ".join(re.sub(r"\b(const|volatile|struct|union|enum)\b", " ", spelt).split())
