from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import gigi.probes as gp


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    d = tmp_path / "trace"
    d.mkdir()
    return d


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(autouse=True)
def _recording_off():
    yield
    if gp.is_enabled():
        gp.disable()


def write_stream(
    path: Path, table: pa.Table | dict, metadata: dict | None = None, batch_rows: int | None = None
) -> Path:
    """A segment in Arrow IPC stream format, the way any writer might make one."""
    if isinstance(table, dict):
        table = pa.table(table)
    if metadata:
        table = table.replace_schema_metadata(metadata)
    with pa.OSFile(str(path), "wb") as f, ipc.new_stream(f, table.schema) as w:
        for batch in table.to_batches(max_chunksize=batch_rows):
            w.write_batch(batch)
    return path


def events(**cols) -> dict:
    """A minimal events table: ts, kind, resource, task and thread, plus any other columns."""
    n = len(cols["ts"])
    base = {
        "ts": pa.array(cols.pop("ts"), pa.int64()),
        "kind": cols.pop("kind"),
        "resource": cols.pop("resource", ["r"] * n),
        "task": pa.array(cols.pop("task", [1] * n), pa.int64()),
        "thread": pa.array(cols.pop("thread", [1] * n), pa.int64()),
    }
    base.update(cols)
    return base


def connect_checked(target, **kwargs):
    """``gigi.queries.connect``, after asserting the ingested trace's invariants hold."""
    from gigi.queries import connect, self_check

    con = connect(target, **kwargs)
    assert self_check(con) == []
    return con
