"""Static verification of every candidate site, per kind, over the parsed function's facts.

- ACQUIRE: the function takes units (a count raised, a flag set, a compare-and-swap, an
  entry popped) and a value derived from the resource through a lookup (iteration, indexing,
  a container search, a free-list pop) reaches its return value or an out-parameter.
- WAIT: a loop whose condition reads runtime state (the resource's members, a predicate call)
  or that retries forever, around a blocking call, a sleep, a condition wait, I/O or eviction;
  or a branch that is a lookup's slow path, taken when what a call on the resource handed
  back has no object or no data (a miss) or when the resource is past its limit (full),
  around I/O, an eviction, a spill, a sleep or a wait.
- RELEASE: a release effect (a count lowered, a flag cleared, a free-list insertion, free,
  delete, unlock, put), the released object not used after it and not returned.
- USE: the function reads or writes the resource's members or its objects' data.
- A log counted by its end position (``level``): ACQUIRE sets the position to a local the
  function counted up (an append), RELEASE sets it back (a restart, a truncation, a rollback).

Candidates from any backend go through here, so a site the LLM made up (a function that does
not exist, a line outside it, a resource that is not one) is rejected with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gigi.scan._offline import (
    BLOCKING,
    BUFFER,
    CAS,
    GUARD,
    NONZERO,
    REFERENCE,
    ZERO,
    Candidate,
    Effect,
    appends,
    bumps,
    checked_takes,
    counted_up,
    fallbacks,
    falsy,
    gives_units,
    heads_by_address,
    lock_calls,
    made_from_params,
    names_a_lock_call,
    no_object,
    queue_moves,
    record_pattern,
    references_taken,
    release_effects,
    same_path,
    set_back,
    sets_held,
    sleeps,
    slots_named,
    slow_branches,
    slow_calls,
    takes_units,
    through_pointer,
    transfers,
    walks,
    within,
)
from gigi.scan._parse import Function

LOOKUP_CALL = re.compile(r"^(find|at|lookup|get|search|front|back|pop|begin|operator\[\])", re.I)


@dataclass
class Verdict:
    ok: bool
    reason: str


def verify(
    c: Candidate,
    fn: Function | None,
    mine: set[str],
    is_resource: bool,
    links: set[str],
    level: str = "",
    free: set[str] = frozenset(),
    queues: set[str] = frozenset(),
    positions: list[str] = (),
    lengths: list[str] = (),
) -> Verdict:
    """``mine``: the resource's records (its own and its objects'); ``links``: its members
    that list objects (free lists, slot arrays, maps), as ``record.member``; ``level``: for a
    log counted by its end position, the path to that member; ``free``: the links that hold
    units no one has (``gigi.scan._offline.free_heads``); ``queues``: the links that queue
    work (``queue_heads``); ``positions``: for an arena, the positions handing out bytes
    moves; ``lengths``: of those, a growable buffer's, which only cutting gives back."""
    if fn is None:
        return Verdict(False, f"no function {c.function} in {c.file}")
    if not fn.line <= c.line <= fn.end_line:
        return Verdict(
            False, f"line {c.line} is outside {c.function} (lines {fn.line}-{fn.end_line})"
        )
    if not is_resource:
        return Verdict(False, f"{c.resource} is not a resource found in phase 1")
    if level:
        return _level_change(c, fn, level)
    if queues and c.kind in ("ACQUIRE", "RELEASE"):
        holders = {n for t, n in fn.params if record_pattern(c.resource).search(t)}
        moves = queue_moves(fn, mine, queues, holders)
        moved = moves.pushes if c.kind == "ACQUIRE" else moves.pops
        if moved:
            a = moved[0]
            how = "work linked into" if c.kind == "ACQUIRE" else "work taken off"
            return Verdict(True, f"{how} the queue {a.target} (line {a.line})")
    if c.kind == "RELEASE":
        return _release(c, fn, mine, links, free, positions, lengths)
    if c.kind == "WAIT":
        return _wait(c, fn, mine, links, free)
    if c.kind == "ACQUIRE":
        return _acquire(c, fn, mine, links, positions)
    if c.kind != "USE":
        return Verdict(False, f"unknown kind {c.kind!r}")
    return _use(c, fn, mine, links)


