"""What a call does to the counts of what it is handed, read as if it were written inline.

A short function that raises or lowers the reference count of an object it is handed (redis's
``incrRefCount(o)``: ``o->refcount++``) or of what a pointer it is handed points to (an
atomic add on ``*ptr``) is summarized once; each call to it then adds to the caller's facts
the ``+=`` or ``-=`` it performs on the caller's argument (``incrRefCount(o)`` raises
``redisObject.refcount`` of ``o``; ``atomic_add(&lock->state, 1)`` raises ``LWLock.state``
of ``lock``). The rules that read counts (an ACQUIRE raises one, a RELEASE lowers one) then
see through the call, in whatever function makes it, not only in thin wrappers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gigi.scan._offline import REFERENCE
from gigi.scan._parse import Assign, Function

# a library's atomic add or subtract, not in the tree to be summarized (apr_atomic_add32,
# apr_atomic_dec32, ngx_atomic_fetch_add, InterlockedIncrement): what its name says it does
# to what its first argument points to
LIBRARY_ATOMIC = re.compile(r"atomic\w*?(add|sub|inc|dec)|interlocked\w*?(add|inc|dec)", re.I)
SUMMARY_LINES = 30  # a function summarized is short: its job is the count
ROUNDS = 2  # a summary made of summaries (decrRefCountVoid calls decrRefCount), no deeper


@dataclass(frozen=True)
class Step:
    """A count a function moves: of its argument ``param``'s ``member`` (record.member), or,
    with no member, of what the argument points to; ``op`` is ``+=`` or ``-=``."""

    param: int
    member: str
    op: str


def steps_of(fn: Function) -> list[Step]:
    """The counts FN moves in what it is handed, when it is short: a reference count of an
    object (``o->refcount++``; a pool's own bookkeeping, ``bp->n_free--``, is part of what
    the function does, not of what it is handed), or what a pointer points to. A count it
    both raises and lowers says nothing of what a call does, and is left out."""
    if fn.end_line - fn.line > SUMMARY_LINES:
        return []
    names = [n for _, n in fn.params]
    pointers = {n for t, n in fn.params if "*" in t}
    found: dict[tuple[int, str], set[str]] = {}
    for a in fn.assigns:
        if a.op not in ("+=", "-="):
            continue
        member = a.target.split(".", 1)[-1]
        if a.target_base in names and "." in a.target and REFERENCE.search(member):  # refcount++
            found.setdefault((names.index(a.target_base), a.target), set()).add(a.op)
        elif (target := a.target.lstrip("*").strip()) in pointers:  # an atomic add on *ptr
            found.setdefault((names.index(target), ""), set()).add(a.op)
    return [Step(i, member, ops.pop()) for (i, member), ops in found.items() if len(ops) == 1]


def through_calls(functions: list[Function], records: set[str]) -> None:
    """Add to each function's assignments the counts its calls move in its arguments."""
    done: set[tuple[str, int, int]] = set()  # (function, call line, step) already added
    for _ in range(ROUNDS):
        summaries = {fn.name: steps for fn in functions if (steps := steps_of(fn))}
        known = {fn.name for fn in functions}
        added = False
        for fn in functions:
            for call in fn.calls:
                steps = summaries.get(call.callee, ())
                if not steps and call.callee not in known:
                    steps = _library_atomic(call)
                for k, step in enumerate(steps):
                    key = (fn.name, call.line, k)
                    if call.callee == fn.name or step.param >= len(call.args) or key in done:
                        continue
                    target, base = _moved(fn, call.args[step.param], step, records)
                    if not target or not _crosses(fn, base, step.op):
                        continue
                    done.add(key)
                    added = True
                    fn.assigns.append(
                        Assign(
                            call.line,
                            target,
                            base,
                            [target],
                            step.op,
                            f"{call.callee}({call.args[step.param].strip()})",
                            path=call.path,
                        )
                    )
        if not added:
            break


def _library_atomic(call) -> list[Step]:
    """The step a library's atomic add or subtract takes on what its first argument points
    to; an add of a negative literal (``apr_atomic_add32(&n, -1)``) subtracts."""
    m = LIBRARY_ATOMIC.search(call.callee)
    if m is None or not call.args:
        return []
    word = (m.group(1) or m.group(2)).lower()
    op = "+=" if word in ("add", "inc") else "-="
    if word == "add" and len(call.args) > 1 and call.args[1].strip().startswith("-"):
        op = "-="
    return [Step(0, "", op)]


def _crosses(fn: Function, base: str, op: str) -> bool:
    """Whether a count moved on BASE crosses FN's interface: a reference taken on what the
    caller handed in or is handed back, or given back on what the caller handed in. A page
    looked up, counted and given back inside one function (SQLite's pagerUndoCallback) moves
    nothing its caller holds."""
    handed_in = base in {n for _, n in fn.params}
    handed_back = any(base in srcs for _, srcs, _ in fn.returns)
    return handed_in or (op == "+=" and handed_back)


def _moved(fn: Function, arg: str, step: Step, records: set[str]) -> tuple[str, str]:
    """What the caller's argument ARG names that STEP moves: (record.member, the local it is
    a member of), or ("", "") when the argument is an expression the caller's names do not
    resolve."""
    arg = re.sub(r"^\(\s*[A-Za-z_][\w\s]*\**\s*\)\s*", "", arg.strip())  # a cast
    if step.member:
        return (step.member, arg) if re.fullmatch(r"[A-Za-z_]\w*", arg) else ("", "")
    m = re.fullmatch(r"&\s*\(?\s*([A-Za-z_]\w*)\s*(->|\.)\s*([A-Za-z_]\w*)\s*\)?", arg)
    if m is None or m.group(1) not in fn.locals:
        return "", ""
    words = set(re.findall(r"[A-Za-z_]\w*", fn.locals[m.group(1)]))
    record = next((r for r in sorted(records) if r in words), "")
    return (f"{record}.{m.group(3)}", m.group(1)) if record else ("", "")
