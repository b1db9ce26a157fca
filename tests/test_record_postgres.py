"""record postgres against a real PostgreSQL server that the tests start: a chain of row-lock
waits whose root blocker is idle in transaction, and a long transaction holding back vacuum
while updates pile up dead tuples; each recorded, then diagnosed."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from gigi.cli import main as cli
from tests.mariadb.fixtures import bad_names, exclusive_overlaps
from tests.postgres.server import (
    Server,
    churn_table,
    start_recorder,
    stop_recorder,
    under_a_long_snapshot,
    wait_until,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    # autovacuum looks at every table each second, so that it runs while dead tuples pile up
    with Server({"autovacuum_naptime": "1s", "log_autovacuum_min_duration": "0"}) as srv:
        yield srv


def waiting_for_lock(conn, pid: int) -> bool:
    row = conn.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


def diagnose(trace: Path, tmp_path: Path) -> dict:
    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    return json.loads(out.read_text())


def task_names(trace: Path) -> dict[int, str]:
    from gigi.queries import connect

    con = connect(trace)
    return dict(con.sql("SELECT task, name FROM tasks").fetchall())


def task_of(names: dict[int, str], pid: int, statement: str) -> int:
    found = [t for t, n in names.items() if n and n.startswith(f"pid {pid}: {statement}")]
    assert len(found) == 1, (pid, statement, names)
    return found[0]


def test_lock_chain_blames_the_root_blocker(server, tmp_path):
    """A updates a row and stays idle in transaction; B updates it (waits for A's xid); C
    updates it (waits for B's tuple lock, behind B). A is to blame, not B."""
    with server.connect() as setup:
        setup.execute("DROP TABLE IF EXISTS chain")
        setup.execute("CREATE TABLE chain (id int PRIMARY KEY, v int)")
        setup.execute("INSERT INTO chain VALUES (1, 0), (2, 0)")
    trace = tmp_path / "trace"
    recorder = start_recorder(server, trace)
    monitor = server.connect()
    a = server.connect(autocommit=False)
    b, c = server.connect(), server.connect()
    pids = {name: conn.info.backend_pid for name, conn in (("A", a), ("B", b), ("C", c))}
    errors: list[BaseException] = []

    def update(conn):
        try:
            conn.execute("UPDATE chain SET v = v + 1 WHERE id = 1")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    try:
        a.execute("UPDATE chain SET v = v + 1 WHERE id = 1")  # and stays idle in transaction
        time.sleep(0.5)
        tb = threading.Thread(target=update, args=(b,))
        tb.start()
        wait_until("B to wait", lambda: waiting_for_lock(monitor, pids["B"]))
        time.sleep(0.5)
        tc = threading.Thread(target=update, args=(c,))
        tc.start()
        wait_until("C to wait", lambda: waiting_for_lock(monitor, pids["C"]))
        time.sleep(3.0)
        a.commit()
        tb.join(10)
        tc.join(10)
        assert not errors, errors
        time.sleep(0.3)
    finally:
        for conn in (a, b, c, monitor):
            conn.close()
        stop = stop_recorder(recorder)
    assert "polls" in stop

    names = task_names(trace)
    task_a = task_of(names, pids["A"], "UPDATE chain")
    task_b = task_of(names, pids["B"], "UPDATE chain")
    task_c = task_of(names, pids["C"], "UPDATE chain")
    diagnosis = diagnose(trace, tmp_path)
    findings = diagnosis["findings"]
    assert findings, diagnosis
    top = findings[0]
    assert top["failure_mode"] == "contention", findings
    assert top["resource"].startswith("pg.lock."), findings
    assert top["culprit_tasks"][0] == task_a, (top, names)
    lock_findings = [
        f
        for f in findings
        if f["failure_mode"] == "contention" and f["resource"].startswith("pg.lock.")
    ]
    victims = {v for f in lock_findings for v in f["victim_tasks"]}
    assert {task_b, task_c} <= victims, (lock_findings, names)
    assert task_a not in victims
    # B waited too: it is never the first to blame
    assert all(f["culprit_tasks"][0] != task_b for f in findings), findings
    con = _store(trace, tmp_path)
    assert exclusive_overlaps(con) == []
    assert bad_names(con) == []


def _store(trace: Path, tmp_path: Path):
    from gigi.ingest import ingest
    from gigi.queries import connect

    ingest(trace, tmp_path / "store")
    return connect(tmp_path / "store")


def test_a_row_lock_holder_is_named_by_its_update_not_its_sleep(server, tmp_path):
    """A transaction updates a row, leaves it a moment (idle in transaction) and runs
    pg_sleep(4), while three others wait for the row. The culprit is named by the UPDATE seen
    when its lock appeared, with its pid, not by the pg_sleep it runs; each waiter by its own
    UPDATE. The xid's resource is exclusive with capacity 1, and the row's holds, passed from
    one transaction to the next, never overlap."""
    with server.connect() as setup:
        setup.execute("DROP TABLE IF EXISTS hot")
        setup.execute("CREATE TABLE hot (id int PRIMARY KEY, v int)")
        setup.execute("INSERT INTO hot VALUES (1, 0), (2, 0)")
    trace = tmp_path / "trace"
    recorder = start_recorder(server, trace)
    holder = server.connect(autocommit=False)
    waiters = [server.connect(autocommit=False) for _ in range(3)]
    errors: list[BaseException] = []

    def wait(conn, i):
        try:
            conn.execute(f"UPDATE hot SET v = v + {i} WHERE id = 1")
            time.sleep(0.3)  # holds the row a while: it passes from one waiter to the next
            conn.commit()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    try:
        holder.execute("UPDATE hot SET v = v + 1 WHERE id = 1")
        time.sleep(0.2)
        sleeping = threading.Thread(target=lambda: holder.execute("SELECT pg_sleep(4)"))
        sleeping.start()
        time.sleep(0.3)
        threads = [threading.Thread(target=wait, args=(c, i + 2)) for i, c in enumerate(waiters)]
        for t in threads:
            t.start()
        sleeping.join(30)
        holder.commit()
        for t in threads:
            t.join(30)
        assert not errors, errors
        time.sleep(0.3)
    finally:
        pids = [holder.info.backend_pid, *(c.info.backend_pid for c in waiters)]
        for conn in (holder, *waiters):
            conn.close()
        stop_recorder(recorder)

    findings = diagnose(trace, tmp_path)["findings"]
    con = _store(trace, tmp_path)
    name = dict(con.execute("SELECT task, name FROM tasks").fetchall())
    xid = [f for f in findings if f["resource"] == "pg.lock.transactionid"]
    assert xid, findings
    assert (
        name[xid[0]["culprit_tasks"][0]] == f"pid {pids[0]}: UPDATE hot SET v = v + 1 WHERE id = 1"
    )
    waited = {
        name[t]
        for (t,) in con.execute(
            "SELECT DISTINCT task FROM events WHERE kind = 0 AND resource LIKE 'pg.lock.%'"
        ).fetchall()
    }
    assert waited == {
        f"pid {pid}: UPDATE hot SET v = v + {i + 2} WHERE id = 1" for i, pid in enumerate(pids[1:])
    }, waited
    assert not [n for n in name.values() if n and "pg_sleep" in n], name
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'pg.lock.transactionid'"
    ).fetchall() == [(1, "exclusive")]
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'pg.lock.relation.shared'"
    ).fetchall() == [(None, "shared")]
    (holders,) = con.execute(
        "SELECT count(DISTINCT task) FROM holds WHERE resource = 'pg.lock.tuple'"
    ).fetchone()
    assert holders >= 1
    assert exclusive_overlaps(con) == []
    assert bad_names(con) == []


