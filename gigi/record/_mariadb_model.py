"""From successive polls of a MariaDB/MySQL server's lock and activity tables to trace rows.

Plain Python over plain rows: no connection here, so what a poll means can be read (and tested)
apart from how it is fetched. Times are nanoseconds on the recorder's monotonic clock; the
server's picosecond timers are mapped onto it by ``ServerClock``.

The model:
- a connection (a foreground thread) is a task; a background thread that holds a lock is a
  background task;
- a transaction is a task, child of its connection: it lasts from the first poll with evidence
  of it (an ACTIVE row in events_transactions_current, a metadata lock of transaction or
  statement duration, a row lock) until a poll without any; a new transaction event id on the
  same connection starts a new task. It is named ``connection N: <statement>`` by the
  statement that took a lock of it that somebody waited for, else by the statement in which it
  waited itself, else by the statement that took its first lock, else by its first statement
  seen that is not transaction control. The statement that took a metadata lock is the one
  whose event range holds the lock's OWNER_EVENT_ID, in events_statements_current or, when the
  statement has already ended, events_statements_history(_long); a row lock was taken by the
  statement that took the transaction's metadata lock on the row's table;
- a statement is a task, child of its transaction (or connection), named
  ``connection N: <SQL text>``, with the server's own start and end;
- a metadata lock of type T is resource ``mdl.<t>`` when held in a mode that conflicts with
  itself (EXCLUSIVE, SHARED_UPGRADABLE, SHARED_NO_WRITE, SHARED_NO_READ_WRITE, a backup's
  stage locks; GET_LOCK's), ``mdl.<t>.shared`` otherwise (see ``gigi.record._locks``); the
  object is a stable hash of ``schema.name``. PENDING is a WAIT of the transaction (its real
  start and end from events_waits_* where the server timed it), GRANTED an ACQUIRE, and the
  row's disappearance a RELEASE; the tickets of one task on one object in one class are one
  hold. Locks of EXPLICIT duration (LOCK TABLES, GET_LOCK, backup locks) belong to the
  connection;
- a row lock (``innodb.row_lock``: an X record lock; ``innodb.row_lock.shared``: S and gap
  locks) is seen only while someone waits for it: the waiter WAITs, the blocker holds it from
  the wait's start (or when first seen) until it no longer blocks.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

from gigi.record._locks import is_exclusive, lock_class, ordered

WAIT, ACQUIRE, USE, RELEASE = 0, 1, 2, 3
ROW_LOCK = "innodb.row_lock"
_CONTROL = re.compile(
    r"^\s*(begin|start\s+transaction|commit|rollback|xa\s"
    # session settings (SET NAMES, SET SESSION x = ..., SET autocommit = ...) take no locks
    r"|set\s+(names\s|character\s+set\s|(session\s+|global\s+|@@)?[a-z_.]+\s*=|transaction\s))",
    re.IGNORECASE,
)
NAME_CHARS = 200  # SQL text kept in a task's name
# Metadata lock modes that conflict with themselves: two owners never hold one object in them
# at once (MariaDB's mdl.cc compatibility matrices; GET_LOCK takes SHARED_NO_WRITE, and one
# backup at a time runs the BACKUP STAGE locks)
MDL_EXCLUSIVE = frozenset(
    {
        "EXCLUSIVE",
        "SHARED_UPGRADABLE",
        "SHARED_NO_WRITE",
        "SHARED_NO_READ_WRITE",
        "BACKUP_START",
        "BACKUP_FLUSH",
        "BACKUP_WAIT_FLUSH",
        "BACKUP_WAIT_DDL",
        "BACKUP_WAIT_COMMIT",
        "BACKUP_BLOCK_DDL",
    }
)
ROW_RELEASES_KEPT = 50_000  # row lock objects whose last RELEASE is remembered


def object_id(text: str) -> int:
    """A stable, positive, non-zero id of a locked object's name.

    >>> object_id("test.t") == object_id("test.t") != object_id("test.u")
    True
    """
    h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return (h & 0x7FFF_FFFF_FFFF_FFFF) or 1


def mdl_resource(object_type: str, lock_type: str | None = None) -> str:
    """``TABLE`` -> ``mdl.table``, ``USER LEVEL LOCK`` -> ``mdl.user_level_lock``; with a
    lock type, the class of a hold in it: ``mdl.table`` for EXCLUSIVE, ``mdl.table.shared``
    for SHARED_READ.

    >>> mdl_resource("TABLE"), mdl_resource("TABLE", "SHARED_READ")
    ('mdl.table', 'mdl.table.shared')
    """
    base = "mdl." + re.sub(r"[^a-z0-9]+", "_", (object_type or "unknown").lower()).strip("_")
    return base if lock_type is None else lock_class(base, mdl_exclusive(lock_type))


def mdl_exclusive(lock_type: str | None) -> bool:
    return (lock_type or "").upper() in MDL_EXCLUSIVE


def row_lock_exclusive(mode: str | None) -> bool:
    """InnoDB's ``X`` record lock (and a table's AUTO_INC lock) excludes every other holder;
    ``S``, intention and gap locks admit others. An unknown mode counts as ``X``, the lock a
    writer holds.

    >>> [row_lock_exclusive(m) for m in ("X", "X,REC_NOT_GAP", "X,GAP", "S", "IX", None)]
    [True, True, False, False, False, True]
    """
    if mode is None:
        return True
    parts = [p.strip().upper() for p in mode.split(",")]
    return parts[0] in ("X", "AUTO_INC") and "GAP" not in parts


def row_table(name: str | None) -> str | None:
    """``test.t`` of a row lock's name (```test`.`t` PRIMARY 1`` or ``test.t PRIMARY 1``)."""
    if not name:
        return None
    return name.split(" ", 1)[0].replace("`", "") or None


