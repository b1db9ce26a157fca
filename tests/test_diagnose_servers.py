"""Real servers, real workloads, diagnosed: each test records a workload on the PostgreSQL or
MariaDB server the recorder tests start (tests/postgres/server.py, tests/mariadb/), diagnoses
the trace with ``gigi.diagnosis.diagnose`` and checks rank 1: the resource, the failure mode
and, where there is one, the culprit by the name a user would recognise.

PostgreSQL: a hot row under pgbench's TPC-B, a lock queue behind an ALTER TABLE, an advisory
lock with one long holder among many short ones, dead tuples behind a long snapshot, and a
healthy read-only pgbench run with no finding. MariaDB: a metadata-lock pile-up behind an open
SELECT and an ALTER, and an InnoDB row lock kept by a transaction that sleeps.

A failed check says what the diagnosis printed (its first lines, as ``gigi-query diagnose``
prints them)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gigi.diagnosis import diagnose
from gigi.diagnosis._render import render
from gigi.queries import connect
from tests.mariadb.fixtures import (  # noqa: F401
    recorder_fixture,
    row_lock_queue,
    session_fixture,
    wait_for,
)
from tests.mariadb.mariadb_server import Server as MariaDBServer
from tests.postgres.server import Server as PostgresServer
from tests.postgres.server import (
    bindir,
    churn_table,
    start_recorder,
    stop_recorder,
    under_a_long_snapshot,
    wait_until,
)

pytestmark = pytest.mark.slow


def _said(d, lines: int = 12) -> str:
    """The diagnosis as ``gigi-query diagnose`` prints it, its first lines."""
    return "\n".join(render(d).splitlines()[:lines])


def _diagnose(trace: Path):
    """The diagnosis and the trace's task names; prints the diagnosis's first lines and the
    headings of the other findings (shown by ``pytest -rP``)."""
    d = diagnose(trace)
    names = dict(connect(trace).execute("SELECT task, name FROM tasks").fetchall())
    text = render(d).splitlines()
    print("\n".join(text[:8] + [line for line in text[8:] if line.startswith("#")]))
    return d, names


def _first(d, failure_mode: str, resource: str | None = None):
    """Rank 1 of the diagnosis, which must be FAILURE_MODE (on RESOURCE, when given)."""
    assert d.findings, _said(d)
    first = d.findings[0]
    assert (first.rank, first.failure_mode) == (1, failure_mode), _said(d)
    if resource is not None:
        assert first.resource == resource, _said(d)
    return first


def _statement(name: str) -> str:
    """A task's name or a group's without the session it ran in (``pid 123: ``, ``pid ?: ``,
    ``connection 7: ``)."""
    return re.sub(r"^(pid|connection) (\d+|\?): ", "", name)


def _waited_most(trace: Path, statement: str) -> str:
    """The resource that tasks named by STATEMENT (a prefix) waited for longest in all."""
    waited: Counter = Counter()
    rows = connect(trace).execute(
        "SELECT e.resource, t.name, coalesce(e.dur, 0) FROM events AS e "
        "JOIN tasks AS t USING (task) WHERE e.kind = 0"
    )
    for resource, name, dur in rows.fetchall():
        if name and _statement(name).startswith(statement):
            waited[resource] += dur
    assert waited, f"no task named {statement!r} waited"
    return waited.most_common(1)[0][0]


# --- PostgreSQL -------------------------------------------------------------------------------


def _pgbench(server: PostgresServer, *args: str, timeout: float = 60) -> str:
    """pgbench, from the directory of the server's own binaries (Debian ships it in
    postgresql-NN, which the fixture installs), against SERVER's database."""
    pgbench = bindir() / "pgbench"
    assert pgbench.exists(), f"no pgbench beside the server's binaries in {pgbench.parent}"
    done = subprocess.run(
        [str(pgbench), *args, server.dsn], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _waiting(conn, pattern: str) -> int:
    """How many backends whose query is LIKE PATTERN wait for a heavyweight lock."""
    (n,) = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        (pattern,),
    ).fetchone()
    return n


# the lock classes the updaters of one row queue on
ROW_LOCKS = ("pg.lock.transactionid", "pg.lock.tuple")


