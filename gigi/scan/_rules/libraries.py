"""A pool a library keeps for the code (APR's resource lists, a connection pool of a client
library) is taken from and given back through calls the scan cannot read: the library is not
in the tree. Their names say what they do (``apr_reslist_acquire(cp->res, &conn)``,
``apr_reslist_release(cp->res, conn)``): a function that keeps what such a call hands out
ACQUIREs a unit of the pool its first argument names, and one that hands its own unit (a
parameter, or a local) to the call that gives back RELEASEs it. Lock calls are the lock
APIs' (``locks``); a call in a loop is a walk, and is left to the rules that read loops."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import Candidate, _words, by_address, names_a_lock_call
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.locks import lock_name

# the last word of a library call's name that says it takes a unit, or gives one back
TAKES = {"acquire", "checkout", "borrow"}
GIVES = {"release", "checkin"}


def pools_of_libraries(found: Found) -> Found:
    defined = {name.split("::")[-1] for _, name in found.functions}
    have = {(c.function, c.kind) for c, ok, _ in found.sites if ok}  # the events found so far
    guesses = {}
    out = []
    for fn in found.functions.values():
        for call in fn.calls:
            words = _words(call.callee)
            if call.callee in defined or call.indirect or call.loops or not words:
                continue
            kind = "ACQUIRE" if words[-1] in TAKES else "RELEASE" if words[-1] in GIVES else ""
            if not kind or names_a_lock_call(call.callee) or (fn.name, kind) in have:
                continue
            pool = lock_name(fn, call.args[0]) if call.args else ""
            if not pool or "." not in pool:
                continue  # a pool a record keeps names it; anything else says too little
            # what it is handed or hands out through, without casts: (void **)&conn is conn
            handed = next(iter(call.args[1:2]), "")
            unit = re.sub(r"\(\s*\w[\w\s*]*\*[\s*]*\)|[&*()\s]", "", handed)
            if kind == "ACQUIRE":
                # handed out through an out-parameter (&conn, or one handed in: out), or
                # returned
                kept = "&" in handed or unit in by_address(fn)
                if not (kept or any(call.callee in a.calls for a in fn.assigns)):
                    continue
            elif unit not in {n for _, n in fn.params} | set(fn.locals):
                continue
            elif unit in fn.locals:
                unit = ""  # a local made from a parameter: the release says which, by its line
            if pool not in found.by_name and pool not in guesses:
                guesses[pool] = found_by(
                    pool, fn, "pool", "", f"a library's pool, taken and given back by {call.callee}"
                )
            why = f"{call.callee} {'hands out' if kind == 'ACQUIRE' else 'takes back'} a unit"
            why += f" of {pool}, a pool the library keeps"
            c = Candidate(fn.file, fn.name, call.line, kind, pool, unit, "1", "heuristic", why)
            out.append(Site(c, True, f"verified: {why}"))
            have.add((fn.name, kind))
    return replace(
        found, resources=(*found.resources, *guesses.values()), sites=(*found.sites, *out)
    )
