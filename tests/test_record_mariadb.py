"""record mariadb against a real MariaDB server the test starts (Debian's mariadb-server,
installed when missing): the MDEV-34989 shape recorded and diagnosed end to end."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "mariadb"))

from mariadb_server import Server  # noqa: E402

from gigi.cli import main as cli  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("mariadb"))
    srv.start()  # a server that fails to start fails the tests with its log
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def session(server):
    """``session()``: a connection to the server, closed when the test ends, passed or not, so a
    failed test leaves no session behind for the next."""
    opened = []

    def open_one():
        opened.append(server.connect())
        return opened[-1]

    yield open_one
    for c in opened:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - already gone (killed, or closed by the test)
            pass


@pytest.fixture
def recorder(server):
    """``recorder(trace, **kw)`` starts ``record`` in a thread; returns (stop, thread, result).
    Whatever the test does, every recorder is stopped and joined when it ends."""
    started = []

    def start(trace: Path, **kw):
        started.append(_recorder(server, trace, **kw))
        return started[-1]

    yield start
    for stop, thread, _ in started:
        stop.set()
        thread.join(30)


def _recorder(server, trace: Path, **kw):
    from gigi.record.mariadb import record

    stop, started, result = threading.Event(), threading.Event(), {}

    def run():
        try:
            result["recording"] = record(server.dsn, trace, stop=stop, on_start=started.set, **kw)
        except Exception as e:  # noqa: BLE001 - handed to the test
            result["error"] = e
            started.set()

    thread = threading.Thread(target=run, name="recorder")
    thread.start()
    assert started.wait(30), "the recorder did not start"
    return stop, thread, result


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_open_select_keeps_mdl_and_alter_waits(server, session, recorder, tmp_path):
    """MDEV-34989: an open transaction's SELECT keeps the table's metadata lock and an ALTER
    TABLE waits behind it. Rank 1 is contention on mdl.table, the SELECT's transaction (on its
    connection) is the culprit and the ALTER the victim."""
    from gigi.queries import connect
    from gigi.record._mariadb_model import object_id

    admin = session()
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS t")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)")
    trace = tmp_path / "trace"
    stop, recording, result = recorder(trace, duration=60.0, interval=0.01)
    assert "error" not in result, result.get("error")

    reader, altering = session(), session()
    with reader.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT * FROM t")
        cur.fetchall()  # the transaction stays open: the shared MDL on t is kept

    def alter():
        with altering.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 60")
            cur.execute("ALTER TABLE t ADD COLUMN c INT")

    alter_thread = threading.Thread(target=alter, name="alter")
    alter_thread.start()

    def alter_waits() -> bool:
        with admin.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM information_schema.PROCESSLIST "
                "WHERE STATE LIKE 'Waiting for table metadata lock%'"
            )
            return cur.fetchone()[0] > 0

    _wait_for(alter_waits, 20, "the ALTER to wait for the metadata lock")
    time.sleep(3.0)
    reader.commit()  # the SELECT's transaction ends, the ALTER gets its lock
    alter_thread.join(30)
    assert not alter_thread.is_alive()
    time.sleep(0.3)
    stop.set()
    recording.join(30)
    assert "error" not in result, result.get("error")
    rec = result["recording"]
    assert rec.polls > 100 and rec.events > 0

    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    findings = json.loads(out.read_text())["findings"]
    assert findings, "no finding"
    top = findings[0]
    assert (top["rank"], top["failure_mode"], top["resource"]) == (1, "contention", "mdl.table")

    con = connect(trace)
    tasks = {
        t: (name, parent)
        for t, name, parent in con.execute("SELECT task, name, parent FROM tasks").fetchall()
    }

    def connection_of(task: int) -> str:
        while tasks[task][1] is not None:
            task = tasks[task][1]
        return tasks[task][0]

    culprit = top["culprit_tasks"][0]
    assert tasks[culprit][0] == "SELECT * FROM t"
    assert connection_of(culprit).startswith(f"connection {reader.thread_id()} ")
    victims = [t for t in top["victim_tasks"] if tasks[t][0].startswith("ALTER TABLE t")]
    assert victims, [tasks[t] for t in top["victim_tasks"]]
    assert connection_of(victims[0]).startswith(f"connection {altering.thread_id()} ")

    # the wait is on t's object, with about the length it had, and t is named in the recording
    table = object_id("test.t")
    (waited,) = con.execute(
        "SELECT sum(dur) FROM events WHERE kind = 0 AND resource = 'mdl.table' AND object = ? "
        "AND task = ?",
        [table, victims[0]],
    ).fetchone()
    assert 2.5e9 < waited < 20e9, waited
    summary = json.loads((trace / "mariadb-recording.json").read_text())
    assert summary["objects"]["mdl.table"][str(table)] == "test.t"
    assert "innodb_lock_waits" in summary["row_locks"]

    # sites: the server's SOURCE file:line, where the build fills it (Debian's leaves it empty)
    with admin.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM performance_schema.events_waits_history_long "
            "WHERE EVENT_NAME = 'wait/lock/metadata/sql/mdl' AND SOURCE <> ''"
        )
        filled = cur.fetchone()[0] > 0
    if filled:
        assert any(s["file"].startswith("mdl") and s["line"] > 0 for s in top["sites"])
    else:
        assert top["sites"] == []

    # the instruments the recorder turned on are back off
    with admin.cursor() as cur:
        cur.execute(
            "SELECT ENABLED FROM performance_schema.setup_instruments "
            "WHERE NAME = 'wait/lock/metadata/sql/mdl'"
        )
        assert cur.fetchone()[0] == "NO"


def test_lost_connection_keeps_what_was_recorded(server, session, recorder, tmp_path):
    """The recorder's connection killed mid-recording: a one-line error, and the trace up to
    then is valid."""
    from gigi.errors import RecordError
    from gigi.ingest import ingest

    admin, holder = session(), session()

    def sessions() -> set[int]:
        with admin.cursor() as cur:
            cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Daemon'")
            return {r[0] for r in cur.fetchall()}

    before = sessions()
    trace = tmp_path / "trace"
    stop, recording, result = recorder(trace, duration=60.0, interval=0.01, flush_every=0.2)
    with holder.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT * FROM mysql.user LIMIT 1")
    time.sleep(0.5)
    # the recorder's connection: the one session that came with it
    ids = sorted(sessions() - before)
    assert len(ids) == 1, ids
    with admin.cursor() as cur:
        cur.execute(f"KILL CONNECTION {ids[0]}")
    recording.join(30)
    assert not recording.is_alive()
    error = result.get("error")
    assert isinstance(error, RecordError), result
    assert "lost the connection" in str(error) and "\n" not in str(error)
    manifest = ingest(trace, tmp_path / "store")
    assert manifest.events >= 1  # the SELECT's lock on mysql.user, at least
    summary = json.loads((trace / "mariadb-recording.json").read_text())
    assert summary["stopped_by"].startswith("lost connection")
    holder.rollback()


@pytest.mark.parametrize(
    "dsn, says",
    [
        ("postgres://u@h/db", "bad DSN"),
        ("mysql://root:secret@127.0.0.1:{free}/test", "cannot connect to mysql://root@127.0.0.1"),
    ],
)
def test_bad_dsn_is_one_line(dsn, says, tmp_path, capsys):
    from mariadb_server import free_port

    code = cli(
        [
            "record",
            "mariadb",
            "--dsn",
            dsn.format(free=free_port()),
            "--out",
            str(tmp_path / "t"),
            "--duration",
            "1s",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert says in err and "Traceback" not in err and "secret" not in err, err
    assert len(err.splitlines()) == 1, err


def test_row_lock_waits_blame_the_holder(server, session, recorder, tmp_path):
    """A transaction keeps a row lock while three others wait for the row: rank 1 is contention
    on innodb.row_lock, the holder's transaction to blame, the three waiters its victims."""
    admin = session()
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS acc")
        cur.execute("CREATE TABLE acc (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO acc VALUES (1, 1), (42, 42)")
    trace = tmp_path / "trace"
    stop, recording, result = recorder(trace, duration=60.0, interval=0.01)
    holder = session()
    with holder.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("UPDATE acc SET v = v + 1 WHERE id = 42")
    waiters = [session() for _ in range(3)]

    def wait(con):
        with con.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 60")
            cur.execute("BEGIN")
            cur.execute("UPDATE acc SET v = v + 1 WHERE id = 42")
        con.commit()

    threads = [threading.Thread(target=wait, args=(c,)) for c in waiters]
    for t in threads:
        t.start()
    time.sleep(3.0)
    holder.commit()
    for t in threads:
        t.join(30)
    time.sleep(0.3)
    stop.set()
    recording.join(30)
    assert "error" not in result, result.get("error")

    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    top = json.loads(out.read_text())["findings"][0]
    assert (top["failure_mode"], top["resource"]) == ("contention", "innodb.row_lock")
    from gigi.queries import connect

    con = connect(trace)
    parent = dict(con.execute("SELECT task, parent FROM tasks").fetchall())
    name = dict(con.execute("SELECT task, name FROM tasks").fetchall())
    culprit = top["culprit_tasks"][0]
    assert name[culprit].startswith("UPDATE acc SET v = v + 1 WHERE id = 42")
    assert name[parent[culprit]].startswith(f"connection {holder.thread_id()} ")
    waiting = {c.thread_id() for c in waiters}
    victim_connections = {int(name[parent[v]].split()[1]) for v in top["victim_tasks"]}
    assert waiting <= victim_connections, (waiting, victim_connections)


