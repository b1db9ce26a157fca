"""A miss waits for the resource the lookup was made on, in whatever function the branch
stands: getPageNormal (the pager's) reads the page when sqlite3PcacheFetch (the page cache's)
had no data for it, so the wait is on the page cache, and lines up with the holds of its
pages."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import records_of, resource_of, slow_branches
from gigi.scan._rules._found import Found, Site


def waits_on_what_they_missed(found: Found) -> Found:
    by_name = {f.name.split("::")[-1]: f for f in found.functions.values()}
    out = []
    for c, ok, why in found.sites:
        fn = found.functions.get((c.file, c.function))
        g = found.by_name.get(c.resource)
        if ok and c.kind == "WAIT" and fn is not None and g is not None:
            slow = next(
                (s for s in slow_branches(fn, records_of(g)) if s.branch.line == c.line), None
            )
            callee = by_name.get(slow.lookup) if slow and slow.lookup else None
            looked_up = resource_of(callee, found.owners, found.declared) if callee else None
            if looked_up and looked_up != c.resource:
                c = replace(c, resource=looked_up)
                why = f"{why}; {slow.lookup} looks up {looked_up}: the wait is on it"
        out.append(Site(c, ok, why))
    return replace(found, sites=tuple(out))
