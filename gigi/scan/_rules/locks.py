"""A function whose job is one call to the platform's locks (a lock API:
``uv_mutex_lock``, a ``slabs_lock`` taken for callers; its file's own helpers too, whose
public wrappers then take the event from them) hands that lock out: its
ACQUIRE, RELEASE or WAIT, on the lock named by what it is handed (a parameter's type, or a
global). Inside a function among other work the same call only guards that work, and
stays unrecorded."""

from __future__ import annotations

import re
from dataclasses import replace

from gigi.scan._offline import LOCK_CHORES, LOCK_WORD, Candidate, ResourceGuess, _words, walks
from gigi.scan._rules._code import (
    C_SCALARS,
    CHECKS,
    ERRNO,
    WRAPPER_LINES,
    bare,
    code_lines,
    found_by,
    loops_around,
    unconditional,
)
from gigi.scan._rules._found import Found, Site

# the platform's locks: what a call to each does to the lock it is handed
LOCK_PRIMITIVES = {
    "pthread_mutex_lock": ("ACQUIRE",),
    "pthread_mutex_trylock": ("ACQUIRE",),
    "pthread_mutex_timedlock": ("WAIT", "ACQUIRE"),  # a wait with a deadline
    "pthread_mutex_unlock": ("RELEASE",),
    "pthread_spin_lock": ("ACQUIRE",),
    "pthread_spin_trylock": ("ACQUIRE",),
    "pthread_spin_unlock": ("RELEASE",),
    "pthread_rwlock_rdlock": ("ACQUIRE",),
    "pthread_rwlock_wrlock": ("ACQUIRE",),
    "pthread_rwlock_tryrdlock": ("ACQUIRE",),
    "pthread_rwlock_trywrlock": ("ACQUIRE",),
    "pthread_rwlock_timedrdlock": ("WAIT", "ACQUIRE"),
    "pthread_rwlock_timedwrlock": ("WAIT", "ACQUIRE"),
    "pthread_rwlock_unlock": ("RELEASE",),
    "sem_wait": ("WAIT", "ACQUIRE"),
    "sem_timedwait": ("WAIT", "ACQUIRE"),
    "sem_trywait": ("ACQUIRE",),
    "sem_post": ("RELEASE",),
    "pthread_cond_wait": ("WAIT",),
    "pthread_cond_timedwait": ("WAIT",),
    "pthread_barrier_wait": ("WAIT",),  # until every party has arrived
}

# the platform's locks whose call takes or gives back by what it is handed: a file lock
# (``flock(fd, LOCK_EX)``, ``LOCK_UN``; ``lockf(fd, F_LOCK, 0)``; ``fcntl(fd, F_SETLKW,
# &unlock_it)``, the lock's kind in a struct named for it) or a System V semaphore
# (``semop(id, &op_on, 1)``, ``&op_off``): which argument says it, and what says "give back"
BY_ARGUMENT = {
    "flock": (1, re.compile(r"LOCK_UN")),
    "lockf": (1, re.compile(r"F_ULOCK")),
    "fcntl": (2, re.compile(r"unl|UNLCK|release|_off\b", re.I)),
    "semop": (1, re.compile(r"unl|release|_off\b|post|_up\b", re.I)),
    "semtimedop": (1, re.compile(r"unl|release|_off\b|post|_up\b", re.I)),
}
FILE_LOCK_COMMANDS = re.compile(r"^F_(OFD_)?SETLKW?$")
# what names a lock where a name must say it (insertpos_lck, WALWriteLock, &b->mutex)
LOCK_NAMED = re.compile(r"lock|lck|mutex|latch|spin|sem", re.I)

# a call through a function pointer is the code's own lock by the pointer's name: a lock
# method of a table of mechanisms (``mutex->meth->acquire(mutex)``), a lock callback set at
# run time (``lock_fns.lock(mode, lock)``)
THROUGH_POINTER = {
    "lock": ("ACQUIRE",),
    "acquire": ("ACQUIRE",),
    "trylock": ("ACQUIRE",),
    "tryacquire": ("ACQUIRE",),
    "timedlock": ("WAIT", "ACQUIRE"),
    "timedacquire": ("WAIT", "ACQUIRE"),
    "unlock": ("RELEASE",),
    "release": ("RELEASE",),
}
# what a lock function of the code's own does by its name's verb: what a lock method does,
# and waiting on a lock (``LWLockWaitForVar``: until it is free, or its variable changes)
VERBS = {**THROUGH_POINTER, "wait": ("WAIT",)}


