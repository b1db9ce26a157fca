"""What part of a lake a diagnosis reads: one trace, a time window, some resources.

Both engines read the lake through the same four relations, each narrowed by the scope before
anything else reads it, so the filters reach the Parquet scans: the ``trace`` and ``day``
partitions a scope names are the only folders read, and ``ts`` and ``resource`` are pushed
into the scans (row groups whose statistics lie outside are skipped).

A time window is diagnosed as a trace of its own that began at ``since`` and ended at
``until``: the events in it, holds paired as ingest paired them, a hold begun before the
window counted from its start (its acquirer unknown, like a hold begun before a trace), one
still held at its end open. A hold that spans the whole window has no event in it and is not
seen. With ``resources``, only their events are read, and a blame chain that passes through
another resource stops there.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gigi.errors import IngestError, QueryError, did_you_mean
from gigi.ingest import Manifest
from gigi.ingest._lake import MANIFESTS, SAMPLES, day_of, partition

SQL_DIR = Path(__file__).parent / "sql"
EVENT_COLUMNS = ("ts, kind, resource, task, thread, amount, dur, object, site, value, seq").split(
    ", "
)
PAIR_COLUMNS = ("acquire_seq", "release_seq", "amount", "acquire_ts", "release_ts")


def parse_time(text: str, option: str) -> int:
    """A time given on the command line, as ns on the trace's clock: an integer (ns), or an
    ISO 8601 date and time (UTC unless it says otherwise), for traces on a wall clock.

    >>> parse_time("2026-12-03T08:00", "--since"), parse_time("1500", "--until")
    (1796284800000000000, 1500)
    """
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(
            f"{option} {text!r}: expected ns on the trace's clock (1500000000) or an ISO 8601 "
            "time (2026-12-03T08:00, UTC unless it says otherwise)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    delta = when - epoch
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def lake_traces(lake: Path) -> list[str]:
    return sorted(
        p.parent.name.removeprefix("trace=")
        for p in (lake / MANIFESTS).glob("trace=*/manifest.json")
    )


@dataclass(frozen=True)
class LakeScope:
    """One trace of a lake, maybe narrowed to ``[since, until)`` (ns) and to ``resources``."""

    lake: Path
    trace_id: str
    manifest: Manifest
    since: int | None = None
    until: int | None = None
    resources: tuple[str, ...] = ()

    @property
    def windowed(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def scoped(self) -> bool:
        return self.windowed or bool(self.resources)

    @property
    def start(self) -> int:
        """Where the trace (or window) begins, ns."""
        m = self.manifest.start or 0
        return m if self.since is None else max(self.since, m)

    @property
    def end(self) -> int:
        """Where it ends, ns: open waits and holds are cut here."""
        m = self.manifest.end or 0
        return m if self.until is None else min(self.until, m)

    @property
    def days(self) -> tuple[str, str] | None:
        """The first and last ``day`` partition the window touches; None: every day."""
        if not self.windowed:
            return None
        lo = self.since if self.since is not None else self.manifest.start or 0
        hi = (self.until - 1) if self.until is not None else self.manifest.end or 0
        return day_of(lo), day_of(max(hi, lo))

    @property
    def dropped(self) -> int:
        m = self.manifest
        if not self.resources:
            return m.dropped
        return sum(m.dropped_by_resource.get(r, 0) for r in self.resources)

    @property
    def sampled(self) -> bool:
        """The trace has perf samples in the lake."""
        return any(partition(self.lake, SAMPLES, self.trace_id).glob("*/*.parquet"))

    def time_filter(self) -> str:
        """The window's condition on ``ts`` (DuckDB and Spark SQL alike)."""
        terms = []
        if self.since is not None:
            terms.append(f"ts >= {self.since}")
        if self.until is not None:
            terms.append(f"ts < {self.until}")
        return " AND ".join(terms) or "TRUE"

    def event_filter(self) -> str:
        """The condition (DuckDB and Spark SQL alike) on an events relation."""
        terms = [self.time_filter()] if self.windowed else []
        if self.resources:
            terms.append(f"resource IN ({', '.join(_quote(r) for r in self.resources)})")
        return " AND ".join(terms) or "TRUE"

    def pair_filter(self) -> str:
        if not self.resources:
            return "TRUE"
        return f"resource IN ({', '.join(_quote(r) for r in self.resources)})"

    def partition_filter(self, dated: bool) -> str:
        terms = [f"trace = {_quote(self.trace_id)}"]
        if dated and self.days is not None:
            terms.append(f"day BETWEEN {_quote(self.days[0])} AND {_quote(self.days[1])}")
        return " AND ".join(terms)

    def bindings(self, rel: dict[str, str]) -> dict[str, str]:
        """The views' ``{{name}}`` placeholders, given the lake's relations (``events``,
        ``hold_pairs``, ``tasks``, ``resources``, ``sites``), each already narrowed by this
        scope."""
        pairs = f"(SELECT acquire_seq, release_seq, amount FROM {rel['hold_pairs']})"
        if self.windowed:
            text = (SQL_DIR / "window_pairs.sql").read_text().rstrip().rstrip(";")
            for key, value in {
                "pairs": rel["hold_pairs"],
                "events": rel["events"],
                "since": str(self.since if self.since is not None else -(2**63)),
                "until": str(self.until if self.until is not None else 2**63 - 1),
            }.items():
                text = text.replace("{{" + key + "}}", value)
            pairs = f"({_strip_comments(text)})"
        count = (
            f"(SELECT count(*) FROM {rel['events']})" if self.scoped else str(self.manifest.events)
        )
        return {
            "events": rel["events"],
            "hold_pairs": pairs,
            "tasks": rel["tasks"],
            "resources": rel["resources"],
            "sites": rel["sites"],
            "samples": rel.get("samples", "_no_samples"),
            "trace_id": _quote(self.trace_id),
            "start": str(self.start),
            "end": str(self.end),
            "event_count": count,
            "dropped": str(self.dropped),
        }


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def open_lake(
    lake: str | os.PathLike,
    trace: str | None = None,
    *,
    since: int | str | None = None,
    until: int | str | None = None,
    resources: list[str] | tuple[str, ...] = (),
) -> LakeScope:
    """The scope of a diagnosis of ``lake``: the trace (``trace`` picks it when the lake holds
    several), the window and the resources, each checked against the lake."""
    lake = Path(lake)
    if not lake.is_dir():
        raise IngestError(f"{lake}: no such lake (a folder written by ingest --lake)")
    traces = lake_traces(lake)
    if not traces:
        raise IngestError(f"{lake}: not a gigi lake (no {MANIFESTS}/trace=*/manifest.json)")
    if trace is None:
        if len(traces) > 1:
            raise IngestError(
                f"{lake}: lake holds {len(traces)} traces, pick one with --trace: "
                + ", ".join(traces)
            )
        trace = traces[0]
    elif trace not in traces:
        raise IngestError(f"{lake}: no trace {trace!r} in this lake{did_you_mean(trace, traces)}")
    path = partition(lake, MANIFESTS, trace) / "manifest.json"
    try:
        manifest = Manifest(**{**json.loads(path.read_text()), "segments": []})
    except (OSError, ValueError, TypeError) as e:
        raise IngestError(f"{path}: not a gigi manifest ({e})") from None
    lo = parse_time(since, "--since") if isinstance(since, str) else since
    hi = parse_time(until, "--until") if isinstance(until, str) else until
    if lo is not None and hi is not None and lo >= hi:
        raise QueryError(f"--since {lo} is not before --until {hi}: the window is empty")
    known = _resources(lake, trace)
    for r in resources:
        if r not in known:
            raise QueryError(f"no resource {r!r} in trace {trace}{did_you_mean(r, known)}")
    return LakeScope(lake, trace, manifest, lo, hi, tuple(dict.fromkeys(resources)))


def _resources(lake: Path, trace: str) -> list[str]:
    import pyarrow.parquet as pq

    folder = partition(lake, "resources", trace)
    try:
        return pq.read_table(folder, columns=["resource"]).column("resource").to_pylist()
    except (OSError, ValueError) as e:
        raise IngestError(f"{folder}: cannot read the resources table ({e})") from None