def _mine(ref: str, mine: set[str]) -> bool:
    return "." in ref and ref.split(".", 1)[0] in mine


def _derived(fn: Function, mine: set[str]) -> set[str]:
    """Locals holding a value derived from the resource, or stored into it."""
    out: set[str] = set()
    for _ in range(3):  # to a fixed point over reassignments
        for a in fn.assigns:
            if "." not in a.target and any(_mine(s, mine) or s in out for s in a.sources):
                out.add(a.target)
            elif _mine(a.target, mine) and a.op == "=":
                out.update(s for s in a.sources if "." not in s and s in fn.locals)
                # the slot written (cells[i].pos = pos): its index names what was taken
                out.update(
                    x
                    for x in re.findall(r"\[\s*([A-Za-z_]\w*)\s*\]", a.target_base)
                    if x in fn.locals
                )
    return out


def _level_change(c: Candidate, fn: Function, level: str) -> Verdict:
    member = level.rsplit(".", 1)[-1]
    sets = [
        a
        for a in fn.assigns
        if a.line == c.line and a.op == "=" and a.target.split(".", 1)[-1] == member
    ]
    if not sets:
        return Verdict(False, f"line {c.line} does not set the log's end ({member})")
    a = sets[0]
    rhs = a.text.split("=", 1)[1].strip()
    counted = len(a.sources) == 1 and counted_up(fn, a.sources[0])
    if c.kind == "ACQUIRE":
        if not counted:
            return Verdict(False, f"{a.text}: not set to a count the function raised")
        return Verdict(True, f"the log's end set to {rhs}, counted up as records were appended")
    if c.kind == "RELEASE":
        if counted:
            return Verdict(False, f"{a.text}: set forward, not back")
        return Verdict(True, f"the log's end set back to {rhs}: its records are given up")
    return Verdict(False, f"a log counted by its end position has no {c.kind} sites")


def _from_params(fn: Function, arg: str) -> bool:
    """Whether an argument is made from FN's parameters: one of them, or a local assigned
    from one (``buf = GetBufferDescriptor(buffer - 1)``), wherever it sits in the argument."""
    return any(re.search(rf"\b{re.escape(n)}\b", arg) for n in made_from_params(fn))


def _resource_params(fn: Function, mine: set[str]) -> set[str]:
    return {n for t, n in fn.params if any(record_pattern(r).search(t) for r in mine)}


# what an append's ACQUIRE says: the copy into the bytes it takes is a USE of them
APPENDED = "bytes copied in"


def _taken(
    fn: Function, mine: set[str], positions: list[str] = ()
) -> tuple[list, list, list, list, list]:
    """Where FN takes units of the resource: counts raised or flags set, compare-and-swaps,
    pops off a list, an arena's position moved (past what it hands out, or what it copied
    in: POSITIONS), locks taken."""
    takes = [
        a
        for a in fn.assigns
        if _mine(a.target, mine)
        and (
            takes_units(a)
            or (a.op == "=" and re.search(r"=\s*(true|1)\s*$", a.text) and sets_held(a.target))
        )
    ]
    cas = [x for x in fn.calls if CAS.search(x.callee)]
    through = heads_by_address(fn, lambda x: _mine(x, mine))  # ref = &pool->free
    pops = [
        a
        for a in fn.assigns
        if (_mine(a.target, mine) or through_pointer(a.target) in through)
        and a.op == "="
        and any(
            _mine(s, mine) and s.split(".")[1] in ("next", "next_free", "link") for s in a.sources
        )
    ]
    return takes, cas, pops, bumps(fn, mine) + appends(fn, positions), lock_calls(fn, unlock=False)