def lock_apis(found: Found) -> Found:
    guesses: dict[str, ResourceGuess] = {}
    out = []
    # the members each record's functions touch: a lock that is a record's member guards
    # what else of it they touch, and a record that is nothing but its lock guards nothing
    touched: dict[str, set[str]] = {}
    for fn in found.functions.values():
        for a in fn.accesses:
            touched.setdefault(a.record, set()).add(a.member)
    defined = {name for _, name in found.functions}
    # the resources each function has events on
    events: dict[str, set[str]] = {}
    for c, ok, _ in found.sites:
        if ok:
            events.setdefault(c.function, set()).add(c.resource)
    for fn in found.functions.values():
        work = [c for c in fn.calls if not CHECKS.search(c.callee) and c.callee != ERRNO]
        if code_lines(fn) > WRAPPER_LINES or len({c.callee for c in work}) > 2:
            continue
        # (a lock function of the code's own whose body the scan has gives its events by
        # what that body does, to the callers its wrappers rule finds; but where the caller
        # hands it a lock of its own naming, apart from the lock function's (one of the
        # WAL's insertion locks to LWLockAcquire), taking that lock is the caller's job)
        prims = [
            c
            for c in work
            if lock_kinds(c)
            and not (c.callee in defined and _by_name(c) and not _own_lock(fn, c, events))
        ]
        # one call, or one per way of taking the same lock (a try, a timed wait), each on
        # its branch of a test of what the caller handed in
        if not prims or not all(unconditional(fn, c) for c in prims):
            continue
        # a lock macro read by its name, taken and given back in one function, guards its
        # work (the one that gives back may expand to no call at all: SpinLockRelease), as
        # one does that moves a count or a field beside it
        said = {"RELEASE" in THROUGH_POINTER.get(_verb(c.callee), ("",)) for c in work}
        # (what picks the lock to take is part of taking it: MyLockNo in
        # LWLockAcquire(&WALInsertLocks[MyLockNo].l.lock))
        subscripts = [i for c in prims for a in c.args for i in re.findall(r"\[([^]]*)\]", a)]
        picks = {w for i in subscripts for w in re.findall(r"\w+", i)}
        # (and what it does before it takes the lock, the lock does not guard)
        first = min(c.line for c in prims)
        # (nor is a flag named for the locks: holdingAllLocks = true)
        steps = any(
            (a.op in ("+=", "-=") or "." in a.target)
            and a.target.split(".")[-1] not in picks
            and not _lock_flag(a)
            and a.line >= first
            for a in fn.assigns
        )
        if any(_by_name(c) for c in prims) and (len(said) > 1 or steps):
            continue
        # (a loop that walks a table of locks takes or gives back each: no retry)
        if any(c.loops and not _walked(fn, c) and not retries_on_interrupt(fn, c) for c in prims):
            continue
        locks = {lock_of(fn, c) for c in prims}
        gives = {"RELEASE" in lock_kinds(c) for c in prims}
        if len(locks) != 1 or len(gives) != 1:
            continue
        (lock,) = locks
        call = prims[0]
        record, _, member = lock.partition(".")
        if not lock or member and not touched.get(record, set()) - {member}:
            continue
        if lock not in found.by_name and lock not in guesses:
            guesses[lock] = lock_found(lock, fn, call, f"handed out by {fn.name}")
        # a site at each call: a lock given back on either branch (one of all the table's,
        # or the one held) is given back whichever runs
        for call in prims:
            for kind in lock_kinds(call):
                why = f"its job is {call.callee} on {lock}"
                c = Candidate(fn.file, fn.name, call.line, kind, lock, "", "1", "heuristic", why)
                out.append(Site(c, True, f"verified: {why}"))
    return replace(
        found,
        resources=(*found.resources, *guesses.values()),
        sites=(*found.sites, *out),
        locks=found.locks | set(guesses),
    )


