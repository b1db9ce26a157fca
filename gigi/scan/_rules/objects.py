"""A site whose statement calls a function that performs the same event on the same
resource, for an object it takes as an integer parameter, performs it for the argument passed
there: walTryBeginRead's ``walLockShared(pWal, WAL_READ_LOCK(mxI))`` takes the read lock mxI,
and sqlite3WalEndReadTransaction gives back ``WAL_READ_LOCK(pWal->readLock)``. Without it,
the outer event (the one recorded) would be of the resource as a whole."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._rules._found import Found, Site


def objects_through_calls(found: Found) -> Found:
    by_name = {name: fn for (_, name), fn in found.functions.items()}
    objects = {
        (c.function, c.kind, c.resource): c.object_expr
        for c, ok, _ in found.sites
        if ok and c.object_expr
    }
    out = []
    for c, ok, why in found.sites:
        fn = found.functions.get((c.file, c.function))
        if ok and not c.object_expr and fn is not None:
            for call in fn.calls:
                callee = by_name.get(call.callee)
                param = objects.get((call.callee, c.kind, c.resource))
                if call.line != c.line or callee is None or param is None:
                    continue
                names = [n for _, n in callee.params]
                i = names.index(param) if param in names else -1
                if 0 <= i < len(call.args) and "*" not in callee.params[i][0]:
                    c = replace(c, object_expr=call.args[i].strip())
                    why = f"{why}; the object is what it passes {call.callee} as {param}"
                    break
        out.append(Site(c, ok, why))
    return replace(found, sites=tuple(out))