class TestPostgres:
    @pytest.fixture(scope="class")
    @classmethod
    def server(cls):
        # autovacuum looks at every table each second, so that it runs while dead tuples pile up
        with PostgresServer({"autovacuum_naptime": "1s"}) as srv:
            yield srv

    @pytest.fixture(scope="class")
    @classmethod
    def hot_row(cls, server, tmp_path_factory):
        """TPC-B at scale 1, 8 clients for 8 s: every transaction updates the one
        pgbench_branches row. The diagnosis, and the lock class where that UPDATE waited
        longest (the first updater of a row waits for the holder's transactionid, those behind
        it for the tuple lock the first one keeps)."""
        _pgbench(server, "-i", "-s", "1", "-q")
        trace = tmp_path_factory.mktemp("hot_row") / "trace"
        recorder = start_recorder(server, trace)
        try:
            out = _pgbench(server, "-n", "-c", "8", "-j", "2", "-T", "8")
        finally:
            stop_recorder(recorder)
        assert "number of failed transactions: 0" in out, out
        queue = _waited_most(trace, "UPDATE pgbench_branches")
        d, _ = _diagnose(trace)
        return d, queue

    def test_hot_row_under_pgbench(self, hot_row):
        """Rank 1 is contention on the class where UPDATE pgbench_branches waited longest, one
        holder at a time with none standing out, and the normalized UPDATE pgbench_branches
        is its first culprit group by name: the statement, not any one of its runs."""
        d, queue = hot_row
        assert queue in ROW_LOCKS, queue
        assert d.findings, _said(d)
        first = d.findings[0]
        assert (first.rank, first.failure_mode, first.resource) == (1, "contention", queue), (
            f"UPDATE pgbench_branches waited longest on {queue}\n{_said(d)}"
        )
        assert first.evidence["one_at_a_time"] and first.evidence["standouts"] == 0, _said(d)
        by_name = [g for g in first.culprit_groups if g["by"] == "name"]
        assert by_name, _said(d)
        assert _statement(by_name[0]["name"]) == (
            "UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?;"
        ), _said(d)
        assert by_name[0]["tasks"] >= 100 and by_name[0]["blame_share"] > 0.4, by_name[0]

    def test_hot_row_is_called_a_hot_spot(self, hot_row):
        """Called so however the server spreads the waits over objects (PostgreSQL puts a
        row-lock wait on the holder's transaction id: one object per transaction)."""
        d, _ = hot_row
        assert "a hot spot that admits one holder at a time" in d.findings[0].summary, _said(d)

    def test_lock_queue_behind_ddl(self, server, tmp_path):
        """An open transaction read a table (AccessShareLock, idle in transaction); an ALTER
        TABLE waits for it, and three SELECTs and three INSERTs queue behind the ALTER for 3 s.
        Rank 1 is contention on the table's lock, the open transaction's SELECT to blame."""
        with server.connect() as setup:
            setup.execute("DROP TABLE IF EXISTS ddl")
            setup.execute("CREATE TABLE ddl (id int PRIMARY KEY, v int)")
            setup.execute("INSERT INTO ddl SELECT g, g FROM generate_series(1, 100) AS g")
        trace = tmp_path / "trace"
        recorder = start_recorder(server, trace)
        monitor = server.connect()
        reader = server.connect(autocommit=False)
        queued = [server.connect() for _ in range(7)]
        errors: list[BaseException] = []

        def run(conn, sql):
            try:
                conn.execute(sql)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        statements = ["ALTER TABLE ddl ADD COLUMN extra int"]
        statements += [f"SELECT count(*) FROM ddl WHERE v > {i}" for i in range(3)]
        statements += [f"INSERT INTO ddl VALUES ({1000 + i}, {i})" for i in range(3)]
        threads = [
            threading.Thread(target=run, args=(c, s))
            for c, s in zip(queued, statements, strict=True)
        ]
        try:
            reader.execute("SELECT count(*) FROM ddl").fetchone()  # and stays open
            time.sleep(0.3)
            threads[0].start()
            wait_until("the ALTER to wait", lambda: _waiting(monitor, "ALTER TABLE ddl%") == 1)
            time.sleep(0.2)
            for t in threads[1:]:
                t.start()
            wait_until("all seven to wait", lambda: _waiting(monitor, "%ddl%") == 7)
            time.sleep(3.0)
            reader.commit()
            for t in threads:
                t.join(30)
            assert not errors, errors
            time.sleep(0.3)
        finally:
            reader_pid = reader.info.backend_pid
            for conn in (reader, monitor, *queued):
                conn.close()
            stop_recorder(recorder)

        d, names = _diagnose(trace)
        first = _first(d, "contention")
        assert first.resource.startswith("pg.lock.relation"), _said(d)
        assert first.culprit_tasks, _said(d)
        assert names[first.culprit_tasks[0]] == f"pid {reader_pid}: SELECT count(*) FROM ddl", (
            _said(d)
        )
        victims = {_statement(names[v]) for v in first.victim_tasks}
        assert "ALTER TABLE ddl ADD COLUMN extra int" in victims, victims

    def test_advisory_lock_hot_spot_with_a_long_holder(self, server, tmp_path):
        """One session holds pg_advisory_xact_lock(42) for about 4 s while six pgbench clients
        loop BEGIN; SELECT pg_advisory_xact_lock(42); SELECT pg_sleep(0.05); COMMIT for 7 s.
        Rank 1 is contention on pg.lock.advisory, the long holder named first, by the
        statement that took the lock (not the pg_sleep it then ran)."""
        script = tmp_path / "advisory.sql"
        script.write_text(
            "BEGIN;\nSELECT pg_advisory_xact_lock(42);\nSELECT pg_sleep(0.05);\nCOMMIT;\n"
        )
        trace = tmp_path / "trace"
        recorder = start_recorder(server, trace)
        holder = server.connect(autocommit=False)
        holder_pid = holder.info.backend_pid
        bench: list[str] = []
        clients = threading.Thread(
            target=lambda: bench.append(
                _pgbench(server, "-n", "-f", str(script), "-c", "6", "-j", "2", "-T", "7")
            )
        )
        try:
            holder.execute("SELECT pg_advisory_xact_lock(42)")
            time.sleep(0.3)  # idle in transaction: a poll sees the lock and the statement
            clients.start()
            holder.execute("SELECT pg_sleep(3.7)")
            holder.commit()
            clients.join(60)
        finally:
            holder.close()
            stop_recorder(recorder)
        assert bench and "number of failed transactions: 0" in bench[0], bench

        d, names = _diagnose(trace)
        first = _first(d, "contention", "pg.lock.advisory")
        assert names[first.culprit_tasks[0]] == (
            f"pid {holder_pid}: SELECT pg_advisory_xact_lock(42)"
        ), _said(d)
        assert first.evidence["standouts"] >= 1, _said(d)

    def test_dead_tuples_behind_a_long_snapshot(self, server, tmp_path):
        """A REPEATABLE READ transaction keeps its snapshot for 10 s while three sessions update
        ranges of a table; autovacuum visits the table (every second, past 300 dead tuples)
        and cannot remove them. The recorder follows n_dead_tup as ``pg.dead_tuples``, a rise
        acquired by the transaction holding back vacuum's horizon: rank 1 is unbounded growth
        there, the long transaction to blame.

        No VACUUM loop of the test's own: each VACUUM lowers n_dead_tup by a few thousand
        while the snapshot stays, and those drops count in the growth detector's noise (what
        lost events could add): with one every 2 s the rise fell under four times the noise,
        and nothing was found, in 1 run of 4."""
        churn_table(server, rows=3000, vacuum_threshold=300)
        trace = tmp_path / "trace"
        recorder = start_recorder(server, trace)
        done = threading.Event()
        errors: list[BaseException] = []

        def updates(seed: int) -> None:
            try:
                with server.connect() as conn:
                    while not done.is_set():
                        first = (seed * 977 + int(time.monotonic() * 1000)) % 2980 + 1
                        conn.execute(
                            "UPDATE churn SET v = v + 1 WHERE id BETWEEN %s AND %s",
                            (first, first + 14),
                        )
                        time.sleep(0.01)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        def autovacuums() -> int:
            with server.connect() as conn:
                (n,) = conn.execute(
                    "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'churn'"
                ).fetchone()
            return n

        workers = [threading.Thread(target=updates, args=(i,)) for i in range(3)]
        try:
            before = autovacuums()
            long_pid, vacuumed = under_a_long_snapshot(
                server, done, workers, 10.0, measure=lambda: autovacuums() - before
            )
        finally:
            stop_recorder(recorder)
        assert not errors, errors
        assert vacuumed >= 2, f"autovacuum visited churn {vacuumed} times under the snapshot"

        d, names = _diagnose(trace)
        first = _first(d, "unbounded_growth", "pg.dead_tuples")
        assert names[first.culprit_tasks[0]] == f"pid {long_pid}: SELECT count(*) FROM churn", (
            _said(d)
        )

    def test_healthy_read_only_pgbench(self, server, tmp_path):
        """pgbench -S (one SELECT by primary key per transaction), four clients for 5 s: no
        lock is waited for, and nothing is said."""
        _pgbench(server, "-i", "-s", "1", "-q")
        trace = tmp_path / "trace"
        recorder = start_recorder(server, trace)
        try:
            out = _pgbench(server, "-n", "-S", "-c", "4", "-j", "2", "-T", "5")
        finally:
            stop_recorder(recorder)
        assert "number of failed transactions: 0" in out, out
        d, _ = _diagnose(trace)
        assert d.findings == [] and d.unexplained == [], _said(d)


