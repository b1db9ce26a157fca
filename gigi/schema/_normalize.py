"""Validation and normalization of trace tables.

A batch in any form that trace format v1 accepts (kind names or codes, dictionary-encoded
strings, narrower integers, optional columns absent) becomes a batch of the normalized schema
``Table.arrow_schema``, or a ``SchemaError`` naming the file, column, batch and row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from gigi.errors import SchemaError, did_you_mean
from gigi.schema._tables import (
    ARROW_TYPE,
    INSTANT_LIMIT,
    KIND_NAMES,
    META_SAMPLE_EVERY,
    META_TABLE,
    META_VERSION,
    VERSION,
    Column,
    Table,
    Type,
)

_INT_RANGE = {
    Type.INT64: (-(2**63), 2**63 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
}


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _expected(col: Column) -> str:
    return {
        Type.INT64: "an integer column (int64)",
        Type.INT32: "an integer column (int32)",
        Type.KIND: "uint8 codes 0-3 or the names WAIT, ACQUIRE, USE, RELEASE",
        Type.STRING: "utf8 or dictionary of utf8",
        Type.BOOL: "bool",
    }[col.type]


def check_schema(schema: pa.Schema, table: Table, path: str) -> None:
    """Refuse a schema that lacks a required column, holds one of the wrong type, or holds
    one twice (which of the two would be the column?)."""
    names = set(schema.names)
    for col in table.columns:
        times = len(schema.get_all_field_indices(col.name))
        if times > 1:
            raise SchemaError(f"appears {times} times, expected once", path=path, column=col.name)
        if col.name not in names:
            if col.required:
                raise SchemaError(
                    f"required column of table {table.name!r} is missing"
                    f"{did_you_mean(col.name, sorted(names - set(table.column_names)))}",
                    path=path,
                    column=col.name,
                )
            continue
        t = schema.field(col.name).type
        ok = {
            Type.INT64: pa.types.is_integer(t),
            Type.INT32: pa.types.is_integer(t),
            Type.KIND: pa.types.is_integer(t) or _is_string(t),
            Type.STRING: _is_string(t),
            Type.BOOL: pa.types.is_boolean(t),
        }[col.type]
        if not ok:
            raise SchemaError(
                f"has type {t}, expected {_expected(col)}", path=path, column=col.name
            )


def _first(mask: pa.Array) -> int:
    return pc.index(mask, True).as_py()


def _kind_codes(arr: pa.Array, where: dict) -> pa.Array:
    if pa.types.is_integer(arr.type):
        bad = pc.or_(pc.less(arr, 0), pc.greater(arr, 3))
        if pc.any(bad).as_py():
            i = _first(bad)
            raise SchemaError(
                f"kind {arr[i].as_py()} is not a kind code, expected 0-3 "
                "(WAIT, ACQUIRE, USE, RELEASE)",
                row=i,
                **where,
            )
        return arr.cast(pa.uint8())
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    codes = pc.index_in(pc.utf8_upper(arr), value_set=pa.array(KIND_NAMES))
    bad = pc.and_(pc.is_null(codes), pc.is_valid(arr))
    if pc.any(bad).as_py():
        i = _first(bad)
        raise SchemaError(
            f"kind {arr[i].as_py()!r} is not a kind name, expected one of {', '.join(KIND_NAMES)}"
            f"{did_you_mean(str(arr[i].as_py()).upper(), KIND_NAMES)}",
            row=i,
            **where,
        )
    return codes.cast(pa.uint8())


def _normalize_column(col: Column, arr: pa.Array, where: dict) -> pa.Array:
    if col.type is Type.KIND:
        arr = _kind_codes(arr, where)
    elif col.type in _INT_RANGE:
        target = pa.int64() if col.type is Type.INT64 else pa.int32()
        if arr.type != target:
            lo, hi = _INT_RANGE[col.type]
            mm = pc.min_max(arr)
            lo_v, hi_v = mm["min"].as_py(), mm["max"].as_py()
            if lo_v is not None and (lo_v < lo or hi_v > hi):
                values = arr.to_pylist()
                i = next(j for j, v in enumerate(values) if v is not None and not lo <= v <= hi)
                raise SchemaError(f"value {arr[i].as_py()} does not fit {target}", row=i, **where)
            arr = arr.cast(target)
        if col.low is not None or col.high is not None:
            _check_range(col, arr, where)
    elif col.type is Type.STRING:
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if arr.type != pa.string():
            arr = arr.cast(pa.string())
        if col.choices is not None:
            bad = pc.and_(
                pc.invert(pc.is_in(arr, value_set=pa.array(col.choices))), pc.is_valid(arr)
            )
            if pc.any(bad).as_py():
                i = _first(bad)
                raise SchemaError(
                    f"value {arr[i].as_py()!r} is not one of {', '.join(col.choices)}"
                    f"{did_you_mean(arr[i].as_py(), col.choices)}",
                    row=i,
                    **where,
                )
    if not col.nullable and arr.null_count:
        i = _first(pc.is_null(arr))
        raise SchemaError("is null, expected a value in every row", row=i, **where)
    return arr


def _check_range(col: Column, arr: pa.Array, where: dict) -> None:
    out = None
    if col.low is not None:
        out = pc.less(arr, col.low)
    if col.high is not None:
        high = pc.greater(arr, col.high)
        out = high if out is None else pc.or_(out, high)
    out = pc.fill_null(out, False)
    if pc.any(out).as_py():
        i = _first(out)
        raise SchemaError(
            f"{col.name} {arr[i].as_py()} is out of range, expected {col.rule}", row=i, **where
        )


def normalize_batch(
    batch: pa.RecordBatch | pa.Table,
    table: Table,
    *,
    path: str = "<memory>",
    batch_index: int | None = None,
) -> pa.RecordBatch:
    """Return ``batch`` in the normalized schema of ``table``, or raise ``SchemaError``.

    Columns the spec does not know are dropped; absent optional columns get their default.

    >>> import pyarrow as pa
    >>> from gigi.schema import EVENTS
    >>> b = pa.record_batch({"ts": [5], "kind": ["acquire"], "resource": ["pool"],
    ...                      "task": [1], "thread": [7]})
    >>> normalize_batch(b, EVENTS).to_pylist()
    [{'ts': 5, 'kind': 1, 'resource': 'pool', 'task': 1, 'thread': 7, 'amount': 1, 'dur': 0, \
'object': 0, 'site': None, 'value': None}]
    """
    if isinstance(batch, pa.Table):
        batch = (
            batch.combine_chunks().to_batches()[0]
            if batch.num_rows
            else pa.record_batch([pa.array([], f.type) for f in batch.schema], schema=batch.schema)
        )
    check_schema(batch.schema, table, path)
    n = batch.num_rows
    arrays = []
    for col in table.columns:
        where = {"path": path, "column": col.name, "batch": batch_index}
        idx = batch.schema.get_field_index(col.name)
        if idx < 0:
            arrays.append(pa.repeat(pa.scalar(col.default, type=ARROW_TYPE[col.type]), n))
            continue
        arrays.append(_normalize_column(col, batch.column(idx), where))
    if table.name == "events":
        arrays = _events_rules(arrays, table, path, batch_index)
    return pa.RecordBatch.from_arrays(arrays, schema=table.arrow_schema)


def _events_rules(arrays: list, table: Table, path: str, batch_index: int | None) -> list:
    """Rules of ``events`` that involve more than one column."""
    names = table.column_names
    kind = arrays[names.index("kind")]
    dur = arrays[names.index("dur")]
    where = {"path": path, "column": "dur", "batch": batch_index}
    negative = pc.fill_null(pc.less(dur, 0), False)
    if pc.any(negative).as_py():
        i = _first(negative)
        raise SchemaError(
            f"duration {dur[i].as_py()} is negative, expected ns >= 0", row=i, **where
        )
    # A null dur means "still waiting at the end" only for WAIT; for other kinds it is 0.
    is_wait = pc.equal(kind, 0)
    not_wait_null = pc.and_(pc.is_null(dur), pc.invert(is_wait))
    if pc.any(not_wait_null).as_py():
        arrays[names.index("dur")] = pc.if_else(not_wait_null, 0, dur)
    # |ts| < 2^62 and 0 <= dur: ts + dur cannot overflow where dur < 2^62 as well
    ts = arrays[names.index("ts")]
    late = pc.or_(
        pc.greater_equal(dur, INSTANT_LIMIT), pc.greater_equal(pc.add(ts, dur), INSTANT_LIMIT)
    )
    late = pc.fill_null(late, False)
    if pc.any(late).as_py():
        i = _first(late)
        raise SchemaError(
            f"ts + dur = {ts[i].as_py() + dur[i].as_py()} is out of range, expected it below "
            "2^62 ns",
            row=i,
            **where,
        )
    amount = arrays[names.index("amount")]
    negative = pc.less(amount, 0)
    if pc.any(negative).as_py():
        i = _first(negative)
        raise SchemaError(
            f"amount {amount[i].as_py()} is negative, expected units >= 0",
            path=path,
            column="amount",
            batch=batch_index,
            row=i,
        )
    return arrays


def table_schema(meta: dict[bytes, bytes] | None) -> str:
    """The table a segment holds, by its schema metadata (``events`` when unsaid)."""
    name = (meta or {}).get(META_TABLE, b"events").decode("utf-8", "replace")
    return name


def check_metadata(meta: dict[bytes, bytes] | None, path: str) -> None:
    """Refuse schema metadata whose value trace format v1 does not allow: another version,
    a sampling that is not a whole number >= 1."""
    meta = meta or {}
    version = meta.get(META_VERSION)
    if version is not None and version != VERSION.encode():
        raise SchemaError(
            f"schema metadata gigi.version is {_text(version)!r}, expected {VERSION!r}: "
            f"this reader knows trace format version {VERSION} only",
            path=path,
        )
    every = meta.get(META_SAMPLE_EVERY)
    if every is not None and _whole(every) is None:
        raise SchemaError(
            f"schema metadata gigi.sample_every is {_text(every)!r}, expected a whole number "
            "N >= 1 (one event kept in N)",
            path=path,
        )


def sample_every_of(meta: dict[bytes, bytes] | None) -> int:
    """The N of a segment's ``gigi.sample_every`` (1 when unsaid), once ``check_metadata``
    has accepted it.

    >>> sample_every_of({b"gigi.sample_every": b"10"}), sample_every_of(None)
    (10, 1)
    """
    every = (meta or {}).get(META_SAMPLE_EVERY)
    return 1 if every is None else _whole(every) or 1


def _whole(value: bytes) -> int | None:
    """``value`` as a whole number >= 1 that fits int64, else None."""
    text = _text(value)
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) < 2**63:
        return None
    return int(text)


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")
