"""Writing trace format v1 from Python rows: what the adapters (record postgres, record mariadb,
ingest --perf) share. A segment is written under a temporary name and renamed, so a reader sees
all of it or none, and segments already written survive whatever happens later."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from gigi.errors import SchemaError
from gigi.schema._tables import (
    META_CLOCK,
    META_HOST,
    META_PID,
    META_TABLE,
    META_VERSION,
    META_WRITER,
    TABLES,
    VERSION,
)


class TraceWriter:
    """Appends rows of the four tables and flushes them as Arrow IPC stream segments into a
    trace directory. Rows are dicts keyed by the spec's column names; missing optional columns
    take their defaults. Each flush writes one segment per table that has new rows."""

    def __init__(
        self,
        trace: str | Path,
        writer: str,
        clock: str = "monotonic",
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.trace = Path(trace)
        self.trace.mkdir(parents=True, exist_ok=True)
        self.writer = writer
        self.clock = clock
        # The writer's own schema metadata keys (the server it recorded, say), on every segment.
        self.metadata = dict(metadata or {})
        self._rows: dict[str, list[dict]] = {name: [] for name in TABLES}
        self._seq = itertools.count()
        self.segments = 0

    def add(self, table: str, row: dict) -> None:
        self._rows[table].append(row)

    def extend(self, table: str, rows) -> None:
        self._rows[table].extend(rows)

    def pending(self, table: str) -> int:
        return len(self._rows[table])

    def flush(self) -> int:
        """Write what was added since the last flush; returns the number of segments written."""
        written = 0
        for name, rows in self._rows.items():
            if not rows:
                continue
            table = TABLES[name]
            schema = table.arrow_schema.with_metadata(
                {
                    **self.metadata,
                    META_VERSION: VERSION,
                    META_TABLE: name,
                    META_WRITER: self.writer,
                    META_CLOCK: self.clock,
                    META_HOST: socket.gethostname(),
                    META_PID: str(os.getpid()),
                }
            )
            stem = f"{self.writer.split()[0]}-{os.getpid()}-{next(self._seq):06d}"
            path = self.trace / f"{stem}-{name}.arrows"
            columns = {}
            for col in table.columns:
                values = [r.get(col.name, col.default) for r in rows]
                if not col.nullable and None in values:
                    # a reader would refuse the whole trace for it: refuse the rows instead,
                    # and keep them, and the segments already written
                    raise SchemaError(
                        f"is null, expected a value in every row (a bug of {self.writer}; "
                        "this segment is not written)",
                        path=str(path),
                        column=col.name,
                        row=values.index(None),
                    )
                columns[col.name] = values
            batch = pa.RecordBatch.from_pydict(columns, schema=schema)
            sink = pa.BufferOutputStream()
            with ipc.new_stream(sink, schema) as w:
                w.write_batch(batch)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(sink.getvalue().to_pybytes())
            os.replace(tmp, path)
            rows.clear()
            written += 1
        self.segments += written
        return written
