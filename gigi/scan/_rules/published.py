"""What lets waiters on is where units come back. A function that writes a resource's data
out (a write, a flush, a sync) and then stores, unconditionally, a member of the resource
that its waiters read (a log's written-up-to position, which a writer waiting for room
compares with the page it needs: ``XLogCtl->LogwrtResult = LogwrtResult`` after the pages
went to disk) gives that room back: a RELEASE, at the last such store, on that resource.

Not a store under a test (a position noted only when a segment ends) or in a loop (a head
moved page by page as the function makes room), nor one before the data went out (a
request for a write is no write), nor in a function that creates, starts or tears down the
resource."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import Candidate, _words, lifecycle, records_of
from gigi.scan._rules._code import loops_around
from gigi.scan._rules._found import Found, Site

# the last word of a call's name that says it writes data out (``pwrite``,
# ``issue_xlog_fsync``), not one that writes into memory (``sldns_write_uint16``)
WRITES_OUT = {"write", "pwrite", "writev", "pwritev", "fsync", "fdatasync", "sync", "flush"}


def published_after_writing(found: Found) -> Found:
    waited: dict[str, set[str]] = {}  # resource -> the members of it that keep waiters waiting
    for c, ok, _ in found.sites:
        fn = found.functions.get((c.file, c.function))
        g = found.by_name.get(c.resource)
        if ok and c.kind == "WAIT" and fn is not None and g is not None:
            waited.setdefault(c.resource, set()).update(_keeps_waiting(fn, c.line, records_of(g)))
    released = {
        (c.file, c.function, c.resource) for c, ok, _ in found.sites if ok and c.kind == "RELEASE"
    }
    out = []
    for fn in found.functions.values():
        out_at = [c.line for c in fn.calls if _writes_out(c.callee)]
        if not out_at or lifecycle(fn.name.split("::")[-1]):
            continue
        last: dict[str, object] = {}
        for a in sorted(fn.assigns, key=lambda a: a.line):
            if a.op != "=" or a.path or a.line <= min(out_at):
                continue
            if loops_around(fn, a.line):
                continue  # (a step of work done page by page: a head moved as it goes)
            for resource, members in waited.items():
                if a.target in members:
                    last[resource] = a
        for resource, a in sorted(last.items()):
            if (fn.file, fn.name, resource) in released:
                continue
            why = (
                f"stores {a.target}, which keeps waiters for {resource} waiting, after writing out"
            )
            c = Candidate(fn.file, fn.name, a.line, "RELEASE", resource, "", "1", "heuristic", why)
            out.append(Site(c, True, f"verified: {why}"))
    return replace(found, sites=(*found.sites, *out))


def _writes_out(callee: str) -> bool:
    words = _words(callee)
    return bool(words) and words[-1].lower() in WRITES_OUT


def _keeps_waiting(fn, line: int, mine: set[str]) -> set[str]:
    """The members of the resource (its records MINE) that the wait at LINE tests: its loop's
    condition and the tests inside the loop, or its branch's condition, read them directly or
    through a copy the function made (``LogwrtResult = XLogCtl->LogwrtResult`` before
    ``if (LogwrtResult.Write < OldPageRqstPtr)``)."""
    tests = [b for b in fn.branches if b.line == line]
    for lp in (lp for lp in fn.loops if lp.line == line):
        tests += [lp, *(b for b in fn.branches if lp.line <= b.line <= lp.end_line)]
    members = {m for t in tests for m in t.cond_members}
    words = {w for t in tests for w in re.findall(r"\w+", t.cond)}
    members |= {x for a in fn.assigns if a.target.split(".")[0] in words for x in a.sources}
    return {m for m in members if m.split(".")[0] in mine}