def _short(sql: str | None) -> str | None:
    if sql is None:
        return None
    sql = " ".join(sql.split())
    return sql if len(sql) <= NAME_CHARS else sql[: NAME_CHARS - 3] + "..."


def covers(s: dict, event: int) -> bool:
    """The statement row ``s`` ran the event ``event`` (a lock's OWNER_EVENT_ID)."""
    end = s.get("END_EVENT_ID")
    return s["EVENT_ID"] <= event and (end is None or event <= end)


class ServerClock:
    """Maps the server's performance_schema timers (picoseconds since it started its timers)
    onto the recorder's clock. Each poll reads the server's timer in a row of its own
    statement, between the moments the poll was sent and answered: the sample with the
    shortest round trip among the last ``window`` polls gives the offset, to within half
    that round trip."""

    def __init__(self, window: int = 100) -> None:
        self.samples: deque[tuple[int, int]] = deque(maxlen=window)  # (round trip, offset)
        self.offset: int | None = None

    def sample(self, sent_ns: int, received_ns: int, server_ps: int | None) -> None:
        if server_ps is None:
            return
        mid = (sent_ns + received_ns) // 2
        self.samples.append((received_ns - sent_ns, mid - server_ps // 1000))
        self.offset = min(self.samples)[1]

    def to_local(self, server_ps: int | None) -> int | None:
        if server_ps is None or self.offset is None:
            return None
        return self.offset + server_ps // 1000


def clamp(value: int | None, low: int | None, high: int) -> int:
    """``value`` within [low, high]; ``high`` when unknown."""
    if value is None:
        return high
    if low is not None and value < low:
        return low
    return min(value, high)


@dataclass
class Task:
    task: int
    name: str | None
    kind: str
    parent: int | None
    start: int
    end: int | None = None

    def row(self) -> dict:
        return {
            "task": self.task,
            "name": self.name,
            "kind": self.kind,
            "parent": self.parent,
            "start": self.start,
            "end": self.end,
        }


@dataclass
class Txn:
    task: Task
    trx_event: int | None = None
    last_seen: int = 0
    # what may name it, best first (see the module's docstring)
    took_waited: str | None = None  # took a lock of it that somebody waited for
    waiting: str | None = None  # waited for a lock
    took_first: str | None = None  # took its first lock
    first: str | None = None  # its first statement seen that is not transaction control


@dataclass
class Thread:
    """A server thread (performance_schema THREAD_ID) and its task."""

    thread_id: int
    os_thread: int
    task: Task
    processlist_id: int | None = None
    txn: Txn | None = None
    last_seen: int = 0


@dataclass
class Poll:
    """One poll's rows, as dicts keyed by the server's column names, and when it happened."""

    sent: int  # ns, when the poll's first query was sent
    received: int  # ns, when its answer was complete
    statements: list[dict] = field(default_factory=list)
    transactions: list[dict] = field(default_factory=list)
    metadata_locks: list[dict] = field(default_factory=list)
    threads: list[dict] = field(default_factory=list)
    # (waiting connection id, blocking connection id, object name, wait start in ns or
    #  None, blocker's transaction start in ns or None[, the blocking lock's mode]), for row
    #  locks (None: row locks were not read in this poll)
    row_waits: list[tuple] | None = None
    # (thread, event id) -> (TIMER_START ps, TIMER_END ps or None, SOURCE) of MDL waits
    mdl_waits: dict[tuple[int, int], tuple] = field(default_factory=dict)
    # thread -> its statements in events_statements_history(_long) (rows as in
    # ``statements``, with NESTING_EVENT_ID): read for the threads ``Model.history_wanted``
    # names, to find the statement that took a lock when it has already ended
    history: dict[int, list[dict]] = field(default_factory=dict)


@dataclass
class _OpenWait:
    resource: str
    object: int
    task: int
    thread: int
    start: int
    site: int | None
    key: tuple  # (thread id, event id) of the server's wait event, when known
    server_start: int | None = None  # ps, the server's TIMER_START of it
    last_seen: int = 0  # ns, the last poll that saw it waiting
    grant: tuple | None = None  # (owner thread, lock type, base resource, object) it waits for

    def end(self, timed: tuple | None, now: int) -> int:
        """When it ended: its start plus the length the server timed (the server's wait timer
        may be a cycle counter whose rate differs a little from the statements' timer, so
        lengths are taken from it, not instants), between the last poll that saw it waiting
        and ``now``; ``now`` when the server did not time it."""
        if timed is not None and timed[1] is not None:
            began = timed[0] if timed[0] is not None else self.server_start
            if began is not None:
                return clamp(self.start + (timed[1] - began) // 1000, self.last_seen, now)
        return now


@dataclass
class _Hold:
    """One task's hold of one object of one lock class (several tickets may stand behind it)."""

    task: int
    thread: int  # the OS thread written with its events
    acquired: int  # ts of its ACQUIRE
    took: str | None  # the statement that took it
    tickets: int = 1
    row: str | None = None  # a row lock's name (schema/table/index/row)


@dataclass
class _Ticket:
    """A granted metadata lock ticket: the hold it counts in, and what it locks."""

    hold: tuple  # (task, resource, object)
    thread: int  # performance_schema THREAD_ID of the owner
    object_type: str | None
    name: str  # schema.name of the locked object
    event: int | None  # OWNER_EVENT_ID
    took: str | None


class Model:
    """Turns polls into rows of events, tasks and sites; ``take()`` hands over what is final."""

    def __init__(self, own_thread: int | None = None) -> None:
        self.clock = ServerClock()
        self.own_thread = own_thread
        self.events: list[dict] = []
        self.tasks_done: list[dict] = []
        self.sites: dict[tuple, int] = {}
        self.sites_new: list[dict] = []
        self.objects: dict[str, dict[int, str]] = {}  # resource -> object id -> name
        self.threads: dict[int, Thread] = {}
        self.txns: dict[int, Txn] = {}  # task id -> open transaction
        self.statements: dict[tuple[int, int], Task] = {}
        self.statement_done: dict[int, int] = {}  # thread -> its last statement written
        self.holds: dict[tuple, _Hold] = {}  # (task, resource, object) -> metadata lock hold
        self.mdl_tickets: dict[tuple, _Ticket] = {}  # granted ticket key -> its hold
        self.mdl_waiting: dict[tuple, _OpenWait] = {}
        self.row_held: dict[tuple, _Hold] = {}  # (thread, resource, object) -> row lock hold
        self.row_waiting: dict[tuple, _OpenWait] = {}  # (thread, object) -> its wait
        self.row_released: dict[tuple, int] = {}  # (resource, object) -> last RELEASE ts
        # lock ticket -> the stand-in thread id (negative) of an owner the server does not name
        self.unnamed: dict[int, int] = {}
        self.previous: Poll | None = None
        self.rows_read: int | None = None  # ns, when row locks were last read
        self._next_task = 1
        self.polls = 0

    # --- helpers ------------------------------------------------------------------------

    def _new_task(self, name, kind, parent, start) -> Task:
        t = Task(self._next_task, name, kind, parent, start)
        self._next_task += 1
        return t

    def _site(self, source: str | None, kind: int, resource: str) -> int | None:
        """The site of a server SOURCE like ``mdl.cc:3372``; None where the build leaves it
        empty."""
        if not source or ":" not in source:
            return None
        file, _, line = source.rpartition(":")
        if not line.isdigit():
            return None
        key = (file, int(line), kind, resource)
        if key not in self.sites:
            self.sites[key] = len(self.sites) + 1
            self.sites_new.append(
                {
                    "site": self.sites[key],
                    "file": file,
                    "line": int(line),
                    "function": None,
                    "kind": kind,
                    "resource": resource,
                    "origin": "adapter",
                    "verified": None,
                }
            )
        return self.sites[key]

    def _event(self, ts, kind, resource, task: Task, thread, obj, dur=0, site=None) -> None:
        if ts < task.start:  # the server's own timer can say it began before we saw it
            task.start = ts
        self.events.append(
            {
                "ts": ts,
                "kind": kind,
                "resource": resource,
                "task": task.task,
                "thread": thread,
                "object": obj,
                "dur": dur,
                "site": site,
            }
        )

    def _task_of(self, task_id: int) -> Task:
        for th in self.threads.values():
            if th.task.task == task_id:
                return th.task
            if th.txn is not None and th.txn.task.task == task_id:
                return th.txn.task
        return Task(task_id, None, "foreground", None, 0)  # ended: its start no longer moves

    def _object(self, resource: str, obj: int, name: str) -> None:
        self.objects.setdefault(resource, {})[obj] = name

    @staticmethod
    def _prefix(th: Thread) -> str:
        """What a statement's or transaction's name begins with: its connection."""
        if th.processlist_id is not None:
            return f"connection {th.processlist_id}: "
        return f"{th.task.name}: "

    @staticmethod
    def _thread_name(thread_id: int, row: dict) -> str:
        """``connection 12 app@10.0.0.5/shop`` (what is unknown left out), or a background
        thread's instrument name."""
        if row.get("TYPE", "FOREGROUND") != "FOREGROUND":
            return row.get("NAME") or f"server thread {thread_id}"
        pid = row.get("PROCESSLIST_ID")
        who = "@".join(x for x in (row.get("PROCESSLIST_USER"), row.get("PROCESSLIST_HOST")) if x)
        db = row.get("PROCESSLIST_DB")
        name = f"connection {pid}" if pid is not None else f"thread {thread_id}"
        return name + (f" {who}" if who else "") + (f"/{db}" if db else "")

    def _thread(self, thread_id: int, row: dict | None, now: int) -> Thread:
        th = self.threads.get(thread_id)
        if th is None:
            row = row or {"TYPE": "BACKGROUND"}  # every connection is in the threads rows
            background = row.get("TYPE", "FOREGROUND") != "FOREGROUND"
            name = self._thread_name(thread_id, row)
            task = self._new_task(name, "background" if background else "foreground", None, now)
            pid = row.get("PROCESSLIST_ID")
            th = Thread(thread_id, row.get("THREAD_OS_ID") or thread_id, task, pid)
            self.threads[thread_id] = th
        elif row is not None and th.task.kind == "foreground":
            # a connection first seen while it logged in has no user yet; its row is written
            # when it ends, with what was learnt of it by then
            th.task.name = self._thread_name(thread_id, row)
            th.processlist_id = row.get("PROCESSLIST_ID") or th.processlist_id
        th.last_seen = now
        return th

    def _statement_name(
        self, statements: dict[int, dict], thread: int, event: int | None, after: int | None
    ):
        """The SQL of the thread's current statement, when it is the one that took ``event``
        (or any event, with ``event`` None), began after the transaction event ``after`` (a
        poll reads its tables one after another: the statement row may be older than the
        transaction row) and is not transaction control."""
        s = statements.get(thread)
        if s is None or s.get("SQL_TEXT") is None or _CONTROL.match(s["SQL_TEXT"]):
            return None
        if after is not None and s["EVENT_ID"] < after:
            return None
        if event is not None and not covers(s, event):
            return None
        return _short(s["SQL_TEXT"])

    def _statement_of(
        self, thread: int, event: int | None, statements: dict[int, dict], history: dict
    ) -> str | None:
        """The SQL of the statement of ``thread`` that ran the event ``event`` (a lock's
        OWNER_EVENT_ID): the current statement, else the innermost one in its history; None
        when neither has it or it is transaction control."""
        if event is None:
            return None
        found = None
        s = statements.get(thread)
        if s is not None and covers(s, event):
            found = s
        else:
            for h in history.get(thread, ()):
                if covers(h, event) and (found is None or h["EVENT_ID"] > found["EVENT_ID"]):
                    found = h
        if found is None or not found.get("SQL_TEXT") or _CONTROL.match(found["SQL_TEXT"]):
            return None
        return _short(found["SQL_TEXT"])

    def _txn_name(self, th: Thread, txn: Txn) -> str:
        said = txn.took_waited or txn.waiting or txn.took_first or txn.first
        return self._prefix(th) + said if said else f"transaction on {th.task.name}"

    def history_wanted(self, poll: Poll) -> dict[int, set[int]]:
        """Threads whose statement history the poll should carry, and the lock owners' events
        to find in it: those of metadata locks seen for the first time, or whose statement is
        not known yet, whose owning statement is not the thread's current one (it ended
        between two polls: the transaction went on to another)."""
        statements = {s["THREAD_ID"]: s for s in poll.statements}
        want: dict[int, set[int]] = {}
        for r in poll.metadata_locks:
            tid, event = r["OWNER_THREAD_ID"], r["OWNER_EVENT_ID"]
            if tid is None or tid == self.own_thread or event is None:
                continue
            key = (r["OBJECT_INSTANCE_BEGIN"], tid, r["LOCK_TYPE"], r["LOCK_STATUS"])
            ticket = self.mdl_tickets.get(key)
            if (ticket is not None and ticket.took is not None) or key in self.mdl_waiting:
                continue
            s = statements.get(tid)
            if s is None or not covers(s, event):
                want.setdefault(tid, set()).add(event)
        return want

    # --- one poll -----------------------------------------------------------------------

    def add(self, poll: Poll) -> None:
        self.polls += 1
        now = poll.received
        before = self.previous.sent if self.previous is not None else None
        own = self.own_thread
        statements = {s["THREAD_ID"]: s for s in poll.statements if s["THREAD_ID"] != own}
        own_rows = [s for s in poll.statements if s["THREAD_ID"] == own]
        if own_rows:  # our own statement, running: its timer reads "now" on the server
            self.clock.sample(poll.sent, poll.received, own_rows[0].get("TIMER_END"))
        trx = {t["THREAD_ID"]: t for t in poll.transactions if t["THREAD_ID"] != own}
        for row in poll.threads:
            if row["THREAD_ID"] != own:
                self._thread(row["THREAD_ID"], row, now)
        by_pid = {th.processlist_id: th for th in self.threads.values() if th.processlist_id}

        locks = [
            r if r["OWNER_THREAD_ID"] is not None else self._unnamed_owner(r, now)
            for r in poll.metadata_locks
            if r["OWNER_THREAD_ID"] != own
        ]
        row_waits = []
        for waiter_pid, blocker_pid, name, wait_start, blocker_start, *more in poll.row_waits or ():
            w, b = by_pid.get(waiter_pid), by_pid.get(blocker_pid)
            if w is not None and b is not None:
                mode = more[0] if more else None
                row_waits.append((w.thread_id, b.thread_id, name, wait_start, blocker_start, mode))

        # transactions: which threads show evidence of one in this poll
        evidence: dict[int, int | None] = {}  # thread -> ACTIVE transaction event id
        for t in trx.values():
            if t.get("STATE") == "ACTIVE":
                evidence[t["THREAD_ID"]] = t["EVENT_ID"]
        for r in locks:
            if r["OWNER_THREAD_ID"] < 0:  # no transaction to see of an owner with no name
                continue
            if r["LOCK_DURATION"] != "EXPLICIT" and r["LOCK_STATUS"] in ("GRANTED", "PENDING"):
                evidence.setdefault(r["OWNER_THREAD_ID"], None)
        for w, b, *_ in row_waits:
            evidence.setdefault(w, None)
            evidence.setdefault(b, None)
        if poll.row_waits is None:  # not read this time: what was seen last still stands
            for tid, *_ in [*self.row_waiting, *self.row_held]:
                evidence.setdefault(tid, None)
        self._transactions(evidence, trx, statements, locks, poll.history, now, before)
        self._statements(statements, now)
        self._metadata_locks(locks, poll, statements, now, before)
        tickets = {r["OBJECT_INSTANCE_BEGIN"] for r in locks}
        for ticket in [t for t in self.unnamed if t not in tickets]:
            self._end_thread(self.threads[self.unnamed.pop(ticket)], now)
        if poll.row_waits is not None:
            self._row_locks(row_waits, statements, now, self.rows_read)
            self.rows_read = poll.sent
        self._waited_for()
        # connections gone from the threads table end (and their statements and holds)
        seen = {row["THREAD_ID"] for row in poll.threads}
        if poll.threads:
            for tid, th in list(self.threads.items()):
                if th.task.kind == "foreground" and tid not in seen:
                    self._end_thread(th, now)
        self.previous = poll

    def _unnamed_owner(self, row: dict, now: int) -> dict:
        """A metadata lock whose OWNER_THREAD_ID is null: its owner is a server thread that
        performance_schema does not instrument (InnoDB's background work, say). Each such lock
        ticket gets a stand-in thread, with OS thread 0 (unknown) and a background task that
        lasts as long as the lock is seen, so the hold is recorded and can be blamed."""
        ticket = row["OBJECT_INSTANCE_BEGIN"]
        tid = self.unnamed.get(ticket)
        if tid is None:
            name = "a server thread without performance_schema instrumentation"
            task = self._new_task(name, "background", None, now)
            tid = self.unnamed[ticket] = -task.task  # unique, as its task is
            self.threads[tid] = Thread(tid, 0, task)
        self.threads[tid].last_seen = now
        return {**row, "OWNER_THREAD_ID": tid}

    def _transactions(self, evidence, trx, statements, locks, history, now, before) -> None:
        for tid, th in list(self.threads.items()):
            txn = th.txn
            if tid not in evidence:
                if txn is not None:
                    self._end_txn(th, trx.get(tid), now)
                continue
            event = evidence[tid]
            if txn is not None and event is not None and txn.trx_event not in (None, event):
                self._end_txn(th, trx.get(tid), now)
                txn = None
            if txn is None:
                start = now
                t = trx.get(tid)
                if event is not None and t is not None:
                    start = clamp(self.clock.to_local(t.get("TIMER_START")), before, now)
                txn = self._open_txn(th, start)
            if event is not None:
                txn.trx_event = event
            txn.last_seen = now
            if txn.first is None:
                txn.first = self._first_statement(th, txn, statements, locks, history)
        for tid in evidence:
            if tid not in self.threads:  # a background thread: named when threads says so
                th = self._thread(tid, None, now)
                self._open_txn(th, now)

    def _open_txn(self, th: Thread, start: int) -> Txn:
        txn = th.txn = Txn(self._new_task(None, th.task.kind, th.task.task, start))
        self.txns[txn.task.task] = txn
        return txn

    def _first_statement(self, th, txn, statements, locks, history) -> str | None:
        """The transaction's first statement that is not transaction control: in the thread's
        statement history (the statements nested in the transaction's event) when the poll
        carries it, else the current statement if it took the transaction's first lock or
        began after the transaction did."""
        tid = th.thread_id
        if txn.trx_event is not None:
            inside = [
                h
                for h in history.get(tid, ())
                if h.get("NESTING_EVENT_ID") == txn.trx_event
                and h.get("SQL_TEXT")
                and not _CONTROL.match(h["SQL_TEXT"])
            ]
            if inside:
                return _short(min(inside, key=lambda h: h["EVENT_ID"])["SQL_TEXT"])
        owner = min(
            (
                r["OWNER_EVENT_ID"]
                for r in locks
                if r["OWNER_THREAD_ID"] == tid and r["OWNER_EVENT_ID"] is not None
            ),
            default=None,
        )
        name = self._statement_name(statements, tid, owner, txn.trx_event)
        if name is None and owner is not None:
            name = self._statement_name(statements, tid, None, txn.trx_event)
        return name

    def _end_txn(self, th: Thread, trx_row: dict | None, now: int) -> None:
        txn = th.txn
        end = now
        if trx_row is not None and trx_row.get("EVENT_ID") == txn.trx_event:
            end = clamp(self.clock.to_local(trx_row.get("TIMER_END")), txn.last_seen, now)
        txn.task.end = max(end, txn.task.start)
        txn.task.name = self._txn_name(th, txn)
        self.tasks_done.append(txn.task.row())
        self.txns.pop(txn.task.task, None)
        th.txn = None

    def _statements(self, statements: dict[int, dict], now: int) -> None:
        current = set()
        for tid, s in statements.items():
            key = (tid, s["EVENT_ID"])
            current.add(key)
            if tid not in self.threads or self.statement_done.get(tid) == s["EVENT_ID"]:
                continue
            task = self.statements.get(key)
            if task is None:
                th = self.threads[tid]
                parent = th.txn.task.task if th.txn is not None else th.task.task
                start = clamp(self.clock.to_local(s.get("TIMER_START")), None, now)
                text = _short(s.get("SQL_TEXT")) or s.get("EVENT_NAME") or "statement"
                name = self._prefix(th) + text
                task = self.statements[key] = self._new_task(name, th.task.kind, parent, start)
            if s.get("END_EVENT_ID") is not None:
                task.end = max(
                    clamp(self.clock.to_local(s.get("TIMER_END")), None, now), task.start
                )
                self.tasks_done.append(self.statements.pop(key).row())
                self.statement_done[tid] = s["EVENT_ID"]
        for key in [k for k in self.statements if k not in current]:  # replaced unseen
            task = self.statements.pop(key)
            task.end = now
            self.tasks_done.append(task.row())

    def _metadata_locks(self, locks: list[dict], poll: Poll, statements, now: int, before) -> None:
        present = {}
        granted = defaultdict(list)  # (base resource, object) -> [(owner thread, exclusive)]
        for r in locks:
            if r["LOCK_STATUS"] not in ("GRANTED", "PENDING"):
                continue
            base = mdl_resource(r["OBJECT_TYPE"])
            name = ".".join(x for x in (r["OBJECT_SCHEMA"], r["OBJECT_NAME"]) if x) or base
            obj = object_id(name)
            exclusive = mdl_exclusive(r["LOCK_TYPE"])
            key = (
                r["OBJECT_INSTANCE_BEGIN"],
                r["OWNER_THREAD_ID"],
                r["LOCK_TYPE"],
                r["LOCK_STATUS"],
            )
            present[key] = (r, base, obj, exclusive, name)
            if r["LOCK_STATUS"] == "GRANTED":
                granted[(base, obj)].append((r["OWNER_THREAD_ID"], exclusive))
        for key in self._stale_grants(present):
            r, base, obj, exclusive, _ = present.pop(key)
            granted[(base, obj)].remove((r["OWNER_THREAD_ID"], exclusive))
        # waits that ended: written now, unless their lock is granted in this poll (then
        # with its ACQUIRE, below)
        for key, w in self.mdl_waiting.items():
            if key in present:
                w.last_seen = now
        new_grants = {
            (r["OWNER_THREAD_ID"], r["LOCK_TYPE"], base, obj): key
            for key, (r, base, obj, _, _) in present.items()
            if r["LOCK_STATUS"] == "GRANTED" and key not in self.mdl_tickets
        }
        converted: dict[tuple, _OpenWait] = {}  # granted ticket key -> the wait it ended
        for key in [k for k in self.mdl_waiting if k not in present]:
            w = self.mdl_waiting.pop(key)
            grant = new_grants.get(w.grant)
            if grant is not None and grant not in converted:
                converted[grant] = w
                continue
            end = w.end(poll.mdl_waits.get(w.key), now)
            self._event(
                w.start,
                WAIT,
                w.resource,
                self._task_of(w.task),
                w.thread,
                w.object,
                end - w.start,
                w.site,
            )
        # new tickets: granted ones join (or open) their task's hold; pending ones wait
        acquires = []  # [ts, resource, object, task, None, wait or None, site, Task, thread]
        for key, (r, base, obj, exclusive, name) in present.items():
            ticket = self.mdl_tickets.get(key)
            if ticket is not None and ticket.took is None:
                self._took_late(ticket, r, statements, poll.history)
            if key in self.mdl_tickets or key in self.mdl_waiting:
                continue
            tid = r["OWNER_THREAD_ID"]
            th = self._thread(tid, None, now)
            explicit = r["LOCK_DURATION"] == "EXPLICIT" or th.txn is None
            task = th.task if explicit else th.txn.task
            took = self._statement_of(tid, r["OWNER_EVENT_ID"], statements, poll.history)
            if r["LOCK_STATUS"] == "PENDING":
                # on the class of what keeps it waiting: another owner's exclusive hold, else
                # the shared holds
                blocked = any(t != tid and x for t, x in granted[(base, obj)])
                resource = lock_class(base, blocked)
                self._object(resource, obj, name)
                wkey = (tid, r["OWNER_EVENT_ID"])
                timed = poll.mdl_waits.get(wkey)
                start = clamp(self.clock.to_local(timed[0]) if timed else None, before, now)
                source = (timed[2] if timed else None) or r.get("SOURCE")
                site = self._site(source, WAIT, resource)
                self.mdl_waiting[key] = _OpenWait(
                    resource,
                    obj,
                    task.task,
                    th.os_thread,
                    start,
                    site,
                    wkey,
                    timed[0] if timed else None,
                    now,
                    (tid, r["LOCK_TYPE"], base, obj),
                )
                if not explicit and th.txn.waiting is None:
                    th.txn.waiting = took
                continue
            resource = lock_class(base, exclusive)
            self._object(resource, obj, name)
            hkey = (task.task, resource, obj)
            self.mdl_tickets[key] = _Ticket(
                hkey, tid, r["OBJECT_TYPE"], name, r["OWNER_EVENT_ID"], took
            )
            if not explicit and th.txn.took_first is None:
                th.txn.took_first = took
            # granted after a wait: at the wait's end
            w = converted.get(key)
            ts = now if w is None else w.end(poll.mdl_waits.get(w.key), now)
            hold = self.holds.get(hkey)
            if hold is not None:  # it held the object in this class already (an upgrade)
                hold.tickets += 1
                if w is not None:
                    self._event(
                        w.start, WAIT, w.resource, task, th.os_thread, obj, ts - w.start, w.site
                    )
                continue
            site = self._site(r.get("SOURCE"), ACQUIRE, resource)
            self.holds[hkey] = _Hold(task.task, th.os_thread, ts, took)
            acquires.append([ts, resource, obj, task.task, None, w, site, task, th.os_thread])
        # tickets gone: a hold ends with its last ticket
        releases = []  # [ts, resource, object, task, its ACQUIRE's ts]
        for key in [k for k in self.mdl_tickets if k not in present]:
            hkey = self.mdl_tickets.pop(key).hold
            hold = self.holds[hkey]
            hold.tickets -= 1
            if hold.tickets == 0:
                del self.holds[hkey]
                releases.append([now, hkey[1], hkey[2], hkey[0], hold.acquired, hold.thread])
        # one poll saw a lock change hands: the previous holder's RELEASE comes first
        ordered(acquires, releases)
        for ts, resource, obj, task, _, thread in sorted(releases, key=lambda r: r[0]):
            self._event(ts, RELEASE, resource, self._task_of(task), thread, obj)
        for ts, resource, obj, task_id, _, w, site, task, thread in acquires:
            if w is not None:
                self._event(w.start, WAIT, w.resource, task, thread, w.object, ts - w.start, w.site)
            self.holds[(task_id, resource, obj)].acquired = ts
            self._event(ts, ACQUIRE, resource, task, thread, obj, site=site)

    def _took_late(self, ticket: _Ticket, r: dict, statements, history) -> None:
        """The statement that took a granted ticket, found in a later poll than the ticket
        was: a poll reads the statements before the locks, so a statement that began between
        the two reads and still ran when the history was read is in neither. Its hold, and
        its transaction's first lock, are named by it then."""
        took = self._statement_of(ticket.thread, r["OWNER_EVENT_ID"], statements, history)
        if took is None:
            return
        ticket.took = took
        hold = self.holds.get(ticket.hold)
        if hold is not None and hold.took is None:
            hold.took = took
        txn = self.txns.get(ticket.hold[0])
        if txn is not None and txn.took_first is None:
            txn.took_first = took
        for (tid, _, _), row in self.row_held.items():  # its row locks on the same table
            if tid == ticket.thread and row.took is None and row.row is not None:
                row.took = self._row_took(tid, row.row)

    def _stale_grants(self, present: dict) -> list[tuple]:
        """The GRANTED rows of an exclusive lock that one poll shows held by two threads.

        The server never grants an exclusive lock twice; a poll reads the lock table row by
        row, and the row of a holder that let the lock go (to a waiter, or to whoever asked
        next) can be read before it is gone. Of the threads the poll shows, the ones already
        holding before it are the ones that let go, and of several new ones all but one (the
        latest statement) are rows of holds that began and ended between two polls: those
        rows are stale. A stale row still there in the next poll is read as a new grant then.
        """
        owners = defaultdict(dict)  # (base, object) -> {owner thread: [ticket keys]}
        for key, (r, base, obj, exclusive, _) in present.items():
            if r["LOCK_STATUS"] == "GRANTED" and exclusive:
                owners[(base, obj)].setdefault(r["OWNER_THREAD_ID"], []).append(key)
        stale = []
        for by_thread in owners.values():
            if len(by_thread) < 2:
                continue
            new = [
                t for t, keys in by_thread.items() if not any(k in self.mdl_tickets for k in keys)
            ]
            keep = max(
                new or by_thread,
                key=lambda t: max(present[k][0]["OWNER_EVENT_ID"] or 0 for k in by_thread[t]),
            )
            stale += [k for t, keys in by_thread.items() if t != keep for k in keys]
        return stale

    def _row_took(self, thread: int, name: str) -> str | None:
        """The statement that took the row lock ``name`` held by ``thread``: the one that took
        the thread's metadata lock on the row's table (InnoDB does not say which statement took
        a row lock; the transaction's first statement on the table did)."""
        table = row_table(name)
        best = None
        for t in self.mdl_tickets.values():
            if t.thread == thread and t.name == table and t.took is not None:
                if best is None or (t.event or 0) < (best.event or 0):
                    best = t
        return best.took if best is not None else None

    def _row_locks(self, row_waits: list[tuple], statements, now: int, before) -> None:
        blockers = defaultdict(list)  # (waiter, object) -> [exclusive] of its blockers' locks
        holding = {}  # (blocker, resource, object) -> (blocker's transaction start, name)
        waiting = {}  # (waiter, object) -> (wait start, name)
        for waiter, blocker, name, wait_start, blocker_start, mode in row_waits:
            obj = object_id(name)
            exclusive = row_lock_exclusive(mode)
            blockers[(waiter, obj)].append(exclusive)
            waiting[(waiter, obj)] = (wait_start, name)
            holding[(blocker, lock_class(ROW_LOCK, exclusive), obj)] = (blocker_start, name)
        for key, w in self.row_waiting.items():
            if key in waiting:
                w.last_seen = now
        ended = set()
        for key in [k for k in self.row_waiting if k not in waiting]:
            w = self.row_waiting.pop(key)
            ended.add(key)
            self._event(
                w.start, WAIT, w.resource, self._task_of(w.task), w.thread, w.object, now - w.start
            )
        for key in [k for k in self.row_held if k not in holding]:
            hold = self.row_held.pop(key)
            self._event(now, RELEASE, key[1], self._task_of(hold.task), hold.thread, key[2])
            self.row_released[key[1:]] = now
        if len(self.row_released) > ROW_RELEASES_KEPT:  # the oldest half goes
            keep = sorted(self.row_released.items(), key=lambda kv: kv[1])
            self.row_released = dict(keep[len(keep) // 2 :])
        for (tid, obj), (wait_start, name) in waiting.items():
            if (tid, obj) in self.row_waiting:
                continue
            th = self._thread(tid, None, now)
            resource = lock_class(ROW_LOCK, any(blockers[(tid, obj)]))
            self._object(resource, obj, name)
            task = th.txn.task if th.txn is not None else th.task
            if th.txn is not None and th.txn.waiting is None:
                th.txn.waiting = self._statement_name(statements, tid, None, None)
            start = clamp(wait_start, before, now)
            self.row_waiting[(tid, obj)] = _OpenWait(
                resource, obj, task.task, th.os_thread, start, None, (), None, now
            )
        for (tid, resource, obj), (blocker_start, name) in holding.items():
            if (tid, resource, obj) in self.row_held:
                continue
            th = self._thread(tid, None, now)
            self._object(resource, obj, name)
            task = th.txn.task if th.txn is not None else th.task
            # it held the lock at least since the wait it causes began (not before its
            # transaction did), and not before the previous holder let it go
            ts = min((w.start for (_, o), w in self.row_waiting.items() if o == obj), default=now)
            if blocker_start is not None:
                ts = max(ts, min(blocker_start, now))
            if is_exclusive(resource):
                ts = max(ts, self.row_released.get((resource, obj), ts))
            if (tid, obj) in ended:  # it waited for the row until this poll
                ts = now
            took = self._row_took(tid, name)
            if th.txn is not None and th.txn.took_first is None:
                th.txn.took_first = took
            self._event(ts, ACQUIRE, resource, task, th.os_thread, obj)
            self.row_held[(tid, resource, obj)] = _Hold(task.task, th.os_thread, ts, took, row=name)

    def _waited_for(self) -> None:
        """Transactions holding what an open wait waits for are named by the statement that
        took it."""
        held = defaultdict(list)  # (resource, object) -> holds
        for (_, resource, obj), hold in [*self.holds.items(), *self.row_held.items()]:
            held[(resource, obj)].append(hold)
        for w in [*self.mdl_waiting.values(), *self.row_waiting.values()]:
            for hold in held.get((w.resource, w.object), ()):
                txn = self.txns.get(hold.task)
                if hold.task != w.task and txn is not None and txn.took_waited is None:
                    txn.took_waited = hold.took

    def _end_thread(self, th: Thread, now: int) -> None:
        if th.txn is not None:
            self._end_txn(th, None, now)
        th.task.end = now
        self.tasks_done.append(th.task.row())
        del self.threads[th.thread_id]

    # --- the end ------------------------------------------------------------------------

    def finish(self, now: int) -> None:
        """The recording ends: open waits are written with a null length (still waiting);
        open holds stay open (no RELEASE); open tasks are written without an end."""
        for w in list(self.mdl_waiting.values()) + list(self.row_waiting.values()):
            self._event(
                w.start, WAIT, w.resource, self._task_of(w.task), w.thread, w.object, None, w.site
            )
        self.mdl_waiting.clear()
        self.row_waiting.clear()
        for task in self.statements.values():
            self.tasks_done.append(task.row())
        self.statements.clear()
        for th in self.threads.values():
            if th.txn is not None:
                th.txn.task.name = self._txn_name(th, th.txn)
                self.tasks_done.append(th.txn.task.row())
            self.tasks_done.append(th.task.row())

    def take(self) -> tuple[list[dict], list[dict], list[dict]]:
        """Events, tasks and sites that are final, handed over once."""
        out = (self.events, self.tasks_done, self.sites_new)
        self.events, self.tasks_done, self.sites_new = [], [], []
        return out
