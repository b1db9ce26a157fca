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
from tests.mariadb.fixtures import (  # noqa: E402, F401
    bad_names,
    exclusive_overlaps,
    recorder_fixture,
    row_lock_queue,
    session_fixture,
)
from tests.mariadb.fixtures import wait_for as _wait_for  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("mariadb"))
    srv.start()  # a server that fails to start fails the tests with its log
    try:
        yield srv
    finally:
        srv.stop()


def test_open_select_keeps_mdl_and_alter_waits(server, session, recorder, tmp_path):
    """MDEV-34989: an open transaction's SELECT keeps the table's metadata lock and an ALTER
    TABLE waits behind it. Rank 1 is contention on mdl.table.shared (the SELECT's lock is
    SHARED_READ), the SELECT's transaction (on its connection) is the culprit and the ALTER the
    victim."""
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
    assert (top["rank"], top["failure_mode"], top["resource"]) == (
        1,
        "contention",
        "mdl.table.shared",
    )

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
    assert tasks[culprit][0] == f"connection {reader.thread_id()}: SELECT * FROM t"
    assert connection_of(culprit).startswith(f"connection {reader.thread_id()} ")
    victims = [
        t
        for t in top["victim_tasks"]
        if tasks[t][0].startswith(f"connection {altering.thread_id()}: ALTER TABLE t")
    ]
    assert victims, [tasks[t] for t in top["victim_tasks"]]
    assert connection_of(victims[0]).startswith(f"connection {altering.thread_id()} ")

    # the wait is on t's object, with about the length it had, and t is named in the recording
    table = object_id("test.t")
    (waited,) = con.execute(
        "SELECT sum(dur) FROM events WHERE kind = 0 AND resource = 'mdl.table.shared' "
        "AND object = ? AND task = ?",
        [table, victims[0]],
    ).fetchone()
    assert 2.5e9 < waited < 20e9, waited
    summary = json.loads((trace / "mariadb-recording.json").read_text())
    assert summary["objects"]["mdl.table.shared"][str(table)] == "test.t"
    # the ALTER's SHARED_UPGRADABLE is exclusive: one holder at a time
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'mdl.table'"
    ).fetchall() == [(1, "exclusive")]
    assert exclusive_overlaps(con) == []
    assert bad_names(con) == []
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
    assert (
        name[culprit] == f"connection {holder.thread_id()}: UPDATE acc SET v = v + 1 WHERE id = 42"
    )
    assert name[parent[culprit]].startswith(f"connection {holder.thread_id()} ")
    waiting = {c.thread_id() for c in waiters}
    victim_connections = {int(name[parent[v]].split()[1]) for v in top["victim_tasks"]}
    # the victims are waiters (one that got the row next held it while the others still waited,
    # and may be named among the culprits instead), and every waiter waited
    assert victim_connections and victim_connections <= waiting, (waiting, victim_connections)
    waited = con.execute(
        "SELECT DISTINCT task FROM events WHERE kind = 0 AND resource = 'innodb.row_lock'"
    ).fetchall()
    assert {int(name[parent[t]].split()[1]) for (t,) in waited} == waiting


