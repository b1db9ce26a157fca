"""Ingest: a trace directory becomes a store entry of Parquet tables and a manifest.

Pass 1 reads every segment batch by batch, validates and normalizes it, and streams it into
DuckDB, which sorts by ``ts`` (ties in segment order) within a memory limit, spilling to disk.
Pass 2 streams the sorted events out to Parquet, numbers them (``seq``) and pairs holds on the
way. Everything is written under a temporary name and renamed into place at the end: a refused
trace leaves the store as it was.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gigi._interrupts import deferred
from gigi.errors import IngestError, SchemaError
from gigi.ingest._perf import SAMPLES_FILE, attach_samples
from gigi.ingest._segments import Segment, list_segments, open_segment
from gigi.ingest._sort import RUN_ROWS, RunWriter, merge_runs, rebatch, reduce_runs
from gigi.schema import (
    EVENTS,
    HOLD_PAIRS_SCHEMA,
    META_TRACE_ID,
    META_WRITER,
    RESOURCES,
    SAMPLES_SCHEMA,
    STORE_EVENTS_SCHEMA,
    TABLES,
    TOTAL_LIMIT,
    VERSION,
    normalize_batch,
    sample_every_of,
)

STORE_LAYOUT_VERSION = 1
MANIFEST = "manifest.json"
ROWS_PER_FILE = 8 << 20
ROW_GROUP = 1 << 19

# Progress callback: (stage, done, total) with stage "read" (bytes) or "write" (events).
Progress = Callable[[str, int, int], None]


@dataclass
class SegmentInfo:
    file: str
    table: str
    format: str
    rows: int
    batches: int
    bytes: int
    bytes_lost: int


@dataclass
class Manifest:
    """What a store entry holds; written as ``manifest.json`` beside the tables."""

    trace_id: str
    events: int
    start: int | None  # first event's ts, ns
    end: int | None  # latest ts + dur over all events, ns: where open waits and holds end
    dropped: int
    dropped_by_resource: dict[str, int]
    sample_every: dict[str, int]
    tasks: int
    resources: int
    sites: int
    holds: int
    open_holds: int
    segments_read: int
    bytes_lost: int
    segments: list[SegmentInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    writers: list[str] = field(default_factory=list)
    samples: int = 0  # perf samples in samples.parquet (ingest --perf)
    perf: dict = field(default_factory=dict)  # what the perf file held (PerfSummary)
    schema_version: str = VERSION
    store_version: int = STORE_LAYOUT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False) + "\n"

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text())
            data["segments"] = [SegmentInfo(**s) for s in data.get("segments", [])]
            return cls(**data)
        except (OSError, ValueError, TypeError) as e:
            raise IngestError(f"{path}: not a gigi manifest ({e})") from None


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "trace"


def _trace_id(trace_dir: Path, segments: list[Segment]) -> str:
    ids = {
        s.schema.metadata.get(META_TRACE_ID)
        for s in segments
        if s.schema is not None and s.schema.metadata
    }
    ids.discard(None)
    if len(ids) == 1:
        return _safe_id(ids.pop().decode("utf-8", "replace"))
    digest = hashlib.sha256()
    for s in segments:
        digest.update(f"{s.path.name}\0{s.size}\0".encode())
    return f"{_safe_id(trace_dir.resolve().name)}-{digest.hexdigest()[:10]}"


def _merge_small(table_name: str, batches: list[pa.RecordBatch]) -> pa.Table:
    """Rows of one id from several segments become one row (later writers fill gaps)."""
    spec = TABLES[table_name]
    table = (
        pa.Table.from_batches(batches, schema=spec.arrow_schema)
        if batches
        else spec.arrow_schema.empty_table()
    )
    if table.num_rows == 0:
        return table
    key = spec.columns[0].name
    rules = {
        "tasks": {
            "name": "first",
            "kind": "first",
            "parent": "first",
            "start": "min",
            "end": "max",
        },
        "resources": {
            "capacity": "max",
            "unit": "first",
            "sharing": "first",
            "dropped": "sum",
            "sample_every": "max",
        },
        "sites": {c: "first" for c in spec.column_names[1:]},
    }[table_name]
    merged = table.group_by(key, use_threads=False).aggregate(
        [(c, how) for c, how in rules.items()]
    )
    merged = merged.rename_columns(
        [
            next((c for c, how in rules.items() if name == f"{c}_{how}"), name)
            for name in merged.column_names
        ]
    )
    merged = merged.select(list(spec.column_names)).sort_by(key)
    return merged.cast(spec.arrow_schema)


class _Events:
    """Pass 1 as a stream of normalized event batches, with the figures gathered on the way."""

    def __init__(self, segments: list[Segment], progress: Progress | None, total: int) -> None:
        self.segments = segments
        self.progress = progress
        self.total = total
        self.count = 0
        self.start: int | None = None
        self.end: int | None = None
        self.amount = 0  # the sum of all amounts, which the views sum in int64

    def batches(self):
        """Every events batch, validated and normalized, in segment order."""
        done = 0
        for seg in self.segments:
            if seg.table == "events":
                for b_index, batch in enumerate(seg.batches_iter()):
                    norm = normalize_batch(batch, EVENTS, path=str(seg.path), batch_index=b_index)
                    if norm.num_rows:
                        self._gather(norm)
                        _check_total(self.amount, "amount", seg, b_index)
                        yield norm
            done += seg.size
            if self.progress:
                self.progress("read", done, self.total)

    def _gather(self, b: pa.RecordBatch) -> None:
        self.count += b.num_rows
        ts = b.column("ts")
        lo = pc.min(ts).as_py()
        hi = pc.max(pc.add(ts, pc.fill_null(b.column("dur"), 0))).as_py()
        self.start = lo if self.start is None else min(self.start, lo)
        self.end = hi if self.end is None else max(self.end, hi)
        self.amount += _exact_sum(b.column("amount"))


def _exact_sum(values: pa.Array) -> int:
    """The sum of non-negative int64 ``values``, exact where an int64 sum would wrap: the
    high and low 31 bits are summed apart (each sum fits int64 below 2^31 rows)."""
    high = pc.sum(pc.shift_right(values, 31)).as_py() or 0
    low = pc.sum(pc.bit_wise_and(values, 2**31 - 1)).as_py() or 0
    return (high << 31) + low


def ingest(
    trace_dir: str | os.PathLike,
    store: str | os.PathLike,
    *,
    run_rows: int = RUN_ROWS,
    progress: Progress | None = None,
    perf: str | os.PathLike | None = None,
    perf_offset_ns: int = 0,
) -> Manifest:
    """Ingest the trace in ``trace_dir`` into ``store``; return its manifest.

    The entry goes to ``store/<trace id>``, replacing an earlier ingest of the same trace.
    Events are sorted in runs of ``run_rows`` spilled to a temporary directory in the store:
    memory follows ``run_rows``, not the length of the trace. ``perf`` names the text of
    ``perf script`` recorded beside the trace: its samples go into the entry's ``samples``
    table, their times plus ``perf_offset_ns`` (see ``gigi/ingest/_perf.py`` on clocks).
    """
    trace_dir, store = Path(trace_dir), Path(store)
    paths = list_segments(trace_dir)
    if not paths:
        raise IngestError(f"{trace_dir}: no segments (*.arrows, *.arrow, *.feather, *.parquet)")
    segments = [open_segment(p) for p in paths]
    if not any(s.table == "events" and s.schema is not None for s in segments):
        raise IngestError(f"{trace_dir}: no events segment with a readable schema")
    made = _make_store(store)
    work = Path(tempfile.mkdtemp(prefix=".ingest-", dir=store))
    try:
        small: dict[str, list[pa.RecordBatch]] = {"tasks": [], "resources": [], "sites": []}
        dropped = 0
        for seg in segments:
            if seg.table in small:
                for i, b in enumerate(seg.batches_iter()):
                    norm = normalize_batch(b, TABLES[seg.table], path=str(seg.path), batch_index=i)
                    small[seg.table].append(norm)
                    if seg.table == "resources":
                        dropped += sum(norm.column("dropped").to_pylist())
                        _check_total(dropped, "dropped", seg, i)
        tables = {name: _merge_small(name, bs) for name, bs in small.items()}

        events = _Events(segments, progress, sum(s.size for s in segments))
        runs = RunWriter(work / "spill", EVENTS.arrow_schema, run_rows=run_rows)
        for batch in events.batches():
            runs.add(batch)
        sorted_runs = reduce_runs(runs.finish(), EVENTS.arrow_schema)
        sorted_events = rebatch(merge_runs(sorted_runs, EVENTS.arrow_schema), ROW_GROUP)
        counts = _write_events(sorted_events, work, events.count, progress)
        resource_names, holds, open_holds = counts
        tables["resources"] = _complete_resources(tables["resources"], resource_names)
        for name, table in tables.items():
            pq.write_table(table, work / f"{name}.parquet")
        manifest = _manifest(trace_dir, segments, events, tables, holds, open_holds)
        if perf is not None:
            _add_samples(manifest, work, perf, perf_offset_ns)
        else:
            pq.write_table(SAMPLES_SCHEMA.empty_table(), work / SAMPLES_FILE)
        (work / MANIFEST).write_text(manifest.to_json())
        shutil.rmtree(work / "spill", ignore_errors=True)
        with deferred():  # the entry is replaced whole or not at all
            replace_entry(work, store / manifest.trace_id)
        return manifest
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for folder in made:  # a refused or interrupted ingest leaves no store it made
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _check_total(total: int, column: str, seg: Segment, batch: int) -> None:
    """Refuse a trace whose ``column`` (amounts, dropped events) adds up to 2^62 or more by
    this batch: the views' sums of it would overflow."""
    if total >= TOTAL_LIMIT:
        what = "amounts" if column == "amount" else f"{column} events"
        raise SchemaError(
            f"the trace's {what} add up to {total} by this batch, expected less than 2^62 in all",
            path=str(seg.path),
            column=column,
            batch=batch,
        )


