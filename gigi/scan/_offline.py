"""The offline recall: which records are resources (phase 1), and which events each function
that touches one performs (phase 2), from names, types, comments and code patterns alone.

Phase 1 scores a record by its members: a container of another record (an array, a pointer
list, a std container) or a byte ring with head and tail; counters; a capacity; the
synchronization that guards them; and its name and comment. Settings, statistics and wrappers
are not resources, whatever they hold. Phase 2 proposes generously (the verifier prunes): WAIT
for loops that block or back off, ACQUIRE for functions that hand out an object or units and
take them, RELEASE for ones that give them back, USE for ones that work through an object of
the resource or its data.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gigi.scan._parse import Branch, Function, Member, Record, file_record

RESOURCE_NAME = re.compile(
    r"pool|cache|buf|frame|slot|scoreboard|log|wal|journal|lock|mdl|latch|queue|arena|free|lru"
    r"|ring|page|conn|worker|txn|undo|kv",
    re.I,
)
NOT_RESOURCE = re.compile(
    r"config|conf$|settings|option|opts$|stat|metric|wrapper|guard|util", re.I
)
COUNTER = re.compile(
    r"^(n_|num_?|nr_)|count|used|usage|busy|free|refs?$|ref_?count|pin|head|tail|size|avail"
    r"|in_use|inuse|outstanding|nslots|n_slots|charge|shared|exclusive|active|cnt|allocated"
    r"|^cur(r|rent)?(_|$)|(^|_)load$",
    re.I,
)
CAPACITY = re.compile(r"capacity|^size$|max|limit|n_?slots|total|cap_?$|^cap", re.I)
SYNC = re.compile(r"mutex|cond|condition_variable|atomic|spinlock|sem_t|rwlock|std::mutex", re.I)
BUFFER = re.compile(r"^[paz]?(ring|buf|buffer|data|bytes|mem)_?$", re.I)
# a compare-and-swap or an exchange, by the name of what performs it (not a broadcast)
CAS = re.compile(r"compare_?(and_?)?(exchange|swap)|test_and_set|exchange|(^|_)cas(\d|_|$)", re.I)
FLAG = re.compile(r"busy|in_use|inuse|used|exclusive|locked|pinned|owned|taken|held", re.I)
LINK = re.compile(r"next|prev|link|lru_|_lru", re.I)
# counts of what is left (a quota, credits, a bucket's tokens): lowering one takes units,
# raising it gives them back
INVERSE = re.compile(r"free|avail|idle|remaining|left|recycl|quota|credits?$|tokens?$", re.I)
# lists of what can be handed out again: putting an object on one gives it back (a dirty
# list or a hash chain only files it)
FREE_LIST = re.compile(r"free|lru|avail|idle|unused|spare|recycl|pool|empty|cache", re.I)


# locals that hold a status code (rc = write(log->fd, ...)): derived from the resource, yet
# neither an object nor anything handed out
STATUS = re.compile(r"^(rc|rv|ret|retval|err|errcode|error|status)$")
# a type of status codes, by its name: apr_status_t, esp_err_t, rsRetVal, CURLcode,
# isc_result_t
STATUS_TYPE = re.compile(
    r"status|(^|_)err(or)?(_t)?\b|ret_?val|[a-z]code\b|(^|_)result(_t)?\b", re.I
)


def status_type(declared: str) -> bool:
    """Whether a type, as declared, is one of status codes.

    >>> [status_type(t) for t in ("apr_status_t", "rsRetVal", "CURLcode", "isc_result_t")]
    [True, True, True, True]
    >>> [status_type(t) for t in ("opcode_t", "size_t", "struct result_set *|x", "Retry")]
    [False, False, False, False]
    """
    spelt = declared.split("|")[0]
    return bool(STATUS_TYPE.search(spelt)) and "*" not in spelt


# a truth value's type, as spelt or as the compiler sees it: bool, _Bool, gboolean, BOOL
FLAG_TYPE = re.compile(r"^(_Bool|(\w*_)?bool(ean)?(_t)?)$", re.I)


def is_status(fn: Function, local: str) -> bool:
    """Whether a local is a status code: named as one, or of a status type, and not a
    pointer (``void *ret`` is what an allocator hands out)."""
    declared = fn.locals.get(local, "")
    named = STATUS.match(local) or status_type(declared)
    return bool(named) and "*" not in declared


def no_object(fn: Function, local: str) -> bool:
    """Whether a local can name no object of a resource: a status code, or a truth value (a
    function that returns whether it got the lock, ``bool result``, hands out no object)."""
    declared = fn.locals.get(local, "")
    return is_status(fn, local) or any(FLAG_TYPE.match(t.strip()) for t in declared.split("|"))


def _made_from(fn: Function, name: str) -> set[str]:
    """NAME and the locals FN makes from it, however indirectly (tail = *head; tmp =
    tail->next)."""
    made = {name}
    while True:
        more = {
            a.target for a in fn.assigns if a.target in fn.locals and set(a.sources) & made
        } - made
        if not more:
            return made
        made |= more


def bare(arg: str) -> str:
    """An argument without the casts in front of it or the parentheses around it:
    ``(void *) ptr`` and ``(void *)(ptr)`` are ``ptr``.

    >>> bare("(void *)(ptr)")
    'ptr'
    """
    arg = arg.strip()
    while True:
        m = re.match(r"\(\s*[A-Za-z_][\w\s]*\**\s*\)\s*(?=\S)", arg)
        if not m:
            break
        arg = arg[m.end() :]
    while arg.startswith("(") and arg.endswith(")"):
        arg = arg[1:-1].strip()
    return arg


def root(expr: str) -> str:
    """The variable an expression starts from: ``pool -> stats [ slot ]`` is ``pool``,
    ``& (q)->head`` is ``q``.

    >>> root("pool -> stats [ slot ]")
    'pool'
    """
    m = re.match(r"[\s&*(]*([A-Za-z_]\w*)", bare(expr))
    return m.group(1) if m else ""


def read_off_resource(fn: Function, mine: set[str]) -> set[str]:
    """FN's locals assigned from one of the resource's members (``c = pool->free``)."""
    return {
        a.target
        for a in fn.assigns
        if a.target in fn.locals and any(_member_of(x, mine) for x in a.sources)
    }


def by_address(fn: Function) -> set[str]:
    """FN's parameters that are pointers to pointers: where it hands an object out, or a
    list head handed in by its address."""
    return {n for t, n in fn.params if "**" in t.replace(" ", "")}


def hands_out_by_address(fn: Function, mine: set[str]) -> bool:
    """Whether FN stores what it read off the resource through a pointer to a pointer its
    caller passed (``*recycled_pool = first_pool->pool``): an object handed out, as a return
    hands it (not a number through an ``int *``, nor the caller's own list relinked through
    its pointer, ``*head = tail->next``)."""
    read = read_off_resource(fn, mine)
    pointers = by_address(fn)
    return any(
        a.target.lstrip().startswith("*")
        and root(a.target) in pointers
        and not set(a.sources) & _made_from(fn, root(a.target))
        and any(x in read or _member_of(x, mine) for x in a.sources)
        for a in fn.assigns
    )


def error_exit(fn: Function, path: tuple) -> bool:
    """Whether a place on PATH sits in a branch taken on a status code (``rv != 0``) that
    returns: an error's way out, where the function undoes what it did before it failed
    (``if (rv != APR_SUCCESS) { idlers++; return rv; }``)."""
    on = set(path)
    return any(
        (b.if_id, b.side) in on
        and any(is_status(fn, x) for x in b.cond_locals)
        and any(b.line <= line <= b.end_line for line, _, _ in fn.returns)
        for b in fn.branches
    )


def record_pattern(record: str) -> re.Pattern:
    """A type that names the record: ``frame``, ``frame_t``, ``struct frame *``."""
    return re.compile(rf"\b{re.escape(record)}(_t)?\b")


# words of a count that is no count of units: of settings given, a statistic, or of the
# tasks waiting for units (``++base->current_event_waiters`` before a condition wait)
NOT_UNITS = {"opt", "opts", "option", "options", "config", "conf", "setting", "settings"} | {
    "waiter",
    "waiters",
    "sleepers",
    "stat",
    "stats",
    "statistic",
    "statistics",
    "metric",
    "metrics",
}


def _counted(a) -> str | None:
    """The member an assignment moves, when it is a count of units (not a statistic, nor a
    count of settings: ``num_opts``)."""
    if a.op not in ("+=", "-="):
        return None
    member = a.target.split(".", 1)[1] if "." in a.target else a.target
    counts = COUNTER.search(member) or INVERSE.search(member) or re.match(r"n[A-Z]", member)
    if any(w in NOT_UNITS for w in _words(member)):
        return None
    if _by_a_limit(a):
        return None
    return member if counts or a.limited or _left_in(a.target) else None


def _by_a_limit(a) -> bool:
    """Whether A moves a count by a limit (``current_free_index -= allocator->max_free_index``
    when the limit is set anew): the count rebased on its bound, no units taken or given.

    >>> from types import SimpleNamespace as A
    >>> _by_a_limit(A(op="+=", text="a -> current_free_index += max_free_index"))
    True
    >>> _by_a_limit(A(op="-=", text="pool -> nused -= n"))
    False
    """
    for op in ("+=", "-="):
        if op in a.text:
            amount = a.text.split(op, 1)[1].strip()
            name = re.fullmatch(r"(?:\w+\s*(?:->|\.)\s*)*(\w+)", amount)
            return bool(name and LIMIT.search(name.group(1)))
    return False


# a record that holds what is left to spend: a token bucket, a budget of credits
LEFT = re.compile(r"tokens?|bucket|credits?|budget|quota", re.I)


def _left_in(target: str) -> bool:
    """Whether TARGET is a level of a record that holds what is left to spend (libevent's
    ``ev_token_bucket.read_limit``), not its rate, its maximum or when it was refilled."""
    record, _, member = target.partition(".")
    return (
        bool(member)
        and bool(LEFT.search(record))
        and not re.search(r"max|rate|cfg|conf|tick|time|updated|burst", member, re.I)
    )


# a comparison of two values, as a condition's tokens spell it
COMPARES = re.compile(r"[<>]=?|[=!]=")


def limited_counts(functions) -> None:
    """Mark the steps (``++``, ``-= n``) of the counts that a condition somewhere compares
    with a limit of the same record (``daemon->connections >= daemon->connection_limit``):
    counts of units taken against a capacity, whatever they are named."""
    limited = set()
    for fn in functions:
        for cond, members in [(b.cond, b.cond_members) for b in fn.branches] + [
            ("<", lp.cond_members) for lp in fn.loops
        ]:
            if not COMPARES.search(cond):
                continue
            limits = {m for m in members if CAPACITY.search(m.split(".")[-1])}
            records = {m.split(".")[0] for m in limits}
            limited |= {m for m in members if m not in limits and m.split(".")[0] in records}
    for fn in functions:
        for a in fn.assigns:
            # a step by an amount of its own (++, += n), not a sum of other records' counts
            amount = [x for x in a.sources if x != a.target]
            if a.op in ("+=", "-=") and a.target in limited and not any("." in x for x in amount):
                a.limited = True


# counts of an object's holders: references, pins, users, the requests a backend serves
REFERENCE = re.compile(r"ref|pin|hold|users|(^|_)load$", re.I)
REFCOUNT = re.compile(r"^n?refs?$|ref(erence)?_?(c(ou)?nt|s)$|refcount|^pin_?c(ou)?nt$", re.I)


# a condition that a count is now zero (== 0, !n, < 1), or was one before it was lowered
# (old == 1, from a fetch-and-add); or that it is not (!= 0, > 0)
ZERO = re.compile(r"==\s*[01]\b|\b[01]\s*==|!\s*[\w(]|<\s*[12]\b|<=\s*[01]\b")
NONZERO = re.compile(r"!=\s*[01]\b|>\s*[01]\b|>=\s*[12]\b")


def refcount(m: Member) -> bool:
    """Whether a member counts the references held on its record's object, by its name
    (``refcount``, ``ref_cnt``, ``nrefs``) or its comment ("reference count"): an object whose
    holders take and drop it."""
    integer = "*" not in m.type and "[" not in m.type
    said = re.search(r"\breference count", m.comment, re.I)
    return integer and bool(REFCOUNT.search(m.name) or said)


# a count of the holders of the record itself, not of units it hands out (a pool's pinned
# pages): its reference count, or the requests a backend serves
HELD_BY = re.compile(REFCOUNT.pattern + r"|(^|_)load$", re.I)


def references_taken(
    fn: Function, takes: list, objects: set[str], holders: set[str] = frozenset()
) -> list:
    """The counts raised that take a reference on an object the caller handed in
    (``page->nRef++``), or on the resource itself when it counts its holders
    (``address->refcount``, ``backend->load``; HOLDERS: the parameters that are the
    resource): the caller keeps the object, now counted as held. Or a reference counted as
    such on an object the caller's reaches (``++d->file.view->refcnt``)."""
    params = {n for _, n in fn.params}
    return [
        a
        for a in takes
        if a.target_base in objects
        and REFERENCE.search(a.target.split(".", 1)[-1])
        or a.target_base in holders
        and HELD_BY.search(a.target.split(".", 1)[-1])
        or root(a.target_base) in params
        and a.target_base != root(a.target_base)
        and REFCOUNT.search(a.target.split(".", 1)[-1])
    ]