def test_a_row_lock_holder_is_named_by_its_update_not_its_sleep(
    server, session, recorder, tmp_path
):
    """A transaction updates a row and goes straight on to SELECT SLEEP(4), while three others
    wait for the row. The culprit is named by the UPDATE that took the row lock (through its
    metadata lock's OWNER_EVENT_ID and the statement history), with its connection id, not by
    the SLEEP it runs; each victim by its own waiting UPDATE. The row lock's resource is
    exclusive with capacity 1, and its holds, passed from one transaction to the next, never
    overlap."""
    from gigi.ingest import ingest
    from gigi.queries import connect

    admin = session()
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS hot")
        cur.execute("CREATE TABLE hot (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO hot VALUES (1, 1), (2, 2)")
    trace = tmp_path / "trace"
    stop, recording, result = recorder(trace, duration=60.0, interval=0.01)
    holder = session()
    waiters = [session() for _ in range(3)]
    row_lock_queue(holder, waiters, "hot", 1, sleep=4, head_start=0.5, keep=0.3)
    time.sleep(0.5)
    stop.set()
    recording.join(30)
    assert "error" not in result, result.get("error")

    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    findings = json.loads(out.read_text())["findings"]
    rows = [f for f in findings if f["resource"] == "innodb.row_lock"]
    assert rows, findings
    ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store")
    name = dict(con.execute("SELECT task, name FROM tasks").fetchall())
    assert name[rows[0]["culprit_tasks"][0]] == (
        f"connection {holder.thread_id()}: UPDATE hot SET v = v + 1 WHERE id = 1"
    ), [name[t] for t in rows[0]["culprit_tasks"]]
    # every waiter's wait, on its transaction, named by its own waiting UPDATE
    waited = {
        name[t]
        for (t,) in con.execute(
            "SELECT DISTINCT task FROM events WHERE kind = 0 AND resource = 'innodb.row_lock'"
        ).fetchall()
    }
    assert waited == {
        f"connection {c.thread_id()}: UPDATE hot SET v = v + {i + 2} WHERE id = 1"
        for i, c in enumerate(waiters)
    }, waited
    assert {name[v] for f in rows for v in f["victim_tasks"]} <= waited
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'innodb.row_lock'"
    ).fetchall() == [(1, "exclusive")]
    (holds,) = con.execute(
        "SELECT count(DISTINCT task) FROM holds WHERE resource = 'innodb.row_lock'"
    ).fetchone()
    assert holds >= 3  # the holder and the waiters it passed to, one after another
    assert exclusive_overlaps(con) == []
    assert bad_names(con) == []


def test_a_lock_passed_round_is_never_held_twice(server, session, recorder, tmp_path):
    """Four sessions take GET_LOCK('hot') in turn for 30 ms each, for 3 s: the lock changes
    hands between polls again and again. Its resource is exclusive with capacity 1, and no two
    of its holds overlap in the trace."""
    from gigi.ingest import ingest
    from gigi.queries import connect

    trace = tmp_path / "trace"
    stop, recording, result = recorder(trace, duration=60.0, interval=0.01)
    done = threading.Event()
    errors: list[BaseException] = []

    def loop(con):
        try:
            with con.cursor() as cur:
                while not done.is_set():
                    cur.execute("SELECT GET_LOCK('hot', 30)")
                    cur.execute("SELECT SLEEP(0.03)")
                    cur.execute("SELECT RELEASE_LOCK('hot')")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(session(),)) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(3.0)
    done.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    time.sleep(0.3)
    stop.set()
    recording.join(30)
    assert "error" not in result, result.get("error")

    ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store")
    assert con.execute(
        "SELECT capacity, sharing FROM resources WHERE resource = 'mdl.user_level_lock'"
    ).fetchall() == [(1, "exclusive")]
    (holds,) = con.execute(
        "SELECT count(*) FROM holds WHERE resource = 'mdl.user_level_lock'"
    ).fetchone()
    assert holds >= 10, holds
    assert exclusive_overlaps(con) == []
    (peak,) = con.execute(
        "SELECT max(outstanding) FROM outstanding WHERE resource = 'mdl.user_level_lock'"
    ).fetchone()
    assert peak == 1
    assert bad_names(con) == []


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
    assert m.threads[10].txn.first is None
    m.add(Poll(20, 30, [statement(8, "SET SESSION lock_wait_timeout = 5")], [active], [], [thread]))
    assert m.threads[10].txn.first is None
    m.add(
        Poll(
            40, 50, [statement(9, "UPDATE acc SET v = v + 1 WHERE id = 42")], [active], [], [thread]
        )
    )
    m.finish(60)
    _, tasks, _ = m.take()
    connection = next(t["task"] for t in tasks if t["parent"] is None)
    (txn,) = [t for t in tasks if t["parent"] == connection]
    assert txn["name"] == "connection 3: UPDATE acc SET v = v + 1 WHERE id = 42"


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


