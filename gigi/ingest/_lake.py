"""The lake: ingested traces laid out as hive-partitioned Parquet, one partition per trace and
per day, which DuckDB and Spark read where it lies (``gigi-query diagnose --lake LAKE``)::

    LAKE/events/trace=<id>/day=<YYYY-MM-DD>/part-<n>.parquet
        the events of trace format v1 (normalized as ingest writes them) plus ``seq``, their
        position in trace order; sorted by ``seq`` (so by ``ts``) inside each file, in row
        groups of 512 Ki rows, whose ``ts`` statistics let a reader skip what a window leaves
    LAKE/hold_pairs/trace=<id>/day=<YYYY-MM-DD>/part-<n>.parquet
        ingest's pairing of ACQUIRE to RELEASE (``acquire_seq``, ``release_seq``, ``amount``),
        with the ``resource`` and the ``acquire_ts`` and ``release_ts`` of the pair's events; in
        the day of its ACQUIRE (of its RELEASE when the hold began before the trace)
    LAKE/samples/trace=<id>/day=<YYYY-MM-DD>/part-<n>.parquet
        the perf samples ingested beside the trace (``ingest --perf``), sorted by ``ts``; only
        for a trace that has them
    LAKE/tasks/trace=<id>/part-0.parquet        the tables of trace format v1, as ingested
    LAKE/resources/trace=<id>/part-0.parquet
    LAKE/sites/trace=<id>/part-0.parquet
    LAKE/manifests/trace=<id>/manifest.json     the store entry's manifest

``day`` is the UTC date of ``ts`` read as ns since the epoch of the trace's clock: the
calendar day for a wall clock, days since boot (1970-01-0N) for a monotonic one. A table's
partition of one trace is written beside the others and renamed into place, so a reader never
sees half a trace, and ingesting the same trace again replaces it.
"""

from __future__ import annotations

import datetime
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gigi.ingest._perf import SAMPLES_FILE
from gigi.ingest._store import replace_entry
from gigi.schema import HOLD_PAIRS_SCHEMA, STORE_EVENTS_SCHEMA

DAY_NS = 86_400 * 10**9
ROW_GROUP = 1 << 19
ROWS_PER_FILE = 8 << 20
SMALL_TABLES = ("tasks", "resources", "sites")
MANIFESTS = "manifests"
SAMPLES = "samples"

# What the lake's hold_pairs add to the store's: what a reader needs to prune them by time
# and resource without a join.
LAKE_HOLD_PAIRS_SCHEMA = (
    HOLD_PAIRS_SCHEMA.append(pa.field("resource", pa.string()))
    .append(pa.field("acquire_ts", pa.int64()))
    .append(pa.field("release_ts", pa.int64()))
)


def day_of(ns: int) -> str:
    """The ``day`` partition of a time, ns: ``1970-01-01`` plus whole days.

    >>> day_of(0), day_of(86_400 * 10**9 * 365 + 1)
    ('1970-01-01', '1971-01-01')
    """
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=ns // DAY_NS)).isoformat()


def partition(lake: Path, table: str, trace_id: str) -> Path:
    return lake / table / f"trace={trace_id}"