# a standard container's member grown by one key (the parser's ``used.insert(i)``), or
# shrunk by one (``used.erase(i)``)
CONTAINER_STEP = re.compile(r"\.(insert|emplace\w*|push_\w+)\((\w+)\)$")
CONTAINER_DROP = re.compile(r"\.(erase|extract|remove)\((\w+)\)$")


def slots_named(fn: Function, takes: list) -> list[str]:
    """The parameters whose slot a count raised marks in use (``used.insert(i)``, the cell the
    caller names): taken for the caller, as a reference on an object handed in is."""
    params = {n for _, n in fn.params}
    out = []
    for a in takes:
        m = CONTAINER_STEP.search(a.text)
        if m and m.group(2) in params:
            out.append(m.group(2))
    return out


def checked_takes(fn: Function, takes: list) -> list:
    """The counts of TAKES moved only after a test that there is a unit to take: in the branch
    that test opens (``if (q->quota > 0) q->quota--``), or past a branch of it that returns
    (``if (d->used >= d->limit) return -1; d->used++``). A try-take, whose unit the caller
    keeps though nothing is handed out."""
    exits = [line for line, _, _ in fn.returns]

    def refuses(b, a) -> bool:  # a test of the count that returns before the take
        inside = [n for n in exits if b.line <= n <= b.end_line]
        return bool(inside) and b.end_line < a.line and set(b.path[:-1]) <= set(a.path)

    return [
        a
        for a in takes
        if a.op in ("+=", "-=")
        and any(
            a.target in b.cond_members and ((b.if_id, b.side) in set(a.path) or refuses(b, a))
            for b in fn.branches
        )
    ]


def takes_units(a) -> bool:
    member = _counted(a)
    return member is not None and (a.op == "+=") != _counts_left(a, member)


def gives_units(a) -> bool:
    member = _counted(a)
    return member is not None and (a.op == "-=") != _counts_left(a, member)


def _counts_left(a, member: str) -> bool:
    """Whether the count A moves says what is left to take, not what is taken: named so
    (``free``, ``quota``), counting a stash (``Assign.stashed``), or a level of a token
    bucket (``_left_in``)."""
    return bool(INVERSE.search(member) or a.stashed or _left_in(a.target))


def stashed_counts(functions, members: list[Member]) -> None:
    """Mark the steps of the counts that count a stash: a list whose head some function pops
    to hand the unit out (``p = alloc->quar; alloc->quar = p->next; return p``), and a
    count of its record, named for it (``num_quar``), that falls where the list is popped
    or rises where it is pushed. Such a count says how many units are left to take, as one
    named for free units does, whatever it is named; and the list is a free list
    (``Member.stash``), whatever it is named."""
    links = {f"{m.record}.{m.name}" for m in members if m.element and m.element == m.record}
    counts = [m for m in members if INTEGER.match(m.type)]
    heads: dict[tuple[str, str], list[Member]] = {}
    for m in members:
        heads.setdefault((m.record, m.name), []).append(m)
    tracked: set[str] = set()
    for fn in functions:
        read = locals_read(fn)
        returned = {s for _, srcs, _ in fn.returns for s in srcs}
        for a in fn.assigns:
            popped = [x for x in returned if a.target in read.get(x, ())]
            if a.op != "=" or "." not in a.target or not popped:
                continue
            if not any(s in links for s in a.sources):
                continue  # not the head set to the link of the unit it held
            record, head = a.target.split(".", 1)
            if QUEUE.search(head) or QUEUE.search(record):
                continue  # a queue's work, handed to whoever takes it off: no stash
            for m in heads.get((record, head), ()):
                m.stash = True
            words = {w.lower() for w in _words(head) if len(w) > 2} - {"list", "head", "first"}
            for m in counts:
                named = words & {w.lower() for w in _words(m.name)}
                if m.record == record and m.name != head and named:
                    tracked.add(f"{m.record}.{m.name}")
    for fn in functions:
        for a in fn.assigns:
            if a.target in tracked and a.op in ("+=", "-="):
                a.stashed = True


ACQUIRE_NAME = re.compile(
    r"get|acquire|alloc|checkout|claim|lookup|reserve|pin|fetch|insert|open|lock|take|grab"
    r"|begin|enter|start"
    r"|obtain|borrow|lease|new",
    re.I,
)
# calls that make a new object: what they hand back is the caller's to set up
MADE = re.compile(r"alloc|^new|_new|create|make|construct|strdup", re.I)
RELEASE_NAME = re.compile(
    r"release|free|put|checkin|unpin|unref|deref|decref|truncate|evict|unlock|close|drop"
    r"|return|give|purge|end"
    r"|dealloc|reclaim|discard|remove|unfetch|unmap",
    re.I,
)
BLOCKING = re.compile(
    r"wait|sleep|nanosleep|sched_yield|yield|poll|select|futex|sem_wait|evict|flush|checkpoint"
    r"|disk_|pread|pwrite|fsync|recv|read$|write$|backoff|busy|lock|try|retry",
    re.I,
)


# a word of a call's name that says it sleeps or waits (not "waiting_list_pop", "awaited")
SLEEP_WORD = re.compile(
    r"^((timed|cond|try)?wait(pid|for|until|ex|all|any)?\d*|\w*sleep|yield|futex\w*)$"
)


def sleeps(callee: str) -> bool:
    """Whether a call's name says it sleeps or waits, by a whole word of it
    (``uv_cond_wait``, ``pthread_cond_timedwait``, ``usleep``, ``ConditionVariableSleep``,
    ``sched_yield``; not ``waiting_udp_get_mem``).

    >>> sleeps("pthread_cond_timedwait"), sleeps("WaitIO"), sleeps("waiting_udp_get_mem")
    (True, True, False)
    """
    return any(SLEEP_WORD.match(w) for w in _words(callee))


# calls that move data (``read_write``, ``net__write``, ``sendmsg``): a loop around them alone
# transfers what it has, in as many rounds as it takes; it waits for nothing
TRANSFERS = re.compile(r"^(p?read|p?write|readv|writev|recv\w*|send\w*|x?fer)$")
WAITS = re.compile(r"wait|sleep|yield|futex|poll|select|lock|evict|flush|sync|backoff|busy")


def transfers(callee: str) -> bool:
    """Whether CALLEE is named for moving data and for nothing that waits, nor for trying to
    take something (``walTryBeginRead`` begins a read transaction: an attempt to acquire).

    >>> transfers("read_write"), transfers("net__write"), transfers("epoll_wait")
    (True, True, False)
    >>> transfers("walTryBeginRead")
    False
    """
    words = [w.lower() for w in _words(callee)]
    return (
        any(TRANSFERS.match(w) for w in words)
        and not WAITS.search(callee.lower())
        and "try" not in words
        and not any(ACQUIRE_NAME.fullmatch(w) for w in words)
    )


# the synchronization that guards a resource's own bookkeeping, not a lock one hands out
GUARD = re.compile(
    r"pthread_mutex|pthread_spin|pthread_cond|mutex_enter|mutex_leave|lock_guard|unique_lock"
    r"|scoped_lock|EnterCritical|LeaveCritical",
    re.I,
)


# an integer parameter that says which of a lock manager's locks: walLockShared(pWal, lockIdx)
LOCK_INDEX = re.compile(r"idx|index|slot|^i?lock_?(no|num|id)$", re.I)


def lock_index(fn: Function) -> str:
    """The parameter naming which lock a lock function takes or gives back (its object), or
    "" when it has none: a lock manager's locks are told apart by their index.

    >>> lock_index(Function("walLockShared", "wal.c", 1, 9, "", "int",
    ...                     [("Wal *", "pWal"), ("int", "lockIdx")], ""))
    'lockIdx'
    >>> lock_index(Function("pagerLockDb", "pager.c", 1, 9, "", "int",
    ...                     [("Pager *", "pPager"), ("int", "eLock")], ""))
    ''
    """
    return next(
        (
            n
            for t, n in fn.params
            if LOCK_INDEX.search(n) and "*" not in t and re.search(r"int|long|short|u\d", t)
        ),
        "",
    )


# a word of a function's name that says it locks (walLockShared, ngx_shmtx_trylock), and not
# a word that only holds the letters (getLRUClock, blockSize)
LOCK_WORD = re.compile(r"(try|un|rd|wr|re)?lock(s|ed|ing)?", re.I)
# a word that says a record is a log: a write-ahead log, a journal, a ring of bytes
LOG_WORD = re.compile(r"(x?log|wal|journal|ring)(s|buf|buffer|file)?", re.I)


# what a call that names a lock does to it, when not taking or giving it back (LWLockWakeup,
# LWLockQueueSelf, LWLockUpdateVar, LWLockHeldByMe, LWLockRegisterTranche)
LOCK_CHORES = {"wake", "wakeup", "queue", "dequeue", "update", "conflicts", "held", "holds"}
LOCK_CHORES |= {"init", "initialize", "register", "new", "tranche", "name", "report", "is"}


def names_a_lock_call(callee: str) -> bool:
    """Whether a call's name says it takes or gives back a lock: a lock word in it
    (pthread_mutex_lock, LockBufHdr, pagerLockDb, LWLockAcquire), and no word after it for
    another chore done to the lock.

    >>> names_a_lock_call("LWLockAcquire"), names_a_lock_call("LWLockWakeup")
    (True, False)
    """
    words = _words(callee)
    at = [i for i, w in enumerate(words) if LOCK_WORD.fullmatch(w)]
    return bool(at) and not set(words[at[0] + 1 :]) & LOCK_CHORES


UNLOCKS = re.compile(r"unlock|release", re.I)


def lock_calls(fn: Function, unlock: bool) -> list:
    """Calls that take (or, with ``unlock``, give back) a lock handed out by a lock manager,
    the guards of the function's own critical section left out."""
    out = []
    for c in fn.calls:
        if GUARD.search(c.callee) or not names_a_lock_call(c.callee):
            continue
        releasing = bool(UNLOCKS.search(c.callee)) or any("UNLOCK" in a for a in c.args)
        if releasing == unlock:
            out.append(c)
    return out


