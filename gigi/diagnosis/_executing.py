"""Beside a finding, what its culprits were executing: perf samples of the culprit tasks'
threads while the victims waited (or while the culprits held the resource), by function."""

from __future__ import annotations

from pathlib import Path

_SQL = (Path(__file__).parent / "executing.sql").read_text()
# Bases tried in order: the victims' waits on the finding's resource, then the culprits' holds.
BASES = ("victim_waits", "culprit_holds")
TOP_FUNCTIONS = 5
TOP_CULPRITS = 3


def has_samples(con) -> bool:
    return con.sql("SELECT count(*) FROM samples").fetchall()[0][0] > 0


def executing(con, resource: str, culprits: list[int], victims: list[int]) -> dict:
    """The culprits' samples by perf event and innermost function, with shares.

    ``{"basis", "tasks", "events": [{"event", "samples", "weight", "tasks", "threads",
    "functions": [{"function", "share", "samples", "callers"}]}]}``; ``basis`` is null and
    ``events`` empty when no sample of the culprits falls in either window.
    """
    tasks = culprits[:TOP_CULPRITS]
    out: dict = {"basis": None, "tasks": tasks, "events": []}
    if not tasks:
        return out
    for basis in BASES:
        rows = con.execute(
            _SQL,
            {"resource": resource, "culprits": tasks, "victims": victims, "basis": basis},
        ).fetchall()
        if rows:
            out["basis"] = basis
            out["events"] = _by_event(rows)
            return out
    return out


def _by_event(rows: list[tuple]) -> list[dict]:
    events: dict[str | None, dict] = {}
    for event, function, samples, weight, callers, tasks, threads in rows:
        e = events.setdefault(
            event,
            {
                "event": event,
                "samples": 0,
                "weight": 0,
                "tasks": set(),
                "threads": set(),
                "functions": [],
            },
        )
        e["samples"] += samples
        e["weight"] += weight
        e["tasks"].update(tasks)
        e["threads"].update(threads)
        e["functions"].append(
            {"function": function, "weight": weight, "samples": samples, "callers": callers or []}
        )
    ordered = sorted(events.values(), key=lambda e: -e["samples"])
    for e in ordered:
        total = e["weight"] or 1
        e["functions"].sort(key=lambda f: (-f["weight"], f["function"]))
        e["functions"] = [
            {
                "function": f["function"],
                "share": round(f["weight"] / total, 4),
                "samples": f["samples"],
                "callers": f["callers"],
            }
            for f in e["functions"][:TOP_FUNCTIONS]
        ]
        e["tasks"], e["threads"] = sorted(e["tasks"]), sorted(e["threads"])
    return ordered
