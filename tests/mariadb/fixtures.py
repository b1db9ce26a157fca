"""pytest fixtures for the tests that record a real MariaDB server: sessions closed when the
test ends, and recorders run in a thread, stopped and joined when it ends. Both ask for a
fixture named ``server`` (a running ``mariadb_server.Server``) that the test module defines
in the scope it wants. A test module takes them by importing ``session_fixture`` and
``recorder_fixture``.

Beside them: ``wait_for``; ``row_lock_queue``, a row lock passed from a sleeping holder to
waiters one after another; and two checks of a recorded store that the PostgreSQL recorder's
tests make too."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest


@pytest.fixture(name="session")
def session_fixture(server):
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


@pytest.fixture(name="recorder")
def recorder_fixture(server):
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


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def row_lock_queue(
    holder, waiters, table: str, row: int, *, sleep: int, head_start: float, keep: float
) -> None:
    """HOLDER updates row ROW of TABLE (``v = v + 1``) and goes on to SELECT SLEEP(SLEEP) before
    it commits; HEAD_START s after it began, each of WAITERS (in a thread of its own) updates
    the same row (``v = v + 2``, ``+ 3``, ...), keeps it KEEP s once it has it and commits.
    Returns when all are done; fails if any of them failed."""
    errors: list[BaseException] = []

    def hold():
        try:
            with holder.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"UPDATE {table} SET v = v + 1 WHERE id = {row}")
                cur.execute(f"SELECT SLEEP({sleep})")
            holder.commit()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def wait(con, i):
        try:
            with con.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 60")
                cur.execute("BEGIN")
                cur.execute(f"UPDATE {table} SET v = v + {i} WHERE id = {row}")
            time.sleep(keep)  # holds the row a while: it passes from one waiter to the next
            con.commit()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    holding = threading.Thread(target=hold)
    holding.start()
    time.sleep(head_start)
    threads = [threading.Thread(target=wait, args=(c, i + 2)) for i, c in enumerate(waiters)]
    for t in threads:
        t.start()
    holding.join(30)
    for t in threads:
        t.join(30)
    assert not errors, errors


def exclusive_overlaps(con) -> list[tuple]:
    """Holds of one object of an exclusive resource that overlap in trace order, from the
    store's holds view."""
    return con.execute(
        """SELECT a.resource, a.object, a.task, b.task
        FROM holds AS a JOIN holds AS b ON a.resource = b.resource AND a.object = b.object
            AND a.acquire_seq < b.acquire_seq
            AND b.acquire_seq < coalesce(a.release_seq, 9223372036854775807)
        JOIN resources AS r ON r.resource = a.resource
        WHERE r.sharing = 'exclusive'"""
    ).fetchall()


def bad_names(con) -> list[str]:
    """The store's task names that are missing or name an unknown user, host or value."""
    names = [n for (n,) in con.execute("SELECT name FROM tasks").fetchall()]
    return [n for n in names if n is None or "?@?" in n or "None" in n]