# --- the lock model, fed synthetic polls (no server) ------------------------------------------


def _connection(tid: int, pid: int, user: str | None = "app") -> dict:
    return {
        "THREAD_ID": tid,
        "TYPE": "FOREGROUND",
        "PROCESSLIST_ID": pid,
        "THREAD_OS_ID": 900 + tid,
        "PROCESSLIST_USER": user,
        "PROCESSLIST_HOST": "localhost" if user else None,
        "PROCESSLIST_DB": "test",
    }


def _mdl(owner, ticket, lock_type, status="GRANTED", event=5, kind="TABLE", name="t", **kw):
    return {
        "OBJECT_TYPE": kind,
        "OBJECT_SCHEMA": None if kind == "USER LEVEL LOCK" else "test",
        "OBJECT_NAME": name,
        "OBJECT_INSTANCE_BEGIN": ticket,
        "LOCK_TYPE": lock_type,
        "LOCK_DURATION": kw.get("duration", "TRANSACTION"),
        "LOCK_STATUS": status,
        "SOURCE": "",
        "OWNER_THREAD_ID": owner,
        "OWNER_EVENT_ID": event,
    }


def _overlaps(events: list[dict]) -> list[tuple]:
    """Pairs of holds of one object of an exclusive class that overlap in trace order (by ts,
    ties in the order written)."""
    from gigi.record._locks import is_exclusive

    order = sorted(range(len(events)), key=lambda i: (events[i]["ts"], i))
    open_by: dict[tuple, int] = {}
    bad = []
    for i in order:
        e = events[i]
        key = (e["resource"], e["object"])
        if not is_exclusive(e["resource"]) or e["kind"] not in (1, 3):
            continue
        if e["kind"] == 1:
            if key in open_by and open_by[key] != e["task"]:
                bad.append((key, open_by[key], e["task"]))
            open_by[key] = e["task"]
        elif open_by.get(key) == e["task"]:
            del open_by[key]
    return bad


def test_an_exclusive_lock_changing_hands_in_one_poll_is_never_held_twice(tmp_path):
    """GET_LOCK's lock passes from A to B between two polls, and the server timed B's wait: B's
    ACQUIRE is at the end of its wait, and A's RELEASE is written before it, at the same
    instant (not at the poll, after it): the lock is never held twice, and its resource says
    capacity 1, exclusive."""
    from gigi.ingest import ingest
    from gigi.queries import connect
    from gigi.record._locks import resource_row
    from gigi.record._mariadb_model import Model, Poll
    from gigi.schema import TraceWriter

    a, b = _connection(10, 3), _connection(11, 4)
    lock = dict(kind="USER LEVEL LOCK", name="k", duration="EXPLICIT")
    m = Model(own_thread=1)
    m.add(
        Poll(
            0,
            10_000,
            metadata_locks=[
                _mdl(10, 0xA, "SHARED_NO_WRITE", **lock),
                _mdl(11, 0xB, "SHARED_NO_WRITE", "PENDING", event=7, **lock),
            ],
            threads=[a, b],
            mdl_waits={(11, 7): (1_000_000, None, "")},
        )
    )
    m.add(
        Poll(
            40_000,
            50_000,
            metadata_locks=[_mdl(11, 0xB, "SHARED_NO_WRITE", event=7, **lock)],
            threads=[a, b],
            mdl_waits={(11, 7): (1_000_000, 16_000_000, "")},  # 15 us, in ps
        )
    )
    m.finish(60_000)
    events, tasks, _ = m.take()
    mine = [(e["kind"], e["ts"], e["resource"]) for e in events]
    assert mine == [
        (1, 10_000, "mdl.user_level_lock"),  # A holds it
        (3, 25_000, "mdl.user_level_lock"),  # A lets it go when B's wait ended...
        (0, 10_000, "mdl.user_level_lock"),  # ... B's wait, as long as the server timed it
        (1, 25_000, "mdl.user_level_lock"),  # ... and B has it
    ], mine
    assert events[2]["dur"] == 15_000
    assert _overlaps(events) == []

    w = TraceWriter(tmp_path / "trace", "gigi-record-mariadb test")
    w.extend("events", events)
    w.extend("tasks", tasks)
    w.extend("resources", [resource_row(r) for r in m.objects])
    w.flush()
    ingest(tmp_path / "trace", tmp_path / "store")
    con = connect(tmp_path / "store")
    assert con.execute("SELECT capacity, sharing FROM resources").fetchall() == [(1, "exclusive")]
    holds = con.execute(
        "SELECT acquire_seq, release_seq FROM holds ORDER BY acquire_seq"
    ).fetchall()
    assert len(holds) == 2 and holds[0][1] < holds[1][0], holds


