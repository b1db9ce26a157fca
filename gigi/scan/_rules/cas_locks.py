"""A lock made of a word a compare-and-swap sets: a function that swaps a member of the lock
it is handed from a value to a non-zero one (nginx's ``ngx_atomic_cmp_set(mtx->lock, 0,
ngx_pid)``, a ``compare_exchange`` on ``&lock->state``) takes that lock, one that swaps it
back to zero (``ngx_atomic_cmp_set(mtx->lock, ngx_pid, 0)``), or to a value it lowered first
(a holder's share of the word: a buffer's pin), gives it back, whatever the functions and
the lock are named. A swap retried in a loop that also sleeps, yields or waits
is the wait for the lock (a spin, then a semaphore); a swap retried only because the word
changed meanwhile is not. A function that touches nothing of another resource but the lock
it holds (the slab pool whose mutex it is) works on the lock: what the recall proposed there
on that resource is not kept. On such a word, the other atomic operations of functions that
swap nothing say the rest (``_bit_moves``): a bit set in a spin takes a lock within the
word, clearing it or subtracting a holder's share gives back."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import Candidate, records_of, sleeps
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site

CAS = re.compile(r"compare_and_swap|cmp_?set|compare_?exchange|(^|_)cas(_|$)|test_and_set", re.I)
ZERO = re.compile(r"^\(?\s*(0|0u|0l|false|NULL|nullptr)\s*\)?$", re.I)
MEMBER = re.compile(r"^&?\s*\(?\s*([A-Za-z_]\w*)\s*(->|\.)\s*([A-Za-z_]\w*)\s*\)?$")


def locks_by_compare_and_swap(found: Found) -> Found:
    kept = {(c.function, c.kind, c.resource) for c in found.kept()}
    new: dict[str, object] = {}
    sites: list[Site] = []
    folded: dict[str, str] = {}  # function -> the lock whose state it touches
    lock_words: set[str] = set()  # the words the swaps take (record.member)
    for fn in found.functions.values():
        swaps = [
            (call, *_swapped(fn, call))
            for call in fn.calls
            if CAS.search(call.callee) and not _counts(call)
        ]
        words = {w for _, w, _ in swaps if w}
        if len(words) != 1 or any(not w for _, w, _ in swaps):
            continue
        record = next(iter(words)).split(".", 1)[0]
        holder = swaps[0][2]  # the object: which lock, the one the function is handed
        directions = {_direction(fn, call) for call, _, _ in swaps}
        if len(directions) != 1:
            continue
        kind = directions.pop()
        first = min(call.line for call, _, _ in swaps)
        # taken where the swap succeeded: in the branch a successful swap takes (if (cas(...))
        # return;), not after it, where the swap failed and the loop goes round again
        won = [
            b.line
            for b in fn.branches
            if b.side == 0 and any(CAS.search(c) for c in b.cond_calls) and b.line > first
        ]
        at = min(won) if kind == "ACQUIRE" and won else first
        events = [(kind, at, f"swaps {next(iter(words))} {_how(kind)}")]
        if kind == "ACQUIRE":
            spin = [
                lp
                for lp in fn.loops
                if any(lp.line <= call.line <= lp.end_line for call, _, _ in swaps)
                and any(sleeps(c) for c in lp.body_calls)
            ]
            if spin:
                outer = min(spin, key=lambda lp: lp.line)
                events.append(("WAIT", outer.line, "retries the swap, sleeping or waiting"))
        for kind_, line, why in events:
            if (fn.name, kind_, record) in kept:
                continue
            if record not in found.by_name and record not in new:
                reason = f"a word {fn.name} takes or gives back by compare-and-swap"
                new[record] = found_by(record, fn, "exclusive", "locks", reason)
            c = Candidate(fn.file, fn.name, line, kind_, record, holder, "1", "heuristic", why)
            sites.append(Site(c, True, f"verified: {why}"))
            folded[fn.name] = record
        lock_words |= words
    sites += _bit_moves(found, lock_words, kept, folded)
    if not sites:
        return found
    out = []
    for c, ok, why in found.sites:
        lock = folded.get(c.function)
        g = found.by_name.get(c.resource)
        if ok and lock and g is not None and c.resource != lock:
            fn = found.functions[(c.file, c.function)]
            # what the function touches of that resource is the lock's state alone
            mine = records_of(g)
            if {a.record for a in fn.accesses if a.record in mine} <= {lock}:
                ok, why = False, f"touches only {lock}'s state of {c.resource}: the lock's event"
        out.append(Site(c, ok, why))
    return replace(found, resources=(*found.resources, *new.values()), sites=(*out, *sites))


# atomic operations on a lock word that give it back: bits cleared, a count of holders
# lowered, the word stored back; and a test-and-set of a bit, which takes it when retried.
# Atomics by their C11 and GCC names and a codebase's own wrappers of them (atomic_fetch_sub,
# __atomic_and_fetch, pg_atomic_fetch_sub_u32), Windows' (InterlockedDecrement), and GCC's
# legacy builtins read as the same operations (``_named``: __sync_fetch_and_sub).
GIVES = re.compile(r"(atomic|interlocked)\w*(sub|dec|and|clear|unlock|release)", re.I)
STORES = re.compile(r"atomic\w*(store|write|set)(_|$)", re.I)
SETS_BIT = re.compile(r"atomic\w*fetch_or|atomic\w*or_fetch|test_and_set_bit", re.I)
LOWERS = re.compile(r"(atomic|interlocked)\w*(sub|dec)", re.I)


def _named(callee: str) -> str:
    """CALLEE with GCC's legacy atomic builtins named as their __atomic twins:
    ``__sync_fetch_and_sub`` as ``__atomic_fetch_sub``, ``__sync_or_and_fetch`` as
    ``__atomic_or_fetch``, ``__sync_lock_release`` as ``__atomic_release`` (a store of 0);
    the sized variants a compiler resolves them to (``__sync_sub_and_fetch_4``) the same."""
    name = re.sub(r"^(__sync_\w+?)_(1|2|4|8|16)$", r"\1", callee)
    name = re.sub(r"^__sync_fetch_and_(\w+)$", r"__atomic_fetch_\1", name)
    name = re.sub(r"^__sync_(\w+?)_and_fetch$", r"__atomic_\1_fetch", name)
    return re.sub(r"^__sync_lock_release$", "__atomic_release", name)


def _bit_moves(found: Found, words: set[str], kept: set, folded: dict) -> list[Site]:
    """The other operations on the lock words compare-and-swaps take (``LWLock.state``),
    in functions handed the lock that swap nothing. An atomic OR setting a bit, in a loop
    that goes round again while the bit it found was set, takes the lock (a spin lock
    within the word), and the loop is its wait; clearing that bit again (an atomic AND with
    its complement, or the word stored without it: ``pg_atomic_write_u32(&desc->state, s &
    ~BM_LOCKED)``) gives it back, and so does an atomic subtract (a holder's share taken
    off). Clearing another bit (a flag that waiters are queued) moves no lock."""
    out: list[Site] = []
    if not words:
        return out
    moves = []  # (fn, call, word, holder)
    for fn in found.functions.values():
        if fn.name in folded:
            continue  # it swaps: the swap says what it does
        for call in fn.calls:
            word, holder = _swapped(fn, call)
            if word in words:
                moves.append((fn, call, word, holder))
    taken: dict[str, set[str]] = {}  # word -> the bits a spin sets
    events = []
    for fn, call, word, holder in moves:
        if not SETS_BIT.search(_named(call.callee)) or len(call.args) < 2:
            continue
        got = {a.target for a in fn.assigns if a.line == call.line and a.target in fn.locals}
        loop = next((lp for lp in fn.loops if lp.line <= call.line <= lp.end_line), None)
        tested = loop is not None and any(
            set(b.cond_locals) & got for b in fn.branches if loop.line <= b.line <= loop.end_line
        )
        if tested:
            bit = call.args[1].strip()
            taken.setdefault(word, set()).add(bit)
            events.append((fn, holder, word, "ACQUIRE", call.line, f"sets {bit} of {word}"))
            events.append((fn, holder, word, "WAIT", loop.line, f"spins until {bit} was clear"))
    for fn, call, word, holder in moves:
        value = call.args[1] if len(call.args) > 1 else ""
        cleared = {
            b for b in taken.get(word, ()) if re.search(rf"~\s*\(?\s*{re.escape(b)}\b", value)
        }
        op = _named(call.callee)
        if LOWERS.search(op):
            why = f"takes a holder's share off {word}: the lock given back"
        elif cleared and (GIVES.search(op) or STORES.search(op)):
            why = f"clears {next(iter(cleared))} of {word}: the lock given back"
        else:
            continue
        events.append((fn, holder, word, "RELEASE", call.line, why))
    for fn, holder, word, kind, line, why in events:
        record = word.split(".", 1)[0]
        if (fn.name, kind, record) in kept:
            continue
        c = Candidate(fn.file, fn.name, line, kind, record, holder, "1", "heuristic", why)
        out.append(Site(c, True, f"verified: {why}"))
        kept.add((fn.name, kind, record))
    return out


def _swapped(fn, call) -> tuple[str, str]:
    """record.member the swap works on and the parameter it is a member of, when it is a
    member of what FN is handed; else ("", "")."""
    m = MEMBER.match(call.args[0].strip()) if call.args else None
    params = {n for _, n in fn.params}
    if m is None or m.group(1) not in params:
        return "", ""
    record = next(
        (a.record for a in fn.accesses if a.base == m.group(1) and a.member == m.group(3)), ""
    )
    return (f"{record}.{m.group(3)}", m.group(1)) if record else ("", "")


def _counts(call) -> bool:
    """Whether the swap steps a count (``cmp_set(&mtx->wait, wait, wait - 1)``): the new
    value is the old one plus or minus something, not a lock word's value."""
    if len(call.args) < 3:
        return False
    old, new = call.args[1].strip(), call.args[2]
    named = re.fullmatch(r"[A-Za-z_]\w*", old) and re.search(rf"\b{re.escape(old)}\b", new)
    return bool(named and re.search(r"[-+]", new))


def _direction(fn, call) -> str:
    """ACQUIRE for a swap to a non-zero value (or a test-and-set), RELEASE for one back to
    zero, or to a value the function lowered first (``new = old; new -= BUF_REFCOUNT_ONE;
    cas(&b->state, &old, new)``: a holder's share of the word given back)."""
    if "test_and_set" in call.callee.lower() or len(call.args) < 3:
        return "ACQUIRE"
    new = call.args[2].strip()
    steps = {a.op for a in fn.assigns if a.target == new and a.line < call.line}
    if new in fn.locals and steps & {"+=", "-="} == {"-="}:
        return "RELEASE"
    return "RELEASE" if ZERO.match(new) else "ACQUIRE"


def _how(kind: str) -> str:
    return "to a value of its own: the lock taken" if kind == "ACQUIRE" else "back, or lower"
