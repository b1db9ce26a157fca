"""Reading segments: Arrow IPC streams and files, and Parquet, as trace format v1 says.

A stream cut off mid-batch yields every complete batch before the cut, and says how many bytes
were lost. A file that is not a segment of any of these formats is refused by name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from gigi.errors import IngestError, SchemaError
from gigi.schema import SEGMENT_SUFFIXES, TABLES, table_schema

_STREAM_CONTINUATION = b"\xff\xff\xff\xff"
_FILE_MAGIC = b"ARROW1"


@dataclass
class Segment:
    """One segment of a trace, opened: its table and schema are known, its rows not yet read."""

    path: Path
    format: str  # "stream", "file" or "parquet"
    table: str
    schema: pa.Schema | None  # None: nothing readable (empty, or cut off before the schema)
    size: int
    rows: int = 0
    batches: int = 0
    bytes_lost: int = 0
    offset: int = 0  # where the stream starts (8 for an Arrow file read without its footer)
    notes: list[str] = field(default_factory=list)

    def batches_iter(self, batch_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
        """Every complete batch, in order; sets ``rows``, ``batches`` and ``bytes_lost``."""
        if self.schema is None:
            return
        if self.format == "parquet":
            yield from self._counted(pq.ParquetFile(self.path).iter_batches(batch_rows))
        elif self.format == "file":
            reader = ipc.open_file(self.path)
            yield from self._counted(reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            yield from self._stream(self.offset)

    def _counted(self, batches):
        for b in batches:
            self.rows += b.num_rows
            self.batches += 1
            yield b

    def _stream(self, offset: int) -> Iterator[pa.RecordBatch]:
        with pa.OSFile(str(self.path)) as f:
            f.seek(offset)
            reader = ipc.open_stream(f)
            good = f.tell()
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except (OSError, pa.ArrowInvalid) as e:
                    self.bytes_lost = self.size - good
                    self.notes.append(
                        f"{self.path}: cut off after batch {self.batches - 1}: "
                        f"{self.bytes_lost} bytes lost ({_reason(e)})"
                    )
                    break
                good = f.tell()
                self.rows += batch.num_rows
                self.batches += 1
                yield batch


def _reason(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def list_segments(trace_dir: Path) -> list[Path]:
    """Every segment file directly in ``trace_dir``, by name (so reading order is stable)."""
    if not trace_dir.exists():
        raise IngestError(f"{trace_dir}: no such trace directory")
    if not trace_dir.is_dir():
        raise IngestError(f"{trace_dir}: is not a directory (a trace is a directory of segments)")
    return sorted(
        p for p in trace_dir.iterdir() if p.is_file() and p.name.endswith(SEGMENT_SUFFIXES)
    )


def open_segment(path: Path) -> Segment:
    """Open ``path`` and read its schema, or raise ``SchemaError`` naming what is wrong."""
    size = os.path.getsize(path)
    name = path.name
    if name.endswith(".parquet"):
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowInvalid) as e:
            raise SchemaError(f"not a Parquet file ({_reason(e)})", path=str(path)) from None
        return _segment(path, "parquet", schema, size)
    with open(path, "rb") as f:
        head = f.read(8)
    if name.endswith((".arrow", ".feather")) or head.startswith(_FILE_MAGIC):
        if not head.startswith(_FILE_MAGIC):
            raise SchemaError(
                "not an Arrow IPC file (no ARROW1 magic at the start)", path=str(path)
            )
        try:
            return _segment(path, "file", ipc.open_file(path).schema, size)
        except (OSError, pa.ArrowInvalid):
            # No footer: the writer died before closing the file. Its body is a stream.
            seg = _open_stream(path, size, offset=8)
            seg.format = "file-body"
            seg.notes.append(f"{path}: Arrow file without its footer; read as a stream")
            return seg
    return _open_stream(path, size, offset=0)


def _open_stream(path: Path, size: int, offset: int) -> Segment:
    if size <= offset:
        seg = Segment(path, "stream", "events", None, size)
        seg.notes.append(f"{path}: empty segment, nothing to read")
        return seg
    with open(path, "rb") as f:
        f.seek(offset)
        head = f.read(4)
    try:
        with pa.OSFile(str(path)) as f:
            f.seek(offset)
            schema = ipc.open_stream(f).schema
    except (OSError, pa.ArrowInvalid) as e:
        if head == _STREAM_CONTINUATION[: len(head)] and _looks_cut(e):
            seg = Segment(path, "stream", "events", None, size, bytes_lost=size)
            seg.notes.append(
                f"{path}: cut off inside its schema: {size} bytes lost, nothing to read"
            )
            return seg
        raise SchemaError(f"not an Arrow IPC stream ({_reason(e)})", path=str(path)) from None
    seg = _segment(path, "stream", schema, size)
    seg.offset = offset
    return seg


def _looks_cut(e: Exception) -> bool:
    text = str(e).lower()
    return "expected to" in text or "end of" in text or "eof" in text or "read" in text


def _segment(path: Path, fmt: str, schema: pa.Schema, size: int) -> Segment:
    table = table_schema(schema.metadata)
    if table not in TABLES:
        raise SchemaError(
            f"schema metadata gigi.table is {table!r}, expected one of {', '.join(TABLES)}",
            path=str(path),
        )
    return Segment(path, fmt, table, schema, size)
