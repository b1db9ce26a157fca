"""How PostgreSQL's own views become trace events: the state kept between polls, and the rules
that turn what changed into WAIT, ACQUIRE, USE and RELEASE.

Tasks. Every backend is a session task (a client backend is foreground, autovacuum, walwriter
and the other workers background); every transaction it is seen in is a task of its own, whose
parent is the session (a parallel worker's, its leader's transaction), named
``pid 123: <statement>`` by the statement seen (``pg_stat_activity.query``) when a lock of it
that somebody waited for first appeared, else by the statement in which it waited itself, else
by its first statement seen that is not transaction control. The activity is read before the
locks: a statement that began between the two reads names what the locks show at the next
poll, which sees it begun before they were read. The trace's thread is the backend's pid.

Locks. A heavyweight lock of type T is resource ``pg.lock.<T>`` when held in a mode that
conflicts with itself (ShareUpdateExclusive, ShareRowExclusive, Exclusive, AccessExclusive:
sharing ``exclusive``, capacity 1 per object) and ``pg.lock.<T>.shared`` in the others
(AccessShare, RowShare, RowExclusive, Share); see ``gigi.record._locks``. The object is a
stable id of the locked thing: the relation's oid, the xid, or a hash of the lock tag. One hold
per transaction, class and lock tag: ACQUIRE when it is first seen granted, at the previous
poll (or the transaction's start, when later: the earliest it may have happened; but in an
exclusive class never before the RELEASE of the hold it succeeds, which one poll may see end at
once), RELEASE when it is gone. A lock not granted is a WAIT from ``pg_locks.waitstart`` until
the poll that sees it granted or gone, on the exclusive class when a blocker holds the tag in
an exclusive mode, else on the shared one. A row lock's waiter waits for the holder's
transactionid lock, so holder and waiter meet on the same object and the diagnosis's chains (C
waits for B's tuple lock while B waits for A's xid) lead to the root. A blocker that
``pg_blocking_pids`` names but that holds no lock on the awaited tag itself (a parallel group's
leader) is given a hold on it while it blocks; a blocker queued for the same tag (a soft block)
is not: the holders ahead of both are to blame. A holder seen running a statement USEs its
locks, once per statement.

Dead tuples. ``pg.dead_tuples`` (sharing ``log``, object = the table's oid) follows
``n_dead_tup``: a rise is ACQUIREd by the transaction that holds back vacuum's horizon (the
oldest xid or snapshot, open since before the tuples died), which is what keeps them; with no
such transaction, by a task standing for the table's writers between polls. A fall is
RELEASEd by the backend seen vacuuming the table, else by a task standing for its vacuum and
pruning between polls.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gigi.record._locks import is_exclusive, lock_class, lock_type, ordered, resource_row
from gigi.schema import Kind
from gigi.schema._write import TraceWriter

DEAD_TUPLES = "pg.dead_tuples"
# Backends report table statistics at most about once a second (PostgreSQL 15): a rise in
# n_dead_tup may stand for tuples that died up to that long before the poll that saw it.
STATS_LAG_NS = 1_000_000_000
# A rise in dead tuples is spread over the time they may have died in, at this step.
SPREAD_STEP_NS = 100_000_000
# Statements that only steer the transaction; a transaction is named by its first other one.
_CONTROL = re.compile(
    r"^\s*(begin|start|commit|end|rollback|abort|savepoint|release|set|show|reset|discard"
    r"|prepare\s+transaction|commit\s+prepared|rollback\s+prepared)\b",
    re.IGNORECASE,
)
NAME_CHARS = 160
# Statements that write rows (or lock them): one of them gave a transaction its xid
_WRITES = re.compile(
    r"^\s*(insert|update|delete|merge|copy|truncate)\b"
    r"|\bfor\s+(update|share|no\s+key\s+update|key\s+share)\b"
    r"|^\s*with\b.*\b(insert|update|delete|merge)\b",
    re.IGNORECASE | re.DOTALL,
)
# Lock types a transaction takes only by writing (or locking) rows
_WRITE_LOCKS = frozenset({"pg.lock.transactionid", "pg.lock.tuple"})
# Lock modes that conflict with themselves: two transactions never hold one tag in them at once
EXCLUSIVE_MODES = frozenset(
    {"ShareUpdateExclusiveLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def server_ns(stamp: datetime) -> int:
    """A server timestamp as integer nanoseconds since the epoch (microseconds exact)."""
    delta = stamp - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def stable_id(*parts: object) -> int:
    """A positive 63-bit id of a lock tag, the same in every run.

    >>> stable_id("tuple", 5, 16384, 0, 1) == stable_id("tuple", 5, 16384, 0, 1)
    True
    """
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) or 1


def statement(query: str | None) -> str:
    """A statement as a task's name: whitespace collapsed, cut to ``NAME_CHARS``.

    >>> statement("UPDATE t\\n   SET v = 1")
    'UPDATE t SET v = 1'
    """
    text = " ".join((query or "").split())
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 3] + "..."


def spread(since: int, until: int, amount: int, step: int = SPREAD_STEP_NS):
    """``amount`` units cut into even parts placed at steps of about ``step`` over
    ``(since, until]``, the last at ``until``.

    >>> spread(0, 300, 10, step=100)
    [(100, 4), (200, 3), (300, 3)]
    >>> spread(0, 0, 10)
    [(0, 10)]
    """
    parts = max(1, min(amount, (until - since) // step))
    each, extra = divmod(amount, parts)
    return [
        (until - (until - since) * (parts - 1 - i) // parts, each + (1 if i < extra else 0))
        for i in range(parts)
    ]


@dataclass
class Task:
    task: int
    kind: str  # foreground or background
    parent: int | None
    start: int  # ns; not before the recording began
    began: int  # ns; when the server says it began, even before the recording
    name: str | None = None  # set once a naming statement is seen
    named: bool = False  # its row with the name was written
    # a transaction's name, best first (see the module's docstring), decided when it ends
    took_waited: str | None = None  # seen when a lock of it somebody waited for appeared
    waiting: str | None = None  # the statement in which it waited
    # what named ``waiting``: the query_start of the statement seen, and when the locks that
    # showed the wait were read (see ``_renamed``)
    waiting_by: object = None
    waiting_seen: object = None


@dataclass
class Hold:
    acquired: int  # ts of the ACQUIRE
    thread: int
    used_for: object = None  # the query_start of the statement that last USEd it
    took: str | None = None  # the statement seen when it first appeared
    named_by: object = None  # that statement's query_start
    seen_at: object = None  # when the locks that showed it first were read (server clock)


@dataclass
class Wait:
    begin: int
    thread: int
    resource: str  # the class it waits on
    blockers: int = 0


@dataclass
class Backend:
    """One row of ``activity.sql``, with its server timestamps placed on the recorder's clock."""

    pid: int
    backend_type: str
    backend_key: object  # the server's backend_start: names the session
    backend_start: int  # ns, recorder's clock
    leader_pid: int | None
    who: str
    state: str | None
    wait_event_type: str | None
    xact_key: object  # the server's xact_start: names the transaction
    xact_start: int | None  # ns, recorder's clock
    query_key: object  # the server's query_start: names the statement
    query_start: int | None
    query: str | None
    horizon_age: int | None
    vacuum_relid: int | None
    blockers: list[int]

    @property
    def foreground(self) -> bool:
        return self.backend_type == "client backend"


