"""``record mariadb``: poll a MariaDB (or MySQL) server's performance_schema and InnoDB lock
tables and write what they show as trace format v1. See ``_mariadb_model`` for what becomes a
task, a resource, an event and a site; this module fetches the rows.

Every poll is one round trip of several statements (statements, transactions, metadata locks,
row lock waits, foreground threads); a second one reads events_waits_current when a new
metadata lock wait shows, and events_waits_history_long when one ended, for their real times;
and events_statements_history when a new lock's owning statement has already ended, for the
statement that took it.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from gigi.errors import RecordError
from gigi.record._locks import resource_row
from gigi.record._mariadb_model import Model, Poll, covers
from gigi.schema._write import TraceWriter

WRITER = "gigi-record-mariadb 1"
SUMMARY = "mariadb-recording.json"
MDL_WAIT = "wait/lock/metadata/sql/mdl"
ROW_LOCK_EVERY = 0.15  # s between reads of InnoDB's lock tables in information_schema
# What the recording needs turned on: (table, name or LIKE pattern, required)
INSTRUMENTS = (("wait/lock/metadata/%", True), ("statement/%", False), ("transaction", False))
CONSUMERS = (
    ("global_instrumentation", True),
    ("thread_instrumentation", True),
    ("events_statements_current", False),
    ("events_statements_history", False),
    ("events_transactions_current", False),
    ("events_waits_current", False),
    ("events_waits_history_long", False),
)

_STATEMENTS = """SELECT THREAD_ID, EVENT_ID, END_EVENT_ID, EVENT_NAME, TIMER_START, TIMER_END,
    SQL_TEXT FROM performance_schema.events_statements_current"""
_TRANSACTIONS = """SELECT THREAD_ID, EVENT_ID, END_EVENT_ID, STATE, TIMER_START, TIMER_END
    FROM performance_schema.events_transactions_current"""
_LOCKS = """SELECT OBJECT_TYPE, OBJECT_SCHEMA, OBJECT_NAME, OBJECT_INSTANCE_BEGIN, LOCK_TYPE,
    LOCK_DURATION, LOCK_STATUS, SOURCE, OWNER_THREAD_ID, OWNER_EVENT_ID
    FROM performance_schema.metadata_locks"""
_THREADS = """SELECT THREAD_ID, NAME, TYPE, PROCESSLIST_ID, PROCESSLIST_USER, PROCESSLIST_HOST,
    PROCESSLIST_DB, THREAD_OS_ID FROM performance_schema.threads"""
# Row lock waits: (waiting connection, blocking connection, lock name, wait start and the
# blocker's transaction start as unix seconds, the blocking lock's mode)
_ROW_WAITS_INNODB = """SELECT rt.trx_mysql_thread_id, bt.trx_mysql_thread_id,
    CONCAT_WS(' ', l.lock_table, l.lock_index, l.lock_data), UNIX_TIMESTAMP(rt.trx_wait_started),
    UNIX_TIMESTAMP(bt.trx_started), bl.lock_mode
    FROM information_schema.INNODB_LOCK_WAITS w
    JOIN information_schema.INNODB_TRX rt ON rt.trx_id = w.requesting_trx_id
    JOIN information_schema.INNODB_TRX bt ON bt.trx_id = w.blocking_trx_id
    JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id
    LEFT JOIN information_schema.INNODB_LOCKS bl ON bl.lock_id = w.blocking_lock_id
    WHERE NOT (bt.trx_requested_lock_id <=> w.blocking_lock_id)"""
_ROW_WAITS_DATA_LOCKS = """SELECT rt.PROCESSLIST_ID, bt.PROCESSLIST_ID,
    CONCAT_WS(' ', CONCAT(l.OBJECT_SCHEMA, '.', l.OBJECT_NAME), l.INDEX_NAME, l.LOCK_DATA),
    NULL, NULL, bl.LOCK_MODE
    FROM performance_schema.data_lock_waits w
    JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
    JOIN performance_schema.threads rt ON rt.THREAD_ID = w.REQUESTING_THREAD_ID
    JOIN performance_schema.threads bt ON bt.THREAD_ID = w.BLOCKING_THREAD_ID
    JOIN performance_schema.data_locks bl ON bl.ENGINE_LOCK_ID = w.BLOCKING_ENGINE_LOCK_ID
    WHERE bl.LOCK_STATUS = 'GRANTED'"""
# The statements of some threads that have ended (the last few of each thread; the long history
# of all threads, when its consumer is on, for those the short one no longer has)
_HISTORY = """SELECT THREAD_ID, EVENT_ID, END_EVENT_ID, NESTING_EVENT_ID, SQL_TEXT
    FROM performance_schema.{table} WHERE THREAD_ID IN ({marks})"""


@dataclass
class Recording:
    """What a recording did: written into the trace as mariadb-recording.json too."""

    server: str
    version: str
    out: str
    polls: int = 0
    seconds: float = 0.0
    events: int = 0
    tasks: int = 0
    segments: int = 0
    poll_ms: list[float] = field(default_factory=list, repr=False)
    row_locks: str = ""
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped_by: str = "duration"

    def figures(self) -> dict:
        ms = sorted(self.poll_ms) or [0.0]
        return {
            "mean": round(statistics.fmean(ms), 3),
            "p50": round(ms[len(ms) // 2], 3),
            "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        }

    def to_json(self, objects: dict) -> dict:
        return {
            "server": self.server,
            "version": self.version,
            "polls": self.polls,
            "seconds": round(self.seconds, 3),
            "events": self.events,
            "tasks": self.tasks,
            "poll_ms": self.figures(),
            "row_locks": self.row_locks,
            "settings_changed_and_restored": self.changed,
            "notes": self.notes,
            "stopped_by": self.stopped_by,
            # resource -> object id -> the locked object's name
            "objects": {r: {str(k): v for k, v in o.items()} for r, o in objects.items()},
        }


def parse_dsn(dsn: str) -> tuple[dict, str]:
    """Connection arguments of a ``mysql://user:password@host:port/db?unix_socket=PATH`` DSN
    (``mariadb://`` too), and the DSN without its password, to show.

    >>> parse_dsn("mysql://root:pw@127.0.0.1:3307/test")
    ({'host': '127.0.0.1', 'port': 3307, 'user': 'root', 'password': 'pw', 'database': 'test'}, 'mysql://root@127.0.0.1:3307/test')
    """
    try:
        url = urlsplit(dsn)
        port = url.port
    except ValueError as e:
        raise RecordError(f"bad DSN: {e}; expected mysql://user:password@host:port/db") from None
    if url.scheme not in ("mysql", "mariadb") or not (url.hostname or "unix_socket" in url.query):
        raise RecordError(
            f"bad DSN {dsn.split('@')[-1]!r}: expected mysql://user:password@host:port/db "
            "(or mariadb://...; ?unix_socket=PATH for a socket)"
        )
    args: dict = {"host": url.hostname or "localhost", "port": port or 3306}
    if url.username:
        args["user"] = unquote(url.username)
    if url.password:
        args["password"] = unquote(url.password)
    if url.path.strip("/"):
        args["database"] = unquote(url.path.strip("/"))
    for key, values in parse_qs(url.query).items():
        if key == "unix_socket":
            args["unix_socket"] = values[-1]
        elif key in ("connect_timeout", "read_timeout"):
            args[key] = float(values[-1])
        else:
            raise RecordError(
                f"bad DSN: unknown option {key!r} (known: unix_socket, "
                "connect_timeout, read_timeout)"
            )
    shown = f"{url.scheme}://" + (f"{args['user']}@" if "user" in args else "")
    shown += f"{url.hostname or ''}" + (f":{port}" if port else "") + url.path
    return args, shown


class _Session:
    """The recorder's connection: runs a batch of statements in one round trip."""

    def __init__(self, args: dict, shown: str) -> None:
        import pymysql
        from pymysql.constants import CLIENT

        self.pymysql = pymysql
        self.shown = shown
        try:
            self.con = pymysql.connect(
                **{"connect_timeout": 5, **args},
                client_flag=CLIENT.MULTI_STATEMENTS,
                autocommit=True,
            )
        except pymysql.err.MySQLError as e:
            raise RecordError(f"cannot connect to {shown}: {_message(e)}") from None

    def rows(self, sql: str, params=None) -> list[tuple]:
        with self.con.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def batch(self, statements: list[str]) -> list[list[dict]]:
        out = []
        with self.con.cursor(self.pymysql.cursors.DictCursor) as cur:
            cur.execute(";\n".join(statements))
            out.append(list(cur.fetchall()))
            while cur.nextset():
                out.append(list(cur.fetchall()))
        return out


def _message(e: Exception) -> str:
    args = getattr(e, "args", ())
    if len(args) >= 2 and isinstance(args[1], str):
        return f"{args[1]} (error {args[0]})"
    return str(e) or type(e).__name__


def _enable(s: _Session, rec: Recording) -> list[tuple[str, str, str, str]]:
    """Turn on the instruments and consumers the recording needs; returns how to undo it."""
    pymysql = s.pymysql
    on = s.rows("SELECT @@performance_schema")[0][0]
    if not on or str(on).upper() in ("0", "OFF"):
        raise RecordError(
            f"performance_schema is OFF on {s.shown}: it is read only at server start; restart "
            "the server with performance_schema=ON (in the [mysqld] section of its config)"
        )
    undo = []
    for table, key, items in (
        ("setup_instruments", "NAME", INSTRUMENTS),
        ("setup_consumers", "NAME", CONSUMERS),
    ):
        timed = table == "setup_instruments"
        for name, required in items:
            op = "LIKE" if "%" in name else "="
            cols = "NAME, ENABLED" + (", TIMED" if timed else "")
            try:
                rows = s.rows(
                    f"SELECT {cols} FROM performance_schema.{table} WHERE {key} {op} %s", (name,)
                )
            except pymysql.err.MySQLError as e:
                raise RecordError(
                    f"cannot read performance_schema.{table} on {s.shown}: {_message(e)}; "
                    "the user needs SELECT ON performance_schema.*"
                ) from None
            off = [r for r in rows if r[1] != "YES" or (timed and r[2] != "YES")]
            if not rows and required:
                raise RecordError(f"{s.shown} has no {name} in performance_schema.{table}")
            if not off:
                continue
            sets = "ENABLED='YES'" + (", TIMED='YES'" if timed else "")
            try:
                s.rows(
                    f"UPDATE performance_schema.{table} SET {sets} WHERE {key} {op} %s "
                    f"AND (ENABLED<>'YES'{' OR TIMED<>%s' if timed else ''})",
                    (name, "YES") if timed else (name,),
                )
            except pymysql.err.MySQLError as e:
                if not required:
                    rec.notes.append(
                        f"{name} is off in {table} and could not be turned on ({_message(e)})"
                    )
                    continue
                raise RecordError(
                    f"{name} is off in performance_schema.{table} and the user may not turn it "
                    f"on ({_message(e)}): GRANT UPDATE ON performance_schema.{table} to it, or "
                    "start the server with performance-schema-instrument='wait/lock/metadata/"
                    "sql/mdl=ON'"
                ) from None
            for r in off:
                undo.append((table, r[0], r[1], r[2] if timed else None))
                rec.changed.append(f"{table} {r[0]}")
    return undo


def _restore(s: _Session, undo) -> None:
    for table, name, enabled, timed in undo:
        sets = "ENABLED=%s" + (", TIMED=%s" if timed is not None else "")
        params = (enabled, timed, name) if timed is not None else (enabled, name)
        s.rows(f"UPDATE performance_schema.{table} SET {sets} WHERE NAME=%s", params)


def _row_lock_source(s: _Session, rec: Recording) -> str | None:
    """The row lock query this server answers, or None (and why, in the recording)."""
    tables = {
        r[0].lower()
        for r in s.rows(
            "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES "
            "WHERE TABLE_NAME IN ('data_lock_waits', 'INNODB_LOCK_WAITS')"
        )
    }
    for table, sql in (
        ("performance_schema.data_lock_waits", _ROW_WAITS_DATA_LOCKS),
        ("information_schema.innodb_lock_waits", _ROW_WAITS_INNODB),
    ):
        if table not in tables:
            continue
        try:
            s.rows(sql + " LIMIT 0")
        except s.pymysql.err.MySQLError as e:
            rec.row_locks = f"not recorded: {table} refused ({_message(e)}; it needs PROCESS)"
            return None
        rec.row_locks = f"from {table} (a row lock is seen only while someone waits for it)"
        return sql
    rec.row_locks = "not recorded: the server has neither data_lock_waits nor INNODB_LOCK_WAITS"
    return None


def record(
    dsn: str,
    out: str | os.PathLike,
    *,
    duration: float = 30.0,
    interval: float = 0.01,
    flush_every: float = 1.0,
    stop: threading.Event | None = None,
    on_start=None,
) -> Recording:
    """Record the server at ``dsn`` into the trace directory ``out`` for ``duration`` seconds
    (or until ``stop`` is set), polling every ``interval`` seconds and writing segments every
    ``flush_every`` seconds. Instruments and consumers that were off are turned on for the
    recording and back off after it. ``on_start()`` is called once the first poll is done."""
    try:
        import pymysql  # noqa: F401
    except ImportError:
        raise RecordError("record mariadb needs PyMySQL: pip install PyMySQL") from None
    if interval <= 0 or duration <= 0:
        raise RecordError("--interval and --duration must be positive")
    stop = stop or threading.Event()
    args, shown = parse_dsn(dsn)
    s = _Session(args, shown)
    version = s.rows("SELECT VERSION()")[0][0]
    rec = Recording(shown, version, str(out))
    undo = _enable(s, rec)
    try:
        own = s.rows(
            "SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = "
            "CONNECTION_ID()"
        )[0][0]
        row_sql = _row_lock_source(s, rec)
        if row_sql is None:
            rec.notes.append(f"row locks {rec.row_locks}")
        consumers = dict(s.rows("SELECT NAME, ENABLED FROM performance_schema.setup_consumers"))
        _run(
            s,
            rec,
            Path(out),
            own,
            row_sql,
            consumers,
            duration,
            interval,
            flush_every,
            stop,
            on_start,
        )
    finally:
        try:
            _restore(s, undo)
            s.con.close()
        except s.pymysql.err.MySQLError:
            pass
    return rec


def _run(s, rec, out, own, row_sql, consumers, duration, interval, flush_every, stop, on_start):
    pymysql = s.pymysql
    writer = TraceWriter(
        out, WRITER, metadata={"gigi.server": rec.server, "gigi.server_version": rec.version}
    )
    model = Model(own)
    statements = [_STATEMENTS]
    if consumers.get("events_transactions_current") == "YES":
        statements.append(_TRANSACTIONS)
    statements.append(_LOCKS)
    # InnoDB refreshes the information_schema copy of its lock tables only when nobody has
    # read it for 100 ms: read more often, it would never change
    row_every = max(interval, ROW_LOCK_EVERY) if row_sql is _ROW_WAITS_INNODB else interval
    next_rows = 0.0
    # server wall clock (row lock wait starts) onto ours
    sent = time.monotonic_ns()
    server_now = float(s.rows("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])
    wall_offset = (sent + time.monotonic_ns()) // 2 - int(server_now * 1e9)
    written = {"events": 0, "tasks": 0}
    resources: set[str] = set()

    def flush(final: bool = False) -> None:
        events, tasks, sites = model.take()
        writer.extend("events", events)
        writer.extend("tasks", tasks)
        writer.extend("sites", sites)
        writer.extend("resources", [resource_row(r) for r in model.objects if r not in resources])
        resources.update(model.objects)
        written["events"] += len(events)
        written["tasks"] += len(tasks)
        writer.flush()
        rec.events, rec.tasks, rec.segments = written["events"], written["tasks"], writer.segments
        summary = out / SUMMARY
        tmp = summary.with_name(summary.name + ".tmp")
        tmp.write_text(json.dumps(rec.to_json(model.objects), indent=2) + "\n")
        os.replace(tmp, summary)

    started = time.monotonic()
    next_poll, next_flush = started, started + flush_every
    known_resources: set[str] = set()
    history_long = consumers.get("events_statements_history_long") == "YES"
    try:
        while not stop.is_set():
            now = time.monotonic()
            if now - started >= duration:
                break
            rows_now = row_sql is not None and now >= next_rows
            if rows_now:
                next_rows = now + row_every
            poll = _poll(
                s, model, statements, row_sql if rows_now else None, wall_offset, history_long
            )
            rec.poll_ms.append((poll.received - poll.sent) / 1e6)
            model.add(poll)
            rec.polls += 1
            if rec.polls == 1 and on_start is not None:
                on_start()
            if time.monotonic() >= next_flush or set(model.objects) - known_resources:
                known_resources |= set(model.objects)
                flush()
                next_flush = time.monotonic() + flush_every
            next_poll += interval
            delay = next_poll - time.monotonic()
            if delay < 0:  # behind: skip the polls we missed rather than run them back to back
                next_poll = time.monotonic()
                delay = 0
            stop.wait(delay)
        else:
            rec.stopped_by = "signal"
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as e:
        rec.stopped_by = f"lost connection: {_message(e)}"
        rec.seconds = time.monotonic() - started
        model.finish(time.monotonic_ns())
        flush(final=True)
        raise RecordError(
            f"lost the connection to {s.shown} after {rec.seconds:.1f} s ({_message(e)}; a "
            f"server restart or a kill ends it too); the {rec.events} events recorded up to "
            f"then are in {out}"
        ) from None
    rec.seconds = time.monotonic() - started
    model.finish(time.monotonic_ns())
    flush(final=True)
    if writer.segments == 0:
        rec.notes.append(
            "nothing was written: no other session held or waited for a lock, so there is no "
            "trace to read"
        )


def _poll(s: _Session, model: Model, statements, row_sql, wall_offset, history_long) -> Poll:
    batch = statements + ([row_sql] if row_sql is not None else [])
    batch.append(_THREADS + " WHERE TYPE = 'FOREGROUND'")  # last: every lock owner is in it
    sent = time.monotonic_ns()
    results = s.batch(batch)
    received = time.monotonic_ns()
    poll = Poll(sent, received)
    parts = iter(results)
    poll.statements = next(parts)
    if statements[1] is _TRANSACTIONS:
        poll.transactions = next(parts)
    poll.metadata_locks = next(parts)
    if row_sql is not None:
        poll.row_waits = []
        for r in next(parts):
            w, b, name, wait_start, blocker_start, mode = tuple(r.values())
            poll.row_waits.append(
                (
                    w,
                    b,
                    name or "row lock",
                    None if wait_start is None else wall_offset + int(float(wait_start) * 1e9),
                    None
                    if blocker_start is None
                    else wall_offset + int(float(blocker_start) * 1e9),
                    mode,
                )
            )
    poll.threads = next(parts)
    # lock owners that are not connections (background threads), named once
    known = set(model.threads) | {t["THREAD_ID"] for t in poll.threads} | {model.own_thread}
    unknown = {r["OWNER_THREAD_ID"] for r in poll.metadata_locks} - known - {None}
    if unknown:
        marks = ", ".join(["%s"] * len(unknown))
        with s.con.cursor(s.pymysql.cursors.DictCursor) as cur:
            cur.execute(_THREADS + f" WHERE THREAD_ID IN ({marks})", tuple(unknown))
            poll.threads += list(cur.fetchall())
    # the server's own times of metadata lock waits: new ones from events_waits_current,
    # ended ones from there or events_waits_history_long
    pending = {
        (r["OWNER_THREAD_ID"], r["OWNER_EVENT_ID"])
        for r in poll.metadata_locks
        if r["LOCK_STATUS"] == "PENDING" and r["OWNER_THREAD_ID"] is not None
    }
    # (an owner the server does not name has a stand-in id below 0 and no timed wait)
    waiting = {w.key for w in model.mdl_waiting.values() if w.key[0] >= 0}
    new, ended = pending - waiting, waiting - pending
    tables = (["events_waits_current"] if new or ended else []) + (
        ["events_waits_history_long"] if ended else []
    )
    for table in tables:
        with s.con.cursor() as cur:
            cur.execute(
                "SELECT THREAD_ID, EVENT_ID, END_EVENT_ID, TIMER_START, TIMER_END, SOURCE "
                f"FROM performance_schema.{table} WHERE EVENT_NAME = %s",
                (MDL_WAIT,),
            )
            for thread, event, end_event, start, end, source in cur.fetchall():
                if (thread, event) in new | ended:
                    done = end if end_event is not None else None
                    old = poll.mdl_waits.get((thread, event))
                    if old is None or old[1] is None:
                        poll.mdl_waits[(thread, event)] = (start, done, source)
    # the statements that took new locks and have already ended
    wanted = model.history_wanted(poll)
    for table in ("events_statements_history", "events_statements_history_long"):
        if not wanted or (table.endswith("long") and not history_long):
            break
        marks = ", ".join(["%s"] * len(wanted))
        with s.con.cursor(s.pymysql.cursors.DictCursor) as cur:
            cur.execute(_HISTORY.format(table=table, marks=marks), tuple(wanted))
            for row in cur.fetchall():
                poll.history.setdefault(row["THREAD_ID"], []).append(row)
        wanted = {
            tid: events
            for tid, events in wanted.items()
            if any(not any(covers(h, e) for h in poll.history.get(tid, ())) for e in events)
        }
    return poll
