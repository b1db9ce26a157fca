"""record postgres against a real PostgreSQL server that the tests start: a chain of row-lock
waits whose root blocker is idle in transaction, and a long transaction holding back vacuum
while updates pile up dead tuples; each recorded, then diagnosed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gigi.cli import main as cli
from tests.postgres.server import Server
from tests.postgres.server import recorder as recorder_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    # autovacuum looks at every table each second, so that it runs while dead tuples pile up
    with Server({"autovacuum_naptime": "1s", "log_autovacuum_min_duration": "0"}) as srv:
        yield srv


def wait_until(what, check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


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


def start_recorder(server: Server, trace: Path) -> subprocess.Popen:
    """`gigi-query record postgres` in a process of its own, until SIGTERM."""
    proc = recorder_process(server.dsn, trace, "120s", "10ms")
    # its first poll flushes a segment
    wait_until(
        "the recorder's first segment",
        lambda: any(trace.glob("*.arrows")) or proc.poll() is not None,
        timeout=30,
    )
    assert proc.poll() is None, proc.communicate()
    return proc


def stop_recorder(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err == ""
    return out


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


@pytest.mark.parametrize("long_transaction", [True, False], ids=["long-xact", "healthy"])
def test_long_transaction_holding_back_vacuum(server, tmp_path, long_transaction):
    """A REPEATABLE READ transaction keeps its snapshot while updates make dead tuples that
    neither autovacuum nor VACUUM may remove: unbounded growth of dead tuples, the long
    transaction to blame. Without it, vacuum keeps up: no growth."""
    from gigi.record.postgres import PostgresRecording, record

    with server.connect() as setup:
        setup.execute("DROP TABLE IF EXISTS churn")
        setup.execute(
            "CREATE TABLE churn (id int PRIMARY KEY, v int) WITH (autovacuum_vacuum_threshold "
            "= 200, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_cost_delay = 0)"
        )
        setup.execute("INSERT INTO churn SELECT g, 0 FROM generate_series(1, 2000) AS g")
        setup.execute("VACUUM churn")
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

    long_xact = server.connect(autocommit=False)
    long_pid = long_xact.info.backend_pid
    workers = [threading.Thread(target=updates, args=(i,)) for i in range(4)]
    workers.append(threading.Thread(target=vacuums))
    try:
        time.sleep(0.5)
        if long_transaction:
            long_xact.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            long_xact.execute("SELECT count(*) FROM churn").fetchone()
        for w in workers:
            w.start()
        time.sleep(14.0)
        long_xact.commit()  # vacuum may now remove what piled up
        done.set()
        for w in workers:
            w.join(10)
        with server.connect() as conn:
            conn.execute("VACUUM churn")
        time.sleep(1.5)  # the statistics catch up
    finally:
        done.set()
        long_xact.close()
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