def _make_store(store: Path) -> list[Path]:
    """Make ``store`` and any missing parents; the folders made, deepest first."""
    made = []
    for folder in [store, *store.parents]:
        if folder.exists():
            break
        made.append(folder)
    store.mkdir(parents=True, exist_ok=True)
    return made


def _add_samples(manifest: Manifest, entry_dir: Path, perf, offset_ns: int) -> None:
    summary, notes = attach_samples(
        entry_dir, perf, start=manifest.start, end=manifest.end, offset_ns=offset_ns
    )
    stale = {f"{name}: " for name in (manifest.perf.get("file"), summary.file) if name}
    manifest.samples = summary.samples
    manifest.perf = asdict(summary)
    manifest.notes = [n for n in manifest.notes if not n.startswith(tuple(stale))] + notes


def ingest_perf(
    target: str | os.PathLike,
    perf: str | os.PathLike,
    *,
    trace: str | None = None,
    perf_offset_ns: int = 0,
) -> tuple[Path, Manifest]:
    """Put the samples of ``perf`` (text of ``perf script``) into a trace already in a store,
    replacing any it had; return the entry's path and its updated manifest.

    ``target`` is a store entry or a store (``trace`` picks the entry when it holds several).
    """
    from gigi.ingest._locate import locate_entry

    entry = locate_entry(Path(target), trace)
    manifest = Manifest.load(entry / MANIFEST)
    _add_samples(manifest, entry, perf, perf_offset_ns)
    tmp = entry / f".{MANIFEST}.tmp"
    tmp.write_text(manifest.to_json())
    os.replace(tmp, entry / MANIFEST)
    return entry, manifest


