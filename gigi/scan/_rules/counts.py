"""A count that a function waits on and moves is a pool of units, whatever it is named: a
counting semaphore built from a mutex, a condition variable and an integer
(``while (sem->value == 0) cond_wait(...); sem->value--``), a queue's idle workers
(``if (--info->idlers < 0) cond_wait(...)``). The function that waits for the count takes a
unit (its WAIT where it waits, its ACQUIRE where it moves the count); every other function
that moves the count the same way takes one too (a try-wait), and one that moves it the
other way gives one back (a post, a worker going idle). A queue's count of the work in it
reads the other way: what the queue lends is a place, taken by pushing work and given back
by taking it off, and the consumer's wait is for work. A function that moves it both ways
hands nothing across its interface, and keeps no site. Records the recall did not propose
become resources of their own."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import INVERSE, QUEUE, Candidate, error_exit, sleeps
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site

OPPOSITE = {"+=": "-=", "-=": "+="}
# a wait for another thread's signal: what a branch (not a loop) must make to wait on a count;
# a branch that spins on something else when a count reaches zero is cleanup, not a wait
SIGNALLED = re.compile(r"cond\w*wait|wait\w*cond|sem_\w*wait|futex", re.I)


def counts_waited_for(found: Found) -> Found:
    waited: dict[str, str] = {}  # record.member -> the move that takes a unit
    waits: list[tuple] = []  # (function, line, record.member)
    for fn in found.functions.values():
        moves = {
            a.target: a.op
            for a in fn.assigns
            if a.op in OPPOSITE and "." in a.target and not error_exit(fn, a.path)
        }
        waiting = [lp for lp in fn.loops if any(sleeps(c) for c in lp.body_calls)] + [
            b for b in fn.branches if any(SIGNALLED.search(c) for c in b.body_calls)
        ]
        for where in waiting:
            for m in where.cond_members:
                if m in moves and _one_way(fn, m):
                    # a queue's count of the work in it: the consumer waits for work and
                    # lowers it, yet what a producer takes is a place in the queue
                    # (raising it), and taking work off gives the place back
                    queued = QUEUE.search(m.split(".", 1)[0]) and not INVERSE.search(m)
                    waited.setdefault(m, OPPOSITE[moves[m]] if queued else moves[m])
                    waits.append((fn, where.line, m))
    if not waited:
        return found
    have = {(c.function, c.kind, c.resource) for c in found.kept()}
    new: dict[str, object] = {}  # resources this rule found, by name
    sites = []

    def site(fn, line, kind, member, why, holder=""):
        record = member.split(".", 1)[0]
        if (fn.name, kind, record) in have:
            return
        have.add((fn.name, kind, record))
        if record not in found.by_name and record not in new:
            reason = f"a count ({member}) that {fn.name} waits on and moves"
            new[record] = found_by(record, fn, "pool", "units", reason)
        c = Candidate(fn.file, fn.name, line, kind, record, holder, "1", "heuristic", why)
        sites.append(Site(c, True, f"verified: {why}"))

    # the object: whose count it is (the semaphore the function is handed)
    for fn, line, m in waits:
        holder = next((a.target_base for a in fn.assigns if a.target == m), "")
        site(fn, line, "WAIT", m, f"waits until {m} lets it take a unit", holder)
    for fn in found.functions.values():
        for m, take in waited.items():
            mine = [a for a in fn.assigns if a.target == m and a.op in OPPOSITE]
            if not mine or not _one_way(fn, m):
                continue
            a = next((x for x in mine if not error_exit(fn, x.path)), mine[0])
            kind = "ACQUIRE" if a.op == take else "RELEASE"
            verb = "takes a unit of" if kind == "ACQUIRE" else "gives back a unit of"
            why = f"{verb} {m}, a count others wait on ({a.text.strip()})"
            site(fn, a.line, kind, m, why, a.target_base)
    return replace(found, resources=(*found.resources, *new.values()), sites=(*found.sites, *sites))


def _one_way(fn, member: str) -> bool:
    """Whether FN moves MEMBER one way only, but for an undo on its way out on an error (a
    branch on a status code that returns it: ``if (rv != APR_SUCCESS) { idlers++; return
    rv; }``)."""
    moves = [a for a in fn.assigns if a.target == member and a.op in OPPOSITE]
    kept = [a for a in moves if not error_exit(fn, a.path)] or moves
    return len({a.op for a in kept}) == 1
