"""A thin wrapper performs its callee's event: a short function of the interface (not a
file's static helper, whose events are its callers') that makes one call beside checks
(a lock taken around it aside) and either returns what that call ACQUIREs (in the return
itself, or through a local it returns: ngx_pcalloc's ``p = ngx_palloc(...)``), or hands
it one of its own parameters to RELEASE or, for a lock (a resource held
exclusive or shared, or a lock API's lock), to take,
unconditionally or behind a test of its parameters alone (``if (p)``); where the call it
wraps waits before it acquires (``uv_sem_wait`` around ``sem_wait``), it waits too. Outside
any loop; proposed at the call, callers of callers too, up to ``ROUNDS`` deep; a function
the scan already gave an event of that kind keeps its own. The instrumenter records the
outermost of nested events of one kind and resource, so a wrapper's event and its
callee's are one."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import Candidate
from gigi.scan._rules._code import (
    CHECKS,
    GUARDS,
    WRAPPER_LINES,
    bare,
    returns_result_of,
    unconditional,
)
from gigi.scan._rules._found import Found, Site

ROUNDS = 3  # callers of callers of a wrapper, and no further


def through_wrappers(found: Found) -> Found:
    locks = found.locks | {g.name for g in found.resources if g.sharing in ("exclusive", "shared")}
    kinds_of: dict[str, set[str]] = {}
    events: dict[str, dict[str, set[str]]] = {}  # function -> kind -> resources
    for c, ok, _ in found.sites:
        if ok:
            kinds_of.setdefault(c.function, set()).add(c.kind)
            if c.kind in ("ACQUIRE", "RELEASE", "WAIT"):
                events.setdefault(c.function, {}).setdefault(c.kind, set()).add(c.resource)
    added = []
    for _ in range(ROUNDS):
        new: dict[str, dict[str, set[str]]] = {}
        for fn in found.functions.values():
            # the lock a wrapper may take around its call guards it (slabs_alloc)
            work = [
                c for c in fn.calls if not CHECKS.search(c.callee) and not GUARDS.search(c.callee)
            ]
            if fn.internal:
                continue
            # a longer function only hands out the object a call it returns acquired
            # (do_item_alloc returns what do_item_alloc_pull took, after setting it up): a
            # status code it passes on (rc = lock(...); ...; return rc) hands out nothing
            thin = fn.end_line - fn.line <= WRAPPER_LINES and len(work) <= 2
            if not thin and "*" not in fn.return_type:
                continue
            params = {n for _, n in fn.params if n}
            for call in work:
                got = events.get(call.callee)
                if not got or call.indirect or call.loops or call.callee == fn.name:
                    continue
                acquired: set[str] = set()  # what this call acquires for the wrapper
                for kind, resources in sorted(got.items(), key=lambda kr: kr[0] == "WAIT"):
                    if kind in kinds_of.get(fn.name, ()):
                        continue
                    if kind == "WAIT":  # it waits where it acquires: in the call it wraps
                        resources = resources & acquired
                        fits, how = bool(resources), f"waits in {call.callee}, which it wraps"
                    passes = any(bare(a) in params for a in call.args)
                    if kind == "WAIT":
                        pass
                    elif not thin and kind != "ACQUIRE":
                        continue
                    elif kind == "ACQUIRE" and passes and resources <= locks and thin:
                        fits = unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which locks it"
                    elif kind == "ACQUIRE":
                        fits = returns_result_of(fn, call.callee)
                        how = f"returns what {call.callee} acquires"
                    elif sum(c.callee == call.callee for c in work) > 1:
                        fits = False  # giving back twice: a job of its own (a whole tree)
                    else:
                        fits = passes and unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which releases it"
                    if not fits:
                        continue
                    if kind == "ACQUIRE":
                        acquired |= resources
                    kinds_of.setdefault(fn.name, set()).add(kind)
                    for res in sorted(resources):
                        new.setdefault(fn.name, {}).setdefault(kind, set()).add(res)
                        c = Candidate(
                            fn.file,
                            fn.name,
                            call.line,
                            kind,
                            res,
                            "",
                            "1",
                            "heuristic",
                            f"a thin wrapper: it {how}",
                        )
                        added.append(Site(c, True, f"verified: a thin wrapper that {how}"))
        if not new:
            break
        for name, kinds in new.items():
            for kind, resources in kinds.items():
                events.setdefault(name, {}).setdefault(kind, set()).update(resources)
    return replace(found, sites=(*found.sites, *added))
