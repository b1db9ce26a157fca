"""Task identity: which logical task (request, transaction, job) an event belongs to.

The current task lives in a ``contextvars.ContextVar``, so asyncio tasks inherit it and work
run through ``contextvars.copy_context().run`` (see ``gigi.probes.wrap``) keeps it on another
thread. Threads that never enter a task get one of their own, named after the thread.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
from dataclasses import dataclass

from gigi.probes._records import IMPLICIT_TASK

current_task: contextvars.ContextVar[int] = contextvars.ContextVar(
    "gigi_task", default=IMPLICIT_TASK
)

_counter = itertools.count(1)
_counter_lock = threading.Lock()
_pid = os.getpid()


def new_task_id() -> int:
    """A task id unique across the processes of one host: pid in the high 32 bits."""
    with _counter_lock:
        n = next(_counter)
    return (_pid << 32) | n


def _reset_after_fork() -> None:
    global _counter, _pid
    _counter = itertools.count(1)
    _pid = os.getpid()


os.register_at_fork(after_in_child=_reset_after_fork)


@dataclass
class TaskInfo:
    task: int
    name: str | None
    kind: str | None
    parent: int | None
    start: int | None
    end: int | None = None
