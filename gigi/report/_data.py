"""What the page shows, read from the diagnosis's connection: the timeline series and the
culprits' holds (the SQL is in this folder's .sql files), task names and resource facts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).parent
# the timeline's series, in panel order: column of timeline.sql -> what the page calls it
SERIES = {
    "outstanding": "outstanding",
    "waiting": "tasks waiting",
    "acquire_rate_per_s": "acquires / s",
}


@cache
def sql(name: str) -> str:
    return (HERE / f"{name}.sql").read_text()


@dataclass
class Timeline:
    edges: list[int]  # window bounds, ns: one more than the values of a series
    values: dict[str, list[float]]  # series name -> one value per window


def timelines(con, windows: int) -> dict[str, Timeline]:
    """Per resource with events, its series over ``windows`` windows."""
    out: dict[str, Timeline] = {}
    rows = con.execute(sql("timeline"), {"windows": windows}).fetchall()
    for resource, _, w0, w1, *values in rows:
        t = out.get(resource)
        if t is None:
            t = out[resource] = Timeline([w0], {name: [] for name in SERIES})
        t.edges.append(w1)
        for name, v in zip(SERIES, values, strict=True):
            t.values[name].append(float(v))
    return out


def culprit_holds(con, resource: str, tasks: list[int], gap_ns: int) -> list[tuple]:
    """(task, start_ts, end_ts, holds) per merged interval of the tasks' holds of resource."""
    if not tasks:
        return []
    return con.execute(
        sql("culprit_holds"), {"resource": resource, "tasks": tasks, "gap_ns": gap_ns}
    ).fetchall()


def resource_facts(con) -> dict[str, tuple]:
    """resource -> (capacity, unit, sharing)."""
    rows = con.execute("SELECT resource, capacity, unit, sharing FROM resources").fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def busiest(con, most: int) -> list[str]:
    """Resources by time waited, then by ACQUIREs: the ones a healthy page plots."""
    rows = con.execute(
        "SELECT resource FROM metrics_resources ORDER BY wait_ns DESC, acquires DESC, resource "
        "LIMIT ?",
        [most],
    ).fetchall()
    return [r for (r,) in rows]


def time_range(con) -> tuple[int, int]:
    start, end = con.execute('SELECT start, "end" FROM trace_info').fetchone()
    return int(start), int(end)
