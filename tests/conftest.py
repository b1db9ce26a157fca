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


S = 1_000_000_000


def perf_line(ts: int, tid: int, function: str, comm: str = "app") -> str:
    """One sample as `perf script` prints it without -g (the layout of tests/perf/flat.txt)."""
    return (
        f"{comm:>16} {tid:5d} {ts // S:5d}.{ts % S:09d}:     250000 cpu-clock:  "
        f"    55d8e866d530 {function}+0x15 (/srv/app/app)\n"
    )


def write_tasks(path: Path, rows: list[tuple]) -> None:
    task, name, start, end = zip(*rows, strict=True)
    write_stream(
        path,
        {
            "task": pa.array(task, pa.int64()),
            "name": list(name),
            "start": pa.array(start, pa.int64()),
            "end": pa.array(end, pa.int64()),
        },
        metadata={b"gigi.table": b"tasks"},
    )


@pytest.fixture
def contended(trace_dir, tmp_path):
    """A compaction (task 1, thread 10) holds a lock 0-1 s; requests 2 and 3 (threads 20, 30)
    wait for it 0.1-1 s. Perf saw the compaction's thread in compact_everything (80%) and
    memmove (20%) during the waits, in idle_loop afterwards, and the requests spin."""
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[0, S // 10, S // 10, S, S, S, S, S, S, 2 * S],
            kind=["ACQUIRE", "WAIT", "WAIT", "RELEASE"]
            + ["ACQUIRE", "RELEASE", "ACQUIRE", "RELEASE"]
            + ["USE", "USE"],
            resource=["app.table_lock"] * 8 + ["app.other"] * 2,
            task=[1, 2, 3, 1, 2, 2, 3, 3, 1, 1],
            thread=[10, 20, 30, 10, 20, 20, 30, 30, 10, 10],
            dur=pa.array([0, 9 * S // 10, 9 * S // 10, 0, 0, 0, 0, 0, 0, 0], pa.int64()),
        ),
    )
    write_tasks(
        trace_dir / "t.arrows",
        [(1, "compaction", 0, 2 * S), (2, "request", S // 10, S), (3, "request", S // 10, S)],
    )
    perf = tmp_path / "perf.txt"
    lines = []
    for i in range(100):  # every 9 ms between 0.1 and 1 s
        ts = S // 10 + i * 9_000_000
        lines.append(perf_line(ts, 10, "memmove" if i % 5 == 0 else "compact_everything"))
        lines.append(perf_line(ts + 1000, 20, "spin_wait"))
    lines += [perf_line(3 * S // 2 + i, 10, "idle_loop") for i in range(300)]
    perf.write_text("".join(lines))
    return trace_dir, perf


def build_native(source: Path, work: Path) -> Path:
    """``source`` (C, against the native probes) compiled with warnings as errors and linked
    to the runtime built in ``work``; the binary, named after the source."""
    import subprocess

    from gigi.probes import native

    binary = work / source.stem
    subprocess.run(
        [native.compiler(), "-O2", "-Wall", "-Werror", *native.cflags(), str(source)]
        + native.libs(work / "lib")
        + ["-o", str(binary)],
        check=True,
    )
    return binary