def test_a_releasers_row_read_beside_the_new_holders_is_stale():
    """A poll reads the lock table row by row: A's row is read before A lets GET_LOCK's lock go,
    B's after B got it, so one poll shows both granted. The server never grants it twice: A's
    hold ends there, before B's begins; and of two holds both new in one poll, one began and
    ended between the polls and only the other is kept."""
    from gigi.record._mariadb_model import Model, Poll

    a, b, c = _connection(10, 3), _connection(11, 4), _connection(12, 5)
    lock = dict(kind="USER LEVEL LOCK", name="k", duration="EXPLICIT")
    m = Model(own_thread=1)
    m.add(Poll(0, 10, metadata_locks=[_mdl(10, 0xA, "SHARED_NO_WRITE", **lock)], threads=[a, b, c]))
    both = [_mdl(10, 0xA, "SHARED_NO_WRITE", **lock), _mdl(11, 0xB, "SHARED_NO_WRITE", **lock)]
    m.add(Poll(20, 30, metadata_locks=both, threads=[a, b, c]))
    m.add(
        Poll(40, 50, metadata_locks=[_mdl(11, 0xB, "SHARED_NO_WRITE", **lock)], threads=[a, b, c])
    )
    two_new = [
        _mdl(10, 0xC, "SHARED_NO_WRITE", event=8, **lock),
        _mdl(12, 0xD, "SHARED_NO_WRITE", event=9, **lock),
    ]
    m.add(Poll(60, 70, metadata_locks=two_new, threads=[a, b, c]))
    m.add(Poll(80, 90, metadata_locks=two_new[1:], threads=[a, b, c]))
    m.finish(100)
    events, _, _ = m.take()
    assert _overlaps(events) == []
    held = [(e["kind"], e["ts"], e["thread"]) for e in events if e["kind"] in (1, 3)]
    assert held == [
        (1, 10, 910),  # A
        (3, 30, 910),  # A's row read beside B's: A let go
        (1, 30, 911),  # B
        (3, 70, 911),  # B let go before two new rows: C's, and a stale one of A's
        (1, 70, 912),  # C, still holding when the recording ends
    ], held