class _BetweenReads:
    """A connection whose poll runs its two reads one by one, and ``between`` after the first:
    what another session does while the recorder reads."""

    def __init__(self, conn, between) -> None:
        self.conn, self.between, self.reads = conn, between, 0

    def pipeline(self):
        import contextlib

        return contextlib.nullcontext()

    def execute(self, sql):
        cur = self.conn.execute(sql)
        self.reads += 1
        if self.reads == 1:
            self.between()
        return cur


def test_a_statement_that_begins_between_the_two_reads_names_its_lock(server):
    """A transaction's UPDATE begins after the poll reads the activity and before it reads
    the locks: the poll sees its row lock beside the statement before it (SELECT 1). Another
    session then waits for the row. The transaction is named by its UPDATE, which the next
    poll sees begun before the locks were read, not by SELECT 1 (nor by "a write to" the
    table: a flake of the test above)."""
    import psycopg

    from gigi.record._pg_model import PgModel
    from gigi.record.postgres import _Poller

    with server.connect() as setup:
        setup.execute("DROP TABLE IF EXISTS between_reads")
        setup.execute("CREATE TABLE between_reads (id int PRIMARY KEY, v int)")
        setup.execute("INSERT INTO between_reads VALUES (1, 0)")
    writer, waiter = server.connect(autocommit=False), server.connect()
    writer.execute("SELECT 1")  # in a transaction, idle, with no statement of its own yet
    pid, waiter_pid = writer.info.backend_pid, waiter.info.backend_pid
    rows = _Rows()
    update = "UPDATE between_reads SET v = v + 1 WHERE id = 1"
    recorder = psycopg.connect(server.dsn, autocommit=True)
    waiting = threading.Thread(target=lambda: waiter.execute(update))
    try:
        oid = recorder.execute("SELECT oid FROM pg_database WHERE datname = 'postgres'")
        model = PgModel(rows, time.monotonic_ns(), database_oid=oid.fetchone()[0])
        conn = _BetweenReads(recorder, lambda: writer.execute(update))
        poller = _Poller(conn, model, model.database_oid)
        poller.poll()
        waiting.start()
        wait_until("the other session waits", lambda: waiting_for_lock(recorder, waiter_pid))
        poller.poll()
        poller.poll()
        writer.commit()
        waiting.join(10)
        poller.poll()
        model.finish(time.monotonic_ns())
    finally:
        writer.close()
        waiter.close()
        recorder.close()
    names = [n for n in rows.names().values() if n.startswith(f"pid {pid}: ")]
    assert sorted(names) == [f"pid {pid}: {update}", f"pid {pid}: client backend postgres@postgres"]