def _own_lock(fn, call, events: dict[str, set[str]]) -> bool:
    """Whether CALL, to a lock function of the code's own, is handed the address of a lock
    FN names apart from the lock function's own resources (``&WALInsertLocks[i].l.lock``;
    not a mode such as ``BUFFER_LOCK_UNLOCK``)."""
    lock = lock_of(fn, call)
    addressed = any(a.strip().startswith("&") and LOCK_NAMED.search(a) for a in call.args)
    return bool(lock) and addressed and lock not in events.get(call.callee, set())


def lock_found(lock: str, fn, call, how: str) -> ResourceGuess:
    """The lock LOCK as a resource, found by what FN's CALL does to it (HOW)."""
    primitive = _primitive(call)
    sharing = "shared" if "rwlock" in primitive else "exclusive"
    if primitive.startswith("sem"):
        sharing = "pool"
    unit = "units" if sharing == "pool" else "locks"  # a semaphore's, or a lock's
    return found_by(lock, fn, sharing, unit, f"{how} through {call.callee}")


def lock_of(fn, call) -> str:
    """The lock CALL is handed: its first argument's; through a function pointer or a lock
    macro of the code's own, the first argument that names one (``lock(mode,
    base->th_base_lock)``, ``HA_SPIN_LOCK(QUEUE_LOCK, &p->queue->lock)``)."""
    if not call.indirect and not _by_name(call):
        return lock_name(fn, call.args[0] if call.args else "")
    args = call.args
    if not call.expands and not call.indirect:
        # a function read by its name alone is a lock on what it is handed only when that
        # is named one too (not sqlite3OsShmLock(pWal->pDbFd, ...), a file)
        args = [a for a in args if LOCK_NAMED.search(a)]
    return next((x for x in (lock_name(fn, a) for a in args) if x), "")


def _primitive(call) -> str:
    """The platform lock call CALL is: itself, or the one a lock macro of the code's own
    expanded to (a lock, checked, with a panic when it fails), or a lock by the name of the
    function pointer it calls through; "" for any other call."""
    if call.indirect:
        return call.callee if call.callee.lower() in THROUGH_POINTER else ""
    if call.callee in LOCK_PRIMITIVES or call.callee in BY_ARGUMENT:
        return call.callee
    prims = [c for c in call.expands if c in LOCK_PRIMITIVES]
    if len(prims) == 1:
        return prims[0]
    # a lock macro of the code's own built on no platform call (atomics: HA_SPIN_LOCK), or a
    # lock function of its own (LWLockAcquire), by what its name says it does (``_verb``)
    named = call.expands or call.own
    return call.callee if named and _verb(call.callee) in VERBS else ""


def _by_name(call) -> bool:
    """Whether CALL is read as a lock by its name alone: a lock macro of the code's own."""
    known = call.callee in LOCK_PRIMITIVES or call.callee in BY_ARGUMENT
    return not call.indirect and not known and _primitive(call) == call.callee


def _verb(name: str) -> str:
    """What a lock function's name says it does, lower case: the first word after its lock
    word that takes or gives back (``LWLockReleaseClearVar``: release), else the lock word
    itself (``LockBufHdr``: lock) or its last word; "" for another chore done to a lock
    (``LWLockUpdateVar``).

    >>> [_verb(n) for n in ("LWLockAcquire", "LWLockReleaseClearVar", "ha_spin_lock")]
    ['acquire', 'release', 'lock']
    >>> _verb("LWLockUpdateVar"), _verb("UnlockBufHdr"), _verb("LWLockWaitForVar")
    ('', 'unlock', 'wait')
    """
    words = [w.lower() for w in _words(name)]
    at = next((i for i, w in enumerate(words) if LOCK_WORD.fullmatch(w)), None)
    if at is None:
        return words[-1] if words else ""
    after = words[at + 1 :]
    if set(after) & LOCK_CHORES:
        return ""
    return next((w for w in after if w in VERBS), words[at])


def _lock_flag(a) -> bool:
    """Whether A sets a flag named for the locks to a truth value (``holdingAllLocks =
    true``): the lock's own bookkeeping, not work it guards."""
    named = any(LOCK_WORD.fullmatch(w) for w in _words(a.target.split(".")[-1]))
    return named and a.op == "=" and a.text.split("=", 1)[-1].strip() in TRUTHS


TRUTHS = {"true", "false", "0", "1", "TRUE", "FALSE"}