# --- MariaDB ----------------------------------------------------------------------------------


class TestMariaDB:
    @pytest.fixture(scope="class")
    @classmethod
    def server(cls, tmp_path_factory):
        with MariaDBServer(tmp_path_factory.mktemp("mariadb")) as srv:
            yield srv

    @staticmethod
    def _record(recorder, trace: Path):
        stop, thread, result = recorder(trace, duration=60.0, interval=0.01)
        assert "error" not in result, result.get("error")

        def finish():
            stop.set()
            thread.join(30)
            assert "error" not in result, result.get("error")
            assert result["recording"].polls > 100

        return finish

    def test_metadata_lock_pile_up(self, server, session, recorder, tmp_path):
        """An open transaction's SELECT keeps t's metadata lock; an ALTER TABLE waits for it and
        four INSERTs queue behind the ALTER, for 3 s. Rank 1 is contention on t's metadata lock
        with the SELECT (on its connection) to blame, not the ALTER the INSERTs wait behind."""
        admin = session()
        with admin.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS t")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)")
        trace = tmp_path / "trace"
        finish = self._record(recorder, trace)
        reader, altering = session(), session()
        inserting = [session() for _ in range(4)]
        errors: list[BaseException] = []

        def run(con, sql):
            try:
                with con.cursor() as cur:
                    cur.execute("SET SESSION lock_wait_timeout = 60")
                    cur.execute(sql)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        def waiting() -> int:
            with admin.cursor() as cur:
                cur.execute(
                    "SELECT count(*) FROM information_schema.PROCESSLIST "
                    "WHERE STATE LIKE 'Waiting for table metadata lock%'"
                )
                return cur.fetchone()[0]

        with reader.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT * FROM t")
            cur.fetchall()  # the transaction stays open: the shared MDL on t is kept
        time.sleep(0.3)
        threads = [threading.Thread(target=run, args=(altering, "ALTER TABLE t ADD COLUMN c INT"))]
        threads += [
            threading.Thread(target=run, args=(c, f"INSERT INTO t (id, v) VALUES ({10 + i}, {i})"))
            for i, c in enumerate(inserting)
        ]
        threads[0].start()
        wait_for(lambda: waiting() == 1, 20, "the ALTER to wait for the metadata lock")
        time.sleep(0.2)
        for t in threads[1:]:
            t.start()
        wait_for(lambda: waiting() == 5, 20, "the INSERTs to queue behind the ALTER")
        time.sleep(3.0)
        reader.commit()
        for t in threads:
            t.join(30)
        assert not errors, errors
        time.sleep(0.3)
        finish()

        d, names = _diagnose(trace)
        first = _first(d, "contention")
        assert first.resource.startswith("mdl.table"), _said(d)
        assert (
            names[first.culprit_tasks[0]] == f"connection {reader.thread_id()}: SELECT * FROM t"
        ), _said(d)

    def test_innodb_row_lock(self, server, session, recorder, tmp_path):
        """A transaction updates a row and goes on to SELECT SLEEP(3) while four others update
        the same row, each committing 0.1 s after it got it. Rank 1 is contention on
        innodb.row_lock, the first UPDATE to blame, named by that UPDATE, not by its SLEEP."""
        admin = session()
        with admin.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS acc")
            cur.execute("CREATE TABLE acc (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO acc VALUES (1, 1), (7, 7)")
        trace = tmp_path / "trace"
        finish = self._record(recorder, trace)
        holder = session()
        waiters = [session() for _ in range(4)]
        row_lock_queue(holder, waiters, "acc", 7, sleep=3, head_start=0.4, keep=0.1)
        time.sleep(0.3)
        finish()

        d, names = _diagnose(trace)
        first = _first(d, "contention", "innodb.row_lock")
        assert names[first.culprit_tasks[0]] == (
            f"connection {holder.thread_id()}: UPDATE acc SET v = v + 1 WHERE id = 7"
        ), _said(d)