def _acquire(
    c: Candidate, fn: Function, mine: set[str], links: set[str], positions: list[str] = ()
) -> Verdict:
    takes, cas, pops, moved, locks = _taken(fn, mine, positions)
    if not (takes or cas or pops or moved or locks):
        return Verdict(
            False,
            "takes nothing: no count raised, flag set, compare-and-swap or "
            "pop or arena position moved; a lookup is not an acquisition",
        )
    # the object whose own count is raised is what the caller gets (a reference taken)
    counted = {a.target_base for a in takes if a.target_base in fn.locals}
    derived = _derived(fn, mine) | _resource_params(fn, mine) | counted
    if not locks:
        # a status code (rc = write(log->fd, ...)) hands nothing out; a lock taken is held
        # by the caller whatever the function returns
        derived = {d for d in derived if not no_object(fn, d)}
    # a lock the function takes, records in the resource (a flag set) and does not give back
    # on every path stays with the caller
    unlocks = lock_calls(fn, unlock=True)
    kept = [
        x for x in locks if not any(u.line > x.line and within(fn, u.path, x.path) for u in unlocks)
    ]
    # and what such a lock answers (the header's state LockBufHdr returns) is of it
    derived |= {a.target for a in fn.assigns if set(a.calls) & {x.callee for x in kept}}
    returned = [
        (line, srcs)
        for line, srcs, _ in fn.returns
        if any(_mine(s, mine) or s in derived for s in srcs)
    ]
    out_param = [
        a
        for a in fn.assigns
        if (a.target.startswith("*") or a.target in {n for t, n in fn.params if "*" in t})
        and any(_mine(s, mine) or s in derived for s in a.sources)
    ]
    # or on the resource itself, where it counts its holders (an address's refcount)
    objects = {n for t, n in fn.params if any(record_pattern(r).search(t) for r in mine)}
    holders = {n for t, n in fn.params if record_pattern(c.resource).search(t)}
    referenced = references_taken(fn, takes, objects - holders, holders)
    if referenced and not returned and not out_param:
        return Verdict(
            True,
            f"reference taken ({referenced[0].text}) on the object handed in, kept by the caller",
        )
    named = slots_named(fn, takes)
    if named and not returned and not out_param:
        return Verdict(True, f"the slot the caller names ({named[0]}) marked in use, kept by it")
    checked = checked_takes(fn, takes)
    if checked and not returned and not out_param:
        return Verdict(
            True, f"a unit taken ({checked[0].text.strip()}) after a test that one is left"
        )
    appended = appends(fn, positions)
    if appended and not returned and not out_param:
        return Verdict(
            True, f"{APPENDED}, the buffer's length moved past them ({appended[0].text})"
        )
    if kept and takes and not returned and not out_param:
        return Verdict(
            True, f"lock taken ({kept[0].callee}), recorded in {takes[0].target} and kept"
        )
    # a lock taken on what the caller handed in (the content lock of the buffer it names) and
    # kept: the caller holds it when the function returns (an interface's; a file's static
    # helper that does so is a step of its callers' events, as with wrappers)
    handed = [x for x in kept if any(_from_params(fn, arg) for arg in x.args)]
    handed = [] if fn.internal else handed
    if handed and not returned and not out_param:
        return Verdict(True, f"lock taken ({handed[0].callee}) on what it was handed, and kept")
    if not returned and not out_param:
        return Verdict(
            False, "nothing derived from the resource reaches the return value or an out-parameter"
        )
    texts = " ".join(a.text for a in fn.assigns) + " ".join(t for _, _, t in fn.returns)
    lookup = (
        locks
        or any(c2 in srcs for _, srcs, _ in fn.returns for c2 in counted)
        or fn.loops
        or "[" in texts
        or pops
        or any(LOOKUP_CALL.match(x.callee) and x.receiver for x in fn.calls)
        or any(a.target in derived and any(_mine(s, mine) for s in a.sources) for a in fn.assigns)
    )
    if not lookup:
        return Verdict(False, "the value returned is not found through a lookup")
    if locks and not (takes or cas or pops or moved or kept) and _a_number(fn.return_type):
        # a getter: a number read under a lock it gives back before it returns holds nothing
        return Verdict(False, f"reads a number under a lock ({locks[0].callee}) it gives back")
    how = (
        "count raised"
        if takes
        else "compare-and-swap"
        if cas
        else "pop"
        if pops
        else "an arena's position moved past it"
        if moved
        else f"lock taken ({locks[0].callee})"
    )
    return Verdict(
        True,
        f"{how}; a value derived from the resource is "
        f"{'returned' if returned else 'written to an out-parameter'}",
    )