def test_an_advisory_lock_passed_round_is_never_held_twice(server, tmp_path):
    """Four sessions take pg_advisory_xact_lock(42) in turn for 30 ms each, for 3 s: the lock
    changes hands between polls again and again. Its resource is exclusive with capacity 1 and
    no two of its holds overlap in the trace: it is never seen held twice."""
    trace = tmp_path / "trace"
    recorder = start_recorder(server, trace)
    done = threading.Event()
    errors: list[BaseException] = []

    def loop():
        try:
            with server.connect(autocommit=False) as conn:
                while not done.is_set():
                    conn.execute("SELECT pg_advisory_xact_lock(42)")
                    conn.execute("SELECT pg_sleep(0.03)")
                    conn.commit()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=loop) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        time.sleep(3.0)
    finally:
        done.set()
        for t in threads:
            t.join(30)
        stop_recorder(recorder)
    assert not errors, errors

    con = _store(trace, tmp_path)
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'pg.lock.advisory'"
    ).fetchall() == [(1, "exclusive")]
    (holds,) = con.execute(
        "SELECT count(*) FROM holds WHERE resource = 'pg.lock.advisory'"
    ).fetchone()
    assert holds >= 10, holds
    assert exclusive_overlaps(con) == []
    (peak,) = con.execute(
        "SELECT max(outstanding) FROM outstanding WHERE resource = 'pg.lock.advisory'"
    ).fetchone()
    assert peak == 1
    assert bad_names(con) == []