def _walked(fn, call) -> bool:
    """Whether every loop around CALL walks (a counted for over a table of locks)."""
    around = loops_around(fn, call.line)
    return bool(around) and all(walks(fn, lp) for lp in around)


def lock_kinds(call) -> tuple[str, ...]:
    """What CALL does to the lock it is handed, by the primitive it is (and, for one that
    takes or gives back by an argument, by that argument); () for no lock call."""
    primitive = _primitive(call)
    if call.indirect:
        return THROUGH_POINTER.get(primitive.lower(), ())
    if _by_name(call):
        return VERBS.get(_verb(primitive), ())  # a lock macro, by its name
    if primitive in LOCK_PRIMITIVES:
        return LOCK_PRIMITIVES[primitive]
    if primitive not in BY_ARGUMENT:
        return ()
    at, gives = BY_ARGUMENT[primitive]
    if (
        len(call.args) <= at
        or primitive == "fcntl"
        and not (FILE_LOCK_COMMANDS.match(call.args[1].strip()))
    ):
        return ()  # fcntl for anything but a lock; too few arguments to say
    if gives.search(call.args[at]):
        return ("RELEASE",)
    return ("WAIT", "ACQUIRE") if primitive == "semtimedop" else ("ACQUIRE",)


def retries_on_interrupt(fn, call) -> bool:
    """Whether the loops around CALL only retry it when a signal interrupted it
    (``do r = sem_wait(sem); while (r == -1 && errno == EINTR)``): no wait of its own."""
    around = loops_around(fn, call.line)
    return bool(around) and all(ERRNO in lp.cond_calls for lp in around)


def lock_name(fn, arg: str) -> str:
    """The lock an argument names: a parameter's type (``uv_mutex_t *mutex``: uv_mutex_t),
    a global's name (``&slabs_lock``), or the member of a record handed in
    (``&daemon->per_ip_mutex``: MHD_Daemon.per_ip_mutex) or one a local points to; "" for
    anything else (a local's own, an expression)."""
    name = bare(arg).lstrip("&").strip()
    # one of a table of locks: item_locks[hv & mask], &WALInsertLocks[i].l.lock
    while "[" in name and name != (name := re.sub(r"\s*\[[^][]*\]", "", name)):
        pass
    # (a member of a member names the first: mutex->os.crossproc is apr_proc_mutex_t.os)
    member = re.fullmatch(
        r"([A-Za-z_]\w*)\s*(?:->|\.)\s*([A-Za-z_]\w*)(?:\s*(?:->|\.)\s*\w+)*", name
    )
    if member:  # of a record handed in, or reached through a local (b = barrier->b)
        # by the record's own name, as its members are known (waiter_t is struct waiter)
        base = member.group(1)
        if not any(p == base for _, p in fn.params) and base not in fn.locals:
            return base  # a global's: the global names it
        record = _param_type(fn, base, locals_too=True, record=True)
        return f"{record}.{member.group(2)}" if record else ""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return ""
    if any(pname == name for _, pname in fn.params):
        return _param_type(fn, name)
    if name in fn.locals:
        # a local set once to a lock's address (lock = &item_locks[hv & mask]) names it
        sets = [a for a in fn.assigns if a.target == name]
        if len(sets) == 1 and sets[0].op == "=" and "=" in sets[0].text:
            value = sets[0].text.split("=", 1)[1].strip()
            return lock_name(fn, value) if value.startswith("&") else ""
        return ""
    return name


def _param_type(fn, name: str, locals_too: bool = False, record: bool = False) -> str:
    """The type parameter NAME points to, bare (or a local's, with LOCALS_TOO); "" for a
    scalar or a ``void *`` handed in, which names no lock. With RECORD, the struct's own
    name where a typedef spells it (``waiter_t *`` is ``struct waiter *``)."""
    typed = [(t, n) for t, n in fn.params if n == name]
    if locals_too and not typed and name in fn.locals:
        typed = [(fn.locals[name], name)]
    for ctype, _ in typed:
        spelt, _, canonical = ctype.partition("|")
        named = record and canonical.strip() and "(" not in canonical
        base = (canonical if named else spelt).replace("const", "").replace("*", "").strip()
        base = re.sub(r"^(struct|union)\s+", "", base)
        plain = re.fullmatch(r"[A-Za-z_]\w*", base) and base not in C_SCALARS
        return base if plain else ""
    return ""
