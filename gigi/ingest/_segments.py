"""Reading segments: Arrow IPC streams and files, and Parquet, as trace format v1 says.

A stream cut off mid-batch yields every complete batch before the cut, and says how many bytes
were lost. A file that is not a segment of any of these formats is refused by name, and so is a
damaged one: a batch that cannot be read before the end of the file, a batch whose buffers do
not hold what its schema says, bytes after the end of a stream (two streams in one file), schema
metadata that trace format v1 does not allow.
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
from gigi.schema import SEGMENT_SUFFIXES, TABLES, check_metadata, table_schema

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
        """Every complete batch, in order; sets ``rows``, ``batches`` and ``bytes_lost``.

        Raises ``SchemaError`` when the segment is damaged (a cut stream is not: it yields
        what came before the cut)."""
        if self.schema is None:
            return
        if self.format == "parquet":
            yield from self._counted(lambda: pq.ParquetFile(self.path).iter_batches(batch_rows))
        elif self.format == "file":

            def batches():
                reader = ipc.open_file(self.path)
                return (reader.get_batch(i) for i in range(reader.num_record_batches))

            yield from self._counted(batches)
        else:
            yield from self._stream(self.offset)

    def _counted(self, batches) -> Iterator[pa.RecordBatch]:
        """The batches of a file read through its footer: an error is damage, not a cut."""
        try:
            for b in batches():
                yield self._checked(b)
        except (OSError, pa.ArrowException, UnicodeDecodeError) as e:
            raise SchemaError(
                f"damaged, cannot be read ({_reason(e)})", path=str(self.path), batch=self.batches
            ) from None

    def _checked(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch``, counted, once its buffers are known to hold what its schema says (flipped
        bytes can leave offsets out of range, indices past a dictionary, strings not UTF-8)."""
        try:
            batch.validate(full=True)
        except (pa.ArrowInvalid, UnicodeDecodeError) as e:
            raise SchemaError(
                f"damaged ({_reason(e)})", path=str(self.path), batch=self.batches
            ) from None
        self.rows += batch.num_rows
        self.batches += 1
        return batch

    def _stream(self, offset: int) -> Iterator[pa.RecordBatch]:
        with pa.OSFile(str(self.path)) as f:
            f.seek(offset)
            reader = ipc.open_stream(f)
            good = f.tell()
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    self._check_end(f.tell())
                    break
                except (OSError, pa.ArrowException) as e:
                    # A cut stream fails for want of bytes, having read to the end of the
                    # file; one that fails before its end is damaged, not cut.
                    if f.tell() < self.size:
                        raise SchemaError(
                            f"damaged at byte {good}, the message there cannot be read "
                            f"({_reason(e)})",
                            path=str(self.path),
                            batch=self.batches,
                        ) from None
                    self.bytes_lost = self.size - good
                    self.notes.append(
                        f"{self.path}: cut off after batch {self.batches - 1}: "
                        f"{self.bytes_lost} bytes lost ({_reason(e)})"
                    )
                    break
                good = f.tell()
                yield self._checked(batch)

    def _check_end(self, end: int) -> None:
        """Refuse bytes after the end of a stream: a second stream, or garbage. In an Arrow
        file read without its footer they are what is left of the footer."""
        if end >= self.size:
            return
        extra = self.size - end
        if self.format == "file-body":
            self.notes.append(f"{self.path}: {extra} bytes after the stream's end ignored")
            return
        raise SchemaError(
            f"{extra} bytes after the end of the stream at byte {end}: a segment holds one "
            "stream (were two files joined?)",
            path=str(self.path),
        )


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
        except (OSError, pa.ArrowException, UnicodeDecodeError) as e:  # a name not UTF-8
            raise SchemaError(f"not a Parquet file ({_reason(e)})", path=str(path)) from None
        return _segment(path, "parquet", schema, size)
    with open(path, "rb") as f:
        head = f.read(8)
    if name.endswith((".arrow", ".feather")) or head.startswith(_FILE_MAGIC):
        if size < len(_FILE_MAGIC) and _FILE_MAGIC.startswith(head):
            seg = Segment(path, "file-body", "events", None, size, bytes_lost=size)
            seg.notes.append(
                f"{path}: cut off in its magic: {size} bytes lost, nothing to read"
                if size
                else f"{path}: empty segment, nothing to read"
            )
            return seg
        if not head.startswith(_FILE_MAGIC):
            raise SchemaError(
                "not an Arrow IPC file (no ARROW1 magic at the start)", path=str(path)
            )
        try:
            schema = ipc.open_file(path).schema
        except (OSError, pa.ArrowException):
            schema = None
        if schema is None:
            # No footer: the writer died before closing the file. Its body is a stream.
            seg = _open_stream(path, size, offset=8)
            seg.format = "file-body"
            seg.notes.append(f"{path}: Arrow file without its footer; read as a stream")
            return seg
        return _segment(path, "file", schema, size)
    return _open_stream(path, size, offset=0)


def _open_stream(path: Path, size: int, offset: int) -> Segment:
    if size <= offset:
        seg = Segment(path, "stream", "events", None, size)
        seg.notes.append(f"{path}: empty segment, nothing to read")
        return seg
    with open(path, "rb") as f:
        f.seek(offset)
        head = f.read(4)
    with pa.OSFile(str(path)) as f:
        f.seek(offset)
        try:
            schema = ipc.open_stream(f).schema
            error = None
        except (OSError, pa.ArrowException) as e:
            schema, error, at_end = None, e, f.tell() >= size
    if error is not None:
        # cut: it begins as a stream does and failed for want of bytes, at the end of the file
        if head == _STREAM_CONTINUATION[: len(head)] and at_end:
            seg = Segment(path, "stream", "events", None, size, bytes_lost=size)
            seg.notes.append(
                f"{path}: cut off inside its schema: {size} bytes lost, nothing to read"
            )
            return seg
        raise SchemaError(f"not an Arrow IPC stream ({_reason(error)})", path=str(path))
    seg = _segment(path, "stream", schema, size)
    seg.offset = offset
    return seg


def _segment(path: Path, fmt: str, schema: pa.Schema, size: int) -> Segment:
    try:
        schema.names  # noqa: B018 - decodes every column name
    except UnicodeDecodeError:
        raise SchemaError("damaged schema: a column name is not UTF-8", path=str(path)) from None
    table = table_schema(schema.metadata)
    if table not in TABLES:
        raise SchemaError(
            f"schema metadata gigi.table is {table!r}, expected one of {', '.join(TABLES)}",
            path=str(path),
        )
    check_metadata(schema.metadata, str(path))
    return Segment(path, fmt, table, schema, size)
