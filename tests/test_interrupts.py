"""Ctrl-C and SIGTERM end every command cleanly: one line ("interrupted"), exit 130 (143), no
crash, no "internal error", nothing half-written left behind, whatever stage was running."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from gigi.ingest import ingest
    from gigi.scenarios import all_scenarios

    d = tmp_path_factory.mktemp("interrupts")
    scenario = next(s for s in all_scenarios() if s.name == "pg-wal-buffers")
    scenario.run(d / "trace", seconds=3.0)
    ingest(d / "trace", d / "store")
    return d / "trace", d / "store"


def _at_a_terminal() -> None:
    """Ctrl-C as a terminal sends it: a suite started in the background (``cmd &`` in a
    script) hands its children SIGINT ignored, and a program rightly goes on ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args: str, code: str | None = None, env: dict | None = None) -> subprocess.Popen:
    argv = ["-c", code] if code else ["-m", "gigi", *args]
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=_at_a_terminal,
    )


def _ended_cleanly(p: subprocess.Popen, signum: int = signal.SIGINT) -> None:
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()  # never left running behind the suite
        p.communicate()
        raise
    assert p.returncode == 128 + signum, (p.returncode, err)
    assert err.strip().splitlines() == ["gigi-query: interrupted"], err


def test_ctrl_c_at_any_moment_of_a_diagnosis(recorded):
    """Ctrl-C at random moments of a diagnosis (imports, numba loading its kernels, DuckDB
    queries, rendering): each run ends with the one line and exit 130. Before, 26 tries gave
    segmentation faults, "internal error: RuntimeError: Query interrupted", interrupts
    ignored (exit 0) and silent exits."""
    _, store = recorded
    # how long a whole diagnosis takes here, so that every signal lands while one runs: a
    # run that ended first would exit 0 as one that ignored the interrupt does
    t = time.monotonic()
    whole = _start("diagnose", str(store))
    whole.communicate(timeout=120)
    took = time.monotonic() - t
    assert whole.returncode == 0
    rng = random.Random(5)
    for _ in range(10):
        p = _start("diagnose", str(store))
        # past the interpreter's start, before the first half of the diagnosis is over
        time.sleep(max(0.3, rng.uniform(0.2, 0.5) * took))
        p.send_signal(signal.SIGINT)
        _ended_cleanly(p)


# A diagnosis that signals itself from inside a stage: the interrupt arrives exactly there.
_SELF_SIGNAL = """
import os, signal, sys
import {module} as m
real = m.{name}
def hit(*args, **kwargs):
    os.kill(os.getpid(), signal.{signal})
    return real(*args, **kwargs)
m.{name} = hit
from gigi.cli import main
sys.exit(main(["diagnose", {store!r}]))
"""


@pytest.mark.parametrize(
    "module, name",
    [
        ("gigi.metrics.attribution", "_points"),  # numba loading and running the blame sweep
        ("gigi.metrics.tasks", "_i64"),  # and the per-task sweep
        ("gigi.diagnosis._diagnose", "check_columns"),  # between a detector's query and rows
    ],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_inside_a_stage(recorded, module, name, signum):
    _, store = recorded
    code = _SELF_SIGNAL.format(
        module=module, name=name, store=str(store), signal=signal.Signals(signum).name
    )
    _ended_cleanly(_start(code=code), signum)


_STUCK_IN_C = """
import hashlib, os, signal, threading
import gigi.cli
def stuck(*args, **kwargs):  # the command, in the main thread: SIGTERM comes while in C
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)  # minutes in C, no bytecode run
gigi.cli.main = stuck
from gigi._entry import entry
entry()
"""


def test_a_signal_ends_a_command_stuck_in_other_c_code():
    """SIGTERM while the main thread is in C code that is no query (a kernel, an Arrow
    compute) and does not come back to Python for minutes: the watcher ends the command
    itself, a few seconds on, with the one line, the status and the atexit work."""
    started = time.monotonic()
    _ended_cleanly(_start(code=_STUCK_IN_C), signal.SIGTERM)
    assert time.monotonic() - started < 60, "the command ran on after the signal"


_STUCK_IN_A_KERNEL = """
import hashlib, os, signal, threading
import gigi.cli
from gigi._interrupts import held
@held
def kernel():  # minutes in C with the GIL released, as a numba kernel with nogil
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)
def stuck(*args, **kwargs):
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    kernel()
gigi.cli.main = stuck
from gigi._entry import entry
entry()
"""


def test_a_signal_ends_a_command_in_a_long_kernel():
    """A kernel run is held (a signal raised in it would leave numba's dispatcher
    half-built), yet one that runs for minutes (the blame of a large trace) still ends a few
    seconds after SIGTERM, as other C code does."""
    started = time.monotonic()
    _ended_cleanly(_start(code=_STUCK_IN_A_KERNEL), signal.SIGTERM)
    assert time.monotonic() - started < 60, "the command ran on after the signal"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_long_query_at_once(recorded, signum):
    """A query that would run for minutes stops at Ctrl-C or SIGTERM with the one line, not
    DuckDB's "Query interrupted" as an internal error, and at once: Python acts on a signal
    only between two bytecodes, which a query in DuckDB runs none of until it returns."""
    _, store = recorded
    p = _start("sql", str(store), "SELECT sum(i % 7) FROM range(100000000000) AS r(i)")
    time.sleep(3.0)
    sent = time.monotonic()
    p.send_signal(signum)
    _ended_cleanly(p, signum)
    assert time.monotonic() - sent < 30, "the query ran on after the signal"


def test_an_interrupted_ingest_leaves_nothing(recorded, tmp_path):
    """An ingest stopped half-way leaves no store behind when it made the store, and an
    existing store as it was."""
    trace, _ = recorded
    code = """
import os, signal, sys
from gigi.ingest import _store
real = _store._write_events
def hit(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
_store._write_events = hit
from gigi.cli import main
sys.exit(main(["ingest", {trace!r}, "--store", {store!r}]))
"""
    fresh = tmp_path / "new" / "store"
    _ended_cleanly(_start(code=code.format(trace=str(trace), store=str(fresh))))
    assert not (tmp_path / "new").exists()

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "note").write_text("mine")
    _ended_cleanly(_start(code=code.format(trace=str(trace), store=str(kept))))
    assert sorted(p.name for p in kept.iterdir()) == ["note"]


def test_an_interrupted_report_writes_no_half_page(recorded, tmp_path):
    """Ctrl-C while the page is written: the old page stays, whole, and no temporary file."""
    _, store = recorded
    page = tmp_path / "report.html"
    page.write_text("<p>the old page</p>")
    code = """
import os, signal, sys
import gigi._interrupts as i
real = i.os.fdopen
def hit(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
i.os.fdopen = hit
from gigi.cli import main
sys.exit(main(["report", {store!r}, "--html", {page!r}]))
"""
    _ended_cleanly(_start(code=code.format(store=str(store), page=str(page))))
    assert page.read_text() == "<p>the old page</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
