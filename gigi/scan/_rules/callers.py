"""A function performs the event of a call it makes when the unit is its own to take or to
give: it keeps what the call acquired (returns it, or stores it into one of the resource's
records: a chain of buffers built from the pool, a connection taken for an accepted
socket), or its last word on a unit it was handed or walked to is handing it to a call that
releases it (a janitor that closes each idle server it finds, a reset that hands back the
request's handler). Recorded at the call, on that unit.

Not where the function holds the unit inside it: it also takes units of the resource (a
lock around its work, a lookup and then a put) before giving one back, or gives back after
taking; a callee that moves units both ways (a state change) says neither. Not a unit it got
by a call of its own (``ts = lookup(...); ...; release(ts)``), a list's or a lock's address
(``&pool->head``), a unit no one holds (``if (p->nRef == 0) unpin(p)``), a structure whose
parts are handed over too (``zfree(mh->db); zfree(mh)``), a status code, nor what a callee
that returns nothing of its own (a lock taken on what it is handed) acquired. Not in a
program's main, nor in a function that creates or tears down (``pager_close``), but for one
that closes what its caller handed in (a connection closed is given back). A thin wrapper is
``wrappers``'s; this is what a longer function does with its callees' units."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import (
    IO,
    REFERENCE,
    ZERO,
    Candidate,
    _words,
    copies,
    lifecycle,
    no_object,
    records_of,
    reports_on,
    same_path,
)
from gigi.scan._rules._code import bare, handed_unit, returns_result_of, root
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.wrappers import released_at


def handed_through_calls(found: Found) -> Found:
    events: dict[str, dict[str, set[str]]] = {}  # function -> kind -> resources
    released: dict[str, dict[str, set[int]]] = {}  # function -> resource -> positions
    for c in (c for c, ok, _ in found.sites if ok):
        events.setdefault(c.function, {}).setdefault(c.kind, set()).add(c.resource)
        callee = found.functions.get((c.file, c.function))
        if c.kind == "RELEASE" and callee:
            released_at(released, callee, c.resource, c.line, c.object_expr)
    returns_own = {
        fn.name for fn in found.functions.values() if fn.return_type.split("|")[0].strip() != "void"
    }

    def only(callee: str, kind: str, other: str) -> set[str]:
        got = events.get(callee, {})
        return got.get(kind, set()) - got.get(other, set())

    added = []
    for fn in found.functions.values():
        short = fn.name.split("::")[-1]
        # a program's main, and a function named for measuring or reporting, which keeps
        # what it built to report (getMemoryOverheadData), move no units of their own
        if fn.name == "main" or reports_on(short):
            continue
        # a function that makes or tears down the resource moves none of its units; but
        # closing what the caller handed in (a connection) gives that unit back
        teardown = lifecycle(short)
        closing = "close" in _words(short)
        have = set(events.get(fn.name, {}))
        callees = [_named(c) for c in fn.calls]
        taken = {r for c in callees for r in only(c, "ACQUIRE", "RELEASE")}
        taken |= events.get(fn.name, {}).get("ACQUIRE", set())
        given = {r for c in callees for r in only(c, "RELEASE", "ACQUIRE")}
        params = {n for _, n in fn.params}
        got_by_call = _got_by_call(fn)
        for call in fn.calls:
            name = _named(call)
            got = events.get(name)
            if not got or call.indirect or name == fn.name:
                continue
            for kind in ("ACQUIRE", "RELEASE"):
                if kind in have:
                    continue
                for res in sorted(got.get(kind, ())):
                    if res in (taken if kind == "RELEASE" else given):
                        continue
                    if kind == "RELEASE":
                        obj = _last_handed(fn, call, released.get(name, {}).get(res, set()))
                        if not obj or root(obj) in got_by_call - params:
                            continue
                        if teardown and not (closing and obj in params):
                            continue
                        if _unheld(fn, call, obj) or _torn_down(fn, call, obj):
                            continue
                        why = f"its last word on {obj} is handing it to {call.callee}"
                    else:
                        if teardown or name not in returns_own:
                            continue
                        guess = found.by_name.get(res)
                        obj = _kept(fn, call, records_of(guess) if guess else {res})
                        if not obj:
                            continue
                        why = f"keeps ({obj}) what {call.callee} acquires"
                    have.add(kind)
                    c = Candidate(
                        fn.file, fn.name, call.line, kind, res, obj, "1", "heuristic", why
                    )
                    added.append(Site(c, True, f"verified: {why}"))
                    # and what it then reads, writes or copies through the unit it keeps, it
                    # does with it
                    filled = _filled(fn, call, obj) if kind == "ACQUIRE" else None
                    used = events.get(fn.name, {}).get("USE", set())
                    if filled is not None and res not in used:
                        events.setdefault(fn.name, {}).setdefault("USE", set()).add(res)
                        why = f"works through ({obj}), what it keeps, by {filled.callee}"
                        c = Candidate(
                            fn.file, fn.name, filled.line, "USE", res, obj, "1", "heuristic", why
                        )
                        added.append(Site(c, True, f"verified: {why}"))
                    break
    return replace(found, sites=(*found.sites, *added))


# the words of a function that writes a message (ngx_log_error_core, log_warn, perror)
MESSAGE_WORDS = {"log", "error", "err", "warn", "warning", "debug", "trace", "printf", "perror"}


def _tells(callee: str) -> bool:
    """Whether CALLEE writes a message rather than working on what it is handed.

    >>> _tells("ngx_log_error_core"), _tells("perror"), _tells("send_all")
    (True, True, False)
    """
    return bool(MESSAGE_WORDS & {w.lower() for w in _words(callee)})


def _filled(fn, call, obj: str):
    """The call after CALL that reads or writes through OBJ, what FN keeps of what CALL
    acquired, or copies data into it (``buffer_copy_string_len(c->mem, mem, len)``,
    ``send_all(c->fd, req, n)``); None when there is none."""
    return next(
        (
            c
            for c in fn.calls
            if c.line > call.line
            and (IO.search(c.callee) or copies(c.callee))
            and any(root(a) == root(obj) for a in c.args)
        ),
        None,
    )


def _named(call) -> str:
    """The function CALL calls: a method by its class, where the parse knows it (``cells.rm(i)``
    is ``llama_kv_cells::rm``), else its own name."""
    return f"{call.method_of}::{call.callee}" if call.method_of else call.callee


def _got_by_call(fn) -> set[str]:
    """The locals FN got by a call of its own: assigned its result (through a function
    pointer too: ``p = cfg.xFetch(...)``), or handed to it by address to be filled in
    (``rc = get(pager, 1, &page)``), and what it made of them (``pg = got->pExtra``)."""
    indirect = {c.line for c in fn.calls if c.indirect}
    got = {root(a.target) for a in fn.assigns if a.op == "=" and (a.calls or a.line in indirect)}
    got |= {
        root(x)
        for c in fn.calls
        for x in c.args
        if re.fullmatch(r"&\s*\w+", bare(x)) and root(x) in fn.locals
    }
    got |= {
        root(a.target)
        for a in fn.assigns
        if a.op == "=" and root(a.target) in fn.locals and set(a.sources) & got
    }
    return got


def _last_handed(fn, call, at: set[int]) -> str:
    """The unit CALL is handed at one of the positions AT, where it is one of FN's own (a
    parameter or a local, not a list's or a lock's address) and FN touches it no more on
    any path the call is on (a slot's number it may go on reading)."""
    obj = handed_unit(fn, call, at)
    if not obj or obj.startswith("&"):
        return ""
    # (a slot's number read after, new_head = i, touches no unit)
    scalar = obj in fn.locals and "*" not in fn.locals[obj] and "&" not in fn.locals[obj]
    if not scalar and any(
        n > call.line and same_path(path, call.path) and not _winds_up(fn, n, root(obj))
        for n, path in fn.uses_after.get(root(obj), [])
    ):
        return ""
    return obj


def _winds_up(fn, line: int, obj: str) -> bool:
    """Whether FN's use of OBJ at LINE, after handing it over, only reads what it needs to
    finish or marks it gone (``fd = c->fd; c->fd = -1; if (c->shared) return;``): no call
    works through OBJ (a message about it may be written: ``log_error(c->log, ...)``), no
    count or link of it moves, it is not returned."""
    if any(n == line and obj in {root(x) for x in fs} for n, fs, _ in fn.returns):
        return False
    if any(
        c.line == line
        and obj in {root(a) for a in c.args}
        and (obj in {bare(a) for a in c.args} or not _tells(c.callee))
        for c in fn.calls
    ):
        return False
    return all(
        a.target in fn.locals or a.op == "=" and not a.sources and root(a.target_base) == obj
        for a in fn.assigns
        if a.line == line
    )


def _unheld(fn, call, obj: str) -> bool:
    """Whether CALL runs only when no one holds OBJ (``if (p->nRef == 0) unpin(p)``): a unit
    whose holders all gave it back is put away, no hold is given back."""
    tested = {i for i, side in call.path if side == 0}
    return any(
        b.if_id in tested
        and b.side == 0
        and root(obj) in b.cond_locals
        and any(REFERENCE.search(m.split(".")[-1]) for m in b.cond_members)
        and ZERO.search(b.cond)
        for b in fn.branches
    )


def _torn_down(fn, call, obj: str) -> bool:
    """Whether FN hands CALL's callee parts of OBJ as well as OBJ itself (``zfree(mh->db);
    zfree(mh)``): a structure torn down, a job of its own, not a unit given back."""
    return any(
        c.callee == call.callee and c is not call and root(a) == root(obj) and bare(a) != obj
        for c in fn.calls
        for a in c.args
    )


def _kept(fn, call, mine: set[str]) -> str:
    """Where FN keeps what CALL returns: the local it returns, or the one it stores into a
    record of the resource (MINE) or into a record its caller handed in (a connection's
    buffer grown from the connection's pool), or that record's member itself; '' where it
    keeps nothing, or a status code."""
    into = [a for a in fn.assigns if call.callee in a.calls and a.op == "="]
    if not into:
        return ""
    obj = root(into[0].target)
    if obj in fn.locals and no_object(fn, obj):
        return ""
    returned = returns_result_of(fn, call.callee)
    typed = {n: t for t, n in fn.params}
    params = set(typed)
    stored = any(
        (a.target.split(".")[0] in mine or "." in a.target and a.target_base in params)
        and (a is into[0] or obj in a.sources)
        for a in fn.assigns
    )
    # or the call linked it into the record the caller handed in, that it was handed too
    # (c = chunkqueue_append_mem_chunk(cq, n): the chunk is cq's now), and FN works on it
    # (reads, writes or copies into it) and hands it nowhere else
    linked = (
        obj in fn.locals
        and "*" in fn.locals[obj]
        # (what it was handed, spelt in the call, or read by the value where a macro hid the
        # call's arguments: elts = table_push(t))
        and any("*" in typed.get(x, "") for x in [*map(root, call.args), *into[0].sources])
        and not any(
            c is not call
            and obj in map(root, c.args)
            and c.callee != call.callee
            and not IO.search(c.callee)
            and not copies(c.callee)
            for c in fn.calls
        )
    )
    return obj if returned or stored or linked else ""