@dataclass
class ResourceGuess:
    name: str
    file: str
    line: int
    sharing: str
    unit: str
    elements: list[str]  # records of the objects it hands out
    score: float
    reasons: list[str]
    members: list[Member] = field(default_factory=list)  # its own and its objects' members
    # a log counted by one member (its end position): the path to it from the record the
    # resource is named after (``hdr.mxFrame`` of Wal); its changes are the log's events
    level: str = ""
    # an arena's positions, which handing out bytes moves past them (MemoryPool.pos, .end):
    # set back to a value not read from them, they give every block past it back at once
    positions: list[str] = field(default_factory=list)
    # of those, a growable buffer's lengths: appending moves them forward, and only cutting
    # them (``set_back``) gives bytes back
    lengths: list[str] = field(default_factory=list)
    # records that keep a free list of its objects, though not its objects' owner
    # (``ngx_cycle_s.free_connections`` of ngx_connection_s): of them, that list and its
    # count are among its members, and nothing else
    keepers: list[str] = field(default_factory=list)


@dataclass
class Candidate:
    """A proposed event site, before verification."""

    file: str
    function: str
    line: int
    kind: str  # WAIT, ACQUIRE, USE, RELEASE
    resource: str
    object_expr: str
    amount_expr: str
    origin: str
    why: str


def members_by_record(members: list[Member]) -> dict[str, list[Member]]:
    by_record: dict[str, list[Member]] = {}
    for m in members:
        by_record.setdefault(m.record, []).append(m)
    return by_record


def list_elements(functions, members: list[Member]) -> None:
    """Give an untyped free list its element type, read from the code that pops and pushes
    it: ``it = (item *) p->slots; p->slots = it->next`` pops ``_stritem``s off the
    ``void *slots`` of slabclass_t, and ``it->next = p->slots; p->slots = it`` pushes one.
    Such a member then lists the record's units, as a typed one does. So does an integer
    that heads a list linked by index (``buf = GetBufferDescriptor(sc->firstFreeBuffer);
    sc->firstFreeBuffer = buf->freeNext``): the index that links each unit to the next
    (``freeNext``) is then a link of the unit's record to its own kind, as a pointer is."""
    # pointers and integers whose element is not known yet: heads and links to give one
    no_element = {
        (m.record, m.name): m
        for m in members
        if not m.element and ("*" in m.type or INTEGER.match(m.type))
    }
    indices = {(m.record, m.name): m for m in members if INTEGER.match(m.type)}
    typed = {(m.record, m.name): m for m in members if m.element and "*" in m.type}
    for fn in functions:
        from_head: dict[str, set[str]] = {}  # local -> the heads it was read from
        linked: dict[str, set[tuple[str, str]]] = {}  # local -> (head, its link's record)
        for a in fn.assigns:
            if "." not in a.target:
                from_head.setdefault(a.target, set()).update(s for s in a.sources if "." in s)
            elif a.target_base and "." not in a.target_base:
                for s in a.sources:  # it->next = p->slots
                    linked.setdefault(a.target_base, set()).add((s, a.target.split(".")[0]))
        for a in fn.assigns:
            head = tuple(a.target.split(".", 1))
            if a.op == "=" and head in typed:
                # a typed list linked through an untyped pointer, cast back as it is popped
                # (unbound's ``alloc->reg_list = (struct regional*)r->next``, next a char *):
                # that pointer is the unit's link to its own kind
                element = typed[head].element
                local = [x for x in a.sources if "." not in x]
                if any(a.target in from_head.get(x, ()) for x in local):
                    for x in (s for s in a.sources if s.startswith(element + ".")):
                        link = no_element.get(tuple(x.split(".", 1)))
                        if link is not None and "*" in link.type and not link.element:
                            link.element = element
            if a.op != "=" or head not in no_element or no_element[head].element:
                continue
            element = ""
            for s in a.sources:
                if "." in s and s != a.target:  # pop: p->slots = it->next, it read from it
                    local = [x for x in a.sources if "." not in x]
                    if any(a.target in from_head.get(x, ()) for x in local):
                        element = s.split(".")[0]
                elif s in linked:  # push: p->slots = it, whose link was set to it
                    element = next((r for h, r in linked[s] if h == a.target), "")
                if element and element != head[0]:
                    break
            if element and element != head[0]:
                no_element[head].element = element
                if "*" not in no_element[head].type:  # linked by index: the unit's link too
                    for x in (s for s in a.sources if s.startswith(element + ".")):
                        if tuple(x.split(".", 1)) in indices:
                            indices[tuple(x.split(".", 1))].element = element


def pops_of(fn: Function, guess: ResourceGuess) -> list:
    """Assignments that pop a unit off one of the resource's lists: the list's head set to the
    link of the unit it held (``p->slots = it->next``), a link being a record's pointer to
    its own kind."""
    heads = links_of(guess)
    self_links = {f"{m.record}.{m.name}" for m in guess.members if m.element == m.record}
    # or through a pointer to a head (``ref = &allocator->free[i]; ... *ref = node->next``)
    through = heads_by_address(fn, lambda x: x in heads)
    return [
        a
        for a in fn.assigns
        if a.op == "="
        and (a.target in heads or through_pointer(a.target) in through)
        and any(s in self_links for s in a.sources)
    ]


def heads_by_address(fn: Function, head: Callable[[str], bool]) -> set[str]:
    """FN's locals that point at a list's head, a member HEAD says is one, by its address
    (``ref = &allocator->free[index]``, ``chunk_t **ref = &p->slots``)."""
    return {
        a.target
        for a in fn.assigns
        if a.target in fn.locals
        and any(head(x) for x in a.sources)
        and a.text.split("=", 1)[-1].lstrip().startswith("&")
    }


def through_pointer(target: str) -> str:
    """The local an assignment writes through (``*ref`` is ``ref``), else ""."""
    m = re.fullmatch(r"\*\s*(\w+)", target.strip())
    return m.group(1) if m else ""


def locals_read(fn: Function) -> dict[str, set[str]]:
    """What each of FN's locals was read from, over all its assignments (``m = p->d.last``:
    m -> ngx_pool_data_t.last, ngx_pool_s.d, p)."""
    read: dict[str, set[str]] = {}
    for a in fn.assigns:
        if "." not in a.target:
            read.setdefault(a.target, set()).update(a.sources)
    return read


def bumps(fn: Function, mine: set[str]) -> list:
    """Allocations from an arena: a position the resource keeps moved past what the function
    hands out, which was read from it (``m = p->d.last; p->d.last = m + size; return m``;
    ``ret = &pool->memory[pool->pos]; pool->pos += n``; from the far end, ``end -= n``; a
    growable array's next slot)."""
    if "*" not in fn.return_type:
        return []  # an arena hands out addresses, not a count or an id it moved on
    read = locals_read(fn)
    returned = {s for _, srcs, _ in fn.returns for s in srcs}
    tested = {
        m
        for b in fn.branches
        if COMPARES.search(b.cond)
        for m in b.cond_members
        if any(o != m and o.split(".")[0] == m.split(".")[0] for o in b.cond_members)
    }
    out = []
    for a in fn.assigns:
        if not _member_of(a.target, mine):
            continue
        moved = a.op in ("+=", "-=") or a.op == "=" and "+" in a.text.split("=", 1)[-1]
        # read by a local handed out, or by the returned address itself where the function
        # also tests it against another of the record's members: a growable array's next
        # slot (``if (arr->nelts == arr->nalloc) grow; ++arr->nelts; return arr->elts +
        # arr->elt_size * (arr->nelts - 1)``)
        direct = a.target in returned and a.target in tested
        if moved and (direct or any(a.target in read.get(x, ()) for x in returned)):
            out.append(a)
    return out


def listed_by_heads(by_record: dict[str, list[Member]]) -> dict[str, str]:
    """Records that are only a list's head: every member a pointer to one other record
    (``STAILQ_HEAD(conn_ev_head, conn_queue_item)`` expands to a struct of a first and a
    last ``conn_queue_item`` pointer). A resource that holds such a head holds what it
    lists."""
    out = {}
    for name, ms in by_record.items():
        pointed = {m.element for m in ms}
        if ms and all("*" in m.type for m in ms) and len(pointed) == 1 and "" not in pointed:
            (element,) = pointed
            if element != name:
                out[name] = element
    return out


def phase1(records: list[Record], members: list[Member]) -> list[ResourceGuess]:
    by_record = members_by_record(members)
    heads = listed_by_heads(by_record)
    out = []
    for r in records:
        ms = by_record.get(r.name, [])
        score, why = 0.0, []
        held = {
            m.element
            for m in ms
            if m.element
            and m.element != r.name
            and not m.element.startswith(("pthread", "__", "std"))
        }
        elements = sorted(held | {heads[e] for e in held if e in heads} - {r.name})
        names = [m.name for m in ms]
        ring = any(BUFFER.match(n) for n in names) and {"head", "tail"} <= {
            n.rstrip("_").lower() for n in names
        }
        std_container = any(
            re.search(r"std::(list|map|unordered_map|vector|deque|set)", m.type) for m in ms
        )
        if elements or ring or std_container:
            score += 2
            why.append(
                "holds "
                + (", ".join(elements) if elements else "a byte ring" if ring else "a container")
            )
        if any(COUNTER.search(n) for n in names):
            score += 1
            why.append("counts what it hands out")
        if any(CAPACITY.search(n) for n in names):
            score += 1
            why.append("has a capacity")
        if any(refcount(m) for m in ms):
            score += 1
            why.append("shared by reference")
        if any(SYNC.search(m.type) for m in ms):
            score += 1
            why.append("guarded by synchronization")
        if RESOURCE_NAME.search(r.name) or RESOURCE_NAME.search(r.comment):
            score += 1
            why.append("named like a resource")
        if NOT_RESOURCE.search(r.name):
            score -= 3
            why.append("named like settings, statistics or a wrapper")
        if score < 4:
            continue
        # by whole words of its name: "storing" holds no ring, nor "blocks" a lock (and its
        # comment may tell of other things: a page cache's of the journal it feeds)
        words = _words(r.name)
        # a lock's own state (its mode, an exclusive flag), not the mutex that guards the
        # record's bookkeeping (conn_queue's pthread_mutex_t lock)
        # a record that counts what it hands out besides a word named for its spinlock (a
        # table's entries, an entry's references) is the pool of those; the word only guards
        # its bookkeeping. A lock's state named for its mode (writeLock, lock_mode) stays one.
        counts = any(COUNTER.search(n) and not LOCK_WORD.search(n) for n in names)
        # a record that heads a free list of other records hands those out: a lock beside
        # the list, typed as one, guards it (BufferStrategyControl's buffer_strategy_lock,
        # of type slock_t)
        free_list = any(m.element and m.element != r.name and FREE_LIST.search(m.name) for m in ms)
        lock_state = any(
            re.search(r"lock$|^e_?lock|lock_?mode", m.name, re.I)
            and not SYNC.search(m.type)
            and not (free_list and re.search(r"lock", m.type, re.I))
            and not (counts and LOCK_WORD.fullmatch(m.name))
            for m in ms
        )
        sharing = (
            "shared"
            if any(LOCK_WORD.fullmatch(w) or w in ("mdl", "latch", "latches") for w in words)
            or lock_state
            else "log"
            if any(LOG_WORD.fullmatch(w) for w in words)
            else "pool"
        )
        unit = (
            "bytes"
            if sharing == "log" or ring
            else "locks"
            if sharing == "shared"
            else plural(elements[0])
            if elements
            else "units"
        )
        out.append(ResourceGuess(r.name, r.file, r.line, sharing, unit, elements, score, why))
    for g in out:
        g.members = [m for rec in [g.name, *g.elements] for m in by_record.get(rec, [])]
        _kept_free(g, by_record)
    return out


