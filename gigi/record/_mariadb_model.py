"""From successive polls of a MariaDB/MySQL server's lock and activity tables to trace rows.

Plain Python over plain rows: no connection here, so what a poll means can be read (and tested)
apart from how it is fetched. Times are nanoseconds on the recorder's monotonic clock; the
server's picosecond timers are mapped onto it by ``ServerClock``.

The model:
- a connection (a foreground thread) is a task; a background thread that holds a lock is a
  background task;
- a transaction is a task, child of its connection, named by the first statement of it that is
  not BEGIN/COMMIT: it lasts from the first poll with evidence of it (an ACTIVE row in
  events_transactions_current, a metadata lock of transaction or statement duration, a row
  lock) until a poll without any; a new transaction event id on the same connection starts a
  new task;
- a statement is a task, child of its transaction (or connection), named by its SQL text,
  with the server's own start and end;
- a metadata lock is a resource per object type (``mdl.table``, ``mdl.schema``, ...) and the
  object is a stable hash of ``schema.name``; PENDING is a WAIT of the transaction (its real
  start and end from events_waits_* where the server timed it), GRANTED an ACQUIRE, and the
  row's disappearance a RELEASE. Locks of EXPLICIT duration (LOCK TABLES, GET_LOCK, backup
  locks) belong to the connection;
- a row lock (``innodb.row_lock``) is seen only while someone waits for it: the waiter WAITs,
  the blocker holds it from the wait's start (or when first seen) until it no longer blocks.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass, field

WAIT, ACQUIRE, USE, RELEASE = 0, 1, 2, 3
ROW_LOCK = "innodb.row_lock"
_CONTROL = re.compile(
    r"^\s*(begin|start\s+transaction|commit|rollback|xa\s"
    # session settings (SET NAMES, SET SESSION x = ..., SET autocommit = ...) take no locks
    r"|set\s+(names\s|character\s+set\s|(session\s+|global\s+|@@)?[a-z_.]+\s*=|transaction\s))",
    re.IGNORECASE,
)
NAME_CHARS = 200  # SQL text kept in a task's name


def object_id(text: str) -> int:
    """A stable, positive, non-zero id of a locked object's name.

    >>> object_id("test.t") == object_id("test.t") != object_id("test.u")
    True
    """
    h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return (h & 0x7FFF_FFFF_FFFF_FFFF) or 1


def mdl_resource(object_type: str) -> str:
    """``TABLE`` -> ``mdl.table``, ``USER LEVEL LOCK`` -> ``mdl.user_level_lock``."""
    return "mdl." + re.sub(r"[^a-z0-9]+", "_", (object_type or "unknown").lower()).strip("_")


def _short(sql: str | None) -> str | None:
    if sql is None:
        return None
    sql = " ".join(sql.split())
    return sql if len(sql) <= NAME_CHARS else sql[: NAME_CHARS - 3] + "..."


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
    # (waiting thread id, blocking thread id, object name, wait start in ns or None,
    #  blocker's transaction start in ns or None), for row locks
    # (None: row locks were not read in this poll)
    row_waits: list[tuple] | None = None
    # (thread, event id) -> (TIMER_START ps, TIMER_END ps or None, SOURCE) of MDL waits
    mdl_waits: dict[tuple[int, int], tuple] = field(default_factory=dict)


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
        self.statements: dict[tuple[int, int], Task] = {}
        self.statement_done: dict[int, int] = {}  # thread -> its last statement written
        self.mdl_held: dict[tuple, tuple[str, int, int, int]] = {}  # key -> res, obj, task, thr
        self.mdl_waiting: dict[tuple, _OpenWait] = {}
        self.row_held: dict[tuple, tuple[int, int]] = {}  # (thread, object) -> task, thread
        self.row_waiting: dict[tuple, _OpenWait] = {}
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

    def _thread(self, thread_id: int, row: dict | None, now: int) -> Thread:
        th = self.threads.get(thread_id)
        if th is None:
            row = row or {"TYPE": "BACKGROUND"}  # every connection is in the threads rows
            background = row.get("TYPE", "FOREGROUND") != "FOREGROUND"
            if background:
                name = row.get("NAME") or f"server thread {thread_id}"
            else:
                who = f"{row.get('PROCESSLIST_USER') or '?'}@{row.get('PROCESSLIST_HOST') or '?'}"
                db = row.get("PROCESSLIST_DB")
                name = f"connection {row.get('PROCESSLIST_ID', thread_id)} {who}" + (
                    f"/{db}" if db else ""
                )
            task = self._new_task(name, "background" if background else "foreground", None, now)
            th = Thread(
                thread_id,
                row.get("THREAD_OS_ID") or thread_id,
                task,
                row.get("PROCESSLIST_ID"),
            )
            self.threads[thread_id] = th
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
        if event is not None and event < s["EVENT_ID"]:
            return None
        if event is not None and s.get("END_EVENT_ID") is not None and event > s["END_EVENT_ID"]:
            return None
        return _short(s["SQL_TEXT"])

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
        for waiter_pid, blocker_pid, name, wait_start, blocker_start in poll.row_waits or ():
            w, b = by_pid.get(waiter_pid), by_pid.get(blocker_pid)
            if w is not None and b is not None:
                row_waits.append((w.thread_id, b.thread_id, name, wait_start, blocker_start))

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
            for tid, _ in [*self.row_waiting, *self.row_held]:
                evidence.setdefault(tid, None)
        self._transactions(evidence, trx, statements, locks, now, before)
        self._statements(statements, now)
        self._metadata_locks(locks, poll, now, before)
        tickets = {r["OBJECT_INSTANCE_BEGIN"] for r in locks}
        for ticket in [t for t in self.unnamed if t not in tickets]:
            self._end_thread(self.threads[self.unnamed.pop(ticket)], now)
        if poll.row_waits is not None:
            self._row_locks(row_waits, now, self.rows_read)
            self.rows_read = poll.sent
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

    def _transactions(self, evidence, trx, statements, locks, now, before) -> None:
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
                txn = th.txn = Txn(self._new_task(None, th.task.kind, th.task.task, start))
            if event is not None:
                txn.trx_event = event
            txn.last_seen = now
            if txn.task.name is None:
                owner = min(
                    (
                        r["OWNER_EVENT_ID"]
                        for r in locks
                        if r["OWNER_THREAD_ID"] == tid and r["OWNER_EVENT_ID"] is not None
                    ),
                    default=None,
                )
                after = txn.trx_event
                txn.task.name = self._statement_name(statements, tid, owner, after)
                if txn.task.name is None and owner is not None:
                    txn.task.name = self._statement_name(statements, tid, None, after)
        for tid in evidence:
            if tid not in self.threads:  # a background thread: named when threads says so
                th = self._thread(tid, None, now)
                th.txn = Txn(self._new_task(None, th.task.kind, th.task.task, now))

    def _end_txn(self, th: Thread, trx_row: dict | None, now: int) -> None:
        txn = th.txn
        end = now
        if trx_row is not None and trx_row.get("EVENT_ID") == txn.trx_event:
            end = clamp(self.clock.to_local(trx_row.get("TIMER_END")), txn.last_seen, now)
        txn.task.end = max(end, txn.task.start)
        if txn.task.name is None:
            txn.task.name = f"transaction on {th.task.name}"
        self.tasks_done.append(txn.task.row())
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
                name = _short(s.get("SQL_TEXT")) or s.get("EVENT_NAME")
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

    def _metadata_locks(self, locks: list[dict], poll: Poll, now: int, before) -> None:
        present = {}
        for r in locks:
            if r["LOCK_STATUS"] not in ("GRANTED", "PENDING"):
                continue
            resource = mdl_resource(r["OBJECT_TYPE"])
            name = ".".join(x for x in (r["OBJECT_SCHEMA"], r["OBJECT_NAME"]) if x) or resource
            obj = object_id(name)
            self.objects.setdefault(resource, {})[obj] = name
            key = (
                r["OBJECT_INSTANCE_BEGIN"],
                r["OWNER_THREAD_ID"],
                r["LOCK_TYPE"],
                r["LOCK_STATUS"],
            )
            present[key] = (r, resource, obj)
        # ended: waits first (their ACQUIRE comes when the grant appears), then releases
        for key, w in self.mdl_waiting.items():
            if key in present:
                w.last_seen = now
        for key in [k for k in self.mdl_waiting if k not in present]:
            w = self.mdl_waiting.pop(key)
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
        for key in [k for k in self.mdl_held if k not in present]:
            resource, obj, task, thread = self.mdl_held.pop(key)
            self._event(now, RELEASE, resource, self._task_of(task), thread, obj)
        for key, (r, resource, obj) in present.items():
            if key in self.mdl_held or key in self.mdl_waiting:
                continue
            th = self._thread(r["OWNER_THREAD_ID"], None, now)
            explicit = r["LOCK_DURATION"] == "EXPLICIT" or th.txn is None
            task = th.task if explicit else th.txn.task
            if r["LOCK_STATUS"] == "PENDING":
                wkey = (r["OWNER_THREAD_ID"], r["OWNER_EVENT_ID"])
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
                )
            else:
                # granted after a wait of the same ticket: at the wait's end
                ts = now
                pending = (key[0], key[1], key[2], "PENDING")
                if pending in self.mdl_waiting:
                    w = self.mdl_waiting.pop(pending)
                    ts = w.end(poll.mdl_waits.get(w.key), now)
                    self._event(
                        w.start, WAIT, resource, task, th.os_thread, obj, ts - w.start, w.site
                    )
                site = self._site(r.get("SOURCE"), ACQUIRE, resource)
                self._event(ts, ACQUIRE, resource, task, th.os_thread, obj, site=site)
                self.mdl_held[key] = (resource, obj, task.task, th.os_thread)

    def _row_locks(self, row_waits: list[tuple], now: int, before) -> None:
        waiting, holding = {}, {}
        for waiter, blocker, name, wait_start, blocker_start in row_waits:
            obj = object_id(name)
            self.objects.setdefault(ROW_LOCK, {})[obj] = name
            waiting[(waiter, obj)] = wait_start
            holding[(blocker, obj)] = blocker_start
        for key, w in self.row_waiting.items():
            if key in waiting:
                w.last_seen = now
        for key in [k for k in self.row_waiting if k not in waiting]:
            w = self.row_waiting.pop(key)
            self._event(
                w.start, WAIT, ROW_LOCK, self._task_of(w.task), w.thread, w.object, now - w.start
            )
        for key in [k for k in self.row_held if k not in holding]:
            task, thread = self.row_held.pop(key)
            self._event(now, RELEASE, ROW_LOCK, self._task_of(task), thread, key[1])
        for (tid, obj), wait_start in waiting.items():
            if (tid, obj) in self.row_waiting:
                continue
            th = self._thread(tid, None, now)
            task = th.txn.task if th.txn is not None else th.task
            start = clamp(wait_start, before, now)
            self.row_waiting[(tid, obj)] = _OpenWait(
                ROW_LOCK, obj, task.task, th.os_thread, start, None, (), None, now
            )
        for (tid, obj), blocker_start in holding.items():
            if (tid, obj) in self.row_held:
                continue
            th = self._thread(tid, None, now)
            task = th.txn.task if th.txn is not None else th.task
            # it held the lock at least since the wait it causes began (not before its
            # transaction did)
            ts = min((w.start for (_, o), w in self.row_waiting.items() if o == obj), default=now)
            if blocker_start is not None:
                ts = max(ts, min(blocker_start, now))
            self._event(ts, ACQUIRE, ROW_LOCK, task, th.os_thread, obj)
            self.row_held[(tid, obj)] = (task.task, th.os_thread)

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
                if th.txn.task.name is None:
                    th.txn.task.name = f"transaction on {th.task.name}"
                self.tasks_done.append(th.txn.task.row())
            self.tasks_done.append(th.task.row())

    def take(self) -> tuple[list[dict], list[dict], list[dict]]:
        """Events, tasks and sites that are final, handed over once."""
        out = (self.events, self.tasks_done, self.sites_new)
        self.events, self.tasks_done, self.sites_new = [], [], []
        return out