def _a_number(return_type: str) -> bool:
    """Whether a return type, as declared, is a number (``size_t``, ``int``, ``ev_uint32_t``),
    not a pointer nor a handle of the code's own (PostgreSQL's ``Buffer``).

    >>> _a_number("size_t | unsigned long"), _a_number("Buffer | int"), _a_number("item *")
    (True, False, False)
    """
    declared = return_type.split("|")[0]
    return "*" not in declared and bool(
        re.search(r"size|int|long|short|bool|char|float|double|unsigned|off_t", declared)
    )


def _wait(
    c: Candidate, fn: Function, mine: set[str], links: set[str], free: set[str] = frozenset()
) -> Verdict:
    # the slow way to a unit the function takes: none spare and more made, or made anew
    # after a fast path that returned
    takes, cas, pops, moved, locks = _taken(fn, mine)
    taken = [a.line for a in takes + pops] + [x.line for x in cas + locks] + [a.line for a in moved]
    if taken:
        why = next((w for at, w in fallbacks(fn, mine, max(taken)) if at == c.line), None)
        if why:
            return Verdict(True, why)
    loop = next((lp for lp in fn.loops if lp.line == c.line), None)
    branch = next((b for b in fn.branches if b.line == c.line), None)
    if loop is None and branch is not None:
        return _branch_wait(c, fn, mine, branch, free)
    if loop is None:
        loop = next((lp for lp in fn.loops if lp.line <= c.line <= lp.end_line), None)
    if loop is None:
        return Verdict(False, f"no loop at line {c.line}: a wait is a slow path that repeats")
    if walks(fn, loop) and not any(sleeps(x) for x in loop.body_calls):
        return Verdict(False, "the loop walks a list or counts: an iteration, not a retry")
    state = [m for m in loop.cond_members if _mine(m, mine)]
    # a local the loop sets from a call on the resource (rc = try_lock(pool)) is its state too
    params = _resource_params(fn, mine)
    state += [
        a.target
        for a in fn.assigns
        if loop.line <= a.line <= loop.end_line
        and a.target in loop.cond_locals
        and any(_mine(x, mine) or x in params for x in a.sources)
    ]
    if not (state or loop.cond_calls or loop.infinite):
        return Verdict(False, "the loop's condition reads no runtime state of the resource")
    blocking = [x for x in loop.body_calls + loop.cond_calls if BLOCKING.search(x)]
    if not blocking:
        return Verdict(False, "the loop neither blocks, sleeps, waits, does I/O nor evicts")
    if all(transfers(x) for x in blocking):
        moves = ", ".join(sorted(set(blocking)))
        return Verdict(False, f"the loop moves data ({moves}) in rounds: work, not a wait")
    guard = ", ".join(state) if state else ", ".join(loop.cond_calls) or "retrying forever"
    return Verdict(True, f"loop guarded by {guard} around {', '.join(sorted(set(blocking)))}")


def _branch_wait(
    c: Candidate, fn: Function, mine: set[str], branch, free: set[str] = frozenset()
) -> Verdict:
    """A branch is a wait when it is a lookup's slow path: taken on a miss or when the
    resource is full, around a call that takes long; or taken when a free list was empty,
    around a call that makes more."""
    slow = next((s for s in slow_branches(fn, mine, free) if s.branch is branch), None)
    if slow is None and not slow_calls(branch.body_calls):
        return Verdict(
            False, "the branch neither blocks, sleeps, waits, does I/O, evicts nor spills"
        )
    if slow is None:
        return Verdict(
            False,
            f"the branch's condition ({branch.cond}) is neither a miss of a lookup on the "
            "resource nor the resource past its limit: ordinary work, not a slow path",
        )
    return Verdict(True, slow.why)