def plural(name: str) -> str:
    """The unit a pool of NAME objects counts in.

    >>> plural("conn"), plural("Latch"), plural("mysockaddr"), plural("box")
    ('conns', 'Latches', 'mysockaddrs', 'boxes')
    """
    return name + ("es" if re.search(r"(s|x|z|ch|sh)$", name) else "s")


def _kept_free(g: ResourceGuess, by_record: dict[str, list[Member]]) -> None:
    """Give G the free lists of its objects that other records keep (a server's or a
    cycle's list of free connections, ``free_connections``, with its count,
    ``free_connection_n``): a list of free units is the pool's, whoever holds its head."""
    own = {g.name, *g.elements}
    named = {w.lower() for w in _words(g.name)}
    for rec, ms in by_record.items():
        if rec == g.name:
            continue
        # an object's pointer named for the resource (page->pCache) is its way back, not
        # a list; a record the resource's objects point to may keep their free list too
        # (a connection's server, with its pool of free connections); a pointer named only
        # for what the resource is (an array's ``pool``, of apr_pool_t) is the pool it
        # draws from, not a list of pools
        lists = [
            m
            for m in ms
            if m.element == g.name
            and ("*" in m.type or INTEGER.match(m.type))  # a pointer, or an index
            and any(FREE_LIST.search(w) and w.lower() not in named for w in _words(m.name))
            and not (rec in own and _names_record(m.name, {g.name}))
        ]
        for head in lists:
            words = {w for w in _words(head.name) if len(w) > 2}
            counts = [
                m
                for m in ms
                if m is not head
                and not m.element
                and (COUNTER.search(m.name) or INVERSE.search(m.name))
                and words & set(_words(m.name))
            ]
            g.members += [head, *counts]
            if rec not in g.keepers:
                g.keepers.append(rec)


def owners(resources: list[ResourceGuess]) -> dict[str, list[str]]:
    """record name -> the resources it belongs to (the resource itself, or one whose objects
    it is: a page header may be the object of a cache and of a pager)."""
    out: dict[str, list[str]] = {}
    for g in resources:
        out.setdefault(g.name, []).append(g.name)
        for e in g.elements:
            out.setdefault(e, []).append(g.name)
    return out


def records_of(guess: ResourceGuess) -> set[str]:
    """The resource's own record and its objects', and those that keep free lists of
    them."""
    return {guess.name, *guess.elements, *guess.keepers}


def resource_of(fn: Function, own: dict[str, list[str]], files: dict[str, str]) -> str | None:
    """The resource a function works on: a method of the resource's class belongs to it;
    otherwise the one whose own members it touches most (twice an object's member), then the
    one declared in the same file. ``files``: resource -> the file declaring it."""
    if fn.record in own and fn.record in own[fn.record]:
        return fn.record
    score: dict[str, float] = {}
    for a in fn.accesses:
        for res in own.get(a.record, []):
            score[res] = score.get(res, 0.0) + (2.0 if a.record == res else 1.0)
    for t, _ in fn.params:
        for rec, holders in own.items():
            if record_pattern(rec).search(t):
                for res in holders:
                    score[res] = score.get(res, 0.0) + (2.0 if rec == res else 1.0)
    for res in score:
        if files.get(res) == fn.file:
            score[res] += 1.5
    return max(score, key=lambda k: (score[k], k)) if score else None


def phase2(fn: Function, resource: str, guess: ResourceGuess) -> list[Candidate]:
    """Every event this function may perform on ``resource``."""
    mine = records_of(guess)
    out: list[Candidate] = []

    def cand(kind, line, why, obj="", amount="1"):
        out.append(Candidate(fn.file, fn.name, line, kind, resource, obj, amount, "heuristic", why))

    short = fn.name.split("::")[-1]
    # a C++ constructor or destructor (llama_kv_cache::llama_kv_cache, ::~llama_kv_cache)
    structor = "::" in fn.name and short.lstrip("~") == fn.name.split("::")[-2]
    holders_of = {n for t, n in fn.params if record_pattern(resource).search(t)}
    # the count of the resource's own holders lowered on the instance handed in: dropping a
    # reference, though the function is named for tearing it down (a response destroyed
    # when its last holder lets go)
    lets_go = any(
        gives_units(a)
        and a.target_base in holders_of
        and HELD_BY.search(a.target.split(".", 1)[-1])
        for a in fn.assigns
    )
    if (lifecycle(short) or structor) and not first_reference(fn, mine) and not lets_go:
        return out  # creating or tearing down the resource itself moves none of its units
    links = links_of(guess)
    free = free_heads(guess, links)
    for loop in fn.loops:
        # (giving a lock back blocks no one: a loop of releases drains, it does not retry)
        blocking = [
            c
            for c in loop.body_calls + loop.cond_calls
            if BLOCKING.search(c) and not (names_a_lock_call(c) and UNLOCKS.search(c))
        ]
        if walks(fn, loop) and not any(sleeps(c) for c in loop.body_calls):
            continue  # an iteration over the resource, not a retry
        if INTERRUPTED.search(loop.cond) and not INTERRUPTED.sub("", loop.cond).count("errno"):
            continue  # a call restarted when a signal interrupted it: no wait of its own
        if blocking or loop.infinite:
            named = ", ".join(dict.fromkeys(blocking))  # each callee once
            cand("WAIT", loop.line, f"loop around {named or 'a retry'}")
    retries = [c.line for c in out if c.kind == "WAIT"]
    for slow in slow_branches(fn, mine, free):
        b = slow.branch
        if not any(b.line <= line <= b.end_line for line in retries):  # the loop is the wait
            cand("WAIT", b.line, slow.why)
    takes = [
        a
        for a in fn.assigns
        if takes_units(a)
        and _member_of(a.target, mine)
        or a.op == "="
        and _member_of(a.target, mine)
        and _truthy(a.text)
        and sets_held(a.target)
    ]
    cas = [c for c in fn.calls if CAS.search(c.callee)]
    carved = bumps(fn, mine)  # what it returns was read from the position it moved
    appended = appends(fn, guess.positions)  # or it wrote the bytes before the position it moved
    pops = pops_of(fn, guess) + carved + appended
    # a member handed out is an object when it points to one (not a count or a mode)
    pointing = {f"{m.record}.{m.name}" for m in guess.members if m.element or "*" in m.type}
    returns_object = any(record_pattern(r).search(fn.return_type) for r in mine) or any(
        s in pointing for _, srcs, _ in fn.returns for s in srcs
    )
    locking = guess.sharing in ("shared", "exclusive")
    locks = lock_calls(fn, unlock=False) if locking else []
    objects = [
        n for t, n in fn.params if any(record_pattern(r).search(t) for r in mine - {resource})
    ]
    # a reference taken on an object the caller handed in: one of the resource's, or the
    # resource itself where its holders count it (an address's refcount, a backend's load)
    referenced = references_taken(fn, takes, set(objects), holders_of)
    named = slots_named(fn, takes)
    checked = checked_takes(fn, takes)
    handed_out = hands_out_by_address(fn, mine)
    moves = queue_moves(fn, mine, queue_heads(guess, links), holders_of)
    pops = [a for a in pops if a not in moves.pops]
    if moves.pushes:
        a = moves.pushes[-1]
        queued = next(x for x in a.sources if "." not in x and x not in holders_of)
        cand("ACQUIRE", a.line, f"links {queued} into {a.target}: work queued", queued)
    if moves.pops:
        a = moves.pops[0]
        taken = next((s for _, srcs, _ in fn.returns for s in srcs if s in fn.locals), "")
        cand("RELEASE", a.line, f"takes work off {a.target}", taken)
    queued = bool(moves.pushes or moves.pops)  # the queue's own events say it all
    if (
        not queued
        and (takes or cas or locks or pops)
        and (
            returns_object
            or carved
            or appended
            or handed_out
            or referenced
            or named
            or checked
            or named_for(ACQUIRE_NAME, short)
            or first_reference(fn, mine)
        )
    ):
        line = max([a.line for a in takes + pops] + [c.line for c in cas] + [c.line for c in locks])
        amount = next(
            (a.text.split("+=")[-1].strip() for a in takes if a.op == "+=" and "+=" in a.text), "1"
        )
        # the object handed out: the one whose own count was raised (page->nRef++) when it is
        # returned, else a local returned as it is, else the first local a return reads
        returned = [srcs for _, srcs, _ in fn.returns if srcs]
        counted = {a.target_base for a in takes if a.target_base in fn.locals}
        candidates = (
            [x for srcs in returned for x in srcs if x in counted]
            + [srcs[0] for srcs in returned if len(srcs) == 1 and srcs[0] in fn.locals]
            + [srcs[0] for srcs in returned if srcs[0] in fn.locals]
        )
        obj = next((x for x in candidates if not no_object(fn, x) and x not in holders_of), "")
        obj = obj or (referenced[0].target_base if referenced else "") or next(iter(named), "")
        obj = obj or (lock_index(fn) if locking else "")
        cand("ACQUIRE", line, "takes units and hands out what it took", obj, amount or "1")
        if not any(c.kind == "WAIT" for c in out):
            for at, why in fallbacks(fn, mine, line):
                cand("WAIT", at, why)
    # the object given back: one the caller handed in, or the resource itself where the
    # count lowered is its holders' (an address's refcount dropped)
    dropped = [
        a.target_base
        for a in fn.assigns
        if gives_units(a)
        and a.target_base in holders_of
        and HELD_BY.search(a.target.split(".", 1)[-1])
    ]
    params = {n for _, n in fn.params}
    # or the slot the caller names, whose key a count drops (used.erase(i))
    dropped += [
        m.group(2)
        for a in fn.assigns
        if gives_units(a) and (m := CONTAINER_DROP.search(a.text)) and m.group(2) in params
    ]
    obj = objects[-1] if objects else dropped[0] if dropped else lock_index(fn) if locking else ""
    # the parameter set as a free list's head (srv->conns_pool = con) is the one given
    # back, not the one that holds the list
    obj = obj and next(
        (
            a.sources[0]
            for a in fn.assigns
            if a.target in free
            and a.sources == [a.text.split("=", 1)[-1].strip()]
            and a.sources[0] in params
        ),
        obj,
    )
    effects = release_effects(
        fn, mine, links, obj, guess.sharing in ("shared", "exclusive"), free, guess.positions
    )
    if takes:  # what a function that takes gives back on its way out on an error is an undo
        effects = [e for e in effects if not error_exit(fn, e.path)]
    if any(c.kind == "ACQUIRE" for c in out):
        # and so is a count an ACQUIRE raised lowered again after (a socket counted, then
        # dropped when binding it failed): the call's net move is the take
        raised = {a.target: a.line for a in takes if a.op in ("+=", "-=")}
        undone = {
            a.line
            for a in fn.assigns
            if gives_units(a) and a.target in raised and a.line > raised[a.target]
        }
        effects = [e for e in effects if not (e.what == "count lowered" and e.line in undone)]
    # freeing the resource's own record it was handed (a free of that pointer alone), with
    # no count lowered first, is tearing that instance down (connection_free(con):
    # free(con)), not a unit given back
    torn = {
        c.line
        for c in fn.calls
        if re.search(r"^(free|.*_free)$", c.callee)
        and len(c.args) == 1
        and c.args[0].strip() in holders_of
    }
    if torn and not any(gives_units(a) for a in fn.assigns):
        effects = [e for e in effects if not (e.what == "freed" and e.line in torn)]
    gives = [e for e in effects if e.what in ("count lowered", "put back")]
    if guess.positions and not queued:
        # the blocks past the position are given back, not the arena, which lives on
        for a in set_back(fn, guess.positions, guess.lengths)[-1:]:
            cand("RELEASE", a.line, f"sets the arena's position ({a.target}) back")
    if not queued and effects and (named_for(RELEASE_NAME, short) or gives):
        # where every call gives back: the last effect on the fewest branches (sqlite3PcacheRelease
        # lowers p->nRef on every call and unpins only at zero; the release is the lowering,
        # or its holds would pair with only some of the ACQUIREs that raised it)
        fewest = min(len(e.path) for e in effects)
        line = max(e.line for e in effects if len(e.path) == fewest)
        cand("RELEASE", line, "gives units back", obj)
    pointers = {(m.record, m.name) for m in guess.members if m.element}
    # a truth value says what state a unit is in (resuming, suspended): none of its data
    truths = {(m.record, m.name) for m in guess.members if re.search(r"\b(_Bool|bool)$", m.type)}
    data = [
        a
        for a in fn.accesses
        if objects
        and a.record in mine
        and a.record != resource
        and a.record not in guess.keepers
        and not _bookkeeping(a.member)
        and not _handle(a.member)
        and (a.record, a.member) not in pointers  # a reference to another struct, not data
        and (a.record, a.member) not in truths
        and not _names_record(a.member, mine)
        or a.record == resource
        and BUFFER.match(a.member)
    ]
    # the log's or store's own data read or written: I/O or a copy through one of its members
    io = [
        c
        for c in fn.calls
        if IO.search(c.callee)
        and not _hidden_by_macro(c)
        and any(
            _data_through(x, holders_of) for x in c.args[: 2 if MEMORY.match(c.callee) else None]
        )
    ]
    # a page written or read by a function named for it (pager_write(page)), not one that
    # only says it will not be (dont_write)
    named = objects and USE_NAME.search(short) and not NEGATED.search(short)
    if (data or io or named) and not fn.internal and not introspects(short):
        cand(
            "USE",
            # the first that runs on every call (not in an if-branch), where there is one:
            # a use recorded only on a rare path (the WAL's header written when it restarts)
            # would say the resource was hardly used
            _use_line(fn, data, io, mine)
            if data or io
            else min([a.line for a in fn.accesses] + [c.line for c in fn.calls], default=fn.line),
            "works through "
            + ", ".join(
                sorted({f"{a.record}.{a.member}" for a in data} | {f"{c.callee}()" for c in io})[:4]
                or [f"{objects[0]}, by its name"]
            ),
            objects[0] if objects else "",
        )
    return out