def test_a_transaction_is_named_by_a_statement_of_its_own():
    """A poll reads its tables one after another, so the statement row may predate the
    transaction row: the connection's SET NAMES (before BEGIN) must not name the transaction,
    and neither may session settings; the first statement inside it does."""
    from gigi.record._mariadb_model import Model, Poll

    thread = {"THREAD_ID": 10, "TYPE": "FOREGROUND", "PROCESSLIST_ID": 3, "THREAD_OS_ID": 99}
    active = {"THREAD_ID": 10, "EVENT_ID": 7, "STATE": "ACTIVE", "TIMER_START": None}

    def statement(event, sql):
        return {"THREAD_ID": 10, "EVENT_ID": event, "END_EVENT_ID": event, "SQL_TEXT": sql}

    m = Model(own_thread=1)
    m.add(Poll(0, 10, [statement(5, "SET NAMES utf8mb4")], [active], threads=[thread]))
    assert m.threads[10].txn.task.name is None
    m.add(Poll(20, 30, [statement(8, "SET SESSION lock_wait_timeout = 5")], [active], [], [thread]))
    assert m.threads[10].txn.task.name is None
    m.add(
        Poll(
            40, 50, [statement(9, "UPDATE acc SET v = v + 1 WHERE id = 42")], [active], [], [thread]
        )
    )
    m.finish(60)
    _, tasks, _ = m.take()
    connection = next(t["task"] for t in tasks if t["parent"] is None)
    (txn,) = [t for t in tasks if t["parent"] == connection]
    assert txn["name"] == "UPDATE acc SET v = v + 1 WHERE id = 42"


