"""OpenTelemetry spans in: ``ingest_otlp(file, store)`` turns an OTLP trace file (JSON, JSON
lines or protobuf; see ``_otlp_read.py``) into an ordinary trace and ingests it.

The convention. A span, or a span event, that carries the attribute ``gigi.kind`` is a resource
event; every other span is a task.

``gigi.kind`` on a span (upper or lower case):

- ``WAIT``: the span is a wait (a lock wait, a pool checkout that blocked): WAIT at the span's
  start, ``dur`` = end - start.
- ``HOLD``: the span covers the time the resource is held (a connection checked out and back,
  a critical section): ACQUIRE at the start, RELEASE at the end.
- ``ACQUIRE``: the span is the getting of the resource (a pool checkout): WAIT for the span's
  length from its start, then ACQUIRE at its end. The WAIT is for the span's ``gigi.object``,
  except on a resource whose ``gigi.sharing`` is ``pool``, where a checkout waits for any unit
  (object 0) whichever one it got. The hold ends at a later RELEASE of the same
  resource and object (a ``gigi.kind=RELEASE`` span event or span); without one it stays open,
  which is what a leak looks like.
- ``USE``: USE at the start, ``dur`` = end - start. ``RELEASE``: RELEASE at the span's end.

``gigi.kind`` on a span event: WAIT, ACQUIRE, USE or RELEASE at the event's time (WAIT and USE
take ``dur`` from ``gigi.dur``, ns, default 0). The other attributes default to the span's.

Other attributes: ``gigi.resource`` (required with ``gigi.kind``: the resource class,
``db.pool``), ``gigi.object`` (which instance: an integer, or a string such as a connection id,
which becomes a stable 63-bit hash; default 0, the resource as a whole), ``gigi.amount`` (units,
default 1); on any span with ``gigi.resource``: ``gigi.capacity``, ``gigi.unit`` and
``gigi.sharing`` (``exclusive``, ``shared``, ``pool``, ``log``) fill the resources table.
``thread.id`` (OpenTelemetry's attribute) gives ``events.thread`` (default 0).

Tasks. Every span without ``gigi.kind`` is a task: ``name`` is the span's name, ``parent`` the
task of its parent span (when that span is in the file), ``start``/``end`` its times. The
resource events of a ``gigi.kind`` span belong to the task of its nearest ancestor span that has
no ``gigi.kind`` (the request, query or job doing the work); with no such ancestor in the file
the span is a task of its own. ``kind``: the attribute ``gigi.task.kind`` (``foreground`` or
``background``) when given, else ``foreground`` for a SERVER or CONSUMER span, else its parent
task's kind, else ``background``.

Task ids. A span id is 64 random bits, unique within its OpenTelemetry trace; the task id is
the span id read as a big-endian integer with the top bit cleared (so ``task`` printed in hex is
the span id, or the span id less 8 in its first digit). Should two spans of the file (of
different traces, or differing only in the top bit) meet on one id, the later span in file
order takes the 63-bit BLAKE2b hash of its trace id and span id, counted up to the next free
id: ids are unique within the ingested trace, and ``OtlpSummary.remapped`` says how many moved.
Spans repeated with the same trace and span id (a retried export) are read once.

Times stay nanoseconds since the Unix epoch (``gigi.clock`` is ``realtime``). A span with
``gigi.kind`` but no ``gigi.resource``, an unknown kind, a bad number, a span that ends before
it starts, or a file that is not OTLP is refused with one message naming the file and the span;
the store is not touched.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from gigi.errors import IngestError
from gigi.ingest._otlp_read import Span, read_spans
from gigi.ingest._store import Manifest, ingest
from gigi.schema import (
    EVENTS,
    META_CLOCK,
    META_TABLE,
    META_TRACE_ID,
    META_VERSION,
    META_WRITER,
    RESOURCES,
    TASKS,
    VERSION,
    Kind,
)

WRITER = "gigi ingest --otlp"
MASK63 = (1 << 63) - 1
SPAN_KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE", "HOLD")
EVENT_KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE")
FOREGROUND_SPAN_KINDS = (2, 5)  # SERVER, CONSUMER
SHARING = ("exclusive", "shared", "pool", "log")
_SUFFIXES = re.compile(r"(\.(json|jsonl|ndjson|pb|binpb|bin|proto|protobuf|otlp|traces?))+$")


@dataclass
class OtlpSummary:
    """What an OTLP file held and what became of it."""

    file: str
    encoding: str  # OTLP/JSON, OTLP/JSON lines, OTLP protobuf[, length-delimited]
    spans: int = 0  # distinct spans read
    traces: int = 0  # distinct OpenTelemetry trace ids
    duplicates: int = 0  # spans read again with the same trace and span id, skipped
    resource_spans: int = 0  # spans with gigi.kind
    span_events: int = 0  # span events with gigi.kind
    tasks: int = 0
    events: int = 0  # trace events written
    remapped: int = 0  # spans whose task id is not their span id (see "Task ids")


def object_id(value: str) -> int:
    """The object id of a string ``gigi.object``: a stable 63-bit hash, never 0.

    >>> object_id("conn-3") == object_id("conn-3") != object_id("conn-4")
    True
    """
    h = int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "big") & MASK63
    return h or 1


def _task_ids(spans: list[Span], owners: list[int]) -> tuple[dict[int, int], int]:
    """Task id of each span index in ``owners``, and how many had to move off their span id."""
    ids: dict[int, int] = {}
    taken: set[int] = set()
    remapped = 0
    for i in owners:
        s = spans[i]
        task = int.from_bytes(s.span_id, "big") & MASK63
        if task in taken or task == 0:
            digest = hashlib.blake2b(s.trace_id + s.span_id, digest_size=8).digest()
            task = (int.from_bytes(digest, "big") & MASK63) or 1
            while task in taken:
                task = (task + 1) & MASK63 or 1
            remapped += 1
        taken.add(task)
        ids[i] = task
    return ids, remapped


class _Convert:
    """The spans of one file as the rows of the events, tasks and resources tables."""

    def __init__(self, path: Path, spans: list[Span], summary: OtlpSummary) -> None:
        self.path = path
        self.summary = summary
        seen: dict[tuple[bytes, bytes], int] = {}
        unique = []
        for s in spans:
            key = (s.trace_id, s.span_id)
            if key in seen:
                summary.duplicates += 1
                continue
            if len(s.trace_id) != 16 or len(s.span_id) != 8 or not any(s.span_id):
                raise self.error(s, "has no trace id or span id")
            if s.end < s.start:
                raise self.error(s, f"ends before it starts ({s.end} < {s.start} ns)")
            seen[key] = len(unique)
            unique.append(s)
        self.spans = unique
        self.index = seen
        summary.spans = len(unique)
        summary.traces = len({s.trace_id for s in unique})
        self.events: dict[str, list] = {c: [] for c in EVENTS.column_names if c != "site"}
        self.resources: dict[str, dict] = {}
        self.checkout_waits: list[int] = []  # rows of the WAITs of ACQUIRE spans

    def error(self, span: Span, what: str) -> IngestError:
        return IngestError(f"{self.path}: {span.describe()}: {what}")

    def run(self) -> None:
        spans = self.spans
        parent = [self.index.get((s.trace_id, s.parent_id)) if s.parent_id else None for s in spans]
        is_resource = [_kind(s.attrs) is not None for s in spans]
        owner = list(range(len(spans)))
        for i in range(len(spans)):  # a resource span's task: nearest ancestor that is a task
            if is_resource[i]:
                j, hops = parent[i], 0
                while j is not None and is_resource[j] and hops < len(spans):
                    j, hops = parent[j], hops + 1
                owner[i] = j if j is not None else i
        owners = sorted({owner[i] for i in range(len(spans))})
        ids, self.summary.remapped = _task_ids(spans, owners)
        self.tasks = self._tasks(owners, ids, parent, owner)
        self.summary.tasks = len(owners)
        for i, s in enumerate(spans):
            task = ids[owner[i]]
            thread = _int(s.attrs.get("thread.id"), 0)
            if not thread:
                thread = _int(spans[owner[i]].attrs.get("thread.id"), 0)
            if is_resource[i]:
                self.summary.resource_spans += 1
                self._span(s, task, thread)
            for ev in s.events:
                self.summary.span_events += 1
                self._span_event(s, ev, task, thread)
        pools = {r for r, v in self.resources.items() if v["sharing"] == "pool"}
        objects, resources = self.events["object"], self.events["resource"]
        for row in self.checkout_waits:  # a pool's checkout waits for any unit
            if resources[row] in pools:
                objects[row] = 0
        self.summary.events = len(self.events["ts"])

    def _tasks(self, owners, ids, parent, owner) -> dict[str, list]:
        spans = self.spans
        kinds: dict[int, str] = {}

        def task_kind(i: int) -> str:
            chain, j = [], i
            while j not in kinds:
                s = spans[j]
                given = s.attrs.get("gigi.task.kind")
                if given is not None:
                    if given not in ("foreground", "background"):
                        raise self.error(
                            s, f"gigi.task.kind is {given!r}, expected foreground or background"
                        )
                    kinds[j] = given
                elif s.kind in FOREGROUND_SPAN_KINDS:
                    kinds[j] = "foreground"
                else:
                    up = owner[parent[j]] if parent[j] is not None else None
                    if up is None or up == j or up in chain:
                        kinds[j] = "background"
                    else:  # as the task that started it
                        chain.append(j)
                        j = up
            for c in chain:
                kinds[c] = kinds[j]
            return kinds[i]

        cols: dict[str, list] = {c: [] for c in TASKS.column_names}
        for i in owners:
            s = spans[i]
            p = parent[i]
            cols["task"].append(ids[i])
            cols["name"].append(s.name)
            cols["kind"].append(task_kind(i))
            cols["parent"].append(ids[owner[p]] if p is not None and owner[p] != i else None)
            cols["start"].append(s.start)
            cols["end"].append(s.end)
        return cols

    def _fields(self, span: Span, attrs: dict, kind: str) -> tuple[str, int, int]:
        resource = attrs.get("gigi.resource", span.attrs.get("gigi.resource"))
        if not isinstance(resource, str) or not resource:
            raise self.error(span, f"gigi.kind {kind} without gigi.resource")
        obj = attrs.get("gigi.object", span.attrs.get("gigi.object", 0))
        if isinstance(obj, str) and not obj.lstrip("-").isdigit():
            obj = object_id(obj)
        amount = attrs.get("gigi.amount", span.attrs.get("gigi.amount", 1))
        obj = self._number(span, "gigi.object", obj)
        amount = self._number(span, "gigi.amount", amount)
        self._resource(span, resource)
        return resource, obj, amount

    def _number(self, span: Span, name: str, value) -> int:
        number = _int(value, None)
        if number is None:
            raise self.error(span, f"{name} is {value!r}, expected an integer")
        return number

    def _resource(self, span: Span, resource: str) -> None:
        r = self.resources.setdefault(resource, {"capacity": None, "unit": None, "sharing": None})
        capacity = span.attrs.get("gigi.capacity")
        if capacity is not None:
            capacity = self._number(span, "gigi.capacity", capacity)
            r["capacity"] = max(capacity, r["capacity"] or capacity)
        if r["unit"] is None and isinstance(span.attrs.get("gigi.unit"), str):
            r["unit"] = span.attrs["gigi.unit"]
        sharing = span.attrs.get("gigi.sharing")
        if sharing is not None:
            if sharing not in SHARING:
                raise self.error(span, f"gigi.sharing is {sharing!r}, expected one of {SHARING}")
            r["sharing"] = r["sharing"] or sharing

    def _add(self, ts, kind, resource, task, thread, amount, dur, obj) -> None:
        e = self.events
        e["ts"].append(ts)
        e["kind"].append(int(Kind[kind]))
        e["resource"].append(resource)
        e["task"].append(task)
        e["thread"].append(thread)
        e["amount"].append(amount)
        e["dur"].append(dur)
        e["object"].append(obj)
        e["value"].append(None)

    def _span(self, s: Span, task: int, thread: int) -> None:
        kind = _kind(s.attrs)
        if kind not in SPAN_KINDS:
            raise self.error(s, f"gigi.kind is {kind!r}, expected one of {', '.join(SPAN_KINDS)}")
        resource, obj, amount = self._fields(s, s.attrs, kind)
        add = self._add
        if kind == "WAIT":
            add(s.start, "WAIT", resource, task, thread, amount, s.end - s.start, obj)
        elif kind == "HOLD":
            add(s.start, "ACQUIRE", resource, task, thread, amount, 0, obj)
            add(s.end, "RELEASE", resource, task, thread, amount, 0, obj)
        elif kind == "ACQUIRE":
            self.checkout_waits.append(len(self.events["ts"]))
            add(s.start, "WAIT", resource, task, thread, amount, s.end - s.start, obj)
            add(s.end, "ACQUIRE", resource, task, thread, amount, 0, obj)
        elif kind == "USE":
            add(s.start, "USE", resource, task, thread, amount, s.end - s.start, obj)
        else:
            add(s.end, "RELEASE", resource, task, thread, amount, 0, obj)

    def _span_event(self, s: Span, ev, task: int, thread: int) -> None:
        kind = _kind(ev.attrs)
        if kind not in EVENT_KINDS:
            raise self.error(
                s,
                f"event {ev.name!r}: gigi.kind is {kind!r}, expected one of "
                f"{', '.join(EVENT_KINDS)} (HOLD is for spans)",
            )
        resource, obj, amount = self._fields(s, ev.attrs, kind)
        dur = 0
        if kind in ("WAIT", "USE"):
            dur = self._number(s, "gigi.dur", ev.attrs.get("gigi.dur", 0))
        self._add(ev.ts, kind, resource, task, thread, amount, dur, obj)


def _kind(attrs: dict) -> str | None:
    kind = attrs.get("gigi.kind")
    return kind.upper() if isinstance(kind, str) else (None if kind is None else repr(kind))


def _int(value, default):
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def otlp_trace_id(path: Path) -> str:
    """The store entry name of an OTLP file: its name less the usual suffixes.

    >>> otlp_trace_id(Path("checkout.otlp.jsonl"))
    'checkout'
    """
    stem = _SUFFIXES.sub("", path.name) or path.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "otlp"


def write_otlp_trace(path: str | os.PathLike, trace_dir: Path) -> OtlpSummary:
    """Read the OTLP file ``path`` and write it into ``trace_dir`` as trace format v1."""
    path = Path(path)
    spans, encoding = read_spans(path)
    summary = OtlpSummary(path.name, encoding)
    conv = _Convert(path, spans, summary)
    conv.run()
    if not summary.spans:
        raise IngestError(f"{path}: no spans in it")
    if not summary.events:
        raise IngestError(
            f"{path}: none of its {summary.spans:,} spans carries gigi.kind: nothing to diagnose "
            "(see the attribute convention in the README, OpenTelemetry in)"
        )
    meta = {
        META_VERSION: VERSION,
        META_WRITER: WRITER,
        META_CLOCK: "realtime",
        META_TRACE_ID: otlp_trace_id(path),
    }
    resources = {
        "resource": list(conv.resources),
        **{k: [r[k] for r in conv.resources.values()] for k in ("capacity", "unit", "sharing")},
    }
    for name, table, cols in (
        ("events", EVENTS, conv.events),
        ("tasks", TASKS, conv.tasks),
        ("resources", RESOURCES, resources),
    ):
        schema = pa.schema([table.arrow_schema.field(c) for c in cols])
        schema = schema.with_metadata({**meta, META_TABLE: name})
        batch = pa.RecordBatch.from_pydict(cols, schema=schema)
        with ipc.new_stream(str(trace_dir / f"{name}.arrows"), schema) as w:
            w.write_batch(batch)
    return summary


def ingest_otlp(
    path: str | os.PathLike, store: str | os.PathLike, **ingest_options
) -> tuple[Manifest, OtlpSummary]:
    """Ingest the OTLP file ``path`` into ``store`` (entry named by ``otlp_trace_id``); return
    the manifest and what the file held. ``ingest_options`` go to ``ingest`` (``run_rows``,
    ``progress``, ``perf``, ``perf_offset_ns``). Nothing is written to the store unless the
    whole file converts."""
    work = Path(tempfile.mkdtemp(prefix="gigi-otlp-"))
    try:
        summary = write_otlp_trace(path, work)
        return ingest(work, store, **ingest_options), summary
    finally:
        shutil.rmtree(work, ignore_errors=True)