def _write_events(
    reader: Iterator[pa.RecordBatch], work: Path, expected: int, progress: Progress | None
) -> tuple[list[str], int, int]:
    """Pass 2: number, pair and write the sorted events; return resource names and hold counts.

    Pairing (numba, without the GIL) runs on a second thread beside the Parquet writes, one
    batch at a time and in order; at most two batches wait for it.
    """
    (work / "events").mkdir()
    (work / "hold_pairs").mkdir()
    holds = _HoldsWriter(work / "hold_pairs" / "part-000000.parquet")
    codes: dict[str, int] = {}
    writer: pq.ParquetWriter | None = None
    seq = rows_in_file = files = 0
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gigi-pairing")
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    try:
        for batch in reader:
            n = batch.num_rows
            if n == 0:
                continue
            if batch.schema != EVENTS.arrow_schema:
                batch = batch.cast(EVENTS.arrow_schema)
            seqs = np.arange(seq, seq + n, dtype=np.int64)
            seq += n
            if writer is None or rows_in_file >= ROWS_PER_FILE:
                if writer is not None:
                    writer.close()
                path = work / "events" / f"part-{files:06d}.parquet"
                writer = pq.ParquetWriter(path, STORE_EVENTS_SCHEMA)
                files += 1
                rows_in_file = 0
            writer.write_batch(
                pa.RecordBatch.from_arrays(
                    [*batch.columns, pa.array(seqs)], schema=STORE_EVENTS_SCHEMA
                ),
                row_group_size=ROW_GROUP,
            )
            rows_in_file += n
            res_codes = _resource_codes(batch.column("resource"), codes)
            kind, obj, task, amount = (
                batch.column(c).to_numpy() for c in ("kind", "object", "task", "amount")
            )
            while len(pending) >= 2:
                pending.popleft().result()
            pending.append(pool.submit(holds.feed, kind, res_codes, obj, task, amount, seqs))
            if progress:
                progress("write", seq, expected)
        while pending:
            pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if writer is None:
        pq.write_table(STORE_EVENTS_SCHEMA.empty_table(), work / "events" / "part-000000.parquet")
    else:
        writer.close()
    open_holds = holds.finish()
    return list(codes), holds.count, open_holds


