"""A trace and its diagnosis as a Chrome JSON trace (the trace event format), which
ui.perfetto.dev, the Perfetto trace processor and chrome://tracing open.

What goes where:

- Each task with waits or holds gets a thread track named ``NAME [task ID]``: waits and holds
  are complete slices ("X") on it, named ``wait RESOURCE`` and ``hold RESOURCE`` (category
  ``wait`` or ``hold``; args: task, resource, object, amount, open, seq). Slices on one track
  must nest, and a task's waits and holds may overlap without nesting (hand-over-hand locks),
  so a task's slices are packed first-fit into as few tracks as keep them nested; the second
  and later are named ``NAME [task ID] (2)``, ....
- Tasks are grouped into processes: a task tree (tasks joined by ``parent``) with more than
  one task on tracks is a process named by its root; other tasks go to the processes
  ``foreground tasks``, ``background tasks`` or ``tasks``.
- Process ``resources`` holds two counter tracks ("C") per resource: ``RESOURCE outstanding``
  (units held, sampled at every time an ACQUIRE or RELEASE happened: the ``outstanding``
  view's level after the last event at that time) and ``RESOURCE acquires/s`` (ACQUIREs per
  second over windows of ``rate_window_ns``, one sample at each window's start).
- Process ``findings`` holds each finding of the diagnosis (the same as ``gigi-query
  diagnose``'s, at the same threshold) as an async slice ("b"/"e", category ``finding``)
  named ``#RANK FAILURE_MODE on RESOURCE`` over the culprits' holds of the resource (else the
  waits for it, else the whole trace), its args the summary, score and culprits.

Timestamps are µs, as the format has them, from the trace's first event (``otherData.origin_ns``
gives that event's ns), with ns kept as three decimals. There is no ``displayTimeUnit``: some
versions of the trace processor read it as the unit of ``ts``. Track ids: processes are numbered
from 1 and threads after the last process, since the trace processor names threads by tid alone
and takes a thread whose tid is a pid for that process's main thread.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from gigi.errors import GigiError

HERE = Path(__file__).parent
PID_RESOURCES, PID_FINDINGS, FIRST_TASK_PID = 1, 2, 3


@dataclass
class PerfettoConfig:
    """How ``export_perfetto`` draws the trace."""

    # window of the acquires/s counters, ns; None: the trace's length / 200 rounded up to
    # 1, 2 or 5 times a power of ten (at least 1 µs). Smaller windows, more counter samples.
    rate_window_ns: int | None = None
    # findings scoring at least this are marked, as ``diagnose --threshold``
    threshold: float = 0.5
    # extra folders of .sql detectors, as ``diagnose --detectors``
    detectors: list[Path] = field(default_factory=list)
    # detector parameters, as ``diagnose --param``
    params: dict[str, float] = field(default_factory=dict)


@dataclass
class ExportSummary:
    """What ``export_perfetto`` wrote."""

    path: str
    trace_events: int = 0  # JSON trace events of every phase
    wait_slices: int = 0
    hold_slices: int = 0
    task_tracks: int = 0  # thread tracks of tasks (lanes counted)
    processes: int = 0  # processes of tasks
    outstanding_samples: int = 0
    rate_samples: int = 0
    findings: int = 0
    rate_window_ns: int = 0
    bytes: int = 0


@cache
def _sql(name: str) -> str:
    return (HERE / f"{name}.sql").read_text()


def rate_window(span_ns: int) -> int:
    """The default acquires/s window for a trace ``span_ns`` long.

    >>> rate_window(2_000_000_000), rate_window(7_300_000_000), rate_window(10)
    (10000000, 50000000, 1000)
    """
    target = max(span_ns / 200, 1000)
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= target:
                return step * scale
        scale *= 10


def _lanes(slices: list[tuple]) -> list[int]:
    """First-fit lane of each slice (sorted by start, longest first) such that the slices of a
    lane nest: each lies inside or after the ones before it."""
    stacks: list[list[int]] = []  # per lane, the ends of the open enclosing slices
    out = []
    for start, end in slices:
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                out.append(lane)
                break
        else:
            stacks.append([end])
            out.append(len(stacks) - 1)
    return out


def _us(ns: int, origin: int) -> float:
    return (ns - origin) / 1000


class _Writer:
    """Trace events, one a line, into a JSON object's ``traceEvents``."""

    def __init__(self, f) -> None:
        self.f = f
        self.count = 0

    def __call__(self, event: dict) -> None:
        self.f.write(",\n" if self.count else "\n")
        self.f.write(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
        self.count += 1

    def meta(self, kind: str, pid: int, tid: int | None, **args) -> None:
        event = {"ph": "M", "name": kind, "pid": pid, "args": args}
        if tid is not None:
            event["tid"] = tid
        self(event)


def export_perfetto(
    target,
    out: str | os.PathLike,
    config: PerfettoConfig | None = None,
    *,
    trace: str | None = None,
) -> ExportSummary:
    """Write the trace ``target`` (a store, store entry or trace directory) and its diagnosis
    to ``out`` as a Chrome JSON trace; return what was written. The file is written under a
    temporary name and renamed: a failed export leaves no partial file."""
    from gigi.diagnosis import diagnose
    from gigi.ingest import StoreEntry, locate

    config = config or PerfettoConfig()
    entry = target if isinstance(target, StoreEntry) else locate(target, trace)
    d = diagnose(
        entry,
        detectors=list(config.detectors),
        threshold=config.threshold,
        params=dict(config.params),
    )
    con = d.con
    m = entry.manifest
    origin = m.start or 0
    end = m.end if m.end is not None else origin
    window = config.rate_window_ns or rate_window(end - origin)
    if window <= 0:
        raise GigiError(f"rate window {window} ns: expected a positive number of ns")
    out = Path(out)
    summary = ExportSummary(str(out), rate_window_ns=window)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            other = {
                "gigi.trace": m.trace_id,
                "origin_ns": origin,
                "rate_window_ns": window,
                "events": m.events,
                "findings": len(d.findings),
            }
            f.write('{"traceEvents":[')
            w = _Writer(f)
            _resources(w, con, origin, window, summary)
            _findings(w, con, d.findings, origin, summary)
            _tasks(w, con, origin, summary)
            f.write('\n],"otherData":')
            f.write(json.dumps(other))
            f.write("}\n")
        summary.trace_events = w.count
        summary.bytes = tmp.stat().st_size
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return summary


def _resources(w: _Writer, con, origin: int, window: int, summary: ExportSummary) -> None:
    w.meta("process_name", PID_RESOURCES, None, name="resources")
    w.meta("process_sort_index", PID_RESOURCES, None, sort_index=0)
    for resource, ts, level in con.execute(_sql("outstanding")).fetchall():
        w(
            {
                "ph": "C",
                "name": resource,
                "pid": PID_RESOURCES,
                "ts": _us(ts, origin),
                "args": {"outstanding": level},
            }
        )
        summary.outstanding_samples += 1
    rows = con.execute(_sql("acquire_rate"), {"window_ns": window}).fetchall()
    for resource, ts, _, per_second in rows:
        w(
            {
                "ph": "C",
                "name": resource,
                "pid": PID_RESOURCES,
                "ts": _us(ts, origin),
                "args": {"acquires/s": per_second},
            }
        )
        summary.rate_samples += 1


def _findings(w: _Writer, con, findings, origin: int, summary: ExportSummary) -> None:
    w.meta("process_name", PID_FINDINGS, None, name="findings")
    w.meta("process_sort_index", PID_FINDINGS, None, sort_index=1)
    w.meta("thread_name", PID_FINDINGS, PID_FINDINGS, name="findings")
    names = dict(con.execute("SELECT task, name FROM tasks").fetchall())
    for f in findings:
        start, stop, basis = con.execute(
            _sql("finding_interval"), {"resource": f.resource, "tasks": f.culprit_tasks}
        ).fetchall()[0]
        common = {
            "cat": "finding",
            "id": f"finding-{f.rank}",
            "name": f"#{f.rank} {f.failure_mode} on {f.resource}",
            "pid": PID_FINDINGS,
            "tid": PID_FINDINGS,
        }
        args = {
            "summary": f.summary,
            "rank": f.rank,
            "failure_mode": f.failure_mode,
            "resource": f.resource,
            "score": round(f.score, 4),
            "culprit_tasks": [str(t) for t in f.culprit_tasks],
            "culprits": [names.get(t) or f"task {t}" for t in f.culprit_tasks],
            "victims": len(f.victim_tasks),
            "caused_by": f.caused_by,
            "interval": basis,
        }
        w({**common, "ph": "b", "ts": _us(start, origin), "args": args})
        w({**common, "ph": "e", "ts": _us(stop, origin)})
        summary.findings += 1


def _roots(tasks: dict[int, tuple]) -> dict[int, int]:
    """Each task's root: its farthest ancestor in the tasks table."""
    roots: dict[int, int] = {}
    for task in tasks:
        chain, t = [], task
        while t not in roots and t in tasks and t not in chain:
            chain.append(t)
            parent = tasks[t][2]
            if parent is None or parent not in tasks:
                break
            t = parent
        root = roots.get(t, chain[-1] if chain else t)
        for c in chain:
            roots[c] = root
    return roots


def _tasks(w: _Writer, con, origin: int, summary: ExportSummary) -> None:
    tasks = {
        t: (name, kind, parent)
        for t, name, kind, parent in con.execute(
            "SELECT task, name, kind, parent FROM tasks"
        ).fetchall()
    }
    roots = _roots(tasks)
    rows = con.execute(_sql("slices")).fetchall()
    by_task: dict[int, list[tuple]] = {}
    for row in rows:
        by_task.setdefault(row[0], []).append(row)
    tree_size: dict[int, int] = {}
    for task in by_task:
        root = roots.get(task, task)
        tree_size[root] = tree_size.get(root, 0) + 1
    # process of each task: its tree's, or the shared one of its kind; in order of first slice
    groups: dict[object, int] = {}
    order = sorted(by_task, key=lambda t: (by_task[t][0][5], t))
    group_of = {}
    for task in order:
        root = roots.get(task, task)
        kind = tasks.get(task, (None, None, None))[1]
        key = root if tree_size[root] > 1 else f"{kind} tasks" if kind else "tasks"
        if key not in groups:
            pid = groups[key] = FIRST_TASK_PID + len(groups)
            label = key if isinstance(key, str) else _label(tasks, key)
            w.meta("process_name", pid, None, name=label)
            w.meta("process_sort_index", pid, None, sort_index=pid)
        group_of[task] = groups[key]
    next_tid = FIRST_TASK_PID + len(groups)  # no thread's tid is a process's pid
    for task in order:
        pid = group_of[task]
        slices = by_task[task]
        lanes = _lanes([(s[5], s[6]) for s in slices])
        tids = []
        for lane in range(max(lanes) + 1):
            next_tid += 1
            tids.append(next_tid)
            suffix = f" ({lane + 1})" if lane else ""
            w.meta("thread_name", pid, next_tid, name=_label(tasks, task) + suffix)
            w.meta("thread_sort_index", pid, next_tid, sort_index=next_tid)
        summary.task_tracks += len(tids)
        for (_, what, resource, obj, amount, start, stop, is_open, seq), lane in zip(
            slices, lanes, strict=True
        ):
            w(
                {
                    "ph": "X",
                    "cat": what,
                    "name": f"{what} {resource}",
                    "pid": pid,
                    "tid": tids[lane],
                    "ts": _us(start, origin),
                    "dur": (stop - start) / 1000,
                    "args": {
                        "task": str(task),
                        "resource": resource,
                        "object": str(obj),
                        "amount": amount,
                        "open": is_open,
                        "seq": seq,
                    },
                }
            )
            if what == "wait":
                summary.wait_slices += 1
            else:
                summary.hold_slices += 1
    summary.processes = len(groups)


def _label(tasks: dict[int, tuple], task: int) -> str:
    name = tasks.get(task, (None,))[0]
    return f"{name} [task {task}]" if name else f"task {task}"