# what a function that reports on the resource is named for, and one that measures it
REPORT_WORDS = r"stats?|statistics?|overhead|dump|print|format|report|describe"
MEASURE_WORDS = r"estimate|size_of|compute_size|num"
INTROSPECTS = re.compile(rf"(^|_)({REPORT_WORDS}|{MEASURE_WORDS})(_|$)")
REPORTS_ON = re.compile(rf"(^|_)({REPORT_WORDS})(_|$)")


def _snake(name: str) -> str:
    """NAME's words, lower case, joined by underscores: ``getMemoryOverheadData`` is
    ``get_memory_overhead_data``."""
    return "_".join(_words(name))


def introspects(name: str) -> bool:
    """Whether a function is named for measuring or reporting on what it reads (its size,
    its statistics, the number of something, a dump): it looks at the resource's objects,
    it does not work through them, so it is no USE.

    >>> introspects("objectComputeSize"), introspects("item_stats_sizes_add")
    (True, True)
    >>> introspects("ap_queue_info_num_idlers")
    True
    >>> introspects("getLongFromObjectOrReply"), introspects("statlist_append")
    (False, False)
    """
    return bool(INTROSPECTS.search(_snake(name)))


def reports_on(name: str) -> bool:
    """Whether a function is named for reporting on the resource (its statistics, its
    overhead, a dump): what it allocates or keeps is its report, not units of the resource.
    Narrower than ``introspects``: the number of something (``zcalloc_num``) may be a unit
    count.

    >>> reports_on("getMemoryOverheadData"), reports_on("zcalloc_num")
    (True, False)
    """
    return bool(REPORTS_ON.search(_snake(name)))


def _use_line(fn: Function, data: list, io: list, mine: set[str]) -> int:
    """Where a function's USE goes: its first data access or I/O through the resource that
    runs on every call (in no if-branch); when all of them sit in branches, its first
    access to the resource's state that does. A use recorded only on a rare path (the WAL's
    header, written when the log restarts) would say the resource was hardly ever used."""
    first = min([(bool(a.path), a.line) for a in data] + [(bool(c.path), c.line) for c in io])
    if not first[0]:
        return first[1]
    always = [a.line for a in fn.accesses if not a.path and a.record in mine]
    return min(always, default=first[1])


MEMORY = re.compile(r"^(memcpy|memmove|memset)$")
USE_NAME = re.compile(r"write|read|copy|fill|modify|update|access|get_?data", re.I)
NEGATED = re.compile(r"dont|do_?not|no_?|skip|without", re.I)


def _data_through(arg: str, holders: set[str]) -> bool:
    """Whether an argument is data reached through the resource (``pool->buf``), not its
    accounting (``pool->size``, ``log->hdr``)."""
    return any(
        m and not _bookkeeping(m.group(1)) and not re.match(r"hdr|header", m.group(1), re.I)
        for h in holders
        for m in [re.search(rf"\b{re.escape(h)}\s*->\s*(\w+)", arg)]
    )


def _hidden_by_macro(c) -> bool:
    """Whether a call is I/O a macro spelt under a name that says something else
    (``MHD_itc_activate_(d->itc)`` writes a byte to wake a thread): the parser gives such a
    call its line as written in place of arguments, and the reader sees no I/O there."""
    return "" in c.args and not IO.search(c.args[-1])


ITERATES = re.compile(r"next|iter|step|advance", re.I)
# reading or writing data (smgrwrite, sqlite3OsRead), not a thread's mutex or condition
IO = re.compile(r"(?<!th)read|write|memcpy|memmove|memset|send|recv", re.I)


LIFECYCLE = {"open", "close", "create", "destroy", "startup", "shutdown", "init", "initialize"}


def first_reference(fn: Function, mine: set[str]) -> bool:
    """Whether FN makes one of the resource's objects and hands it out with its count set
    (``o = zmalloc(...); o->refcount = 1; return o``): a unit taken, not the resource
    created, whatever the function's name says."""
    returned = {s for _, srcs, _ in fn.returns for s in srcs}
    return any(
        a.op == "="
        and _member_of(a.target, mine)
        and a.target_base in returned
        and COUNTER.search(a.target.split(".", 1)[1])
        and _truthy(a.text)
        for a in fn.assigns
    )


def lifecycle(name: str) -> bool:
    """Whether a function creates or tears down something (a word of its name says so:
    ``pool_destroy``, ``pagerOpenWal``, ``Cache::init``).

    >>> lifecycle("pagerOpenWal"), lifecycle("buf_pool_init"), lifecycle("sqlite3PagerCloseWal")
    (True, True, True)
    >>> lifecycle("reopen_count"), lifecycle("pcache1Fetch")
    (False, False)
    """
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)
    return any(w.lower() in LIFECYCLE for w in words)


def walks(fn: Function, loop) -> bool:
    """Whether a loop iterates (a counted for, or a walk down a list: ``p = p->next``) rather
    than retries."""
    if loop.form in ("for", "range-for") and not loop.infinite:
        return True
    # stepped by an iterator: while (next(it, &x))
    if any(ITERATES.search(c) for c in loop.cond_calls):
        return True
    # the condition's local stepped along a member of what it points to: p = p->next
    return any(
        loop.line <= a.line <= loop.end_line
        and a.target in loop.cond_locals
        and a.target in a.sources
        and any("." in x for x in a.sources)
        for a in fn.assigns
    )


# a call that takes long, by a word of its name: storage read or written (readDbPage,
# sqlite3OsRead, pwrite), pages flushed, evicted or spilled (xStress), a sleep or a wait
SLOW_WORDS = {
    "read", "pread", "write", "pwrite", "fsync", "sync", "flush", "evict", "spill", "stress",
    "sleep", "usleep", "nanosleep", "wait",
}  # fmt: skip
# a member that bounds how much the resource may hold before it must make room
LIMIT = re.compile(r"capacity|max|limit|spill|thresh|high_?water", re.I)
NULL = r"(0|NULL|nullptr)"


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]


def named_for(pattern: re.Pattern, name: str) -> bool:
    """Whether a word of NAME is what PATTERN names, or it with a prefix of up to three letters
    (``ngx_palloc``, ``sdsfree``): ``pager_put`` and ``sqlite3PagerUnref`` are,
    ``set_input_idxs`` is not named for putting (a common word that merely ends in the verb
    says nothing).

    >>> named_for(RELEASE_NAME, "set_input_k_idxs"), named_for(RELEASE_NAME, "bp_put")
    (False, True)
    """
    return any(
        pattern.match(w) or w not in COMMON and any(pattern.fullmatch(w[i:]) for i in (1, 2, 3))
        for w in _words(name)
    )


# words that end in a verb the names look for without meaning it
COMMON = {"input", "output", "throughput", "compute", "append", "send", "spend", "extend"}
COMMON |= {"target", "budget", "spin", "block", "clock", "legend", "pend", "depend"}


def slow_calls(calls: list[str]) -> list[str]:
    """The calls that take long (``readDbPage``, ``sqlite3OsRead``, ``xStress``)."""
    return sorted({c for c in calls if SLOW_WORDS & set(_words(c))})


@dataclass
class SlowBranch:
    branch: Branch
    why: str
    lookup: str = ""  # the call whose missing result the branch makes up for ("" when full)


def lookups(fn: Function, mine: set[str]) -> dict[str, str]:
    """Pointers that hold what a call handed the resource returned (``pBase =
    sqlite3PcacheFetch(pPager->pPCache, pgno, 3)``): local -> that call."""
    holders = {n for t, n in fn.params if any(record_pattern(r).search(t) for r in mine)}
    out: dict[str, str] = {}
    for a in fn.assigns:
        if (
            a.calls
            and a.target in fn.locals
            and "*" in fn.locals[a.target]
            and any(_member_of(x, mine) or x in holders for x in a.sources)
        ):
            out.setdefault(a.target, a.calls[0])
    return out


def misses(b: Branch, local: str) -> bool:
    """Whether the branch runs when ``local`` holds nothing ready: the then-side of ``!p`` or
    ``p == 0``, the else-side of ``p``, ``p->member`` or ``p != 0`` (and more)."""
    t, x = re.sub(r"\s+", "", b.cond), re.escape(local)
    if b.side == 0:
        return bool(re.fullmatch(rf"!{x}|{x}=={NULL}|{NULL}=={x}", t))
    return bool(re.match(rf"({x}(->\w+)*|{x}!={NULL})(&&|$)", t))


# calls that report or check, not work: what a branch that makes more units is not made of
REPORTS = re.compile(r"assert|log|debug|trace|printf|perror|error|warn", re.I)


