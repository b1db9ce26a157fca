"""Ctrl-C (and SIGTERM) held back over the few steps that must not stop half-way.

Python raises KeyboardInterrupt between any two bytecodes. Most of gigi can stop anywhere: a
query is interrupted, a temporary folder removed. A few steps cannot: numba loading a kernel
from its cache and calling it (stopped in the middle, its dispatcher is left half-built, and
the next call into it crashes the process), renaming a finished file or store entry into
place, writing an output file. ``deferred()`` runs such a step with the signals recorded
instead of acted on, then acts on the first one as soon as the step is over, through the
handler that was in place before (KeyboardInterrupt by default; the CLI's own for SIGTERM).

Only the main thread receives signals in Python, so elsewhere ``deferred()`` does nothing.

``handling()`` is the CLI's side: SIGINT and SIGTERM raise ``KeyboardInterrupt`` (SIGTERM as
``Terminated``) and are recorded, so that the command reports "interrupted" whatever the
exception it ends with. A signal that arrives inside the import machinery (where an exception
in a lock's callback is printed and dropped, and a module is left half-imported) is delivered
a few milliseconds later instead, once the import is done.

Python runs a signal's handler only between two bytecodes of the main thread: while a DuckDB
query runs there (a diagnosis's join over a large trace, minutes), nothing happens until it
returns. So ``handling()`` also watches for the signals from a thread of its own (through
``signal.set_wakeup_fd``) and interrupts the queries of every connection ``interruptible()``
named, outside ``deferred()`` steps; the query then ends at once with DuckDB's own error,
and the handler raises as usual. Where the main thread is in other C code that does not
return to Python in time (a numba kernel, an Arrow compute over a large trace), the watcher
ends the process itself ``GRACE_S`` after the signal: the one line, the atexit work (temp
stores, spill folders), and the status the signal asks for.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import threading
import weakref
from contextlib import contextmanager
from pathlib import Path

_HELD = (signal.SIGINT, signal.SIGTERM)
_RETRY_S = 0.005  # how soon a signal held back at an unsafe point is tried again
_UNSAFE_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a CI runner, ``kill``), raised in the main thread as Ctrl-C is, so
    that a command cleans up as it does for Ctrl-C: a diagnosis at scale removes its scratch
    files (gigabytes in DuckDB's temp directory), a recording writes what it has."""


received: list[int] = []  # the signals handling() acted on, first first
_pending: list[int] = []  # held back at an unsafe point
_queries: weakref.WeakSet = weakref.WeakSet()  # DuckDB connections a signal interrupts
_deferring = [0]  # how many deferred() steps run now
_forcible = [0]  # how many of them the watcher may end the process in (held(): a kernel)


def interruptible(con):
    """Name a DuckDB connection whose running query SIGINT or SIGTERM stops at once (while
    ``handling()`` is in charge); returns it."""
    _queries.add(con)
    return con


GRACE_S = 10.0  # how long the main thread has to act on a signal before the watcher does


def _watch(fd: int) -> None:
    """The watcher thread: each SIGINT or SIGTERM written to FD interrupts every named
    connection's query, unless a deferred() step runs, and ends the process GRACE_S later
    where the main thread has not acted on it; returns when FD's other end closes."""
    forcing = False
    while True:
        try:
            got = os.read(fd, 64)
        except OSError:
            return
        if not got:
            return
        signums = [b for b in got if b in _HELD]
        if not signums:
            continue
        if not _deferring[0]:
            for con in list(_queries):
                try:
                    con.interrupt()
                except Exception:  # noqa: BLE001, S112 - a connection closed meanwhile
                    continue
        if not forcing:
            forcing = True
            threading.Thread(target=_force, args=(signums[0],), daemon=True).start()


def _force(signum: int) -> None:
    """End the process as the CLI would for SIGNUM, unless the main thread acts on a signal
    (``received`` says so: it is on its way out) within GRACE_S; never while a deferred()
    step runs, but for a held() one: a kernel that runs for minutes."""
    import atexit
    import sys
    import time

    end = time.monotonic() + GRACE_S
    while time.monotonic() < end or _deferring[0] > _forcible[0]:
        if received:
            return
        time.sleep(0.05)
    print("gigi-query: interrupted", file=sys.stderr, flush=True)
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(128 + signum)


def _unsafe(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename in _UNSAFE_FILES or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _raise(signum, frame) -> None:
    if _unsafe(frame):
        _pending.append(signum)
        signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
        return
    received.append(signum)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _retry(_signum, frame) -> None:
    if _pending:
        _raise(_pending.pop(0), frame)


@contextmanager
def handling():
    """SIGINT and SIGTERM raise at the next safe point and are recorded in ``received``,
    while the block runs (in the main thread, where the handlers are still Python's own).
    Nested in another ``handling()``, it leaves the outer one in charge."""
    restore = {}
    if threading.current_thread() is threading.main_thread():
        for signum, theirs in (
            (signal.SIGTERM, signal.SIG_DFL),
            (signal.SIGINT, signal.default_int_handler),
        ):
            if signal.getsignal(signum) is theirs:
                restore[signum] = signal.signal(signum, _raise)
        if restore and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL:
            restore[signal.SIGALRM] = signal.signal(signal.SIGALRM, _retry)
    if restore:  # a new command: nothing received yet
        received.clear()
        _pending.clear()
    watch = _watching() if restore else None
    try:
        yield received
    finally:
        if signal.SIGALRM in restore:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in restore.items():
            signal.signal(signum, handler)
        if watch is not None:
            watch()


def _watching():
    """Start the watcher thread on a wakeup fd of our own; returns what stops it. Nothing
    where the program had a wakeup fd already (an event loop's)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        previous = 0
    if previous != -1:
        if previous != 0:
            signal.set_wakeup_fd(previous)
        os.close(r)
        os.close(w)
        return None
    thread = threading.Thread(target=_watch, args=(r,), name="gigi-signals", daemon=True)
    thread.start()

    def stop() -> None:
        signal.set_wakeup_fd(-1)
        os.close(w)  # the watcher reads the end, and returns
        thread.join(1)
        os.close(r)

    return stop


@contextmanager
def deferred():
    """Run the block with SIGINT and SIGTERM held; the first that came is acted on after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, object]] = []

    def hold(signum, frame) -> None:
        caught.append((signum, frame))

    previous = {s: signal.signal(s, hold) for s in _HELD}
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signum, frame = caught[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:  # what the signal would have done: end us
                os.kill(os.getpid(), signum)


def held(fn):
    """``fn`` run under ``deferred()``: for a function that loads or calls numba kernels. A
    signal is not raised inside it, but the watcher may still end the process GRACE_S on, as
    it does in other C code: an exit leaves no half-built dispatcher to call again, and numba
    writes its cache files whole (to a temporary name, then renamed)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with deferred():
            _forcible[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                _forcible[0] -= 1

    return run


def write_atomic(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8") -> None:
    """Write ``data`` to ``path`` in full or not at all: to a temporary file beside it, then
    renamed over it. An interrupt or a full disk leaves the old file (or none), never half
    of the new one."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # a new file, as open() makes one: mode 0666 less the umask (mkstemp's would be 0600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if path.exists():  # a file written over keeps its mode
            os.fchmod(fd, path.stat().st_mode & 0o7777)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        with deferred():
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
