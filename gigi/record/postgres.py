"""``record postgres``: poll a PostgreSQL server's activity, locks and dead tuples and write
them as a trace (format v1). What the rows become is ``_pg_model``'s business; this module
connects, polls on time, flushes and stops cleanly.

Each poll reads ``pg_stat_activity`` (with ``pg_blocking_pids`` for the backends that wait for
a lock, and ``pg_stat_progress_vacuum``) and ``pg_locks``; dead tuples
(``pg_stat_user_tables``) are read every ``TABLES_EVERY_S`` at most, as the server updates
them about once a second. Segments are flushed every ``flush_s``, so a recorder that is killed
loses at most that much; Ctrl-C and SIGTERM stop it cleanly, and a lost connection keeps all
that was recorded before it.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gigi.errors import RecordError
from gigi.record._pg_model import Backend, Lock, PgModel, server_ns, stable_id
from gigi.schema._write import TraceWriter

SQL = Path(__file__).with_name("postgres_sql")
TABLES_EVERY_S = 0.1
WRITER = "gigi-record-postgres 1"


@dataclass(frozen=True)
class PostgresRecording:
    """What ``record`` does."""

    # libpq connection string or URI. The role must see other sessions' activity: a superuser
    # or a member of pg_read_all_stats. Sees every session's SQL text, which goes in the trace.
    dsn: str
    # The trace directory to write (created if missing).
    out: Path
    # Seconds to record; None: until stopped (Ctrl-C, SIGTERM, or ``stop``).
    duration_s: float | None = 30.0
    # Seconds between polls. Holds and waits shorter than this may go unseen; each poll costs
    # the server two catalog queries (see bench/record_postgres.py).
    interval_s: float = 0.01
    # Seconds between flushes of segments: what a killed recorder may lose.
    flush_s: float = 1.0


@dataclass(frozen=True)
class RecordSummary:
    polls: int
    seconds: float
    poll_s: float  # seconds spent in polls (the queries and turning rows into events)
    events: int
    segments: int
    server: str


def _psycopg():
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise RecordError("record postgres needs psycopg 3: pip install 'psycopg[binary]'") from e
    return psycopg


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def connect(dsn: str):
    """An autocommit connection, or a RecordError saying why there is none."""
    psycopg = _psycopg()
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        raise RecordError(f"cannot connect to PostgreSQL ({_one_line(e)})") from None
    except Exception as e:  # a malformed DSN, say  # noqa: BLE001
        raise RecordError(f"cannot connect to PostgreSQL: {_one_line(e)}") from None
    conn.execute("SET application_name = 'gigi record postgres'")
    return conn


def server_identity(conn) -> dict[str, str]:
    """The server as schema metadata; a RecordError when the role cannot see what is needed."""
    cur = conn.execute((SQL / "server.sql").read_text())
    row = dict(zip([c.name for c in cur.description], cur.fetchone(), strict=True))
    if not row["sees_all"]:
        raise RecordError(
            f"role {row['role']!r} cannot see other sessions' queries and waits: "
            f"GRANT pg_read_all_stats TO {row['role']} (or record as a superuser)"
        )
    meta = {
        "gigi.pg.version": row["version"],
        "gigi.pg.database": row["database"],
        "gigi.pg.database_oid": str(row["database_oid"]),
        "gigi.pg.started": row["started"],
    }
    if row["address"] is not None:
        meta["gigi.pg.address"] = f"{row['address']}:{row['port']}"
    return meta


class _Clock:
    """Places server timestamps on the recorder's monotonic clock, by the offset measured at
    the poll with the shortest round trip so far."""

    def __init__(self) -> None:
        self.offset: int | None = None
        self.round_trip: int | None = None

    def observe(self, sent: int, received: int, server_now) -> None:
        trip = received - sent
        if self.round_trip is None or trip <= self.round_trip:
            self.round_trip = trip
            self.offset = (sent + received) // 2 - server_ns(server_now)

    def __call__(self, stamp) -> int | None:
        if stamp is None or self.offset is None:
            return None
        return server_ns(stamp) + self.offset


def _lock_tag(row: dict, database_oid: int) -> tuple[str, int]:
    """(resource, object) of a pg_locks row: the relation's oid, the xid, or a stable id of
    the tag."""
    kind = row["locktype"]
    db, rel = row["database"], row["relation"]
    if kind in ("relation", "extend") and db in (None, 0, database_oid):
        obj = rel
    elif kind == "transactionid":
        obj = int(row["transactionid"])
    elif kind in ("page", "tuple", "relation", "extend"):
        obj = stable_id(kind, db, rel, row["page"], row["tuple"])
    elif kind == "virtualxid":
        obj = stable_id(kind, row["virtualxid"])
    else:  # object, advisory, userlock, spectoken, frozenid, applytransaction
        obj = stable_id(kind, db, row["classid"], row["objid"], row["objsubid"])
    return f"pg.lock.{kind}", obj


def _who(row: dict) -> str:
    """``user@database (application)``, what is unknown left out.

    >>> _who({"usename": "app", "datname": None, "application_name": ""})
    'app'
    """
    who = "@".join(x for x in (row["usename"], row["datname"]) if x)
    app = row["application_name"]
    return f"{who} ({app})".strip() if app else who


class _Poller:
    def __init__(self, conn, model: PgModel, database_oid: int) -> None:
        self.conn = conn
        self.model = model
        self.database_oid = database_oid
        self.clock = _Clock()
        self.activity_sql = (SQL / "activity.sql").read_text()
        self.locks_sql = (SQL / "locks.sql").read_text()
        self.tables_sql = (SQL / "tables.sql").read_text()

    @staticmethod
    def _rows(cur) -> list[dict]:
        names = [c.name for c in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def poll(self) -> int:
        """One poll of activity and then locks (both queries in one round trip); returns its
        time on the recorder's clock."""
        sent = time.monotonic_ns()
        with self.conn.pipeline():
            activity_cur = self.conn.execute(self.activity_sql)
            locks_cur = self.conn.execute(self.locks_sql)
        received = time.monotonic_ns()
        activity, locks = self._rows(activity_cur), self._rows(locks_cur)
        ts = (sent + received) // 2
        if activity:
            self.clock.observe(sent, received, activity[0]["now"])
        clock = self.clock
        backends = [
            Backend(
                pid=r["pid"],
                backend_type=r["backend_type"] or "backend",
                backend_key=r["backend_start"],
                backend_start=clock(r["backend_start"]) or ts,
                leader_pid=r["leader_pid"] if r["leader_pid"] != r["pid"] else None,
                who=_who(r),
                state=r["state"],
                wait_event_type=r["wait_event_type"],
                xact_key=r["xact_start"],
                xact_start=clock(r["xact_start"]),
                query_key=r["query_start"],
                query_start=clock(r["query_start"]),
                query=r["query"],
                horizon_age=r["horizon_age"],
                vacuum_relid=r["vacuum_relid"],
                blockers=list(r["blockers"] or ()),
            )
            for r in activity
        ]
        model_locks = []
        for r in locks:
            resource, obj = _lock_tag(r, self.database_oid)
            model_locks.append(
                Lock(
                    r["pid"],
                    resource,
                    obj,
                    r["granted"],
                    clock(r["waitstart"]),
                    r["virtualtransaction"],
                    r["mode"],
                    r["relname"],
                )
            )
        # when the locks were read, on the server's clock: a statement seen in the activity
        # read before them may have begun after it (``PgModel._renamed``)
        locks_at = locks[0]["now"] if locks else None
        self.model.poll(ts, backends, model_locks, locks_at)
        return ts

    def tables(self) -> None:
        rows = self._rows(self.conn.execute(self.tables_sql))
        ts = time.monotonic_ns()
        self.model.tables(ts, [(r["relid"], r["name"], r["n_dead_tup"] or 0) for r in rows])