def slow_branches(fn: Function, mine: set[str], free: set[str] = frozenset()) -> list[SlowBranch]:
    """The slow paths of a lookup that are branches, not loops: the branch a lookup takes
    when what it was handed back has no object or no data (a miss), or when the resource
    is past its limit (full), around a call that takes long (I/O, eviction, a spill, a
    sleep); and the branch taken when a list of free units (``free``, as ``free_heads``)
    gave nothing, around whatever call makes more (a new slab, a drain of reusable
    connections) before the branch takes from the list again. A branch taken on any other
    condition is the function's ordinary work."""
    found = lookups(fn, mine)
    # what was read off a free list, directly or through a call handed it
    emptied = {
        a.target: a.calls[0] if a.calls else next(s for s in a.sources if s in free)
        for a in fn.assigns
        if a.target in fn.locals and any(s in free for s in a.sources)
    }
    out = []
    for b in fn.branches:
        slow = slow_calls(b.body_calls)
        missed = next((x for x in b.cond_locals if x in found and misses(b, x)), None)
        if slow and missed:
            why = f"branch taken when {found[missed]}() gave no ready object ({b.cond}): a miss"
            out.append(SlowBranch(b, f"{why}, around {', '.join(slow)}", found[missed]))
            continue
        empty = next((x for x in b.cond_locals if x in emptied and misses(b, x)), None)
        more = [c for c in b.body_calls if not REPORTS.search(c) and not GUARD.search(c)]
        # it makes more and takes again: the local is read off the same list anew
        again = empty and any(
            a.target == empty
            and b.line <= a.line <= b.end_line
            and any(s in free for s in a.sources)
            for a in fn.assigns
        )
        if again and more:
            why = f"branch taken when {emptied[empty]} gave no free unit ({b.cond}): empty"
            out.append(SlowBranch(b, f"{why}, around {', '.join(more[:3])}", ""))
            continue
        if not slow:
            continue
        around = ", ".join(slow)
        compares = re.search(r"(^| )(<|>|<=|>=)( |$)", b.cond)
        limit = [
            m for m in b.cond_members if _member_of(m, mine) and LIMIT.search(m.split(".", 1)[1])
        ]
        if b.side == 0 and compares and limit:
            why = f"branch taken when the resource is past its limit ({b.cond}): full"
            out.append(SlowBranch(b, f"{why}, around {around}"))
    return out


def fallbacks(fn: Function, mine: set[str], take: int) -> list[tuple[int, str]]:
    """The slow paths of a function that takes a unit at line TAKE, where they are not a
    retry loop nor a miss: (line, why) of

    - **none spare, make more**: a branch taken when a count or a list of the resource's
      says none is left (``if (p->sl_curr == 0) newslab(id);``, ``if (!pool->free)``),
      around a call that makes more, after which the function takes (past the branch);
    - **the fast path returns first**: a branch on the resource's state that returns what
      it found (``if (cl) { pool->chain = cl->next; return cl; }``), after which the
      function makes one anew and hands that out (``cl = palloc(pool, ...); return cl``).
      The call that makes it is the slow path.

    - **a spare, else make one**: an if on whether a count or a list of the resource's has
      one left (``if (srv->conns_pool)``), whose then-branch takes it at TAKE and whose
      else-branch makes the same local anew by a call (``con = connection_init(srv)``): the
      else is the slow path.

    Each says what the paper's WAIT is, the slow way to get a unit; a branch taken on any
    other condition is the function's ordinary work."""
    out: list[tuple[int, str]] = []
    flat = lambda b: re.sub(r"\s+", "", b.cond)  # noqa: E731
    # a member is a count by its name, or by the function stepping it (p->sl_curr--)
    stepped = {
        a.target.split(".", 1)[1]
        for a in fn.assigns
        if a.op in ("+=", "-=") and _member_of(a.target, mine)
    }
    for b in fn.branches:
        if b.side != 0 or b.line > take:
            continue
        more = [
            c
            for c in b.body_calls
            if not REPORTS.search(c) and not GUARD.search(c) and not named_for(RELEASE_NAME, c)
        ]
        returns = [r for r in fn.returns if b.line <= r[0] <= b.end_line]
        counts = [
            m
            for m in b.cond_members
            if _member_of(m, mine)
            and (
                COUNTER.search(m.split(".", 1)[1])
                or FREE_LIST.search(m.split(".", 1)[1])
                or m.split(".", 1)[1] in stepped
            )
        ]
        spelt = [_spelt(m, fn.file) for m in counts]
        none_left = any(
            re.search(rf"(^|[(&|])(!{x}|{x}==({NULL})|{x}<=0)($|[)&|])", flat(b)) for x in spelt
        )
        if none_left and more and not returns and take > b.end_line:
            why = f"branch taken when none is spare ({b.cond}): makes more, around {more[0]}"
            out.append((b.line, why))
        spare = any(
            re.search(rf"(^|&&)({x}|{x}!={NULL}|{NULL}!={x}|{x}>0|{x}!=0)(&&|$)", flat(b))
            for x in spelt
        )
        other = next((e for e in fn.branches if e.if_id == b.if_id and e.side == 1), None)
        # the else gives the local the then-branch took off the resource from a call instead
        took = {a.target for a in fn.assigns if b.line <= a.line <= b.end_line} & set(fn.locals)
        makes = [
            a.calls[0]
            for a in fn.assigns
            if other and other.line <= a.line <= other.end_line and a.target in took and a.calls
        ]
        if spare and b.line <= take <= b.end_line and makes:
            why = f"branch taken when none is spare (else of {b.cond}): makes one, {makes[0]}"
            out.append((other.line, why))
    if out:
        return out
    returned = {s for _, srcs, _ in fn.returns for s in srcs}
    # what was read off the resource's lists, or a list head handed in by its address
    read_off = read_off_resource(fn, mine) | by_address(fn)
    for b in fn.branches:
        # a branch taken when what was read off the resource is there, that hands
        # something out and returns: the fast path (not one on the state of an object
        # the caller handed in: that is a choice between two ways of doing the work)
        on_resource = any(
            re.search(rf"(^|&&)(\*?{x}|\*?{x}!={NULL}|{NULL}!=\*?{x}|{x}->\w+)(&&|$)", flat(b))
            for x in b.cond_locals
            if x in read_off
        )
        # or one that takes from what it read off the resource and jumps past the rest
        # (``if (size <= free_space(active)) { active->first_avail += size; goto done; }``)
        inside = [a for a in fn.assigns if b.line < a.line <= b.end_line]
        stepped_off = any(
            root(a.target) in read_off and a.op in ("+=", "-=") or _member_of(a.target, mine)
            for a in inside
        )
        leaves = [r for r in fn.returns if b.line <= r[0] <= b.end_line]
        jumps = b.exits and not leaves and set(b.cond_locals) & read_off and stepped_off
        early = [r for r in leaves if r[1] and not re.search(rf"\b{NULL}\b", r[2])]
        if b.side != 0 or not (on_resource and early or jumps):
            continue
        at = early[0][0] if early else b.end_line
        for a in fn.assigns:
            handed = returned & _made_from(fn, a.target) if a.target in fn.locals else set()
            made = a.line > b.end_line and (a.target in returned or handed) and a.calls
            if made and any(named_for(ACQUIRE_NAME, c) or MAKES.search(c) for c in a.calls):
                why = f"when the fast path ({b.cond}, leaving at line {at}) had "
                out.append((a.line, why + f"nothing, makes one: {a.calls[0]}"))
                return out
    return out


def _spelt(member: str, file: str) -> str:
    """A pattern for how code spells a member (``record.name``) read by a condition: through
    a pointer or an object (``p->sl_curr``, ``pool.free``), or, for a variable of the
    function's own file, by its name alone."""
    record, name = member.split(".", 1)
    through = rf"[\w\[\]().>*-]*(->|\.){re.escape(name)}"
    return rf"(?:{through}|{re.escape(name)})" if record == file_record(file) else through


# a loop's test that a signal interrupted the call it restarts (errno == EINTR)
INTERRUPTED = re.compile(r"\berrno\s*==\s*EINTR\b|\bEINTR\s*==\s*errno\b")


# what makes a unit anew where none was spare
MAKES = re.compile(r"alloc|new|create|make|grow|append|expand|extend|spawn", re.I)


@dataclass
class Effect:
    line: int
    path: tuple  # the if-branches it sits in
    what: str  # count lowered, put back, freed, unlocked, handed to a release


def free_heads(guess: ResourceGuess, links: set[str]) -> set[str]:
    """Of the resource's lists (``links``, its ``links_of``), those that hold units no one
    has: named so (a free list, an LRU of unpinned pages), popped to hand a unit out (a
    stash: ``stashed_counts``), or untyped (``void *slots``: raw chunks, not live objects).
    Pushing onto another list (the dirty pages) is bookkeeping, not a release."""
    return {
        f"{m.record}.{m.name}"
        for m in guess.members
        if f"{m.record}.{m.name}" in links
        and (m.stash or FREE_LIST.search(m.name) or re.match(r"^(const\s+)?void\s*\*", m.type))
    }


# a list of work waiting its turn: what is linked in holds a place until it is taken off
QUEUE = re.compile(r"queue|fifo|jobs?|work|pending|backlog|(^|_)w?q$", re.I)


def queue_heads(guess: ResourceGuess, links: set[str]) -> set[str]:
    """Of the resource's lists, those that queue work (named so, or the resource is): what
    is linked into one holds a place in it until it is taken off, so a push takes a unit
    and a pop gives one back, the other way round from a free list."""
    named = bool(QUEUE.search(guess.name))
    free = free_heads(guess, links)
    return {
        f"{m.record}.{m.name}"
        for m in guess.members
        if f"{m.record}.{m.name}" in links - free
        and m.element != m.record  # an object's link to the next chains the list
        and not FREE_LIST.search(m.name)
        and (named or QUEUE.search(m.name))
    }


@dataclass(frozen=True)
class QueueMoves:
    pushes: list  # assignments that link an object handed in or made into a queue
    pops: list  # assignments that set a queue's head to its first object's link


def queue_moves(fn: Function, mine: set[str], queues: set[str], holders: set[str]) -> QueueMoves:
    """Where the function links work into one of the resource's queues (a head or a last
    link set to an object it was handed or made: ``*(cq->head).stqh_last = item``) or takes
    work off one (the head set to its first object's link: ``head.first = first->next``).
    ``holders``: the parameters that are the resource itself, which link nothing in."""
    if not queues:
        return QueueMoves([], [])
    owners = {q.split(".", 1)[0] for q in queues}
    # what is linked in comes from elsewhere: not the queue's own first object, read off it
    first = {a.target for a in fn.assigns if "." not in a.target and set(a.sources) & queues}
    objects = (set(fn.locals) | {n for _, n in fn.params}) - first
    pushes, pops = [], []
    for a in fn.assigns:
        if a.op != "=" or a.target not in queues:
            continue
        rhs = a.text.split("=", 1)[-1]
        # (the head set to an object's own link, head = item->next, unlinks it: no push)
        pushed = [
            x
            for x in a.sources
            if "." not in x
            and x in objects
            and x not in holders
            and not re.search(rf"\b{re.escape(x)}\s*(->|\.)\s*\w*(next|prev|link)", rhs, re.I)
        ]
        if pushed:
            pushes.append(a)
        elif any(
            "." in x and x.split(".", 1)[0] in mine - owners and LINK.search(x.split(".", 1)[1])
            for x in a.sources
        ):
            pops.append(a)
    return QueueMoves(pushes, pops)