def _release(
    c: Candidate,
    fn: Function,
    mine: set[str],
    links: set[str],
    free: set[str] = frozenset(),
    positions: list[str] = (),
    lengths: list[str] = (),
) -> Verdict:
    obj = c.object_expr if c.object_expr in fn.locals else ""
    effects = release_effects(fn, mine, links, obj, free=free, positions=positions)
    effects += [
        Effect(a.line, a.path, "the arena's position set back")
        for a in set_back(fn, positions, lengths)
    ]
    if not effects:
        return Verdict(False, "no release effect: nothing lowered, cleared, put back or freed")
    last = max(effects, key=lambda e: e.line)
    # the object's own release: a count lowered on its holder (pool->pfree += pages) leaves it
    # to be put back after, as the function goes on to do
    holders = {
        a.line for a in fn.assigns if gives_units(a) and a.target_base and a.target_base != obj
    }
    own = [e for e in effects if not (e.what == "count lowered" and e.line in holders)]
    if obj and own:
        mine_last = max(own, key=lambda e: e.line)
        # a use on a path that can run after the last release effect (not in a branch the
        # release did not take)
        # (nor in the last holder's branch, where the count it lowered reached zero and the
        # object is torn down: if (--o->refs == 0) free(o))
        last_holder = _last_holder(fn, obj)
        # (nor its fields cleared after: f->stash = NULL resets what was given back)
        resets = {a.line for a in fn.assigns if a.target_base == obj and a.op == "="}
        resets -= {a.line for a in fn.assigns if a.line in resets and not falsy(a.text)}
        later = [
            n
            for n, path in fn.uses_after.get(obj, [])
            if n > mine_last.line
            and same_path(path, mine_last.path)
            and not last_holder & set(path)
            and n not in resets
        ]
        if later:
            return Verdict(False, f"{obj} is used again at line {later[0]}, after its release")
        if any(obj in srcs for _, srcs, _ in fn.returns):
            return Verdict(False, f"{obj} is returned: it was not given back")
    return Verdict(True, f"{last.what}; the released object is not used afterwards")


def _last_holder(fn: Function, obj: str) -> set[tuple[int, int]]:
    """The branches FN takes when a count of OBJ's holders it lowered reached zero: the
    last holder's, which tears the object down. Read off the count itself or the local the
    lowering's result went to (``to_free = atomic_dec(&a->refcount); if (to_free == 0)``)."""
    lowered = [
        a
        for a in fn.assigns
        if gives_units(a) and a.target_base == obj and REFERENCE.search(a.target.split(".")[-1])
    ]
    counts = {a.target.split(".", 1)[-1] for a in lowered}
    results = {
        x.target for x in fn.assigns if x.op == "=" and x.line in {a.line for a in lowered}
    } & set(fn.locals)
    out = set()
    for b in fn.branches:
        read = counts & {m.split(".", 1)[-1] for m in b.cond_members} or results & set(
            b.cond_locals
        )
        if read and (ZERO.search(b.cond) if b.side == 0 else NONZERO.search(b.cond)):
            out.add((b.if_id, b.side))
    return out


def _use(c: Candidate, fn: Function, mine: set[str], links: set[str]) -> Verdict:
    touched = sorted({f"{a.record}.{a.member}" for a in fn.accesses if a.record in mine})
    if not touched:
        return Verdict(False, "touches none of the resource's state")
    if any(record_pattern(r).search(fn.return_type) for r in mine):
        return Verdict(
            False, "hands out an object of the resource without taking it: a lookup, not a use"
        )
    # the lock a getter or a setter takes around its fields does no work on the resource
    work = [x for x in fn.calls if not names_a_lock_call(x.callee) and not GUARD.search(x.callee)]
    # (one that reads the unit's data, or hands out a pointer into it, uses it)
    plain = "*" not in fn.return_type and not (
        work or fn.loops or any(BUFFER.match(a.member) for a in fn.accesses)
    )
    ops = {a.op for a in fn.accesses}
    if plain and ops <= {"read"}:
        # a predicate, a time, a status: it reads a few fields and answers with a value
        return Verdict(False, "only reads fields and answers a value: an accessor, not a use")
    stores = any(a.record in mine for a in fn.accesses if a.op == "write")
    if plain and ops <= {"read", "write"} and stores:
        # an option, a callback, a limit stored (under its lock or not): set up, not worked
        return Verdict(False, "only stores fields: a setter, not a use")
    return Verdict(True, "touches " + ", ".join(touched[:4]))