class DayWriter:
    """Writes rows sorted by day into ``<dir>/day=<day>/part-<n>.parquet``, one file open at
    a time (a new one per day, and every ``ROWS_PER_FILE`` rows)."""

    def __init__(self, directory: Path, schema: pa.Schema) -> None:
        self.directory, self.schema = directory, schema
        self.day: str | None = None
        self.writer: pq.ParquetWriter | None = None
        self.rows = self.files = 0

    def write(self, day: str, batch: pa.RecordBatch | pa.Table) -> None:
        if day != self.day or self.rows >= ROWS_PER_FILE:
            self.close()
            folder = self.directory / f"day={day}"
            folder.mkdir(parents=True, exist_ok=True)
            self.files = 0 if day != self.day else self.files + 1
            self.day, self.rows = day, 0
            self.writer = pq.ParquetWriter(folder / f"part-{self.files:05d}.parquet", self.schema)
        self.writer.write(batch, row_group_size=ROW_GROUP)
        self.rows += batch.num_rows

    def write_by_day(self, batch: pa.RecordBatch, ts: np.ndarray) -> None:
        """Split a batch sorted by ``ts`` at day boundaries."""
        days = ts // DAY_NS
        cuts = np.flatnonzero(np.diff(days)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(days)], strict=True):
            if hi > lo:
                self.write(day_of(int(ts[lo])), batch.slice(int(lo), int(hi - lo)))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def write_lake(entry: Path, trace_id: str, lake: Path) -> None:
    """Lay out the store entry ``entry`` (trace ``trace_id``) in ``lake``, replacing that
    trace's partitions if it was there already."""
    stage = lake / f".staging-{uuid.uuid4().hex[:10]}"
    try:
        events = DayWriter(stage / "events", STORE_EVENTS_SCHEMA)
        ts_of, res_of = _event_index(entry)
        for path in sorted((entry / "events").glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(ROW_GROUP):
                events.write_by_day(batch, batch.column("ts").to_numpy())
        if events.day is None:  # a trace without events still has the table
            events.write(day_of(0), STORE_EVENTS_SCHEMA.empty_table())
        events.close()
        _write_pairs(entry, stage / "hold_pairs", ts_of, res_of)
        for name in SMALL_TABLES:
            (stage / name).mkdir(parents=True)
            shutil.copyfile(entry / f"{name}.parquet", stage / name / "part-0.parquet")
        sampled = _write_samples(entry, stage / SAMPLES)
        (stage / MANIFESTS).mkdir()
        shutil.copyfile(entry / "manifest.json", stage / MANIFESTS / "manifest.json")
        for table in ("events", "hold_pairs", *SMALL_TABLES, *[SAMPLES] * sampled, MANIFESTS):
            _replace(stage / table, partition(lake, table, trace_id))
        if not sampled:  # the trace put in again without samples: the old ones go
            shutil.rmtree(partition(lake, SAMPLES, trace_id), ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _write_samples(entry: Path, directory: Path) -> bool:
    """The entry's perf samples, by day, sorted by ts; False when it has none."""
    path = entry / SAMPLES_FILE
    if not path.is_file() or pq.ParquetFile(path).metadata.num_rows == 0:
        return False
    table = pq.read_table(path).sort_by("ts")
    writer = DayWriter(directory, table.schema)
    for batch in table.to_batches(ROW_GROUP):
        writer.write_by_day(batch, batch.column("ts").to_numpy())
    writer.close()
    return True


def _event_index(entry: Path):
    """Each event's ts and resource code by seq (seq is dense: 0 to n-1): 12 bytes an event,
    filled a row group at a time (reading the three columns whole would hold every resource
    name of the trace at once)."""
    files = sorted((entry / "events").glob("*.parquet"))
    n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    ts = np.empty(n, np.int64)
    codes = np.empty(n, np.int32)
    names: dict[str, int] = {}
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(
            ROW_GROUP, columns=["seq", "ts", "resource"]
        ):
            seq = batch.column("seq").to_numpy()
            ts[seq] = batch.column("ts").to_numpy()
            enc = pc.dictionary_encode(batch.column("resource"))
            local = np.array(
                [names.setdefault(x, len(names)) for x in enc.dictionary.to_pylist()], np.int32
            )
            codes[seq] = local[enc.indices.to_numpy()] if len(local) else 0
    return ts, (codes, pa.array(list(names), pa.string()))


def _write_pairs(entry: Path, directory: Path, ts_of: np.ndarray, res_of) -> None:
    """The entry's hold pairs with their resource and times, into the day of their ACQUIRE
    (of their RELEASE when the hold began before the trace): a row group of pairs at a time,
    one file open per day, in the store's order (pairs are made as their RELEASEs come, so
    nearly in time order), each row group sorted by its anchor event."""
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for path in sorted((entry / "hold_pairs").glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(ROW_GROUP):
                table, day = _lake_pairs(batch, ts_of, res_of)
                cuts = np.flatnonzero(np.diff(day)) + 1
                for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(day)], strict=True):
                    if hi == lo:
                        continue
                    d = int(day[lo])
                    if d not in writers:
                        folder = directory / f"day={day_of(d * DAY_NS)}"
                        folder.mkdir(parents=True, exist_ok=True)
                        writers[d] = pq.ParquetWriter(
                            folder / "part-00000.parquet", LAKE_HOLD_PAIRS_SCHEMA
                        )
                    writers[d].write(table.slice(int(lo), int(hi - lo)), row_group_size=ROW_GROUP)
    finally:
        for w in writers.values():
            w.close()
    if not writers:  # a trace without holds still has the table
        writer = DayWriter(directory, LAKE_HOLD_PAIRS_SCHEMA)
        writer.write(day_of(0), LAKE_HOLD_PAIRS_SCHEMA.empty_table())
        writer.close()


def _lake_pairs(batch: pa.RecordBatch, ts_of: np.ndarray, res_of) -> tuple[pa.Table, np.ndarray]:
    """A batch of the store's hold pairs as the lake keeps them, sorted by (day, anchor), and
    each row's day (days since the epoch)."""
    acq = batch.column("acquire_seq").fill_null(-1).to_numpy().astype(np.int64)
    rel = batch.column("release_seq").fill_null(-1).to_numpy().astype(np.int64)
    codes, names = res_of
    anchor = np.where(acq >= 0, acq, rel)
    a_ts = ts_of[np.maximum(acq, 0)] if len(ts_of) else np.zeros(len(acq), np.int64)
    r_ts = ts_of[np.maximum(rel, 0)] if len(ts_of) else np.zeros(len(rel), np.int64)
    day = np.where(acq >= 0, a_ts, r_ts) // DAY_NS
    order = np.lexsort((anchor, day))
    table = pa.table(
        {
            "acquire_seq": pa.array(acq[order], mask=acq[order] < 0),
            "release_seq": pa.array(rel[order], mask=rel[order] < 0),
            "amount": batch.column("amount").take(pa.array(order)),
            "resource": names.take(pa.array(codes[anchor[order]]))
            if len(order)
            else pa.array([], pa.string()),
            "acquire_ts": pa.array(a_ts[order], mask=acq[order] < 0),
            "release_ts": pa.array(r_ts[order], mask=rel[order] < 0),
        },
        schema=LAKE_HOLD_PAIRS_SCHEMA,
    )
    return table, day[order]


def _replace(new: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_entry(new, target)


def ingest_lake(
    source: str | os.PathLike,
    lake: str | os.PathLike,
    *,
    trace: str | None = None,
    **ingest_options,
):
    """Put a trace into ``lake``; return its manifest. ``source`` is a trace directory (it is
    ingested first, with ``ingest_options``), or a store or store entry (``trace`` picks the
    entry of a store that holds several)."""
    import tempfile

    from gigi.ingest._locate import locate_entry, store_entries
    from gigi.ingest._store import MANIFEST, Manifest, ingest

    source, lake = Path(source), Path(lake)
    if not source.exists():
        from gigi.errors import IngestError

        raise IngestError(f"{source}: no such trace directory or store")
    lake.mkdir(parents=True, exist_ok=True)
    if (source / MANIFEST).is_file() or (source.is_dir() and store_entries(source)):
        entry = locate_entry(source, trace)
        manifest = Manifest.load(entry / MANIFEST)
        write_lake(entry, manifest.trace_id, lake)
        return manifest
    work = Path(tempfile.mkdtemp(prefix=".ingest-", dir=lake))
    try:
        manifest = ingest(source, work, **ingest_options)
        write_lake(work / manifest.trace_id, manifest.trace_id, lake)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)
