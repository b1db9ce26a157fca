"""pytest fixtures for the tests that record a real MariaDB server: sessions closed when the
test ends, and recorders run in a thread, stopped and joined when it ends. Both ask for a
fixture named ``server`` (a running ``mariadb_server.Server``) that the test module defines
in the scope it wants. A test module takes them by importing ``session_fixture`` and
``recorder_fixture``."""

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
