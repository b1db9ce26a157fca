"""A small discrete-event simulator that records WAIT / ACQUIRE / USE / RELEASE events.

Written apart from gigi's probes and scenario suite: nothing sleeps, time is simulated in
nanoseconds, and the events are kept as rows of trace format v1 (``ts``, ``kind``,
``resource``, ``task``, ``thread``, ``amount``, ``dur``, ``object``, ``site``) in the order
they happened, with the ``tasks``, ``resources`` and ``sites`` tables beside them.

A process is a generator. It yields what it waits for and gets the result back::

    def client(sim, thread):
        while sim.now < end:
            task = sim.begin("GET /x", thread)
            obj = yield pool.acquire(task)      # may WAIT; returns the object granted
            pool.use(task, obj, dur=sim.ms(2))
            yield sim.sleep(sim.ms(2))           # holding it
            pool.release(task, obj)
            sim.end(task)
            yield sim.sleep(sim.ms(5))           # think time

A WAIT is recorded when the request cannot be granted at once, with the time it began; its
``dur`` is filled in when it is granted (null when it still waits at the end of the run).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass

WAIT, ACQUIRE, USE, RELEASE = 0, 1, 2, 3
_KIND_NAMES = ("WAIT", "ACQUIRE", "USE", "RELEASE")


@dataclass
class Task:
    id: int
    name: str
    thread: int
    row: dict


class _Sleep:
    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def start(self, sim: Sim, proc: _Proc) -> None:
        sim._wake(proc, sim.now + max(0, self.ns), None)


class _Proc:
    __slots__ = ("gen",)

    def __init__(self, gen: Generator) -> None:
        self.gen = gen


class Sim:
    """The clock, the agenda of processes, and the recorded tables."""

    def __init__(self, seed: int, *, clock_base: int | None = None) -> None:
        self.rng = random.Random(seed)
        # a monotonic clock does not start at zero
        self.base = clock_base if clock_base is not None else self.rng.randrange(10**12, 10**13)
        self.now = self.base
        self._agenda: list[tuple[int, int, _Proc, object]] = []
        self._order = itertools.count()
        self._task_ids = itertools.count(self.rng.randrange(1, 1000) * 1000)
        self.events: list[dict] = []
        self.tasks: dict[int, Task] = {}
        self.resources: dict[str, Resource] = {}
        self.sites: dict[tuple[str, int], int] = {}
        self._site_rows: list[dict] = []
        self._threads = itertools.count(self.rng.randrange(2_000, 60_000), 7)

    # --- time ------------------------------------------------------------------------------
    @staticmethod
    def ms(x: float) -> int:
        return int(x * 1_000_000)

    @staticmethod
    def s(x: float) -> int:
        return int(x * 1_000_000_000)

    def at(self, seconds: float) -> int:
        """The clock reading ``seconds`` after the run started."""
        return self.base + self.s(seconds)

    def sleep(self, ns: int) -> _Sleep:
        return _Sleep(int(ns))

    def until(self, ts: int) -> _Sleep:
        return _Sleep(int(ts) - self.now)

    def exp_ns(self, mean_ns: float) -> int:
        return max(1, int(self.rng.expovariate(1.0 / max(mean_ns, 1.0))))

    # --- processes -------------------------------------------------------------------------
    def spawn(self, gen: Generator, at: int | None = None) -> None:
        self._wake(_Proc(gen), self.now if at is None else at, None)

    def _wake(self, proc: _Proc, ts: int, value: object) -> None:
        heapq.heappush(self._agenda, (ts, next(self._order), proc, value))

    def run(self, until: int) -> None:
        """Run processes until the agenda is empty or the clock passes ``until``; what still
        waits then stays waiting (its WAIT's ``dur`` null), what is held stays held."""
        while self._agenda and self._agenda[0][0] <= until:
            ts, _, proc, value = heapq.heappop(self._agenda)
            self.now = ts
            try:
                cmd = proc.gen.send(value)
            except StopIteration:
                continue
            cmd.start(self, proc)

    def thread(self) -> int:
        """A new OS thread id."""
        return next(self._threads)

    # --- tasks -----------------------------------------------------------------------------
    def begin(
        self, name: str, thread: int, kind: str = "foreground", *, parent: Task | None = None
    ) -> Task:
        tid = next(self._task_ids)
        row = {
            "task": tid,
            "name": name,
            "kind": kind,
            "parent": parent.id if parent else None,
            "start": self.now,
            "end": None,
        }
        task = Task(tid, name, thread, row)
        self.tasks[tid] = task
        return task

    def end(self, task: Task) -> None:
        task.row["end"] = self.now

    def rename(self, task: Task, name: str) -> None:
        task.name = name
        task.row["name"] = name

    # --- recording -------------------------------------------------------------------------
    def site(self, resource: str, kind: int, function: str) -> int:
        key = (resource, kind)
        if key not in self.sites:
            sid = len(self._site_rows) + 1
            self.sites[key] = sid
            self._site_rows.append(
                {
                    "site": sid,
                    "file": f"src/{resource.split('.')[0]}/{resource.split('.')[-1]}.c",
                    "line": 40 + 17 * sid,
                    "function": function,
                    "kind": kind,
                    "resource": resource,
                    "origin": "manual",
                    "verified": True,
                }
            )
        return self.sites[key]

    def emit(
        self,
        kind: int,
        res: Resource,
        task: Task,
        obj: int = 0,
        amount: int = 1,
        dur: int | None = 0,
    ) -> dict:
        row = {
            "ts": self.now,
            "kind": kind,
            "resource": res.name,
            "task": task.id,
            "thread": task.thread,
            "amount": int(amount),
            "dur": dur,
            "object": int(obj),
            "site": self.site(res.name, kind, f"{res.name.split('.')[-1]}_{_KIND_NAMES[kind]}"),
        }
        self.events.append(row)
        return row

    def tables(self) -> dict[str, list[dict]]:
        """The four tables of the trace, events in the order they happened."""
        return {
            "events": self.events,
            "tasks": [t.row for t in self.tasks.values()],
            "resources": [r.row() for r in self.resources.values()],
            "sites": list(self._site_rows),
        }


class Resource:
    """A resource class as declared in the ``resources`` table."""

    def __init__(
        self,
        sim: Sim,
        name: str,
        *,
        capacity: int | None = None,
        unit: str | None = None,
        sharing: str | None = None,
    ) -> None:
        self.sim = sim
        self.name = name
        self.capacity = capacity
        self.unit = unit
        self.sharing = sharing
        sim.resources[name] = self

    def row(self) -> dict:
        # events lost by the loss model are NOT counted: dropped stays 0
        return {
            "resource": self.name,
            "capacity": self.capacity,
            "unit": self.unit,
            "sharing": self.sharing,
            "dropped": 0,
            "sample_every": 1,
        }

    def use(self, task: Task, obj: int = 0, amount: int = 1, dur: int = 0) -> None:
        self.sim.emit(USE, self, task, obj, amount, dur)

    def _wait(self, task: Task, obj: int, amount: int) -> dict:
        # dur stays null (still waiting when the trace ended) unless the wait is granted
        return self.sim.emit(WAIT, self, task, obj, amount, None)

    def _granted(self, row: dict | None) -> None:
        if row is not None:
            row["dur"] = self.sim.now - row["ts"]


class _Request:
    __slots__ = ("res", "task", "obj", "amount")

    def __init__(self, res, task: Task, obj: int, amount: int) -> None:
        self.res, self.task, self.obj, self.amount = res, task, obj, amount

    def start(self, sim: Sim, proc: _Proc) -> None:
        self.res._request(self, proc)


class Lock(Resource):
    """Exclusive locks, one per object, granted first come first served."""

    def __init__(self, sim: Sim, name: str, *, declare_capacity: bool = True) -> None:
        super().__init__(
            sim, name, capacity=1 if declare_capacity else None, unit="locks", sharing="exclusive"
        )
        self.holder: dict[int, Task] = {}
        self.queue: dict[int, deque] = {}

    def acquire(self, task: Task, obj: int) -> _Request:
        return _Request(self, task, obj, 1)

    def _request(self, req: _Request, proc: _Proc) -> None:
        if req.obj not in self.holder:
            self.holder[req.obj] = req.task
            self.sim.emit(ACQUIRE, self, req.task, req.obj)
            self.sim._wake(proc, self.sim.now, req.obj)
            return
        row = self._wait(req.task, req.obj, 1)
        self.queue.setdefault(req.obj, deque()).append((req, proc, row))

    def release(self, task: Task, obj: int) -> None:
        self.sim.emit(RELEASE, self, task, obj)
        del self.holder[obj]
        q = self.queue.get(obj)
        if q:
            req, proc, row = q.popleft()
            self.holder[obj] = req.task
            self._granted(row)
            self.sim.emit(ACQUIRE, self, req.task, obj)
            self.sim._wake(proc, self.sim.now, obj)


class Pool(Resource):
    """``capacity`` units handed out first come first served. With ``objects`` the units are
    numbered things (connections, slots): each ACQUIRE takes one and names it, a waiter waits
    for any of them (object 0). Without, units are counted (cells, pages): object 0."""

    def __init__(
        self, sim: Sim, name: str, capacity: int, unit: str, *, objects: list[int] | None = None
    ) -> None:
        super().__init__(sim, name, capacity=capacity, unit=unit, sharing="pool")
        self.free = capacity
        self.free_objects = deque(objects) if objects is not None else None
        self.queue: deque = deque()

    def acquire(self, task: Task, amount: int = 1) -> _Request:
        return _Request(self, task, 0, 1 if self.free_objects is not None else amount)

    def _fits(self, amount: int) -> bool:
        return self.free >= amount and not (self.free_objects is not None and not self.free_objects)

    def _grant(self, req: _Request, proc: _Proc, row: dict | None) -> None:
        self.free -= req.amount
        obj = self.free_objects.popleft() if self.free_objects is not None else 0
        self._granted(row)
        self.sim.emit(ACQUIRE, self, req.task, obj, req.amount)
        self.sim._wake(proc, self.sim.now, obj)

    def _request(self, req: _Request, proc: _Proc) -> None:
        if not self.queue and self._fits(req.amount):
            self._grant(req, proc, None)
            return
        row = self._wait(req.task, 0, req.amount)
        self.queue.append((req, proc, row))

    def release(self, task: Task, obj: int = 0, amount: int = 1) -> None:
        self.sim.emit(RELEASE, self, task, obj, amount)
        self.free += amount
        if self.free_objects is not None and obj:
            self.free_objects.append(obj)
        while self.queue and self._fits(self.queue[0][0].amount):
            self._grant(*self.queue.popleft())


class Log(Resource):
    """Records appended by tasks and truncated later (by anyone): no capacity, no waits."""

    def __init__(self, sim: Sim, name: str, unit: str = "records") -> None:
        super().__init__(sim, name, unit=unit, sharing="log")
        self.level = 0

    def append(self, task: Task, amount: int) -> None:
        self.sim.emit(ACQUIRE, self, task, 0, amount)
        self.sim.emit(USE, self, task, 0, amount)  # the change is written into them
        self.level += amount

    def truncate(self, task: Task, amount: int) -> None:
        if amount > 0:
            self.sim.emit(RELEASE, self, task, 0, amount)
            self.level -= amount