@dataclass
class Lock:
    """One row of ``locks.sql``."""

    pid: int | None
    resource: str
    object: int
    granted: bool
    waitstart: int | None  # ns, recorder's clock
    virtualtransaction: str | None
    mode: str | None = None  # AccessShareLock ... AccessExclusiveLock
    relname: str | None = None  # a table it writes or locks rows of (a RowExclusive lock's)

    @property
    def exclusive(self) -> bool:
        return self.mode in EXCLUSIVE_MODES


@dataclass
class PgModel:
    """The recorder's memory between polls; each ``poll`` or ``tables`` call adds the events
    for what changed since the last one to ``writer``."""

    writer: TraceWriter
    start: int  # the first poll, ns
    database_oid: int = 0
    events: int = 0  # events written so far
    _next_task: int = 1
    _sessions: dict = field(default_factory=dict)  # (pid, backend_key) -> Task
    _xacts: dict = field(default_factory=dict)  # (pid, xact_key) -> Task
    _prepared: dict = field(default_factory=dict)  # virtualtransaction -> Task
    _tables: dict = field(default_factory=dict)  # (relid, role) -> Task of writers or vacuum
    _holds: dict = field(default_factory=dict)  # (task, lock class, object) -> Hold
    _waits: dict = field(default_factory=dict)  # (task, lock type, object) -> Wait
    _open: dict = field(default_factory=dict)  # task id -> open transaction Task
    _resources: set = field(default_factory=set)
    _dead: dict = field(default_factory=dict)  # relid -> n_dead_tup last seen
    _vacuumed: dict = field(default_factory=dict)  # relid -> (task, pid, ts last seen at it)
    _backends: dict = field(default_factory=dict)  # pid -> Backend at the last poll
    _prev: int | None = None  # the previous poll, ns
    _prev_tables: int | None = None

    # -- tasks --------------------------------------------------------------------------------

    def _new_task(self, kind: str, parent: int | None, began: int, name: str | None) -> Task:
        task = Task(self._next_task, kind, parent, max(self.start, began), began, name)
        self._next_task += 1
        if name is not None:
            self._write_task(task)
        return task

    def _write_task(self, task: Task) -> None:
        # Written once with its name; its end comes in a row of its own (ingest merges them).
        self.writer.add(
            "tasks",
            {
                "task": task.task,
                "name": task.name,
                "kind": task.kind,
                "parent": task.parent,
                "start": task.start,
            },
        )
        task.named = True

    def _end_task(self, task: Task, ts: int, fallback_name: str) -> None:
        if not task.named:
            task.name = self._final_name(task) or fallback_name
            self._write_task(task)
        self.writer.add("tasks", {"task": task.task, "end": ts})

    @staticmethod
    def _final_name(task: Task) -> str | None:
        return task.took_waited or task.waiting or task.name

    def _statement_now(self, b: Backend) -> str | None:
        """``pid N: <statement>`` of what the backend runs, or ran last in its transaction when
        idle in it; None when that is transaction control or from before the transaction."""
        if not b.query or _CONTROL.match(b.query):
            return None
        if b.xact_key is not None and (b.query_key is None or b.query_key < b.xact_key):
            return None
        return f"pid {b.pid}: {statement(b.query)}"

    def _took(
        self, b: Backend, lock_type: str, written: list[str], waited: str | None = None
    ) -> str | None:
        """The statement seen when a hold first appeared. A row lock (or xid) comes from a
        write: when the statement seen writes nothing (the write ended between two polls and
        the transaction went on: ``SELECT pg_sleep(15)``), the tables it wrote are said too.
        When no statement of the transaction is seen (it has reached ``COMMIT``), the one it
        was seen waiting with, ``waited``, took it.

        >>> m = PgModel(None, 0)
        >>> b = Backend(7, "client backend", 0, 0, None, "", "active", None, 1, 1, 2, 2,
        ...             "SELECT pg_sleep(15)", None, None, [])
        >>> m._took(b, "pg.lock.transactionid", ["t"])
        'pid 7: SELECT pg_sleep(15), after writing t'
        >>> m._took(b, "pg.lock.relation", ["t"])
        'pid 7: SELECT pg_sleep(15)'
        """
        now = self._statement_now(b)
        if now is None and waited is not None:
            return waited
        if lock_type not in _WRITE_LOCKS or not written or (b.query and _WRITES.search(b.query)):
            return now
        tables = ", ".join(sorted(set(written)))
        return f"{now}, after writing {tables}" if now else f"pid {b.pid}: a write to {tables}"

    @staticmethod
    def _renamed(b: Backend, named_by: object, seen_at: object) -> bool:
        """Whether the statement B shows now, not the one that named a hold or a wait, was
        already running when the locks that first showed it were read (at SEEN_AT, on the
        server's clock): it began between that poll's read of the activity and its read of
        the locks, and is the one the lock appeared in. Statements of a backend run one after
        another, so one that began before SEEN_AT and still runs was running then."""
        return (
            seen_at is not None
            and b.query_key is not None
            and b.query_key != named_by
            and b.query_key <= seen_at
        )

    def _session(self, b: Backend, ts: int) -> Task:
        key = (b.pid, b.backend_key)
        task = self._sessions.get(key)
        if task is None:
            name = f"pid {b.pid}: {b.backend_type}" + (f" {b.who}" if b.who else "")
            kind = "foreground" if b.foreground else "background"
            began = min(b.backend_start, ts)
            task = self._sessions[key] = self._new_task(kind, None, began, name)
        return task

    def _xact(self, b: Backend, ts: int) -> Task | None:
        if b.xact_key is None:
            return None
        task = self._xacts.get((b.pid, b.xact_key))
        if task is None:
            parent = self._session(b, ts).task
            if b.leader_pid is not None:
                leader = self._backends.get(b.leader_pid)
                lead = self._xacts.get((b.leader_pid, leader.xact_key)) if leader else None
                parent = lead.task if lead else parent
            began = min(b.xact_start or ts, ts)
            kind = "foreground" if b.foreground else "background"
            task = self._xacts[(b.pid, b.xact_key)] = self._new_task(kind, parent, began, None)
            self._open[task.task] = task
            # its row now, its name when it ends (ingest keeps the first name written)
            self.writer.add(
                "tasks",
                {"task": task.task, "kind": kind, "parent": parent, "start": task.start},
            )
        if task.name is None and b.query_key is not None:
            task.name = self._statement_now(b)
        return task

    def _owner(self, b: Backend, ts: int) -> Task:
        return self._xact(b, ts) or self._session(b, ts)

    def _table_task(self, relid: int, name: str, role: str, ts: int) -> Task:
        task = self._tables.get((relid, role))
        if task is None:
            if role == "writers":
                label = f"{name}: updates and deletes by transactions between polls"
                kind = "foreground"
            else:
                label = f"{name}: vacuum and pruning between polls"
                kind = "background"
            task = self._tables[(relid, role)] = self._new_task(kind, None, ts, label)
        return task

    # -- events -------------------------------------------------------------------------------

    def _event(self, ts: int, kind: Kind, resource: str, task: int, thread: int, **extra) -> None:
        if resource not in self._resources:
            self._resources.add(resource)
            if resource == DEAD_TUPLES:
                row = {"resource": resource, "unit": "tuples", "sharing": "log"}
            else:
                row = resource_row(resource)
            self.writer.add("resources", row)
        row = {"ts": ts, "kind": int(kind), "resource": resource, "task": task, "thread": thread}
        row.update(extra)
        self.writer.add("events", row)
        self.events += 1

    # -- one poll of activity and locks ---------------------------------------------------------

    def poll(
        self, ts: int, backends: list[Backend], locks: list[Lock], locks_at: object = None
    ) -> None:
        """One poll: BACKENDS as the activity showed them, then LOCKS, read after them at
        LOCKS_AT on the server's clock (as ``Backend.query_key``; None: not known)."""
        prev = self._prev if self._prev is not None else ts
        by_pid = {b.pid: b for b in backends}
        self._backends = by_pid
        for b in backends:
            owner = self._owner(b, ts)
            if b.vacuum_relid is not None:
                self._vacuumed[b.vacuum_relid] = (owner, b.pid, ts)

        held: dict[tuple, tuple[Task, int]] = {}  # (task, class, object) -> owner, thread
        written: dict[int, list[str]] = defaultdict(list)  # task -> tables it writes
        waiting: dict[tuple, tuple[Task, Backend, Lock]] = {}  # (task, lock type, object)
        # (lock type, object) -> holder's pid (0: a prepared transaction) -> in an exclusive mode
        granted: dict[tuple, dict[int, bool]] = defaultdict(dict)
        for lock in locks:
            if lock.pid is None:  # a prepared transaction
                vt = lock.virtualtransaction or "?"
                owner = self._prepared.get(vt)
                if owner is None:
                    owner = self._prepared[vt] = self._new_task(
                        "foreground", None, ts, f"prepared transaction {vt}"
                    )
                thread = 0
            else:
                b = by_pid.get(lock.pid)
                if b is None:  # a backend born between the two reads
                    continue
                owner, thread = self._owner(b, ts), b.pid
            if lock.relname is not None and lock.granted:
                written[owner.task].append(lock.relname)
            if lock.granted:
                resource = lock_class(lock.resource, lock.exclusive)
                held[(owner.task, resource, lock.object)] = (owner, thread)
                modes = granted[(lock.resource, lock.object)]
                modes[thread] = modes.get(thread, False) or lock.exclusive
            else:
                waiting[(owner.task, lock.resource, lock.object)] = (owner, by_pid[lock.pid], lock)
        # the class each wait is on: that of what keeps it waiting
        wait_class = {}
        for key, (_, b, _) in waiting.items():
            wait = self._waits.get(key)
            if wait is not None:
                wait_class[key] = wait.resource
                continue
            modes = granted[key[1:]]
            hard = [modes[p] for p in set(b.blockers) if p in modes]
            if not hard:  # queued behind other waiters: the holders ahead of them
                hard = [x for p, x in modes.items() if p != b.pid]
            wait_class[key] = lock_class(key[1], any(hard))
        # A blocker with no lock of its own on the awaited tag, and not queued for it, holds
        # it through something the view does not show (its parallel workers): it holds it
        # (in an exclusive class, only when nobody else is seen to).
        for (task, base, obj), (_, b, _) in waiting.items():
            resource = wait_class[(task, base, obj)]
            for pid in set(b.blockers) - {0}:
                blocker = by_pid.get(pid)
                if blocker is None or pid in granted[(base, obj)]:
                    continue
                owner = self._owner(blocker, ts)
                if (owner.task, base, obj) in waiting:
                    continue
                if is_exclusive(resource) and any(k[1:] == (resource, obj) for k in held):
                    continue
                held.setdefault((owner.task, resource, obj), (owner, blocker.pid))

        # releases and ends of waits first: at one instant, ends come before starts
        releases = []  # [ts, class, object, task, its ACQUIRE's ts, thread]
        for key in [k for k in self._holds if k not in held]:
            hold = self._holds.pop(key)
            releases.append([ts, key[1], key[2], key[0], hold.acquired, hold.thread])
        waited = set()  # (task, lock type, object) of the waits that ended in this poll
        for key in [k for k in self._waits if k not in waiting]:
            self._end_wait(key, ts)
            waited.add(key)
        handed = {(r[1], r[2]) for r in releases if is_exclusive(r[1])}
        acquires = []  # [ts, class, object, task, None, Hold]
        for key, (owner, thread) in held.items():
            if key in self._holds:
                continue
            at = min(ts, max(prev, owner.start))
            # a lock that changed hands, or that it waited for, in this poll: at this poll,
            # after the previous holder's RELEASE and its own wait's end
            base = lock_type(key[1])
            if key[1:] in handed or (key[0], base, key[2]) in waited:
                at = ts
            b = by_pid.get(thread)
            took = None
            if b is not None:
                took = self._took(b, base, written[key[0]], owner.waiting)
            hold = self._holds[key] = Hold(at, thread, took=took, seen_at=locks_at)
            hold.named_by = None if b is None else b.query_key
            acquires.append([at, key[1], key[2], key[0], None, hold])
        for key, (owner, thread) in held.items():
            hold, b = self._holds[key], by_pid.get(thread)
            if b is None or not self._renamed(b, hold.named_by, hold.seen_at):
                continue
            base = lock_type(key[1])
            took = self._took(b, base, written[key[0]], owner.waiting)
            if took is not None:
                if hold.took is not None and owner.took_waited == hold.took:
                    owner.took_waited = took  # somebody waited for it: named by it
                hold.took, hold.named_by = took, b.query_key
        ordered(acquires, releases)
        for at, resource, obj, task, _, thread in sorted(releases, key=lambda r: r[0]):
            self._event(at, Kind.RELEASE, resource, task, thread, object=obj)
        for at, resource, obj, task, _, hold in acquires:
            hold.acquired = at
            self._event(at, Kind.ACQUIRE, resource, task, hold.thread, object=obj)
        for key, (_, thread) in held.items():
            hold = self._holds[key]
            b = by_pid.get(thread)
            if b is not None and b.state == "active" and b.wait_event_type != "Lock":
                if hold.used_for != b.query_key:
                    hold.used_for = b.query_key
                    self._event(ts, Kind.USE, key[1], key[0], thread, object=key[2])
        for key, (owner, b, lock) in waiting.items():
            wait = self._waits.get(key)
            if wait is None:
                resource = wait_class[key]
                begin = lock.waitstart
                if begin is None:
                    begin = max(prev, b.query_start or prev)
                # never before the recording, nor before the holders it waits for (whose
                # ACQUIREs are placed at the earliest they may have happened)
                holders = [
                    h.acquired for k, h in self._holds.items() if k[1:] == (resource, key[2])
                ]
                begin = min(ts, max(begin, self.start, *holders))
                wait = self._waits[key] = Wait(begin, b.pid, resource)
                if owner.waiting is None:
                    owner.waiting = self._statement_now(b)
                    owner.waiting_by, owner.waiting_seen = b.query_key, locks_at
            elif self._renamed(b, owner.waiting_by, owner.waiting_seen):
                owner.waiting = self._statement_now(b) or owner.waiting
                owner.waiting_by = b.query_key
            wait.blockers = max(wait.blockers, len(set(b.blockers)))
        # the transactions that hold what others wait for are named by what took it
        for (task, _, obj), wait in self._waits.items():
            for (holder, resource, o), hold in self._holds.items():
                if o == obj and resource == wait.resource and holder != task:
                    xact = self._open.get(holder)
                    if xact is not None and xact.took_waited is None:
                        xact.took_waited = hold.took

        self._end_gone_tasks(by_pid, ts)
        self._prev = ts

    def _end_wait(self, key: tuple, ts: int | None) -> None:
        wait = self._waits.pop(key)
        self._event(
            wait.begin,
            Kind.WAIT,
            wait.resource,
            key[0],
            wait.thread,
            object=key[2],
            dur=None if ts is None else ts - wait.begin,
            value=wait.blockers,
        )

    def _end_gone_tasks(self, by_pid: dict, ts: int) -> None:
        for (pid, xact_key), task in list(self._xacts.items()):
            b = by_pid.get(pid)
            if b is None or b.xact_key != xact_key:
                del self._xacts[(pid, xact_key)]
                self._open.pop(task.task, None)
                self._end_task(task, ts, f"pid {pid}: transaction")
        for (pid, backend_key), task in list(self._sessions.items()):
            b = by_pid.get(pid)
            if b is None or b.backend_key != backend_key:
                del self._sessions[(pid, backend_key)]
                self._end_task(task, ts, task.name or f"pid {pid}")

    # -- dead tuples ----------------------------------------------------------------------------

    def tables(self, ts: int, rows: list[tuple[int, str, int]]) -> None:
        """One reading of ``tables.sql``: ``(relid, name, n_dead_tup)`` rows."""
        prev = self._prev_tables if self._prev_tables is not None else ts
        for relid, name, n in rows:
            change = n - self._dead.get(relid, 0)
            first = relid not in self._dead
            self._dead[relid] = n
            if change > 0:
                owner, thread = self._horizon_holder(prev - STATS_LAG_NS)
                if owner is None:
                    owner, thread = self._table_task(relid, name, "writers", ts), 0
                # A backend reports the tuples it killed within about the last second: a rise
                # is spread evenly over that second (not before the recording began; the
                # tuples already dead then are counted at once).
                since = ts if first else max(self.start, ts - STATS_LAG_NS)
                for at, amount in spread(since, ts, change):
                    self._event(
                        at,
                        Kind.ACQUIRE,
                        DEAD_TUPLES,
                        owner.task,
                        thread,
                        object=relid,
                        amount=amount,
                    )
            elif change < 0:
                seen = self._vacuumed.get(relid)
                if seen is not None and seen[2] >= prev - STATS_LAG_NS:
                    owner, thread = seen[0], seen[1]
                else:
                    owner, thread = self._table_task(relid, name, "vacuum", ts), 0
                self._event(
                    ts, Kind.RELEASE, DEAD_TUPLES, owner.task, thread, object=relid, amount=-change
                )
        self._prev_tables = ts

    def _horizon_holder(self, since: int) -> tuple[Task | None, int]:
        """The task whose xid or snapshot is the oldest of those open since ``since``, and its
        pid; a vacuum's own snapshot holds nothing back."""
        best, best_age = None, -1
        for b in self._backends.values():
            if b.horizon_age is None or b.vacuum_relid is not None:
                continue
            if b.backend_type == "autovacuum worker":
                continue
            owner = self._xacts.get((b.pid, b.xact_key)) or self._sessions.get(
                (b.pid, b.backend_key)
            )
            if owner is None or owner.began > since or b.horizon_age <= best_age:
                continue
            best, best_age = (owner, b.pid), b.horizon_age
        return best if best is not None else (None, 0)

    # -- the end --------------------------------------------------------------------------------

    def finish(self, ts: int) -> None:
        """The recording stopped at ``ts``: waits still open are written as such (null
        length); holds stay open, as the server still has them."""
        for key in list(self._waits):
            self._end_wait(key, None)
        for (pid, _), task in self._xacts.items():
            if not task.named:
                task.name = self._final_name(task) or f"pid {pid}: transaction"
                self._write_task(task)
        for task in [*self._sessions.values(), *self._prepared.values()]:
            if not task.named:
                task.name = task.name or f"task {task.task}"
                self._write_task(task)
