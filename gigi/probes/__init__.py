"""Record WAIT / ACQUIRE / USE / RELEASE events of a program's own resources.

Recording is off until ``enable()`` is called or the environment variable ``GIGI_TRACE`` names
a trace directory; while off, every probe call returns at once.

>>> import tempfile, gigi.probes as gp
>>> pool = gp.resource("doc.pool", capacity=4, unit="slots", sharing="pool")
>>> with tempfile.TemporaryDirectory() as d:
...     _ = gp.enable(d)
...     with gp.task("request-1"):
...         with pool.wait():
...             pass
...         pool.acquire(object=3)
...         pool.use(object=3)
...         pool.release(object=3)
...     gp.disable().written["doc.pool"]
4
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from gigi.errors import ProbeError
from gigi.probes import _state
from gigi.probes._records import RID_SHIFT
from gigi.probes._resource import Resource, declare, declared, set_recording
from gigi.probes._state import ProbeConfig, Stats
from gigi.probes._tasks import TaskInfo, current_task, new_task_id
from gigi.schema import KIND_NAMES, Kind

__all__ = [
    "ProbeConfig",
    "Resource",
    "Stats",
    "Task",
    "current_task_id",
    "disable",
    "enable",
    "flush",
    "is_enabled",
    "resource",
    "site",
    "stats",
    "task",
    "wrap",
]

T = TypeVar("T")
_lock = threading.Lock()


def resource(
    name: str,
    *,
    capacity: int | None = None,
    unit: str | None = None,
    sharing: Literal["exclusive", "shared", "pool", "log"] | None = None,
    sample_every: int = 1,
) -> Resource:
    """Declare the resource class ``name`` (dotted: ``innodb.buffer_pool``) and return it.

    ``capacity`` is the most units it can hold, ``unit`` what they are (pages, bytes, slots),
    ``sharing`` how it is handed out. With ``sample_every=N`` one event in N is kept (keyed by
    object, or by task for object 0, so a hold's events are kept or skipped together); the trace
    says N. Declaring the same name again returns the same resource.
    """
    return declare(name, capacity=capacity, unit=unit, sharing=sharing, sample_every=sample_every)


_site_lock = threading.Lock()
_sites: dict[tuple, int] = {}


def site(
    file: str,
    line: int,
    function: str | None = None,
    kind: Kind | str | None = None,
    resource: str | None = None,
) -> int:
    """Register a code location and return its site id, for the ``site=`` of a probe call."""
    if isinstance(kind, str):
        if kind.upper() not in KIND_NAMES:
            raise ProbeError(f"site kind {kind!r} is not one of {', '.join(KIND_NAMES)}")
        kind = Kind[kind.upper()]
    key = (file, int(line), function, None if kind is None else int(kind), resource)
    with _site_lock:
        if key in _sites:
            return _sites[key]
        sid = len(_sites)
        _sites[key] = sid
    row = dict(zip(("file", "line", "function", "kind", "resource"), key, strict=True))
    row.update(site=sid, origin="manual", verified=False)
    _site_rows.append(row)
    rec = _state._rec
    if rec is not None:
        with rec.lock:
            rec.sites.append(row)
    return sid


_site_rows: list[dict] = []


class Task:
    """A logical task (request, transaction, background job) that events belong to.

    Use as a context manager; tasks started inside it record it as their parent.
    """

    __slots__ = ("id", "name", "kind", "parent", "_token")

    def __init__(self, name: str | None, kind: str | None, task_id: int | None) -> None:
        if kind not in (None, "foreground", "background"):
            raise ProbeError(f"task kind must be 'foreground' or 'background', got {kind!r}")
        self.id = task_id if task_id is not None else new_task_id()
        self.name, self.kind = name, kind
        self.parent = current_task_id()
        self._token: contextvars.Token | None = None

    def start(self) -> Task:
        rec = _state._rec
        if rec is not None:
            rec.task_started(
                TaskInfo(self.id, self.name, self.kind, self.parent, time.monotonic_ns())
            )
        self._token = current_task.set(self.id)
        return self

    def end(self) -> None:
        rec = _state._rec
        if rec is not None:
            rec.task_ended(self.id, time.monotonic_ns())
        if self._token is not None:
            try:
                current_task.reset(self._token)
            except ValueError:  # ended in another context than it started in
                current_task.set(self.parent or 0)
            self._token = None

    def __enter__(self) -> Task:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.end()

    def __repr__(self) -> str:
        return f"Task({self.id}, {self.name!r})"


def task(
    name: str | None = None,
    *,
    kind: Literal["foreground", "background"] = "foreground",
    task_id: int | None = None,
) -> Task:
    """A new task: ``with gigi.probes.task("txn 42"):`` or ``t = task(...).start(); t.end()``."""
    return Task(name, kind, task_id)


def current_task_id() -> int | None:
    """The id of the task the caller runs in, or None outside any explicit task."""
    t = current_task.get()
    if t:
        return t
    ring = getattr(_state.local, "ring", None)
    return ring.implicit_task if ring is not None else None


def wrap(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to a copy of the caller's context, so it runs in the caller's task on any
    thread: ``executor.submit(gigi.probes.wrap(work), x)``."""
    ctx = contextvars.copy_context()

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return ctx.copy().run(fn, *args, **kwargs)

    return run


def enable(
    trace_dir: str | os.PathLike | None = None,
    *,
    interval: float = 0.5,
    buffer_events: int = 65536,
    policy: Literal["drop", "block"] = "drop",
    backlog_events: int = 1 << 18,
    trace_id: str | None = None,
) -> ProbeConfig:
    """Start recording into ``trace_dir`` (default: ``$GIGI_TRACE``); see ``ProbeConfig``."""
    trace_dir = trace_dir or os.environ.get("GIGI_TRACE")
    if not trace_dir:
        raise ProbeError("no trace directory: pass one to enable() or set GIGI_TRACE")
    config = ProbeConfig(
        Path(trace_dir),
        interval=interval,
        buffer_events=buffer_events,
        policy=policy,
        backlog_events=backlog_events,
        trace_id=trace_id,
    )
    with _lock:
        if _state._rec is not None:
            raise ProbeError(f"already recording into {_state._rec.config.trace_dir}")
        rec = _state.Recorder(config)
        rec.sites.extend(_site_rows)
        _state._rec = rec
        rec.start()
        set_recording(True)
    return config


def is_enabled() -> bool:
    return _state._rec is not None


def flush() -> None:
    """Write everything recorded so far now, instead of at the next interval."""
    rec = _state._rec
    if rec is not None:
        with _lock:
            rec.flush()


def stats() -> Stats:
    """Events written and dropped so far in this recording, by resource name."""
    rec = _state._rec
    return _stats(rec) if rec is not None else Stats()


def _stats(rec: _state.Recorder) -> Stats:
    names = [i.name for i in declared()]
    out = Stats({n: 0 for n in names}, {n: 0 for n in names})
    for code, n in rec.written.items():
        out.written[names[code >> RID_SHIFT]] += n
    for code, n in rec.drops().items():
        out.dropped[names[code >> RID_SHIFT]] += n
    if rec.write_error is not None:
        out.write_error = str(rec.write_error)
    return out


def disable() -> Stats:
    """Stop recording, write everything still buffered, and say what was written and lost."""
    with _lock:
        rec = _state._rec
        if rec is None:
            return Stats()
        set_recording(False)
        rec.stop()
        _state._rec = None
    return _stats(rec)


def _at_exit() -> None:
    if _state._rec is not None:
        disable()


def _after_fork_in_child() -> None:
    # The parent's writer thread does not exist here: start a recorder of our own (new pid,
    # new segment names) into the same trace, and forget the parent's buffered records.
    rec = _state._rec
    if rec is None:
        return
    _state._rec = None
    set_recording(False)
    cfg = rec.config
    enable(
        cfg.trace_dir,
        interval=cfg.interval,
        buffer_events=cfg.buffer_events,
        policy=cfg.policy,
        backlog_events=cfg.backlog_events,
        trace_id=rec.trace_id,
    )


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)

if os.environ.get("GIGI_TRACE"):
    enable()