def release_effects(
    fn: Function,
    mine: set[str],
    links: set[str],
    obj: str,
    locks: bool = True,
    free: set[str] = frozenset(),
    positions: tuple[str, ...] | list[str] = (),
) -> list[Effect]:
    """Where the function gives units back: a count lowered, a flag cleared or a tail moved,
    an object put back on a list, free/put/delete, an unlock, or the object handed to a
    function named for releasing it. An arena's position (``first_avail``, ``pos``) is no
    count: moved forward, it carves; only set back does it give back (``set_back``)."""
    # what can be put back: the object handed in, or any parameter when it is not known
    objects = {obj} if obj else {n for _, n in fn.params}
    # units linked in front of a list's head (it->next = p->slots): pushed when the head is
    # then set to them, whatever the list is named
    linked = {
        a.target_base
        for a in fn.assigns
        if _member_of(a.target, mine)
        and a.target_base in fn.locals
        and any(s in links and s != a.target for s in a.sources)
    }
    # objects the function just made (it = item_alloc(...); p = malloc(...)) and what it
    # carves out of them (chunk = ITEM_schunk(it)): setting their fields up (it->next = 0,
    # chunk->used = 0) starts them; nothing is given back
    made: dict[str, int] = {}
    for a in sorted(fn.assigns, key=lambda a: a.line):  # and what is carved out of them
        if a.target in fn.locals and a.target not in made:
            if any(MADE.search(c) for c in a.calls) or any(x in made for x in a.sources):
                made[a.target] = a.line
    out = []
    for a in fn.assigns:
        if not _member_of(a.target, mine):
            continue
        if a.target_base in made and a.line > made[a.target_base]:
            continue
        member = a.target.split(".", 1)[1]
        # what is set on the list is the object itself (head = c), not what it links to
        # (head = c->next: a pop)
        value = re.sub(r"^\(\s*[\w\s]+\*+\s*\)\s*", "", a.text.split("=", 1)[-1].strip())
        if gives_units(a) and a.target not in positions:
            out.append(Effect(a.line, a.path, "count lowered"))
        elif (
            a.op == "="
            and a.target in free
            # the unit, or its index in a list linked by index (head = buf->buf_id)
            and (
                value in linked
                or re.fullmatch(r"\w+\s*(->|\.)\s*\w+", value)
                and root(value) in linked
                and not set(a.sources) & links
            )
            and not any(lp.line <= a.line <= lp.end_line for lp in fn.loops)  # a list filled
        ):
            out.append(Effect(a.line, a.path, "put back"))
        elif a.op == "=" and (
            falsy(a.text)
            and FLAG.search(member)
            or a.target in links
            and FREE_LIST.search(member)
            and value in objects
            or member.rstrip("_") == "tail"
        ):
            out.append(Effect(a.line, a.path, "put back"))
    for c in fn.calls:
        if re.search(r"^atomic_store", c.callee):
            out.append(Effect(c.line, c.path, "flag cleared"))
        elif re.search(r"^(free|.*_free|.*put)$", c.callee):
            # giving units back frees or puts the object handed in; freeing storage a struct
            # keeps (free(pool->slots)) or what the function walked a list for tears it down
            if c.args and c.args[0].strip() in objects:
                out.append(Effect(c.line, c.path, "freed"))
        elif (
            obj
            and named_for(RELEASE_NAME, c.callee)
            and any(re.search(rf"\b{re.escape(obj)}\b", x) for x in c.args)
        ):
            out.append(Effect(c.line, c.path, f"handed to {c.callee}"))
    if locks:
        out += [Effect(c.line, c.path, "unlocked") for c in lock_calls(fn, unlock=True)]
    out += [Effect(line, (), "freed") for line, _ in fn.deletes]
    return out


def same_path(a: tuple, b: tuple) -> bool:
    """Whether two places can both run: no if takes one branch for one and the other for
    the other."""
    branch = dict(a)
    return all(branch.get(i, side) == side for i, side in b)


def within(fn: Function, inner: tuple, outer: tuple) -> bool:
    """Whether code on path INNER runs whenever code on path OUTER does, after it: every
    branch of INNER is one of OUTER's, or tests what one of OUTER's tests, on the same side
    (a lock macro's own ``if (lockvar)`` around the unlock, as around the lock)."""
    conds = {(b.if_id, b.side): re.sub(r"\s+", "", b.cond) for b in fn.branches}
    tested = {(conds.get(step), step[1]) for step in outer}
    return all(step in outer or (conds.get(step), step[1]) in tested for step in inner)


def _bookkeeping(member: str) -> bool:
    """Counters, flags and links, what a unit is (its type, its encoding, its state, its id
    or its class's: ``uid``, ``slabs_clsid``), how long its data is (``klen``), when it was
    last touched (its LRU clock, its expiry) and how it is set up (its conf): the resource's
    accounting, replacement policy and settings, not its data."""
    return bool(
        COUNTER.search(member)
        or FLAG.search(member)
        or LINK.search(member)
        or CAPACITY.search(member)
        or re.search(r"flags?$|^i?key$|^pgno$|(^|_)[a-z]{0,3}id$|[a-z_]len$|^length$", member, re.I)
        or re.search(r"^(type|kind|encoding|state|status|mode)$", member, re.I)
        or re.search(r"lru|lfu|^(a|m)?time$|_time$|clock|stamp|expir|ttl$", member, re.I)
        or re.search(r"^(conf|config|cfg|settings?|opts|options)$|_(conf|config|cfg)$", member)
    )


def _handle(member: str) -> bool:
    """What names a unit to the system or says what is to be done with it (its socket, its
    event registration, its callback, the action or wait pending on it): touching those
    sets a unit up or moves it along, it does not work through what it holds. (I/O through
    a handle, read(c->fd, ...), is still a use: see ``_data_through``.)"""
    return bool(
        re.search(r"^(fd|sock|socket|handle|ev|event)$", member, re.I)
        or re.search(r"_(type|kind|action|cb|callback)$|^(on|wait)_", member, re.I)
    )


def _names_record(member: str, records: set[str]) -> bool:
    """Whether a member is named for one of the records (``pPager``, ``m_pool``): a pointer
    to it, even where its declaration was not parsed.

    >>> _names_record("pPager", {"Pager"}), _names_record("pCache", {"PCache"})
    (True, True)
    >>> _names_record("pData", {"Pager"})
    False
    """
    names = {member.lower(), re.sub(r"^(m_|_|p(?=[A-Z]))", "", member).lower()}
    return any(r.lower() in names for r in records)


def links_of(guess: ResourceGuess) -> set[str]:
    """The resource's members that list its objects (free lists, slot arrays, maps), as
    ``record.member``."""
    mine = records_of(guess)
    # an object's pointer back to the resource that owns it (page -> cache) lists nothing,
    # nor does a pointer to what cannot be changed through it (const array *tempdirs: a
    # setting read, no list of units to link into or take off)
    return {
        f"{m.record}.{m.name}"
        for m in guess.members
        if m.element in mine
        and not (m.element == guess.name and m.record not in (guess.name, *guess.keepers))
        and not re.match(r"\s*const\b", m.type)
    }


def _member_of(target: str, records: set[str]) -> bool:
    return "." in target and target.split(".", 1)[0] in records


def made_from_params(fn: Function) -> set[str]:
    """FN's parameters, and the locals assigned from one (``buf = lookup(buffer - 1)``)."""
    params = {n for _, n in fn.params if n}
    return params | {
        a.target for a in fn.assigns if set(a.sources) & params and "." not in a.target
    }


def sets_held(target: str) -> bool:
    """Whether setting the member TARGET (record.member) true marks a unit held: a flag or a
    count by its name (``in_use``, ``pinned``, ``refcount``), not a state of the resource as
    a whole (``terminated``, ``dirty``) nor a setting."""
    member = target.split(".", 1)[-1]
    return bool(FLAG.search(member) or COUNTER.search(member))


def _truthy(text: str) -> bool:
    rhs = text.split("=", 1)[-1].strip()
    return rhs in ("true", "1") or rhs.endswith(("true", "= 1"))


def falsy(text: str) -> bool:
    """Whether an assignment's value is nothing: false, zero, NULL, or -1 (``f->sentto =
    NULL``)."""
    rhs = text.split("=", 1)[-1].strip()
    return rhs in ("false", "0", "NULL", "nullptr", "- 1")


# --- logs counted by their end position --------------------------------------------------------

# a member that says where a log ends: the index of its last frame, record or entry, or the
# sequence number or offset of the next one (WalIndexHdr.mxFrame)
LOG_POSITION = re.compile(r"frame|lsn|offset|entr(y|ies)|record|seq", re.I)
INTEGER = re.compile(
    r"^(const\s+)?(unsigned\s+|signed\s+)?(u?int\d*(_t)?|u\d+|i\d+|long|short|size_t|off_t"
    r"|unsigned|int|long long|uint64|ssize_t|Pgno|sqlite3_int64|sqlite_int64)(\s*\|.*)?$"
)


@dataclass
class _Change:
    fn: Function
    line: int
    owner: str  # the record the path starts from: Wal
    path: str  # hdr.mxFrame
    how: str  # advance (set to a local counted up), reset (set to 0), rewind (anything else)
    text: str


def _path_of(fn: Function, a, records: set[str], by_record: dict) -> tuple[str, str] | None:
    """(owner record, member path) of an assignment to a member: ``pWal->hdr.mxFrame`` is
    (Wal, hdr.mxFrame) when pWal is a Wal and hdr a member of it; a direct ``log->lsn`` is
    (log's record, lsn)."""
    record, member = a.target.split(".", 1)
    parts = [x for x in re.split(r"\s*(?:->|\.)\s*", a.target_base.strip()) if x]
    if not parts or not re.fullmatch(r"[A-Za-z_]\w*", parts[0]):
        return None
    types = dict((n, t) for t, n in fn.params) | fn.locals
    t = types.get(parts[0], "")
    owner = next((r for r in sorted(records) if record_pattern(r).search(t)), None)
    if owner is None:
        return None
    current = owner
    for step in parts[1:]:
        m = next((m for m in by_record.get(current, []) if m.name == step), None)
        if m is None or "*" in m.type:
            return None
        current = next((r for r in records if record_pattern(r).fullmatch(m.type.strip())), "")
        if not current:
            return None
    if current != record:
        return None
    return owner, ".".join([*parts[1:], member])


# a pointer to raw bytes: what an arena carves its blocks from
BYTES = re.compile(
    r"^(const\s+)?((un)?signed\s+)?(char|u?int8_t|u_?char|byte|std::byte|void)\s*\*$", re.I
)


def byte_members(by_record: dict[str, list[Member]]) -> dict[str, set[str]]:
    """record -> its members that point to raw bytes (``record.member``), for the records
    that have any: what an arena carves blocks from, or a buffer grows."""
    out = {
        rec: {f"{rec}.{m.name}" for m in ms if BYTES.match(m.type.strip())}
        for rec, ms in by_record.items()
    }
    return {rec: b for rec, b in out.items() if b}


def arenas(
    functions: list[Function], members: list[Member], resources: list
) -> list[ResourceGuess]:
    """Records that are arenas by what a function does with them: it hands out an address in
    their bytes and moves a position past it (``ret = &pool->memory[pool->pos]; pool->pos +=
    n; return ret``, or ``m = p->last; p->last = m + n; return m``). Whatever a record is
    named or declared, carving blocks out of its memory is handing out units of it."""
    by_record = members_by_record(members)
    known = {g.name: g for g in resources}
    carvable = byte_members(by_record)  # the records with bytes to carve
    found: dict[str, tuple[Function, str]] = {}
    positions: dict[str, set[str]] = {}
    for fn in functions:
        short = fn.name.split("::")[-1]
        # an arena hands out addresses: only a function that returns a pointer carves
        if lifecycle(short) or "*" not in fn.return_type:
            continue
        moved_in = {a.target.split(".", 1)[0] for a in fn.assigns if "." in a.target}
        if not moved_in & carvable.keys():
            continue
        returned = {s for _, srcs, _ in fn.returns for s in srcs}
        read = locals_read(fn)
        handed = set().union(*(read.get(x, set()) for x in returned), returned)
        for rec in sorted(moved_in & carvable.keys()):
            raw = carvable[rec]
            moved = [a for a in bumps(fn, {rec}) if handed & raw or a.target in raw]
            if moved:
                found.setdefault(rec, (fn, moved[0].target))
                positions.setdefault(rec, set()).update(a.target for a in moved)
    # a record embedded by value in a resource's (ngx_pool_s's ``ngx_pool_data_t d``) is
    # part of it: its positions are that resource's
    embedded = {
        m.element: known[m.record]
        for m in members
        if m.record in known and m.element and "*" not in m.type and "[" not in m.type
    }
    out = []
    for rec, (fn, position) in sorted(found.items()):
        owner = known.get(rec) or embedded.get(rec)
        if owner is not None:
            owner.positions = sorted(set(owner.positions) | positions[rec])
            continue
        why = f"an arena: {fn.name} hands out its bytes and moves {position} past them"
        g = ResourceGuess(rec, fn.file, fn.line, "pool", "bytes", [], 1.0, [why])
        g.members, g.positions = list(by_record.get(rec, [])), sorted(positions[rec])
        out.append(g)
    return out


