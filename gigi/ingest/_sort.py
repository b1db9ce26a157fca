"""External sort of events by ``ts`` in bounded memory, ties kept in arrival order.

Batches arrive in segment order. ``RunWriter`` gathers them into runs of at most ``run_rows``,
sorts each run stably by ``ts`` and spills it as an Arrow IPC stream. ``merge_runs`` streams
the runs back a block at a time and merges them: memory is one run while writing and one block
per run while merging, whatever the length of the trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

RUN_ROWS = 1 << 20
BLOCK_ROWS = 1 << 16
# An in-order run is spilled as it is (no reordering) once it has this many rows and the next
# batch would break its order; shorter ones are coalesced and sorted, to keep runs few.
MIN_SORTED_RUN = 1 << 16
_SPILL_OPTIONS = ipc.IpcWriteOptions(compression="lz4")
# Runs merged at once (each holds one block in memory while merging).
FAN_IN = 16


def _stable_order(ts: np.ndarray) -> np.ndarray | None:
    """Indices that sort ``ts`` stably, or None when it is already sorted."""
    if len(ts) < 2 or bool(np.all(ts[1:] >= ts[:-1])):
        return None
    return np.argsort(ts, kind="stable")


class RunWriter:
    """Collects batches into sorted runs spilled under ``spill``."""

    def __init__(
        self,
        spill: Path,
        schema: pa.Schema,
        run_rows: int = RUN_ROWS,
        block_rows: int = BLOCK_ROWS,
        min_sorted_run: int = MIN_SORTED_RUN,
    ) -> None:
        self.spill = spill
        self.min_sorted_run = min_sorted_run
        self.block_rows = block_rows
        self.schema = schema
        self.run_rows = run_rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.pending_sorted = True  # the pending rows are in ts order as they stand
        self.last_ts = 0
        self.runs: list[Path] = []
        spill.mkdir(parents=True, exist_ok=True)

    def add(self, batch: pa.RecordBatch) -> None:
        ts = batch.column("ts").to_numpy()
        in_order = _stable_order(ts) is None
        follows = in_order and (not self.pending or ts[0] >= self.last_ts)
        if not follows and self.pending_sorted and self.pending_rows >= self.min_sorted_run:
            self._spill()
        self.pending_sorted = self.pending_sorted and (follows or not self.pending)
        self.pending_sorted = self.pending_sorted and in_order
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        self.last_ts = int(ts[-1])
        if self.pending_rows >= self.run_rows:
            self._spill()

    def finish(self) -> list[Path]:
        if self.pending_rows:
            self._spill()
        return self.runs

    def _spill(self) -> None:
        table = pa.Table.from_batches(self.pending, schema=self.schema)
        if not self.pending_sorted:
            table = table.combine_chunks()
            order = _stable_order(table.column("ts").to_numpy())
            if order is not None:
                table = table.take(order)
        self.pending, self.pending_rows, self.pending_sorted = [], 0, True
        path = self.spill / f"run-{len(self.runs):06d}.arrows"
        with (
            pa.OSFile(str(path), "wb") as f,
            ipc.new_stream(f, self.schema, options=_SPILL_OPTIONS) as w,
        ):
            w.write_table(table, max_chunksize=self.block_rows)
        self.runs.append(path)


class _Run:
    """One spilled run being merged: the rows not yet emitted, extended a block at a time."""

    def __init__(self, path: Path) -> None:
        self.file = pa.OSFile(str(path))
        self.reader = ipc.open_stream(self.file)
        self.rows: pa.Table | None = None
        self.ts = np.empty(0, np.int64)
        self.exhausted = False
        self.load()

    def load(self) -> None:
        try:
            block = pa.Table.from_batches([self.reader.read_next_batch()])
        except StopIteration:
            self.exhausted = True
            self.file.close()
            return
        if self.rows is None or self.rows.num_rows == 0:
            self.rows = block
        else:
            # Copy what is left of the older blocks, so that their buffers can go.
            self.rows = pa.concat_tables([self.rows, block]).combine_chunks()
        self.ts = self.rows.column("ts").to_numpy()

    def take_before(self, cutoff: int | None) -> pa.Table | None:
        """Remove and return the rows with ``ts < cutoff`` (all rows when ``cutoff`` is None)."""
        if self.rows is None or self.rows.num_rows == 0:
            return None
        end = len(self.ts) if cutoff is None else int(np.searchsorted(self.ts, cutoff, "left"))
        if end == 0:
            return None
        head = self.rows.slice(0, end)
        self.rows = self.rows.slice(end)
        self.ts = self.ts[end:]
        return head


def reduce_runs(runs: list[Path], schema: pa.Schema, fan_in: int = FAN_IN) -> list[Path]:
    """Merge runs in groups of ``fan_in`` until at most ``fan_in`` are left.

    Merging holds one block per run in memory, so bounding the runs merged at once bounds the
    memory of any trace's sort; each level costs one more pass over the spilled events.
    """
    level = 0
    while len(runs) > fan_in:
        level += 1
        merged = []
        for g in range(0, len(runs), fan_in):
            group = runs[g : g + fan_in]
            path = group[0].with_name(f"level{level}-{g // fan_in:06d}.arrows")
            with (
                pa.OSFile(str(path), "wb") as f,
                ipc.new_stream(f, schema, options=_SPILL_OPTIONS) as w,
            ):
                for batch in rebatch(merge_runs(group, schema), BLOCK_ROWS):
                    w.write_table(pa.Table.from_batches([batch]), max_chunksize=BLOCK_ROWS)
            for p in group:
                p.unlink()
            merged.append(path)
        runs = merged
    return runs


def merge_runs(runs: list[Path], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of all runs by ``ts``; ties in run order, then in order within their run."""
    active = [_Run(p) for p in runs]
    while active:
        live = [r for r in active if not r.exhausted]
        if live:
            # Everything before the smallest last-loaded ts is final: no later block of any
            # run can hold a smaller one.
            bound = min(live, key=lambda r: r.ts[-1] if len(r.ts) else np.iinfo(np.int64).min)
            cutoff = int(bound.ts[-1]) if len(bound.ts) else None
        else:
            bound, cutoff = None, None
        if cutoff is None and bound is not None:  # an empty buffer: fill it first
            bound.load()
            continue
        pieces = [t for r in active if (t := r.take_before(cutoff)) is not None]
        if pieces:
            merged = pa.concat_tables(pieces).combine_chunks() if len(pieces) > 1 else pieces[0]
            order = _stable_order(merged.column("ts").to_numpy()) if len(pieces) > 1 else None
            if order is not None:
                merged = merged.take(order)
            yield from merged.to_batches()
        if bound is not None:
            bound.load()  # what is left of it is all == cutoff: extend it past the cutoff
        active = [
            r for r in active if not (r.exhausted and (r.rows is None or r.rows.num_rows == 0))
        ]


def rebatch(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The same rows in batches of about ``rows`` (the last may be smaller)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, count = [], 0
    if count:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
