"""Traces generated independently of gigi's scenario suite, and events lost from them.

A discrete-event simulation (``sim``) of the shapes the diagnosis must recognise
(``shapes``), each with its ground truth, written straight to trace format v1 with
``gigi.schema.TraceWriter``. Nothing here sleeps or records through gigi's probes; the rates,
sizes, task counts and durations come from each shape's seed.

    from independent import SHAPES, simulate, write_trace
    tables = simulate("pool_hog", seed=3)
    write_trace(tables, "trace-dir", lose=0.3, lose_seed=1)   # 30% of events lost, uncounted
"""

from __future__ import annotations

import random
from pathlib import Path

from .shapes import SHAPES, Shape, Truth
from .sim import Sim

WRITER = "independent-sim 1"


def simulate(shape: str, seed: int) -> dict[str, list[dict]]:
    """Run one shape with one seed; the four tables of its trace, events in time order."""
    spec = SHAPES[shape]
    rng = random.Random(f"{shape}:{seed}")
    sim = Sim(rng.randrange(2**32))
    end = spec.build(sim, rng)
    sim.run(end + sim.s(0.3))
    return sim.tables()


def lose_events(events: list[dict], share: float, seed: int) -> list[dict]:
    """``events`` with ``share`` of them (rounded) removed uniformly at random, the rest in
    their order. Nothing counts them: the trace's ``dropped`` stays 0."""
    if share <= 0:
        return list(events)
    gone = set(random.Random(seed).sample(range(len(events)), round(share * len(events))))
    return [e for i, e in enumerate(events) if i not in gone]


def write_trace(
    tables: dict[str, list[dict]],
    out: str | Path,
    *,
    lose: float = 0.0,
    lose_seed: int = 0,
    trace_id: str | None = None,
    segment_events: int = 4096,
) -> int:
    """Write ``tables`` as a trace directory ``out`` (segments of ``segment_events`` events);
    return the number of events written."""
    from gigi.schema import TraceWriter

    events = lose_events(tables["events"], lose, lose_seed)
    meta = {"gigi.trace_id": trace_id} if trace_id else None
    w = TraceWriter(out, WRITER, metadata=meta)
    for i in range(0, len(events), segment_events):
        w.extend("events", events[i : i + segment_events])
        w.flush()
    for name in ("tasks", "resources", "sites"):
        w.extend(name, tables[name])
    w.flush()
    return len(events)


__all__ = ["SHAPES", "Shape", "Truth", "WRITER", "lose_events", "simulate", "write_trace"]