# a call that makes an allocation anew at another size: how a growable buffer grows
RESIZES = re.compile(r"realloc", re.I)


def moved_forward(a, read: dict[str, set[str]]) -> bool:
    """Whether assignment A moves its target forward from where it was (``pos += n``;
    ``s->leng = indx + len`` where indx was read from s->leng)."""
    if a.op == "+=":
        return True
    if a.op != "=" or "+" not in a.text.split("=", 1)[-1]:
        return False
    return a.target in a.sources or any(a.target in read.get(x, ()) for x in a.sources)


def appends(fn: Function, positions: list[str]) -> list:
    """The POSITIONS (a growable buffer's length, an arena's position) that FN moves forward
    while it copies data in (``memcpy(&s->bufr[indx], mem, len); s->leng = indx + len``):
    bytes of the buffer taken for data, not handed out to the caller (``bumps``)."""
    if not positions or not any(copies(c.callee) for c in fn.calls):
        return []
    read = locals_read(fn)
    return [a for a in fn.assigns if a.target in positions and moved_forward(a, read)]


def copies(callee: str) -> bool:
    """Whether a call copies data into what it is handed (memcpy, strcpy, a code's own
    ``buffer_copy``)."""
    return bool(MEMORY.match(callee) or re.search(r"cpy|copy", callee, re.I))


def growables(
    functions: list[Function], members: list[Member], resources: list
) -> list[ResourceGuess]:
    """Records that are growable buffers by what the code does with them: their bytes are
    allocated anew at a larger size (``p = realloc(s->bufr, a); s->bufr = p``), and a
    function that copies into those bytes moves a length of the record forward
    (``memcpy(&s->bufr[indx], mem, len); s->leng = indx + len``). Appending takes bytes of
    the buffer, and setting its length back gives them back, whatever the record and its
    members are named (curl's dynbuf: bufr, leng, allc, toobig)."""
    by_record = members_by_record(members)
    known = {g.name: g for g in resources}
    carvable = byte_members(by_record)
    resized: dict[str, Function] = {}
    for fn in functions:
        made = {
            a.target
            for a in fn.assigns
            if a.target in fn.locals and any(RESIZES.search(c) for c in a.calls)
        }
        for a in fn.assigns:
            rec = a.target.split(".", 1)[0]
            if "." not in a.target or a.target not in carvable.get(rec, ()):
                continue
            if any(RESIZES.search(c) for c in a.calls) or set(a.sources) & made:
                resized.setdefault(rec, fn)
    positions: dict[str, set[str]] = {}
    for fn in functions:
        read = locals_read(fn)
        touched = {
            a.record for a in fn.accesses if f"{a.record}.{a.member}" in carvable.get(a.record, ())
        }
        if not touched & resized.keys():
            continue
        if not any(copies(c.callee) for c in fn.calls):
            continue
        for a in fn.assigns:
            rec = a.target.split(".", 1)[0]
            if rec not in touched or rec not in resized or a.target in carvable[rec]:
                continue
            member = a.target.split(".", 1)[1]
            typed = next((m.type for m in by_record[rec] if m.name == member), "")
            if INTEGER.match(typed.strip()) and moved_forward(a, read):
                positions.setdefault(rec, set()).add(a.target)
    out = []
    # (a record already a resource of other units, a message shared by reference that holds
    # its text, or a connection that holds its read buffer, is not a buffer of bytes: its
    # lengths set anew are not units given back)
    for rec in sorted(positions.keys() - known.keys()):
        fn = resized[rec]
        why = (
            f"a growable buffer: {fn.name} allocates its bytes anew, and appending moves "
            f"{', '.join(sorted(positions[rec]))} past what it copies in"
        )
        g = ResourceGuess(rec, fn.file, fn.line, "pool", "bytes", [], 1.0, [why])
        g.members, g.positions = list(by_record.get(rec, [])), sorted(positions[rec])
        g.lengths = g.positions
        out.append(g)
    return out


TEARS_DOWN = re.compile(r"free|destroy|delete|release|unmap|close|dispose|finali[sz]e", re.I)


def shared_objects(
    functions: list[Function], members: list[Member], resources: list
) -> list[ResourceGuess]:
    """Records shared by reference, by what the code does with a count of theirs, named for
    references or not (``refcnt``, ``inuse``, ``count``): one function raises it, another
    lowers it and, when it reaches zero, tears the object down (``if (0 == --cfv->refcnt)
    { munmap(...); free(cfv); }``). Each reference is a unit held: the record is a resource
    whatever else it holds (a record already one, or another's object, is left to that)."""
    by_record = members_by_record(members)
    taken = {rec for g in resources for rec in records_of(g)}
    # a count named for references, or any count of its users (curl's Curl_dns_entry.inuse):
    # what the code does with it says whether it counts references
    counts = {
        f"{m.record}.{m.name}": m.record
        for m in members
        if (refcount(m) or INTEGER.match(m.type) and COUNTER.search(m.name))
        and m.record not in taken
        and not NOT_RESOURCE.search(m.record)
    }
    raised: dict[str, Function] = {}
    dropped: dict[str, Function] = {}
    for fn in functions:
        for a in fn.assigns:
            rec = counts.get(a.target)
            if rec is None or not set(a.sources) <= {a.target}:
                continue  # a step of one (++, += 1), not a count set from other state
            if takes_units(a):
                raised.setdefault(rec, fn)
            elif gives_units(a) and _torn_at_zero(fn, a):
                dropped.setdefault(rec, fn)
    out = []
    for rec in sorted(raised.keys() & dropped.keys()):
        fn = dropped[rec]
        why = (
            f"shared by reference: {raised[rec].name} takes one, {fn.name} drops one and "
            "tears the object down at zero"
        )
        g = ResourceGuess(rec, fn.file, fn.line, "pool", "references", [], 1.0, [why])
        g.members = list(by_record.get(rec, []))
        out.append(g)
    return out


def _torn_at_zero(fn: Function, lowered) -> bool:
    """Whether FN, having lowered a count at LOWERED, tears the object down in a branch taken
    when the count (or what the lowering returned) is zero."""
    results = {a.target for a in fn.assigns if a.line == lowered.line and a.op == "="}
    for b in fn.branches:
        reads = lowered.target in b.cond_members or results & set(b.cond_locals)
        zero = ZERO.search(b.cond) if b.side == 0 else NONZERO.search(b.cond)
        if reads and zero and any(TEARS_DOWN.search(c) for c in b.body_calls):
            return True
    return False


def set_back(fn: Function, positions: list[str], lengths: list[str] = ()) -> list:
    """Assignments that set an arena's position to a value not read from it (``pool->pos =
    new_size``, ``p->d.last = (u_char *) p + sizeof(*p)``): every block past it given back.
    A growable buffer's length (LENGTHS) is given back only when cut: set to a constant
    (``s->leng = 0``), or to a value the function tests against it (``if (set > s->leng)
    return ...; s->leng = set``); set to anything else, its content is replaced (a value's
    text set anew), no bytes given back."""
    read = locals_read(fn)
    # a block the function just made (new = malloc(...)) is set up, not set back
    made: set[str] = set()
    for a in sorted(fn.assigns, key=lambda a: a.line):  # and what is made of it
        if a.target in fn.locals and (a.calls or set(a.sources) & made):
            made.add(a.target)
    out = []
    for a in fn.assigns:
        if a.op != "=" or a.target not in positions or root(a.target_base) in made:
            continue
        # (set to what a test around it compared the position with: raised to a size, or
        # clamped, ``if (b->data < t->key_size) ... b->data = t->key_size``)
        # (whole tokens, as the parse spells them with spaces: 0 is not in 10)
        where, _, value = (f" {x.strip()} " for x in a.text.partition("="))
        tests = [f" {b.cond} " for b in fn.branches if (b.if_id, b.side) in a.path]
        if value.strip() and any(where in cond and value in cond for cond in tests):
            continue
        derived = set(a.sources).union(*(read.get(x, set()) for x in a.sources))
        if a.target in derived:
            continue
        # (the value at the end of a chain: s->leng = s->allc = 0)
        constant = re.fullmatch(r"\s*-?\d+[uUlL]*\s*", value.rsplit("=", 1)[-1])
        cut = constant or any(
            where in f" {b.cond} " and value in f" {b.cond} " and COMPARES.search(b.cond)
            for b in fn.branches
        )
        if a.target not in lengths or cut:
            out.append(a)
    return out


def counted_up(fn: Function, local: str) -> bool:
    """Whether the function raises LOCAL (``iFrame++``, ``n += k``)."""
    return local in fn.locals and any(a.target == local and a.op == "+=" for a in fn.assigns)


def log_levels(
    functions: list[Function], records: list[Record], members: list[Member], resources: list
) -> tuple[list[ResourceGuess], list[Candidate]]:
    """Logs whose size is one member's value: the end position (named like one, an integer)
    that appends advance, setting it to a local they counted up (``mxFrame = iFrame`` after
    ``iFrame++`` per frame written), and that a restart or truncation sets back to zero. Each
    becomes a resource of its own, named after the record that keeps it and what it counts
    (``Wal.frames``), with an ACQUIRE where it advances and a RELEASE where it is set back;
    the instrumenter records each change of the member by how far it moved."""
    by_record = members_by_record(members)
    names = {r.name for r in records}
    resource_names = {g.name for g in resources}
    changes: list[_Change] = []
    for fn in functions:
        if lifecycle(fn.name.split("::")[-1]):
            continue
        for a in fn.assigns:
            if a.op != "=" or "." not in a.target:
                continue
            record, member = a.target.split(".", 1)
            if not LOG_POSITION.search(member):
                continue
            decl = next((m for m in by_record.get(record, []) if m.name == member), None)
            if decl is None or not INTEGER.match(decl.type.strip()):
                continue
            where = _path_of(fn, a, names, by_record)
            if where is None:
                continue
            rhs = a.text.split("=", 1)[1].strip()
            how = (
                "reset"
                if rhs == "0"
                else "advance"
                if len(a.sources) == 1 and counted_up(fn, a.sources[0])
                else "rewind"
            )
            changes.append(_Change(fn, a.line, *where, how, a.text))
    guesses, cands = [], []
    for owner, path in sorted({(c.owner, c.path) for c in changes}):
        mine = [c for c in changes if (c.owner, c.path) == (owner, path)]
        hows = {c.how for c in mine}
        logged = owner in resource_names or RESOURCE_NAME.search(owner)
        if not ({"advance", "reset"} <= hows and logged):
            continue
        word = LOG_POSITION.search(path.rsplit(".", 1)[-1]).group(0).lower()
        unit = word if word.endswith(("s", "ies")) else word + "s"
        name = f"{owner}.{unit}"
        member = path.rsplit(".", 1)[-1]
        first = min(mine, key=lambda c: (c.fn.file, c.line))
        guesses.append(
            ResourceGuess(
                name,
                first.fn.file,
                first.line,
                "log",
                unit,
                [],
                1.0,
                [f"a log's end position ({owner}.{path}): advanced by appends, set back to 0"],
                level=path,
            )
        )
        for c in mine:
            kind = "ACQUIRE" if c.how == "advance" else "RELEASE"
            why = {
                "advance": f"advances the log's end ({member}) to a count it raised: an append",
                "reset": f"sets the log's end ({member}) back to 0: a restart",
                "rewind": f"sets the log's end ({member}) back: a rollback of what was appended",
            }[c.how]
            cands.append(
                Candidate(c.fn.file, c.fn.name, c.line, kind, name, "", "1", "heuristic", why)
            )
    return guesses, cands
