"""A first-come-first-served queue in front of a resource of some capacity, simulated (no
sleeping) and written as a trace: every wait is spent behind tasks that hold the resource, so
the simulation's own sum of waits is what the diagnosis must call blamed wait."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path

from gigi.schema import TraceWriter

MS = 1_000_000


@dataclass
class Request:
    name: str
    arrival: int  # ns
    hold: int  # ns
    obj: int = 0  # object taken; 0 for any unit of the resource
    parent: int | None = None  # index into Simulation.sessions
    keep: bool = False  # never released (a leak): the task ends while still holding it


@dataclass
class Simulation:
    resource: str
    capacity: int
    sharing: str | None
    requests: list[Request]
    sessions: list[str] = field(default_factory=list)
    declare_capacity: bool = True

    def run(self) -> tuple[list[tuple[int, int, int, int]], int]:
        """(start, end, wait, unit) per request in FCFS order of arrival, and the total wait."""
        free_at = [(0, unit) for unit in range(1, self.capacity + 1)]  # (frees at, unit), a heap
        heapq.heapify(free_at)
        out, total = [], 0
        for r in self.requests:
            unit_free, unit = heapq.heappop(free_at)
            start = max(r.arrival, unit_free)
            end = start + r.hold
            heapq.heappush(free_at, (1 << 62 if r.keep else end, unit))
            out.append((start, end, start - r.arrival, unit))
            total += start - r.arrival
        return out, total

    def write(self, trace: Path) -> int:
        """Write the trace into ``trace``; returns the simulated total wait, ns."""
        self.requests.sort(key=lambda r: r.arrival)
        timing, total = self.run()
        w = TraceWriter(trace, "gigi-tests queueing")
        w.add(
            "resources",
            {
                "resource": self.resource,
                "capacity": self.capacity if self.declare_capacity else None,
                "unit": "units",
                "sharing": self.sharing,
            },
        )
        base = 10_000
        end_of_all = max(end for _, end, _, _ in timing) + MS
        for i, name in enumerate(self.sessions):
            w.add(
                "tasks",
                {
                    "task": base + i,
                    "name": name,
                    "kind": "foreground",
                    "start": 0,
                    "end": end_of_all,
                },
            )
        for i, (r, (start, end, wait, unit)) in enumerate(zip(self.requests, timing, strict=True)):
            task = 1 + i
            thread = 100 + (r.parent if r.parent is not None else i % 8)
            w.add(
                "tasks",
                {
                    "task": task,
                    "name": r.name,
                    "kind": "foreground",
                    "parent": None if r.parent is None else base + r.parent,
                    "start": r.arrival,
                    "end": end + 1000,
                },
            )
            obj = r.obj or unit  # the lock's object, or the pool's unit it got
            common = {"resource": self.resource, "task": task, "thread": thread, "amount": 1}
            if wait > 0:
                w.add(
                    "events", {**common, "ts": r.arrival, "kind": 0, "dur": wait, "object": r.obj}
                )
            w.add("events", {**common, "ts": start, "kind": 1, "object": obj})
            w.add("events", {**common, "ts": start + r.hold // 2, "kind": 2, "object": obj})
            if not r.keep:
                w.add("events", {**common, "ts": end, "kind": 3, "object": obj})
        w.flush()
        return total