def test_a_wait_is_on_the_class_of_what_keeps_it_waiting():
    """An open transaction's SELECT holds t's metadata lock in SHARED_READ; an ALTER holds
    SHARED_UPGRADABLE and waits for EXCLUSIVE; an INSERT queues behind the ALTER. The SELECT's
    hold is shared (``mdl.table.shared``), the ALTER's exclusive (``mdl.table``); the ALTER waits
    for the shared holders, the INSERT for the ALTER."""
    from gigi.record._mariadb_model import Model, Poll

    threads = [_connection(10, 3), _connection(11, 4), _connection(12, 5)]
    locks = [
        _mdl(10, 0xA, "SHARED_READ"),
        _mdl(11, 0xB, "SHARED_UPGRADABLE"),
        _mdl(11, 0xC, "EXCLUSIVE", "PENDING", event=9),
        _mdl(12, 0xD, "SHARED_WRITE", "PENDING", event=6),
    ]
    m = Model(own_thread=1)
    m.add(Poll(0, 10, metadata_locks=locks, threads=threads))
    holders = {h.task: r for (_, r, _), h in m.holds.items()}
    assert holders == {
        m.threads[10].txn.task.task: "mdl.table.shared",
        m.threads[11].txn.task.task: "mdl.table",
    }
    waits = {w.task: w.resource for w in m.mdl_waiting.values()}
    alter = m.threads[11].txn.task.task
    assert waits == {alter: "mdl.table.shared", m.threads[12].txn.task.task: "mdl.table"}
    # the SELECT commits: the ALTER's ticket is upgraded to EXCLUSIVE, its wait ends, and its
    # hold of the table goes on (no RELEASE and ACQUIRE of its own)
    upgraded = [_mdl(11, 0xB, "EXCLUSIVE"), _mdl(12, 0xD, "SHARED_WRITE", "PENDING", event=6)]
    m.add(Poll(20, 30, metadata_locks=upgraded, threads=threads))
    events, _, _ = m.take()
    mine = [(e["kind"], e["ts"], e["resource"], e["dur"]) for e in events if e["task"] == alter]
    assert mine == [(1, 10, "mdl.table", 0), (0, 10, "mdl.table.shared", 20)], mine


def test_a_row_lock_changing_hands_in_one_poll_is_never_held_twice():
    """H holds a row that W1 and W2 wait for; at the next reading H is gone and W1 holds it
    (W2 waits for W1). W1's ACQUIRE comes after H's RELEASE and its own wait's end, not at the
    start of the waits it causes, which began while H held the row."""
    from gigi.record._mariadb_model import Model, Poll

    threads = [_connection(10, 3), _connection(11, 4), _connection(12, 5)]
    row = "`test`.`t` PRIMARY 1"
    m = Model(own_thread=1)
    polls = [
        [(4, 3, row, 1_000, 500, "X"), (5, 3, row, 2_000, 500, "X")],
        [(5, 4, row, 2_000, 700, "X")],
        [],
    ]
    for i, waits in enumerate(polls):
        m.add(Poll(5_000 * (i + 1), 5_000 * (i + 1) + 1_000, threads=threads, row_waits=waits))
    m.finish(30_000)
    events, _, _ = m.take()
    rows = [(e["kind"], e["ts"], e["thread"]) for e in events if e["resource"] == "innodb.row_lock"]
    assert [(k, ts) for k, ts, t in rows if t == 910] == [(1, 1_000), (3, 11_000)], rows  # H
    assert [(k, ts) for k, ts, t in rows if t == 911] == [(0, 1_000), (1, 11_000), (3, 16_000)]
    assert _overlaps(events) == []


def test_a_lock_holder_is_named_by_the_statement_that_took_it():
    """A transaction updated a row and went on to SELECT SLEEP(15) before the recorder saw
    it; another waits for the row. The holder's transaction is named by the UPDATE (found in
    its statement history through its metadata lock's OWNER_EVENT_ID), not by the SLEEP it
    runs; the waiter by its own waiting UPDATE; statements carry their connection; no name
    says ``?@?`` or ``None``, though the holder's connection has no user or host yet."""
    from gigi.record._mariadb_model import Model, Poll

    holder, waiter = _connection(10, 3, user=None), _connection(11, 4)
    statements = [
        {"THREAD_ID": 10, "EVENT_ID": 12, "END_EVENT_ID": None, "SQL_TEXT": "SELECT SLEEP(15)"},
        {"THREAD_ID": 11, "EVENT_ID": 7, "END_EVENT_ID": None, "SQL_TEXT": "UPDATE t SET v = 2"},
    ]
    transactions = [
        {"THREAD_ID": t, "EVENT_ID": 5, "STATE": "ACTIVE", "TIMER_START": None} for t in (10, 11)
    ]
    history = {
        10: [
            {"THREAD_ID": 10, "EVENT_ID": 4, "END_EVENT_ID": 5, "SQL_TEXT": "BEGIN"},
            {
                "THREAD_ID": 10,
                "EVENT_ID": 7,
                "END_EVENT_ID": 10,
                "NESTING_EVENT_ID": 5,
                "SQL_TEXT": "UPDATE t SET v = 1 WHERE id = 1",
            },
        ]
    }
    poll = Poll(
        0,
        10,
        statements,
        transactions,
        [_mdl(10, 0xA, "SHARED_WRITE", event=8), _mdl(11, 0xB, "SHARED_WRITE", event=8)],
        [holder, waiter],
        row_waits=[(4, 3, "`test`.`t` PRIMARY 1", None, None, "X")],
    )
    m = Model(own_thread=1)
    assert m.history_wanted(poll) == {10: {8}}  # the waiter's lock is its current statement's
    poll.history = history
    m.add(poll)
    m.finish(20)
    _, tasks, _ = m.take()
    names = {t["task"]: t["name"] for t in tasks}
    assert names[m.threads[10].txn.task.task] == "connection 3: UPDATE t SET v = 1 WHERE id = 1"
    assert names[m.threads[11].txn.task.task] == "connection 4: UPDATE t SET v = 2"
    assert names[m.threads[10].task.task] == "connection 3/test"
    assert "connection 3: SELECT SLEEP(15)" in names.values()  # its statement, as a task
    assert not [n for n in names.values() if n is None or "?@?" in n or "None" in n], names


