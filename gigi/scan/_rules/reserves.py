"""A function that moves a shared position forward by an amount its caller names, under a
lock it takes, and hands the caller where the position was, reserves that much of what the
position runs over: a log's insert position (``start = Insert->CurrBytePos; end = start +
size; Insert->CurrBytePos = end; *StartPos = start``, under the spinlock that guards it).
That is an ACQUIRE of the amount, on the resource the position's record belongs to (or on
the record itself, a log of its own). (A position moved by a fetch-and-add is a count
stepped atomically, which the recall reads already.)

A cursor its owner moves over its own input (a parser's ``p->pos += n``) is no reservation:
the position must be shared, moved under a lock the function takes; and a counter moved by
one (an id handed out) moves by no amount the caller names."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import (
    Candidate,
    ResourceGuess,
    lifecycle,
    locals_read,
    lock_calls,
    made_from_params,
)
from gigi.scan._parse import Function
from gigi.scan._rules._found import Found, Site


def reservations(found: Found) -> Found:
    taken = {(c.file, c.function) for c, ok, _ in found.sites if ok and c.kind == "ACQUIRE"}
    guesses: dict[str, ResourceGuess] = {}
    out = []
    for key, fn in sorted(found.functions.items()):
        if key in taken or lifecycle(fn.name.split("::")[-1]):
            continue
        moved = _reserves(fn)
        if moved is None:
            continue
        line, position, amount, how = moved
        record = position.split(".", 1)[0]
        owners = found.owners.get(record, [])
        resource = owners[0] if owners else record
        if resource not in found.by_name and resource not in guesses:
            why = f"a position reserved from: {fn.name} moves {position} past what it hands out"
            guesses[resource] = ResourceGuess(
                resource, fn.file, fn.line, "log", "bytes", [], 1.0, [why]
            )
        why = f"moves {position} forward by {amount} ({how}) and hands out where it was"
        c = Candidate(fn.file, fn.name, line, "ACQUIRE", resource, "", amount, "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))
    return replace(
        found,
        resources=(*found.resources, *guesses.values()),
        sites=(*found.sites, *out),
    )


def _reserves(fn: Function) -> tuple[int, str, str, str] | None:
    """(line, position, amount, how) where FN reserves: a record's member moved forward,
    under a lock FN takes, by an amount made from FN's parameters, from a value read from
    the member itself, with the old value handed to the caller; None when it does not."""
    params = made_from_params(fn)
    if not params:
        return None
    read = locals_read(fn)
    closure = _closure(read)
    handed = _handed_out(fn, closure)
    locks = lock_calls(fn, unlock=False)
    for a in fn.assigns:
        if "." not in a.target or a.target.startswith("*"):
            continue
        if not any(x.line < a.line for x in locks):
            continue  # nothing shared about it: a cursor of the function's own
        if a.op == "+=":
            amount = a.text.split("+=", 1)[1].strip() if "+=" in a.text else ""  # not ++
            # the old value, read before the move, handed out
            olds = {x for x in handed if a.target in closure.get(x, ())}
        elif a.op == "=" and len(a.sources) == 1 and a.sources[0] in read:
            end = a.sources[0]
            sums = [b for b in fn.assigns if b.target == end and "+" in b.text.partition("=")[2]]
            if not sums or a.target not in closure.get(end, ()):
                continue
            amount = " + ".join(s for s in sums[0].sources if s in params) or ""
            olds = {x for x in handed if a.target in closure.get(x, ()) and x != end}
        else:
            continue
        if amount and _made_of(amount, params) and olds:
            return a.line, a.target, amount, "under " + locks[0].callee
    return None


def _closure(read: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each local's sources, through the locals it was read from."""
    out = {}
    for name in read:
        seen, todo = set(), [name]
        while todo:
            for s in read.get(todo.pop(), ()):
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
        out[name] = seen
    return out


def _handed_out(fn: Function, closure: dict[str, set[str]]) -> set[str]:
    """The locals whose value reaches FN's caller: returned, or stored through a pointer it
    handed in (``*StartPos = XLogBytePosToRecPtr(startbytepos)``), and what they were read
    from."""
    pointers = {n for t, n in fn.params if "*" in t}
    out = {s for _, srcs, _ in fn.returns for s in srcs}
    for a in fn.assigns:
        if a.target.startswith("*") and a.target.lstrip("*").strip() in pointers:
            out.update(a.sources)
    for x in list(out):
        out |= {s for s in closure.get(x, ()) if s in fn.locals}
    return out


def _made_of(text: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)