def record(config: PostgresRecording, stop: threading.Event | None = None) -> RecordSummary:
    """Record until the duration is up, ``stop`` is set, Ctrl-C or SIGTERM; everything seen
    is in ``config.out`` when this returns, and when it raises RecordError for a lost
    connection."""
    if config.interval_s <= 0:
        raise RecordError(f"--interval must be above 0, not {config.interval_s:g} s")
    if config.duration_s is not None and config.duration_s <= 0:
        raise RecordError(f"--duration must be above 0, not {config.duration_s:g} s")
    psycopg = _psycopg()
    conn = connect(config.dsn)
    try:
        meta = server_identity(conn)
    except psycopg.Error as e:
        conn.close()
        raise RecordError(f"cannot read the server's identity ({_one_line(e)})") from None
    except BaseException:
        conn.close()
        raise
    stop = stop or threading.Event()
    restore = _on_sigterm(stop)
    writer = TraceWriter(config.out, WRITER, metadata=meta)
    started = time.monotonic_ns()
    model = PgModel(writer, started, database_oid=int(meta["gigi.pg.database_oid"]))
    poller = _Poller(conn, model, model.database_oid)
    polls, last_ts, busy = 0, started, 0.0
    next_tables = next_flush = time.monotonic()
    deadline = None if config.duration_s is None else time.monotonic() + config.duration_s
    lost: Exception | None = None
    try:
        while not stop.is_set():
            tick = time.monotonic()
            if deadline is not None and tick >= deadline:
                break
            try:
                last_ts = poller.poll()
                if tick >= next_tables:
                    poller.tables()
                    next_tables = tick + TABLES_EVERY_S
            except psycopg.Error as e:
                lost = e
                break
            polls += 1
            busy += time.monotonic() - tick
            if tick >= next_flush:
                writer.flush()
                next_flush = tick + config.flush_s
            stop.wait(max(0.0, tick + config.interval_s - time.monotonic()))
    except KeyboardInterrupt:
        pass  # Ctrl-C: a normal end
    finally:
        restore()
        model.finish(last_ts)
        writer.flush()
        conn.close()
    seconds = (last_ts - started) / 1e9
    if lost is not None:
        raise RecordError(
            f"lost the connection to the server after {seconds:.1f} s ({_one_line(lost)}); "
            f"what was recorded until then is in {config.out}"
        )
    return RecordSummary(
        polls, seconds, busy, model.events, writer.segments, meta["gigi.pg.version"]
    )


def _on_sigterm(stop: threading.Event):
    """SIGTERM sets ``stop`` (in the main thread only); returns what puts it back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return lambda: signal.signal(signal.SIGTERM, previous)
