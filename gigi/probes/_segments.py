"""How the probes' writer turns rows into segments, under a traced program's busy threads.

The writer thread waits for the GIL every time it has let go of it, behind each busy thread
of the program: a switch interval apiece, tens of ms on a loaded machine. So a flush must let
go of it as few times as it can, and never to import anything:

- The C writer (``_writer``, built with the hot path) puts a segment together and writes it
  without the GIL, letting go of it once. Under four busy threads a flush took 0.2-1 s through
  numpy and pyarrow, which let go at every step.
- Its plain twin, where the C writer is not built or ``GIGI_PURE_PYTHON`` is set, builds the
  Arrow arrays from buffers: pyarrow's own conversions (``pa.array``, ``pa.table`` of a dict)
  import pandas the first time they run, some 400 modules whose file reads each let go of the
  GIL, and the first segment of a busy program waited seconds for them.

Both write a segment under a temporary name and rename it, so that a reader sees all of it or
none, and segments already written survive a SIGKILL.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from gigi.probes._accel import segment_writer
from gigi.probes._records import (
    FIELDS,
    HAS_VALUE,
    IMPLICIT_TASK,
    KIND_MASK,
    NULL_DUR,
    NULL_SITE,
    RID_SHIFT,
)
from gigi.schema import EVENTS

Meta = dict[bytes, bytes]


def write_events(
    path: Path, meta: Meta, names: list[str], parts: list[tuple[int, int, bytes]]
) -> dict[int, int]:
    """Write the records of ``parts`` (thread, its implicit task, its ring's bytes) as one
    events segment; returns the events written by code (rid << RID_SHIFT | kind)."""
    if segment_writer is not None:
        counts = segment_writer.write_events(str(path), list(meta.items()), names, parts)
        return {c: n for c, n in enumerate(counts) if n}
    return _write_events_arrow(path, meta, names, parts)


def write_rows(path: Path, meta: Meta, schema: pa.Schema, columns: dict[str, Sequence]) -> None:
    """Write one segment of ``schema`` from a list of Python values (None: null) per column."""
    if segment_writer is not None:
        rows = len(columns[schema.names[0]])
        cols = [_c_column(f, columns[f.name]) for f in schema]
        segment_writer.write_table(str(path), list(meta.items()), cols, rows)
        return
    _write_stream(path, batch(columns, schema.with_metadata(meta)))


# --- the C writer's columns ------------------------------------------------------------------
# arrow_ipc.h's ipc_type codes, and the numpy type of each
_IPC_TYPE = {pa.int64(): 0, pa.int32(): 1, pa.uint8(): 2, pa.bool_(): 3, pa.string(): 4}
_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.uint8(): np.uint8}


def _c_column(f: pa.Field, values: Sequence) -> tuple:
    """(name, type, nullable, values, valid, offsets), as _writer.write_table takes a column."""
    valid = bytes(v is not None for v in values) if None in values else None
    offsets = None
    if f.type == pa.string():
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = _offsets(encoded).tobytes()
        data: bytes = b"".join(encoded)
    elif f.type == pa.bool_():
        data = bytes(bool(v) for v in values)
    else:
        data = np.fromiter((0 if v is None else v for v in values), _NUMPY[f.type]).tobytes()
    return (f.name, _IPC_TYPE[f.type], f.nullable, data, valid, offsets)


def _offsets(encoded: list[bytes]) -> np.ndarray:
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return offsets


# --- the plain twin: pyarrow, from buffers -----------------------------------------------------


def _write_events_arrow(
    path: Path, meta: Meta, names: list[str], parts: list[tuple[int, int, bytes]]
) -> dict[int, int]:
    # One transposing copy turns the records into contiguous columns, which Arrow then takes
    # without copying.
    records = [np.frombuffer(chunk, np.int64).reshape(-1, len(FIELDS)) for _, _, chunk in parts]
    cols = np.concatenate(records).T.copy()
    ts, code, task, amount, obj, site, value, dur = cols
    thread = np.empty(len(ts), np.int64)
    at = 0
    for (th, implicit, _), p in zip(parts, records, strict=True):
        seg = slice(at, at + len(p))
        thread[seg] = th
        t = task[seg]
        t[t == IMPLICIT_TASK] = implicit
        at += len(p)
    events = pa.RecordBatch.from_arrays(
        [
            numbers(ts),
            numbers((code & KIND_MASK).astype(np.uint8)),
            pa.DictionaryArray.from_arrays(
                numbers((code >> RID_SHIFT).astype(np.int32)), strings(names)
            ),
            numbers(task),
            numbers(thread),
            numbers(amount),
            numbers(dur, dur != NULL_DUR),
            numbers(obj),
            numbers(site.astype(np.int32), site != NULL_SITE),
            numbers(value, (code & HAS_VALUE) != 0),
        ],
        schema=_events_schema().with_metadata(meta),
    )
    _write_stream(path, events)
    counts = np.bincount(code & ~HAS_VALUE)
    return {int(c): int(counts[c]) for c in np.nonzero(counts)[0]}


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    """Arrow's validity bitmap for ``valid``; None (no nulls) when all are valid."""
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def numbers(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """An array of numpy ``values`` (not copied when contiguous), null where ``valid`` is false.

    >>> numbers(np.array([1, 2, 3]), np.array([True, False, True])).to_pylist()
    [1, None, 3]
    """
    values = np.ascontiguousarray(values)
    bitmap = None if valid is None else _bitmap(valid)
    return pa.Array.from_buffers(
        pa.from_numpy_dtype(values.dtype), len(values), [bitmap, pa.py_buffer(values)]
    )


def strings(values: Sequence[str | None]) -> pa.Array:
    """A utf8 array of ``values``, None for null.

    >>> strings(["pool", None, "é"]).to_pylist()
    ['pool', None, 'é']
    """
    encoded = [b"" if v is None else v.encode() for v in values]
    valid = np.fromiter((v is not None for v in values), bool, len(values))
    return pa.Array.from_buffers(
        pa.string(),
        len(encoded),
        [_bitmap(valid), pa.py_buffer(_offsets(encoded)), pa.py_buffer(b"".join(encoded))],
    )


def column(values: Sequence, type: pa.DataType) -> pa.Array:
    """An array of ``type`` (utf8, bool, int64, int32 or uint8) from Python values, None for
    null.

    >>> column([True, None, False], pa.bool_()).to_pylist()
    [True, None, False]
    """
    if type == pa.string():
        return strings(values)
    n = len(values)
    valid = np.fromiter((v is not None for v in values), bool, n)
    if type == pa.bool_():
        bits = np.packbits(np.fromiter((bool(v) for v in values), bool, n), bitorder="little")
        return pa.Array.from_buffers(type, n, [_bitmap(valid), pa.py_buffer(bits)])
    data = np.fromiter((0 if v is None else v for v in values), _NUMPY[type], n)
    return numbers(data, valid)


def batch(columns: dict[str, Sequence], schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` from a list of Python values per column name."""
    return pa.RecordBatch.from_arrays(
        [column(columns[f.name], f.type) for f in schema], schema=schema
    )


_EVENTS_SCHEMA: pa.Schema | None = None


def _events_schema() -> pa.Schema:
    global _EVENTS_SCHEMA
    if _EVENTS_SCHEMA is None:
        s = EVENTS.arrow_schema
        i = s.get_field_index("resource")
        _EVENTS_SCHEMA = s.set(
            i, pa.field("resource", pa.dictionary(pa.int32(), pa.string()), nullable=False)
        )
    return _EVENTS_SCHEMA


def _write_stream(path: Path, data: pa.RecordBatch) -> None:
    """Write one segment so that a reader sees all of it or none (write, then rename)."""
    # Serialized in memory and written with one call: each time the writer lets go of the GIL
    # it may wait a whole switch interval to get it back from a busy traced thread.
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(sink.getvalue())
    os.replace(tmp, path)