def test_a_lock_whose_owner_the_server_does_not_name(tmp_path):
    """performance_schema leaves OWNER_THREAD_ID null for a lock taken by a thread it does not
    instrument (InnoDB's background work on a table an ALTER just changed, say). The hold is
    recorded on a stand-in background task with OS thread 0, never as a null thread that would
    make the whole trace unreadable, and its task ends when the lock goes."""
    from gigi.ingest import ingest
    from gigi.queries import connect
    from gigi.record._mariadb_model import Model, Poll
    from gigi.schema import TraceWriter

    conn = {"THREAD_ID": 10, "TYPE": "FOREGROUND", "PROCESSLIST_ID": 3, "THREAD_OS_ID": 99}

    def lock(owner, ticket, status="GRANTED"):
        return {
            "OBJECT_TYPE": "TABLE",
            "OBJECT_SCHEMA": "test",
            "OBJECT_NAME": "t",
            "OBJECT_INSTANCE_BEGIN": ticket,
            "LOCK_TYPE": "SHARED_READ",
            "LOCK_DURATION": "TRANSACTION",
            "LOCK_STATUS": status,
            "SOURCE": "",
            "OWNER_THREAD_ID": owner,
            "OWNER_EVENT_ID": None if owner is None else 5,
        }

    m = Model(own_thread=1)
    m.add(Poll(0, 10, metadata_locks=[lock(None, 0xA0), lock(10, 0xB0)], threads=[conn]))
    m.add(Poll(20, 30, metadata_locks=[lock(None, 0xA0), lock(10, 0xB0)], threads=[conn]))
    m.add(Poll(40, 50, metadata_locks=[lock(10, 0xB0)], threads=[conn]))  # the unnamed lock went
    m.add(Poll(60, 70, metadata_locks=[lock(None, 0xC0), lock(10, 0xB0)], threads=[conn]))
    m.finish(80)
    events, tasks, _ = m.take()
    assert all(e["thread"] is not None and e["task"] is not None for e in events), events
    unnamed = {
        t["task"]: t for t in tasks if t["name"].startswith("a server thread without performance")
    }
    assert len(unnamed) == 2 and all(t["kind"] == "background" for t in unnamed.values())
    first = min(unnamed)
    assert unnamed[first]["end"] == 50  # ended with its lock; the second still open at the end
    mine = [(e["kind"], e["ts"], e["thread"]) for e in events if e["task"] == first]
    assert mine == [(1, 10, 0), (3, 50, 0)]  # ACQUIRE when seen, RELEASE when gone

    w = TraceWriter(tmp_path / "trace", "gigi-record-mariadb test")
    w.extend("events", events)
    w.extend("tasks", tasks)
    w.flush()
    ingest(tmp_path / "trace", tmp_path / "store")
    con = connect(tmp_path / "store")
    assert con.execute("SELECT count(*) FROM events WHERE thread = 0").fetchone()[0] == 3


def test_the_writer_refuses_a_null_in_a_required_column(tmp_path):
    """A writer's bug (a null thread, say) is refused when the segment is written, in one line
    naming the column and row, and the segments already written stay readable."""
    from gigi.errors import SchemaError
    from gigi.ingest import ingest
    from gigi.schema import TraceWriter

    row = {"ts": 1, "kind": 1, "resource": "r", "task": 1, "thread": 7}
    w = TraceWriter(tmp_path / "trace", "gigi-test")
    w.extend("events", [row])
    w.flush()
    w.extend("events", [row, {**row, "ts": 2, "thread": None}])
    with pytest.raises(SchemaError, match=r"column 'thread', row 1: is null") as e:
        w.flush()
    assert "\n" not in str(e.value)
    assert ingest(tmp_path / "trace", tmp_path / "store").events == 1