@pytest.mark.parametrize("long_transaction", [True, False], ids=["long-xact", "healthy"])
def test_long_transaction_holding_back_vacuum(server, tmp_path, long_transaction):
    """A REPEATABLE READ transaction keeps its snapshot while updates make dead tuples that
    neither autovacuum nor VACUUM may remove: unbounded growth of dead tuples, the long
    transaction to blame. Without it, vacuum keeps up: no growth."""
    from gigi.record.postgres import PostgresRecording, record

    churn_table(server, rows=2000, vacuum_threshold=200)
    trace = tmp_path / "trace"
    stop = threading.Event()
    summary: list = []
    recorder = threading.Thread(
        target=lambda: summary.append(
            record(PostgresRecording(server.dsn, trace, duration_s=None), stop)
        )
    )
    recorder.start()
    wait_until("the recorder's first segment", lambda: any(trace.glob("*.arrows")))
    done = threading.Event()

    def updates(seed: int) -> None:
        rng = random.Random(seed)
        with server.connect() as conn:
            while not done.is_set():
                first = rng.randrange(1, 1990)
                conn.execute(
                    "UPDATE churn SET v = v + 1 WHERE id BETWEEN %s AND %s", (first, first + 9)
                )
                time.sleep(0.01)

    def vacuums() -> None:
        with server.connect() as conn:
            while not done.wait(2.0):
                conn.execute("VACUUM churn")

    workers = [threading.Thread(target=updates, args=(i,)) for i in range(4)]
    workers.append(threading.Thread(target=vacuums))
    try:
        long_pid, _ = under_a_long_snapshot(
            server, done, workers, 14.0, snapshot=long_transaction, settle=0.5
        )
    finally:
        stop.set()
        recorder.join(30)
    assert summary and summary[0].polls > 100

    names = task_names(trace)
    diagnosis = diagnose(trace, tmp_path)
    growth = [f for f in diagnosis["findings"] if f["failure_mode"] == "unbounded_growth"]
    if not long_transaction:
        assert not growth, growth
        return
    long_task = task_of(names, long_pid, "SELECT count(*) FROM churn")
    assert growth, diagnosis["findings"]
    assert growth[0]["resource"] == "pg.dead_tuples", growth
    assert growth[0]["culprit_tasks"][0] == long_task, (growth, names)
    assert diagnosis["findings"][0]["failure_mode"] == "unbounded_growth", diagnosis["findings"]


