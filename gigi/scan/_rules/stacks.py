"""A free list kept in a global: a file's ``static request_st *reqpool`` that one function pops
(``r = reqpool; reqpool = r->next``) and another pushes back (``r->next = reqpool; reqpool =
r``), linked through a member of the objects themselves, whatever its name (a pointer reused as
the link: ``reqpool = (request_st *)r->con``). The pop is its ACQUIRE (the object it took,
recorded where it is returned: on the slow path too), the push its RELEASE (the object it was
handed); where the pop finds the list empty and the function makes a new object instead (``else
r = calloc(...)``, ``else c = chunk_init_sz(sz)``, or a later ``return chunk_init_sz(sz)``),
that is the slow path: its WAIT. Both must be seen, in the scanned code, for the global to be a
free list: a global set to an object and read back is a cache of one, not a pool. A pop inside
a loop drains the list (the pool torn down), and is no event."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gigi.scan._offline import Candidate, ResourceGuess, locals_read
from gigi.scan._parse import Assign, Function, file_record
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site


@dataclass(frozen=True)
class Move:
    fn: Function
    kind: str  # ACQUIRE (popped) or RELEASE (pushed)
    line: int
    obj: str  # the local or parameter that holds the object moved
    path: tuple  # the branch the move is on


def global_free_lists(found: Found) -> Found:
    moves: dict[str, list[Move]] = {}
    for fn in found.functions.values():
        for head, move in _moves(fn):
            moves.setdefault(head, []).append(move)
    out: list[Site] = []
    guesses: dict[str, ResourceGuess] = {}
    for path, ms in sorted(moves.items()):
        if {m.kind for m in ms} != {"ACQUIRE", "RELEASE"}:
            continue
        # the list is its file's record's, where that record is a resource; else its own
        record = path.split(".", 1)[0] if "." in path else ""
        head = record if record in found.by_name else _name(path)
        name = _name(path)
        for m in ms:
            why = (
                f"pops {m.obj} off the free list {name}"
                if m.kind == "ACQUIRE"
                else f"pushes {m.obj} back onto the free list {name}"
            )
            out.append(_site(m.fn, m.kind, m.line, head, m.obj, why))
            slow = _made_instead(m) if m.kind == "ACQUIRE" else None
            if slow is not None:
                why = f"{name} is empty: a new object is made instead"
                out.append(_site(m.fn, "WAIT", slow, head, m.obj, why))
        if head not in found.by_name:
            unit = _record(ms[0].fn, ms[0].obj)
            guesses[head] = found_by(
                head, ms[0].fn, "pool", f"{unit}s" if unit else "units", "a free list in a global"
            )
    return replace(
        found,
        resources=(*found.resources, *guesses.values()),
        sites=(*found.sites, *out),
    )


def _site(fn: Function, kind: str, line: int, head: str, obj: str, why: str) -> Site:
    c = Candidate(fn.file, fn.name, line, kind, head, obj, "1", "heuristic", why)
    return Site(c, True, f"verified: {why}")


def _globals(fn: Function) -> set[str]:
    """What FN assigns that is neither a local, a parameter nor a member: its globals (its own
    file's as members of the file's record, others' by name)."""
    mine = set(fn.locals) | {n for _, n in fn.params}
    own = file_record(fn.file) + "."
    return {
        a.target
        for a in fn.assigns
        if a.op == "="
        and a.target
        and ("." not in a.target and a.target not in mine or a.target.startswith(own))
    }


def _name(head: str) -> str:
    """A global by its name (``reqpool``, not ``reqpool_c.reqpool``)."""
    return head.rsplit(".", 1)[-1]


def _names(a: Assign, name: str) -> bool:
    """Whether the value A assigns reads NAME (globals are not among its sources)."""
    value = a.text.split("=", 1)[-1]
    return re.search(rf"\b{re.escape(name)}\b", value) is not None


def _moves(fn: Function):
    """(global, Move) for each pop and push FN makes on a global list head."""
    looped = [(lp.line, lp.end_line) for lp in fn.loops]
    params = {n for _, n in fn.params}
    heads = _globals(fn)
    read = locals_read(fn)
    for head in heads:
        sets = [a for a in fn.assigns if a.target == head and a.op == "="]
        name = _name(head)
        for a in sets:
            if any(lo <= a.line <= hi for lo, hi in looped):
                continue  # draining the list, or walking it
            linked = [s for s in a.sources if "." in s and s not in heads]
            objs = [s for s in a.sources if "." not in s]
            # pop: head = x->link, where x was read from the head
            if linked and len(objs) == 1:
                x = objs[0]
                took = any(
                    b.target == x and b.line < a.line and _names(b, name) for b in fn.assigns
                )
                if took:
                    # where it is handed out, on every path (the slow one too), if it is
                    returned = [line for line, srcs, _ in fn.returns if srcs == [x]]
                    at = returned[-1] if returned else a.line
                    yield head, Move(fn, "ACQUIRE", at, x, a.path)
            # push: x->link = head; head = x, x handed in; or a chain of them, linked through
            # its last (``for (tmp = x; tmp->next; ...) ...; tmp->next = head; head = x``)
            elif not linked and len(objs) == 1 and objs[0] in params:
                x = objs[0]
                ends = {x} | {local for local, srcs in read.items() if x in srcs}
                if any(
                    b.target_base in ends
                    and "." in b.target
                    and b.line < a.line
                    and _names(b, name)
                    for b in fn.assigns
                ):
                    yield head, Move(fn, "RELEASE", a.line, x, a.path)


def _made_instead(m: Move) -> int | None:
    """Where the function makes a new object when the pop found the list empty, or None:
    the other branch of the pop's test making one into the same local (``else r =
    calloc(...)``), or, when the pop returns from inside its branch, a later return of what a
    call makes (``return chunk_init_sz(sz)``)."""
    if not m.path:
        return None
    test, branch = m.path[-1]
    other = (*m.path[:-1], (test, 1 - branch))
    for a in m.fn.assigns:
        if a.target == m.obj and a.path[: len(other)] == other and a.calls:
            return a.line  # what a call makes or finds elsewhere: chunk_init_sz(), calloc()
    if m.line not in {line for line, _, _ in m.fn.returns}:
        return None
    made = [
        line
        for line, _, text in m.fn.returns
        if line > m.line and re.match(r"return\s*\(?\s*[A-Za-z_]\w*\s*\(", text)
    ]
    return made[0] if made else None


def _record(fn: Function, local: str) -> str:
    """The record a local or parameter points to, by its type (``request_st *``)."""
    t = fn.locals.get(local) or next((t for t, n in fn.params if n == local), "")
    m = re.match(r"\s*(?:const\s+|struct\s+)*([A-Za-z_]\w*)", t.split("|")[0])
    return m.group(1) if m else ""
