"""A memory budget the application keeps: a short function whose job is one call to the
C library's memory functions, and which counts what it takes or gives back (``used +=
size``, an atomic add to ``used_memory``), returning what it allocates or handing back a
pointer it was given (or one made from it: ``free((char *)ptr - PREFIX)``), is that
count's ACQUIRE or RELEASE. A plain ``strdup`` keeps no budget and is no event. Its own
file's helpers too (``ztrymalloc_usable_internal``): the interface's wrappers of them take
their event from them.

An allocator the program lets be replaced is its own heap, counted or not: a function whose
job is one call through a function pointer named for a memory function
(``uv__allocator.local_malloc(size)``, ``methods->free(p)``) ACQUIREs or RELEASEs units of
the record that holds those pointers."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import Candidate, ResourceGuess
from gigi.scan._parse import file_record
from gigi.scan._rules._code import (
    CHECKS,
    WRAPPER_LINES,
    bare,
    code_lines,
    found_by,
    from_params,
    record_at,
    returns_result_of,
    unconditional,
)
from gigi.scan._rules._found import Found, Site

# the C library's memory: what a call to each does to the heap
MEMORY_PRIMITIVES = {
    "malloc": ("ACQUIRE",),
    "calloc": ("ACQUIRE",),
    "aligned_alloc": ("ACQUIRE",),
    "valloc": ("ACQUIRE",),
    "memalign": ("ACQUIRE",),
    "strdup": ("ACQUIRE",),
    "strndup": ("ACQUIRE",),
    "realloc": ("ACQUIRE", "RELEASE"),
    "reallocf": ("ACQUIRE", "RELEASE"),
    "free": ("RELEASE",),
}


ATOMIC_COUNT = re.compile(r"atomic.*(add|sub|inc|dec)|fetch_(add|sub)|(add|sub)_fetch", re.I)


def allocators_with_a_budget(found: Found) -> Found:
    out = []
    guesses: dict[str, ResourceGuess] = {}
    for fn in found.functions.values():
        work = [c for c in fn.calls if not CHECKS.search(c.callee)]
        if code_lines(fn) > WRAPPER_LINES:
            continue
        prims = [c for c in work if _primitive(c)]
        if len(prims) != 1 or prims[0].loops:
            continue
        call = prims[0]
        # a count it keeps, or the record of the pointer it calls through (a replaceable heap)
        budget = _budget(fn) or (record_at(fn, call.callee, call.line) if call.indirect else "")
        if not budget:
            continue
        kinds = MEMORY_PRIMITIVES[_primitive(call)]
        gives = "RELEASE" in kinds and any(from_params(fn, a) for a in call.args[:1])
        takes = "ACQUIRE" in kinds and returns_result_of(fn, call.callee)
        for kind, fits in (("ACQUIRE", takes), ("RELEASE", gives)):
            if fits and (kind == "ACQUIRE" or unconditional(fn, call)):
                why = f"its job is {call.callee}, counted in {budget}"
                c = Candidate(fn.file, fn.name, call.line, kind, budget, "", "1", "heuristic", why)
                out.append(Site(c, True, f"verified: {why}"))
                if budget not in found.by_name and budget not in guesses:
                    reason = f"memory counted by {fn.name} as it calls {call.callee}"
                    guesses[budget] = found_by(budget, fn, "pool", "bytes", reason)
    return replace(
        found,
        resources=(*found.resources, *guesses.values()),
        sites=(*found.sites, *out),
    )


def _primitive(call) -> str:
    """The C library memory function CALL is: by its name, or for a call through a function
    pointer, by a word of the pointer's name (``local_malloc``, ``free_fn``); else ''."""
    if call.callee in MEMORY_PRIMITIVES:
        return call.callee
    if call.indirect:
        return next((w for w in call.callee.lower().split("_") if w in MEMORY_PRIMITIVES), "")
    return ""


def _budget(fn) -> str:
    """What FN counts memory in: a global or a member it adds to or takes from (``+=``,
    ``-=``, an atomic add or subtract), or "" when it counts nothing."""
    own = file_record(fn.file) + "."
    for a in fn.assigns:
        if a.op in ("+=", "-=") and a.target not in fn.locals and a.target:
            return a.target.removeprefix(own)  # a variable of its file's, by its name
    for c in fn.calls:
        if ATOMIC_COUNT.search(c.callee) and c.args:
            name = bare(c.args[0]).lstrip("&").strip()
            if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in fn.locals:
                return name
    return ""