def test_a_lock_whose_statement_was_read_too_early_is_named_when_it_ends():
    """A poll reads the statements before the locks: the holder's UPDATE began between the
    two reads, so the poll shows its metadata lock beside the BEGIN before it, and the
    UPDATE, still running, is in no history yet. The next poll finds it in the history
    (the holder has gone on to SELECT SLEEP(15)) and names the holder's transaction by it,
    not by the SLEEP it runs when a waiter comes."""
    from gigi.record._mariadb_model import Model, Poll

    holder, waiter = _connection(10, 3), _connection(11, 4)
    begin = {"THREAD_ID": 10, "EVENT_ID": 4, "END_EVENT_ID": 5, "SQL_TEXT": "BEGIN"}
    update = {
        "THREAD_ID": 10,
        "EVENT_ID": 7,
        "END_EVENT_ID": 10,
        "NESTING_EVENT_ID": 5,
        "SQL_TEXT": "UPDATE t SET v = 1 WHERE id = 1",
    }
    active = {"THREAD_ID": 10, "EVENT_ID": 5, "STATE": "ACTIVE", "TIMER_START": None}
    m = Model(own_thread=1)
    first = Poll(0, 10, [begin], [active], [_mdl(10, 0xA, "SHARED_WRITE", event=8)], [holder])
    assert m.history_wanted(first) == {10: {8}}
    first.history = {10: [begin]}  # the UPDATE still runs: not in the history yet
    m.add(first)
    sleep = {"THREAD_ID": 10, "EVENT_ID": 12, "END_EVENT_ID": None, "SQL_TEXT": "SELECT SLEEP(15)"}
    waiting = {
        "THREAD_ID": 11,
        "EVENT_ID": 7,
        "END_EVENT_ID": None,
        "SQL_TEXT": "UPDATE t SET v = 2",
    }
    second = Poll(
        20,
        30,
        [sleep, waiting],
        [active, {**active, "THREAD_ID": 11}],
        [_mdl(10, 0xA, "SHARED_WRITE", event=8), _mdl(11, 0xB, "SHARED_WRITE", event=8)],
        [holder, waiter],
        row_waits=[(11, 10, "`test`.`t` PRIMARY 1", None, None, "X")],
    )
    # asked for again (its statement is not known yet): the poll carries what was asked for
    second.history = {t: [begin, update] for t in m.history_wanted(second)}
    m.add(second)
    m.finish(40)
    _, tasks, _ = m.take()
    names = {t["task"]: t["name"] for t in tasks}
    assert names[m.threads[10].txn.task.task] == "connection 3: UPDATE t SET v = 1 WHERE id = 1"