def test_bad_dsn_is_one_line(tmp_path, capsys):
    from tests.postgres.server import free_port

    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    code = cli(["record", "postgres", "--dsn", dsn, "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("gigi-query: error: cannot connect to PostgreSQL")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "t").exists()


def test_missing_privilege_is_named(server, tmp_path, capsys):
    with server.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS watcher")
        conn.execute("CREATE ROLE watcher LOGIN")
    dsn = server.dsn.replace("postgres@", "watcher@", 1)
    code = cli(["record", "postgres", "--dsn", dsn, "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2
    assert "GRANT pg_read_all_stats TO watcher" in err, err
    assert err.count("\n") == 1


def test_server_gone_keeps_the_trace(tmp_path, capsys):
    """The server stops mid-recording: one line says so, and what was recorded stays a
    valid trace."""
    trace = tmp_path / "trace"
    with Server() as srv:
        result: list[int] = []
        t = threading.Thread(
            target=lambda: result.append(
                cli(
                    [
                        "record",
                        "postgres",
                        "--dsn",
                        srv.dsn,
                        "--duration",
                        "60s",
                        "--out",
                        str(trace),
                    ]
                )
            )
        )
        t.start()
        wait_until("the recorder's first segment", lambda: any(trace.glob("*.arrows")))
        conn = srv.connect(autocommit=False)
        try:
            conn.execute("CREATE TABLE gone (id int)")  # holds its locks until the end
            time.sleep(1.2)
            os.kill(srv.pid, signal.SIGINT)  # fast shutdown under the recorder
            t.join(60)
        finally:
            conn.close()
    assert result == [2]
    err = capsys.readouterr().err
    assert "lost the connection to the server" in err and err.count("\n") == 1, err
    assert cli(["info", str(trace)]) == 0


# --- the lock model, fed synthetic polls (no server) ------------------------------------------


class _Rows:
    """What a TraceWriter would be handed, by table."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {}

    def add(self, table: str, row: dict) -> None:
        self.rows.setdefault(table, []).append(row)

    def names(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for r in self.rows.get("tasks", []):
            if r.get("name") is not None:
                out.setdefault(r["task"], r["name"])
        return out


def _backend(pid, xact=None, query=None, query_key=None, state="active", blockers=()):
    from gigi.record._pg_model import Backend

    return Backend(
        pid=pid,
        backend_type="client backend",
        backend_key=1,
        backend_start=0,
        leader_pid=None,
        who="app@shop",
        state=state,
        wait_event_type="Lock" if blockers else None,
        xact_key=xact,
        xact_start=xact,
        query_key=query_key,
        query_start=query_key,
        query=query,
        horizon_age=None,
        vacuum_relid=None,
        blockers=list(blockers),
    )


def _lock(pid, resource, obj, mode, granted=True, relname=None):
    from gigi.record._pg_model import Lock

    return Lock(pid, resource, obj, granted, None, f"3/{pid}", mode, relname)


def _kinds(rows: _Rows, resource: str) -> list[tuple]:
    return [
        (e["kind"], e["ts"], e["thread"])
        for e in rows.rows.get("events", [])
        if e["resource"] == resource
    ]


def test_an_advisory_lock_changing_hands_in_one_poll_is_never_held_twice():
    """A holds advisory lock 42 and B waits for it; by the next poll A has committed and B
    holds it. B's ACQUIRE is at that poll, after A's RELEASE (written first), not at the
    previous poll (the earliest a lock first seen may have been taken), where A still held it;
    the resource is exclusive with capacity 1."""
    from gigi.record._pg_model import PgModel

    rows = _Rows()
    m = PgModel(rows, start=0)
    lock = "pg.lock.advisory"
    a_query = "SELECT pg_advisory_xact_lock(42)"
    m.poll(
        100,
        [
            _backend(1, 10, a_query, 11),
            _backend(2, 20, a_query, 21, blockers=[1]),
        ],
        [_lock(1, lock, 42, "ExclusiveLock"), _lock(2, lock, 42, "ExclusiveLock", False)],
    )
    m.poll(
        200,
        [_backend(1, None, "COMMIT", 12, "idle"), _backend(2, 20, a_query, 21)],
        [_lock(2, lock, 42, "ExclusiveLock")],
    )
    m.finish(300)
    events = _kinds(rows, lock)
    assert [e for e in events if e[0] in (1, 3)] == [
        (1, 100, 1),  # A holds it
        (3, 200, 1),  # A let it go by this poll, written before...
        (1, 200, 2),  # ... B took it
    ], events
    (wait,) = [e for e in rows.rows["events"] if e["kind"] == 0]
    assert (wait["ts"], wait["ts"] + wait["dur"], wait["resource"]) == (100, 200, lock)
    assert {"resource": lock, "capacity": 1, "unit": "locks", "sharing": "exclusive"} in rows.rows[
        "resources"
    ]


def test_shared_modes_are_shared_and_a_wait_is_on_what_keeps_it_waiting():
    """Two SELECTs hold a table in AccessShareLock, an ALTER waits for AccessExclusiveLock
    behind them, an INSERT queues behind the ALTER: the holds and both waits are on
    ``pg.lock.relation.shared`` (shared, no capacity): the SELECTs keep both waiting."""
    from gigi.record._pg_model import PgModel

    rows = _Rows()
    m = PgModel(rows, start=0)
    rel = "pg.lock.relation"
    m.poll(
        100,
        [
            _backend(1, 10, "SELECT * FROM t", 11, "idle in transaction"),
            _backend(2, 20, "SELECT * FROM t", 21, "idle in transaction"),
            _backend(3, 30, "ALTER TABLE t ADD c int", 31, blockers=[1, 2]),
            _backend(4, 40, "INSERT INTO t VALUES (1)", 41, blockers=[3]),
        ],
        [
            _lock(1, rel, 16384, "AccessShareLock"),
            _lock(2, rel, 16384, "AccessShareLock"),
            _lock(3, rel, 16384, "AccessExclusiveLock", False),
            _lock(4, rel, 16384, "RowExclusiveLock", False),
        ],
    )
    m.finish(200)
    events = rows.rows["events"]
    assert {(e["kind"], e["resource"]) for e in events} == {
        (1, "pg.lock.relation.shared"),
        (0, "pg.lock.relation.shared"),
    }, events
    assert rows.rows["resources"] == [
        {
            "resource": "pg.lock.relation.shared",
            "capacity": None,
            "unit": "locks",
            "sharing": "shared",
        }
    ]


@pytest.mark.parametrize("seen", [True, False], ids=["update-seen", "update-unseen"])
def test_a_lock_holder_is_named_by_the_statement_seen_when_it_took_it(seen):
    """A transaction updates a row, then runs pg_sleep(15); another waits for the row. The
    holder is named by the statement seen when its xid lock first appeared: the UPDATE when a
    poll saw it (running, or the session idle after it); when the UPDATE ended between two
    polls, the statement seen then and the table the transaction wrote. The waiter is named by
    its own waiting UPDATE; every name carries the backend's pid."""
    from gigi.record._pg_model import PgModel

    rows = _Rows()
    m = PgModel(rows, start=0)
    update = "UPDATE t SET v = 1 WHERE id = 1"
    sleep = "SELECT pg_sleep(15)"
    xid = [_lock(7, "pg.lock.transactionid", 900, "ExclusiveLock")]
    xid.append(_lock(7, "pg.lock.relation", 16384, "RowExclusiveLock", relname="t"))
    if seen:
        m.poll(100, [_backend(7, 10, update, 11, "idle in transaction")], xid)
    waiting = _lock(8, "pg.lock.transactionid", 900, "ShareLock", False)
    m.poll(
        200,
        [_backend(7, 10, sleep, 12), _backend(8, 20, "UPDATE t SET v = 2", 21, blockers=[7])],
        [*xid, waiting],
    )
    m.poll(300, [], [])
    names = rows.names()
    holder = f"pid 7: {update}" if seen else f"pid 7: {sleep}, after writing t"
    assert holder in names.values(), names
    assert "pid 8: UPDATE t SET v = 2" in names.values(), names
    assert f"pid 7: {sleep}" not in names.values()
    assert not [n for n in names.values() if "None" in n or "?@?" in n], names


def test_a_waiter_that_took_the_row_and_reached_commit_between_polls_keeps_its_update():
    """B waits for A's row with its UPDATE; by the next poll (a loaded machine polls late) A
    has committed, and B took the row, wrote, and is running COMMIT, while C waits for B's
    xid. B is named by the UPDATE it waited with, not by a write to the table."""
    from gigi.record._pg_model import PgModel

    rows = _Rows()
    m = PgModel(rows, start=0)
    xid = "pg.lock.transactionid"
    update = "UPDATE t SET v = 2 WHERE id = 1"
    a = [_lock(7, xid, 900, "ExclusiveLock")]
    a.append(_lock(7, "pg.lock.relation", 16384, "RowExclusiveLock", relname="t"))
    m.poll(
        100,
        [_backend(7, 10, "SELECT pg_sleep(4)", 11), _backend(8, 20, update, 21, blockers=[7])],
        [*a, _lock(8, xid, 900, "ShareLock", False)],
    )
    b = [_lock(8, xid, 901, "ExclusiveLock")]
    b.append(_lock(8, "pg.lock.relation", 16384, "RowExclusiveLock", relname="t"))
    m.poll(
        200,
        [
            _backend(8, 20, "COMMIT", 22),
            _backend(9, 30, "UPDATE t SET v = 3 WHERE id = 1", 31, blockers=[8]),
        ],
        [*b, _lock(9, xid, 901, "ShareLock", False)],
    )
    m.poll(300, [], [])
    names = rows.names().values()
    assert f"pid 8: {update}" in names, names
    assert not [n for n in names if "a write to" in n], names
