"""A wait loop waits for the resource whose state keeps it looping. The recall gives a
function the resource it touches most; in a file that keeps its state in variables of its
own that is the file's record (``xlog_c``), though the loop's condition reads the shared
record those variables point to (``while (upto >= XLogCtl->InitializedUpTo)``: the WAL
buffers' XLogCtlData). Such a WAIT moves to that resource, when the condition reads the
state of exactly one resource besides the file's."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._parse import file_record
from gigi.scan._rules._found import Found, Site


def waits_on_what_they_read(found: Found) -> Found:
    out = []
    for site in found.sites:
        c, ok, why = site
        fn = found.functions.get((c.file, c.function))
        if not ok or c.kind != "WAIT" or fn is None or c.resource != file_record(fn.file):
            out.append(site)
            continue
        loop = next((lp for lp in fn.loops if lp.line == c.line), None)
        read = {m.split(".")[0] for m in loop.cond_members} if loop is not None else set()
        others = {r for rec in read for r in found.owners.get(rec, ())} - {c.resource}
        if len(others) != 1:
            out.append(site)
            continue
        (other,) = others
        out.append(Site(replace(c, resource=other), ok, f"{why}; its condition reads {other}"))
    return replace(found, sites=tuple(out))