def _resource_codes(resource: pa.Array, codes: dict[str, int]) -> np.ndarray:
    """Integer codes of resource names, stable over the whole trace (``codes`` grows)."""
    enc = pc.dictionary_encode(resource)
    local = np.array(
        [codes.setdefault(v, len(codes)) for v in enc.dictionary.to_pylist()], dtype=np.int64
    )
    return local[enc.indices.to_numpy()] if len(local) else np.zeros(len(resource), np.int64)


class _HoldsWriter:
    """Streams events through the pairing kernel and its pairs into ``hold_pairs``."""

    def __init__(self, path: Path) -> None:
        from gigi.metrics.pairing import HoldPairer

        self.pairer = HoldPairer()
        self.writer = pq.ParquetWriter(path, HOLD_PAIRS_SCHEMA)
        self.count = 0

    def feed(self, *columns: np.ndarray) -> None:
        self._write(*self.pairer.feed(*columns))

    def finish(self) -> int:
        """Write the holds still open; return how many there are."""
        acq, rel, amt = self.pairer.finish()
        self._write(acq, rel, amt)
        self.writer.close()
        return len(acq)

    def _write(self, acq: np.ndarray, rel: np.ndarray, amt: np.ndarray) -> None:
        self.count += len(acq)
        if len(acq):
            self.writer.write_batch(
                pa.record_batch(
                    [pa.array(acq, mask=acq < 0), pa.array(rel, mask=rel < 0), pa.array(amt)],
                    schema=HOLD_PAIRS_SCHEMA,
                )
            )


def _complete_resources(resources: pa.Table, seen: list[str]) -> pa.Table:
    """Every resource that has events gets a row, declared or not."""
    have = set(resources.column("resource").to_pylist())
    missing = sorted(set(seen) - have)
    if not missing:
        return resources
    extra = pa.table(
        {"resource": missing, "dropped": [0] * len(missing), "sample_every": [1] * len(missing)}
    )
    extra = normalize_batch(extra, RESOURCES)
    return pa.concat_tables([resources, pa.Table.from_batches([extra])]).sort_by("resource")


def _manifest(
    trace_dir: Path,
    segments: list[Segment],
    events: _Events,
    tables: dict[str, pa.Table],
    holds: int,
    open_holds: int,
) -> Manifest:
    res = tables["resources"].to_pylist()
    writers = sorted(
        {
            s.schema.metadata[META_WRITER].decode("utf-8", "replace")
            for s in segments
            if s.schema is not None and s.schema.metadata and META_WRITER in s.schema.metadata
        }
    )
    sample_every = {r["resource"]: r["sample_every"] for r in res if r["sample_every"] > 1}
    for s in segments:  # a writer's segment-wide sampling applies to the resources it wrote
        every = sample_every_of(s.schema.metadata) if s.schema is not None else 1
        if s.table == "events" and every > 1:
            sample_every.setdefault("*", every)
    notes = [n for s in segments for n in s.notes]
    return Manifest(
        trace_id=_trace_id(trace_dir, segments),
        events=events.count,
        start=events.start,
        end=events.end,
        dropped=sum(r["dropped"] for r in res),
        dropped_by_resource={r["resource"]: r["dropped"] for r in res if r["dropped"]},
        sample_every=sample_every,
        tasks=tables["tasks"].num_rows,
        resources=len(res),
        sites=tables["sites"].num_rows,
        holds=holds,
        open_holds=open_holds,
        segments_read=sum(1 for s in segments if s.schema is not None),
        bytes_lost=sum(s.bytes_lost for s in segments),
        segments=[
            SegmentInfo(s.path.name, s.table, s.format, s.rows, s.batches, s.size, s.bytes_lost)
            for s in segments
        ],
        notes=notes,
        writers=writers,
    )


def replace_entry(new: Path, target: Path) -> None:
    """Put ``new`` at ``target``; an earlier entry there is swapped out, then removed."""
    old = None
    if target.exists():
        old = target.with_name(f".old-{target.name}-{uuid.uuid4().hex[:8]}")
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
