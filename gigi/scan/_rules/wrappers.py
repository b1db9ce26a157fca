"""A thin wrapper performs its callee's event: a short function that makes one call beside
checks and reports (a lock taken around it aside) and either returns what that call ACQUIREs
(in the return itself, or through a local it returns: ngx_pcalloc's ``p = ngx_palloc(...)``;
or stored through its parameter: HAProxy's b_alloc, ``buf->area = area``),
or hands it one of its own parameters to RELEASE or, for a lock (a resource held exclusive or
shared, or a lock API's lock) or a callee that ACQUIREs what it is handed (a job it queues),
to take, unconditionally or behind a test of its parameters alone (``if (p)``); where the
call it wraps waits before it acquires (``uv_sem_wait`` around ``sem_wait``), it waits too.
A longer function that ends by handing its parameter to be released, touching it no more,
releases it. Outside any loop, but for one that gives back each unit it walks (every
connection of a list handed, on every turn, to the function that gives one back, or each
one a test of its own state picks; recorded at the call, on that turn's unit; never a
program's main or a driver that takes units of the resource too), and one that takes a
unit on every turn and links it into the chain it returns; a fast path that returns what
it had at hand before the call that acquires makes that call the slow way, a WAIT.
Proposed at the call, callers of callers too, to a fixed point; a function the scan
already gave an event of that kind keeps its own.

A file's static helper carries its callee's event up to the functions that call it (so
memcached's redispatch_conn takes the queue item that cache_alloc hands to cqi_new and
notify_worker_fd, both static), and keeps a site of its own only where some caller does
not perform the same event (``interface.covered_by_callers``, as for any static helper;
a call an assertion makes calls for nothing). The instrumenter records one of nested events
of one kind and resource, the outer one's where it fires, so a wrapper's event and its
callee's are one."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import (
    Candidate,
    lifecycle,
    record_pattern,
    records_of,
    reports_on,
    sleeps,
    through_pointer,
)
from gigi.scan._rules._code import (
    C_SCALARS,
    CHECKS,
    GUARDS,
    WRAPPER_LINES,
    bare,
    from_params,
    handed_param,
    handed_unit,
    returns_result_of,
    root,
    stores_result_of,
    unconditional,
)
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.interface import covered_by_callers

ROUNDS = 8  # wrappers of wrappers, as deep as the code nests them (a fixed point, bounded)


def through_wrappers(found: Found) -> Found:
    locks = found.locks | {g.name for g in found.resources if g.sharing in ("exclusive", "shared")}
    kinds_of: dict[str, set[str]] = {}
    events: dict[str, dict[str, set[str]]] = {}  # function -> kind -> resources
    # function -> the resources it ACQUIREs by taking what it is handed (a job queued, a
    # reference taken on the object passed in): like a lock, not something it returns
    handed: dict[str, set[str]] = {}
    # function -> resource -> the positions of the parameters it RELEASEs: a wrapper hands
    # one of its own there to release it
    released: dict[str, dict[str, set[int]]] = {}
    used: dict[str, dict[str, set[int]]] = {}  # and those it USEs
    for c, ok, _ in found.sites:
        if ok:
            kinds_of.setdefault(c.function, set()).add(c.kind)
            if c.kind in ("ACQUIRE", "RELEASE", "WAIT", "USE"):
                events.setdefault(c.function, {}).setdefault(c.kind, set()).add(c.resource)
            callee = found.functions.get((c.file, c.function))
            params = callee.params if callee else []
            if c.kind == "ACQUIRE" and c.object_expr in {n for _, n in params}:
                handed.setdefault(c.function, set()).add(c.resource)
            if c.kind == "RELEASE" and callee:
                released_at(released, callee, c.resource, c.line, c.object_expr)
            if c.kind == "USE" and callee:  # the positions of the parameters it uses
                at = {i for i, (_, n) in enumerate(callee.params) if n and n == c.object_expr}
                used.setdefault(c.function, {}).setdefault(c.resource, set()).update(at)
    # a C++ method by its own name, where no other function has that name
    named: dict[str, list[str]] = {}
    for fn in found.functions.values():
        named.setdefault(fn.name.split("::")[-1], []).append(fn.name)
    methods = {s: full[0] for s, full in named.items() if len(full) == 1 and s != full[0]}
    added = []
    for _ in range(ROUNDS):
        new: dict[str, dict[str, set[str]]] = {}
        for fn in found.functions.values():
            # a function named for measuring or reporting (getMemoryOverheadData) hands
            # out what it built to report, not units of the resource (it may read them)
            reporting = reports_on(fn.name.split("::")[-1])
            # the lock a wrapper may take around its call guards it (slabs_alloc), and a
            # sleep while it waits for what it hands on is no work of its own
            reports = _reports(fn)
            work = [
                c
                for c in fn.calls
                if not CHECKS.search(c.callee)
                and not GUARDS.search(c.callee)
                and not (sleeps(c.callee) and c.loops)
                and c.callee not in reports
            ]
            # a longer function only hands out the object a call it returns acquired
            # (do_item_alloc returns what do_item_alloc_pull took, after setting it up): a
            # status code it passes on (rc = lock(...); ...; return rc) hands out nothing
            thin = fn.end_line - fn.line <= WRAPPER_LINES and len(work) <= 2
            # a longer one that returns no object may still end by releasing its parameter;
            # one that returns a handle (PostgreSQL's Buffer, a number naming a buffer)
            # hands out what the call it returns it from acquired
            handle = not thin and "*" not in fn.return_type and _handle_type(fn.return_type)
            releases_only = not thin and "*" not in fn.return_type and not handle
            if releases_only and fn.end_line - fn.line > LONGER_LINES:
                continue
            params = {n for _, n in fn.params if n}
            for call in work:
                # a method, by its class where the parse knows it (cells.rm(i):
                # llama_kv_cells::rm), else by its own name: the one function so named
                qualified = f"{call.method_of}::{call.callee}" if call.method_of else ""
                name = (
                    qualified
                    if qualified in events
                    else call.callee
                    if call.callee in events
                    else methods.get(call.callee, "")
                )
                got = events.get(name)
                if not got or call.indirect or name == fn.name:
                    continue
                looped = call.loops > 0  # then only a loop that gives back what it walks
                acquired: set[str] = set()  # what this call acquires for the wrapper
                for kind, resources in sorted(got.items(), key=lambda kr: kr[0] == "WAIT"):
                    if kind in kinds_of.get(fn.name, ()) or reporting and kind != "USE":
                        continue
                    # (or a loop that takes a unit on every turn and links it into the
                    # chain it hands out)
                    chained = looped and kind in ("ACQUIRE", "WAIT") and _chains(fn, call)
                    if (releases_only or looped and not chained) and kind != "RELEASE":
                        continue
                    if handle and kind == "RELEASE" and fn.end_line - fn.line > LONGER_LINES:
                        continue
                    if kind == "WAIT":  # it waits where it acquires: in the call it wraps
                        # (a thin wrapper's job is the call; a longer function that also
                        # sets up what it got does work of its own around the wait)
                        resources = resources & acquired if thin else set()
                        fits, how = bool(resources), f"waits in {call.callee}, which it wraps"
                    passes = any(bare(a) in params for a in call.args)
                    if kind == "WAIT":
                        pass
                    elif chained and kind == "ACQUIRE":
                        fits, how = True, f"links what {call.callee} acquires into {chained}"
                    elif looped:
                        resources = {
                            r
                            for r in resources
                            if _gives_back_in_loop(fn, call, released[name][r], events, r)
                        }
                        fits = bool(resources)
                        how = f"gives back each unit it walks, handing it to {call.callee}"
                    elif not thin and kind == "RELEASE":
                        # a longer function that ends by handing its parameter to be
                        # released (a kill that unlinks an entry, then frees it) releases it
                        fits, how = _ends_releasing(fn, call, work, released[name], resources)
                        resources = {r for r in resources if fits}
                    elif not thin and kind != "ACQUIRE":
                        continue
                    elif kind == "ACQUIRE" and passes and resources <= locks and thin:
                        # not a mode that gives it back (LockBuffer(buf, BUFFER_LOCK_UNLOCK))
                        fits = unconditional(fn, call) and not any("UNLOCK" in a for a in call.args)
                        how = f"hands its parameter to {call.callee}, which locks it"
                    elif (
                        kind == "ACQUIRE"
                        # its parameter, or what its parameter holds (c->thread; not a
                        # list's address, &slab->freelist, which holds units, not one)
                        and (passes or _hands_part(call, params))
                        and thin
                        and resources <= handed.get(name, set())
                    ):
                        fits = unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which takes it"
                        if fits:  # and so takes what it is handed, for its own callers
                            handed.setdefault(fn.name, set()).update(resources)
                    elif kind == "ACQUIRE":
                        fits = returns_result_of(fn, call.callee)
                        how = f"returns what {call.callee} acquires"
                        if not fits and (out := stores_result_of(fn, call.callee)):
                            fits = True
                            how = f"hands out through {out} what {call.callee} acquires"
                    elif kind == "USE":
                        # what it hands over is used in the call, as its callers see it (a
                        # file's own helper is no interface: its callers' uses say it)
                        # (not one that hands out an object of the resource, or what the
                        # call found: a lookup; nor one that makes or tears down what it
                        # hands over)
                        objs = {handed_unit(fn, call, used[name][r]) for r in resources} & params
                        fits = (
                            bool(objs)
                            and unconditional(fn, call)
                            and not lifecycle(fn.name.split("::")[-1])
                            and not ("*" in fn.return_type and returns_result_of(fn, call.callee))
                            and not any(
                                record_pattern(rec).search(fn.return_type)
                                for r in resources
                                for rec in records_of(found.by_name[r])
                            )
                        )
                        how = f"hands its parameter to {call.callee}, which uses it"
                    elif sum(c.callee == call.callee for c in work) > 1:
                        fits = False  # giving back twice: a job of its own (a whole tree)
                    else:
                        resources = {
                            r for r in resources if handed_param(fn, call, released[name][r])
                        }
                        fits = bool(resources) and unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which releases it"
                    if not fits:
                        continue
                    if kind == "ACQUIRE":
                        acquired |= resources
                        fast = _fast_path_before(fn, call)
                        slept = _sleeping_loop(fn, call)
                        if (fast or slept) and "WAIT" not in kinds_of.get(fn.name, ()):
                            # what it had at hand came first, and the call is the slow way;
                            # or it slept until what it hands over could be had
                            if fast:
                                at = call.line
                                why = (
                                    f"when its fast path ({fast}) had nothing, calls {call.callee}"
                                )
                            else:
                                at = slept.line
                                why = f"sleeps until {slept.cond_calls[0]} gives something, then"
                                why += " hands it on"
                            kinds_of.setdefault(fn.name, set()).add("WAIT")
                            for res in sorted(resources):
                                new.setdefault(fn.name, {}).setdefault("WAIT", set()).add(res)
                                c = Candidate(
                                    fn.file, fn.name, at, "WAIT", res, "", "1", "heuristic", why,
                                )  # fmt: skip
                                added.append(Site(c, True, f"verified: {why}"))
                    kinds_of.setdefault(fn.name, set()).add(kind)
                    for res in sorted(resources):
                        new.setdefault(fn.name, {}).setdefault(kind, set()).add(res)
                        obj = ""
                        if kind == "RELEASE" and looped:  # the unit of this turn
                            obj = handed_unit(fn, call, released[name][res])
                            released.setdefault(fn.name, {}).setdefault(res, set())
                        elif kind == "RELEASE":  # the parameter it hands over to be released
                            obj = handed_param(fn, call, released[name][res])
                            released_at(released, fn, res, call.line, obj)
                        elif kind == "USE":  # the parameter it hands over to be used
                            obj = handed_unit(fn, call, used[name][res])
                            used.setdefault(fn.name, {}).setdefault(res, set()).update(
                                i for i, (_, n) in enumerate(fn.params) if n == obj
                            )
                        c = Candidate(
                            fn.file,
                            fn.name,
                            call.line,
                            kind,
                            res,
                            obj,
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
    # a file's static helper whose every caller wraps it in turn is part of their event
    kept = covered_by_callers(found, added, (*found.sites, *added))
    return replace(found, sites=(*found.sites, *kept))


# what a function that reports an error or a warning is named for
REPORTED = re.compile(r"error|warn|reply|report|fail", re.I)


def _hands_part(call, params: set[str]) -> bool:
    """Whether CALL is handed something one of PARAMS holds (``notify_worker_fd(c->thread,
    ...)``), not by its address."""
    return any(root(a) in params and not bare(a).startswith("&") for a in call.args)


def _reports(fn) -> set[str]:
    """The callees FN reports through: named for an error or a reply, and handed a message
    as a string literal by some call of FN's (``addReplyError(c, "not a float")``); a
    function named for an error that is handed none does work of its own (closing what
    failed)."""
    return {
        c.callee
        for c in fn.calls
        if REPORTED.search(c.callee) and any(a.strip().startswith('"') for a in c.args)
    }


def _handle_type(return_type: str) -> bool:
    """Whether a function's return type, not a pointer, names a handle to an object (a
    typedef of its own: ``Buffer | int``) rather than a number, a truth or a status
    (``int``, ``size_t``, ``apr_status_t``, ``ngx_int_t``)."""
    declared = return_type.split("|")[0].strip()
    words = set(re.findall(r"\w+", declared)) - {"const", "static", "inline", "extern"}
    return bool(words) and not (
        words & C_SCALARS
        or re.search(r"status|err|result|^rc$|bool|int|size|ssize|off_t|time|long", declared, re.I)
    )


def _fast_path_before(fn, call) -> str:
    """The condition of FN's fast path ahead of CALL, or '': a branch before it, that CALL
    is not in, taken on the state of something FN was handed (``if (c && c->type ==
    MEM_CHUNK)``, ``c = cq->last``) and returning what it found there, not nothing. A
    return from a search's loop, or of what a search loop found, is a lookup's hit, and the
    call after it makes what was not there: the miss, not a shortage."""
    inside = {b for b, _ in call.path}
    params = {n for _, n in fn.params}
    in_loops = [a for a in fn.assigns if any(lp.line <= a.line <= lp.end_line for lp in fn.loops)]
    for b in fn.branches:
        if b.side or b.end_line >= call.line or b.if_id in inside:
            continue
        if any(lp.line <= b.line <= lp.end_line for lp in fn.loops):
            continue
        found = [
            text
            for line, srcs, text in fn.returns
            if b.line <= line <= b.end_line
            and srcs
            and not re.search(r"\b(0|NULL|nullptr|false|-\s*1)\b", text)
            # handing back what the caller handed in: it had one already, no shortage
            and not set(srcs) <= params
        ]
        # what a search loop found (p = p->next until the key matches) is a lookup's hit
        searched = {a.target for a in in_loops if a.line < b.line}
        tested = [x for x in b.cond_locals if from_params(fn, x)]
        if found and tested and not set(tested) & searched:
            return b.cond
    return ""


def _chains(fn, call) -> str:
    """The chain FN hands out of what CALL, in a loop, acquires on every turn, or '': its
    result linked through a pointer or into a member (``*prev = block``, ``tail->next =
    block``) of a list that FN returns, a local of the same type as the unit
    (dnsmasq's blockdata_alloc_real builds a chain of blocks, one new_block() per turn)."""
    got = {a.target for a in fn.assigns if call.callee in a.calls and a.target in fn.locals}
    linked = any(
        set(a.sources) & got and (through_pointer(a.target) or "." in a.target) for a in fn.assigns
    )
    if not linked:
        return ""
    unit = {fn.locals[x] for x in got}
    returned = {x for _, srcs, _ in fn.returns for x in srcs if x in fn.locals}
    return next((x for x in sorted(returned - got) if fn.locals[x] in unit), "")


def _sleeping_loop(fn, call):
    """A loop of FN ahead of CALL that retries the call of its condition and does nothing
    else but sleep until it gives something (``while ((item = cqi_new(q)) == NULL)
    usleep(10000);``), or spin (a body with no call and no assignment; a sleep the parse
    could not resolve leaves it so); None where there is none."""

    def idle(lp) -> bool:
        if lp.body_calls:
            return all(sleeps(x) for x in lp.body_calls)
        return not any(lp.line < a.line <= lp.end_line for a in fn.assigns)

    return next(
        (
            lp
            for lp in fn.loops
            if lp.end_line < call.line and lp.form in ("while", "do") and lp.cond_calls and idle(lp)
        ),
        None,
    )


LONGER_LINES = 60  # a function that ends by releasing its parameter, and no longer


def _ends_releasing(fn, call, work, at: dict, resources: set[str]) -> tuple[bool, str]:
    """Whether FN's last word on a parameter is CALL releasing it: handed over once,
    unconditionally, and not touched after; and how, in words."""
    if fn.end_line - fn.line > LONGER_LINES or sum(c.callee == call.callee for c in work) > 1:
        return False, ""
    objs = {handed_param(fn, call, at[r]) for r in resources} - {""}
    if len(objs) != 1 or not unconditional(fn, call):
        return False, ""
    obj = objs.pop()
    if any(line > call.line for line, _ in fn.uses_after.get(obj, [])):
        return False, ""
    return True, f"ends by handing {obj} to {call.callee}, which releases it"


def _gives_back_in_loop(fn, call, at: set[int], events: dict, resource: str) -> bool:
    """Whether FN gives back, in a loop, each unit of RESOURCE it walks: a function of no
    more than LONGER_LINES, whose loop's work is CALL handing the unit it holds
    (``disconnect_server(server)`` for each server of a list, ``cells.rm(i)`` for each
    cell; AT: the positions the callee releases) to be released, on every turn. Not a
    program's main, nor a function that also takes units of the resource: a driver that
    gets and puts back, whose own calls are the events."""
    if fn.end_line - fn.line > LONGER_LINES or fn.name == "main":
        return False
    if any(resource in events.get(c.callee, {}).get("ACQUIRE", ()) for c in fn.calls):
        return False
    inner = [lp for lp in fn.loops if lp.line <= call.line <= lp.end_line]
    unit = handed_unit(fn, call, at)
    if not inner or not (unconditional(fn, call) or _picks(fn, call, unit)):
        return False
    loop = max(inner, key=lambda lp: lp.line)
    busy = [c for c in loop.body_calls if not CHECKS.search(c) and not GUARDS.search(c)]
    if len(set(busy)) > 3:
        return False  # the loop does work of its own
    return bool(unit)


def _picks(fn, call, unit: str) -> bool:
    """Whether the only tests CALL sits behind pick which units to hand over by their own
    state (``if (bufHdr->tag.rnode.dbNode == dbid) InvalidateBuffer(bufHdr)``): a test of
    UNIT, with no call, is a filter of the walk, not a decision about another's state."""
    on_path = set(call.path)
    return bool(unit) and all(
        unit in b.cond_locals and not b.cond_calls
        for b in fn.branches
        if (b.if_id, b.side) in on_path
    )


def released_at(released: dict, fn, resource: str, line: int, obj: str):
    """Note where FN takes the object it RELEASEs of RESOURCE at LINE: the position of the
    parameter OBJ; where OBJ is not named, of the parameters the release at LINE works on
    (``sem->value++``, ``free(p)``), else of any pointer but the resource itself
    (``pcache1Free(void *p)``); nowhere when it is something of the function's own (a page
    it evicts)."""
    names = [n for _, n in fn.params]
    if obj:
        at = {i for i, n in enumerate(names) if n == obj}
    else:
        here = [a for a in fn.assigns if a.line == line]
        touched = {root(a.target_base) for a in here} | {x for a in here for x in a.sources}
        touched |= {bare(x) for c in fn.calls if c.line == line for x in c.args}
        # and the parameters those locals were made from: it = (item *)ptr
        touched |= {
            x
            for a in fn.assigns
            if a.target in touched and a.target in fn.locals
            for x in a.sources
        }
        at = {i for i, n in enumerate(names) if n and n in touched}
        if not at:
            # a count moved on the pool's own record (free_n++) beside the parameter the
            # function links into a record (pool->free = c): that parameter is the unit
            at = {
                i
                for i, (t, n) in enumerate(fn.params)
                if n and "*" in t and any(n in a.sources and "." in a.target for a in fn.assigns)
            }
        if not at and not touched - {""}:
            holder = record_pattern(resource)
            at = {i for i, (t, _) in enumerate(fn.params) if "*" in t and not holder.search(t)}
    released.setdefault(fn.name, {}).setdefault(resource, set()).update(at)
