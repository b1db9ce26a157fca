"""Writing query results in the formats every read command offers."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pyarrow as pa

from gigi._interrupts import write_atomic
from gigi.errors import QueryError

FORMATS = ("table", "csv", "json", "parquet", "arrow")
_BINARY = {"parquet", "arrow"}


def write_result(
    table: pa.Table, fmt: str, output: Path | None, *, title: str | None = None, limit: int = 200
) -> None:
    """Write ``table`` as ``fmt`` to ``output`` (a file) or to stdout."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown format {fmt!r}, expected one of {', '.join(FORMATS)}")
    if fmt in _BINARY and output is None and sys.stdout.isatty():
        raise QueryError(f"{fmt} is binary: give --output FILE or redirect stdout")
    if fmt == "table":
        if output is not None:
            text = io.StringIO()
            _print_table(table, text, title, limit=None)
            write_atomic(output, text.getvalue())
        else:
            _print_table(table, sys.stdout, title, limit)
        return
    data = _encode(table, fmt)
    if output is not None:
        write_atomic(output, data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


def _encode(table: pa.Table, fmt: str) -> bytes:
    sink = io.BytesIO()
    if fmt == "csv":
        _write_csv(table, sink)
    elif fmt == "json":
        rows = table.to_pylist()
        sink.write((json.dumps(rows, indent=1, default=str) + "\n").encode())
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
    else:
        import pyarrow.ipc as ipc

        with ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    return sink.getvalue()


def _write_csv(table: pa.Table, sink: io.BytesIO) -> None:
    """CSV has no lists, structs or maps: a column Arrow cannot write as CSV is written as text,
    each value as JSON (``[1, 2]``, ``{"a": 1}``), so that every result has a CSV."""
    import pyarrow.csv as pcsv

    try:
        pcsv.write_csv(table, sink)
        return
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        sink.seek(0)
        sink.truncate()
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            pcsv.write_csv(pa.table({name: column}), io.BytesIO())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            column = pa.array(
                [None if v is None else _json_text(v) for v in column.to_pylist()], pa.string()
            )
        columns.append(column)
    try:
        pcsv.write_csv(pa.table(columns, names=table.column_names), sink)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        first = str(e).splitlines()[0]
        raise QueryError(f"csv cannot hold this result ({first}): use json or parquet") from None


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def _print_table(table: pa.Table, file, title: str | None, limit: int | None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # the data is shown as it is: Text never reads markup ([red]) or emoji codes (:smile:)
    console = Console(file=file, width=None if file.isatty() else 200)
    shown = table if limit is None else table.slice(0, limit)
    t = Table(
        title=None if title is None else Text(title), title_justify="left", title_style="bold"
    )
    for field in table.schema:
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        t.add_column(Text(field.name), justify="right" if numeric else "left", overflow="fold")
    for row in shown.to_pylist():
        t.add_row(*(Text("" if v is None else _fmt(v)) for v in row.values()))
    console.print(t)
    if limit is not None and table.num_rows > limit:
        console.print(f"({table.num_rows - limit} more rows; use --format csv or --output for all)")


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1e15 else str(v)
    return str(v)
