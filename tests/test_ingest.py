import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from gigi.errors import IngestError, SchemaError
from gigi.ingest import ingest, locate
from gigi.queries import run
from tests.conftest import connect_checked, events, write_stream


def _ten(start=0):
    return events(
        ts=list(range(start, start + 10)),
        kind=["ACQUIRE", "RELEASE"] * 5,
        object=pa.array([i // 2 for i in range(10)], pa.int64()),
    )


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def test_stream_file_and_parquet_segments_concatenate_sorted(trace_dir, store):
    write_stream(trace_dir / "a.arrows", _ten(0))
    feather.write_feather(pa.table(_ten(100)), trace_dir / "b.arrow", compression="uncompressed")
    pq.write_table(pa.table(_ten(50)), trace_dir / "c.parquet")
    m = ingest(trace_dir, store)
    assert m.events == 30 and m.segments_read == 3 and m.bytes_lost == 0
    con = connect_checked(store)
    ts = [r[0] for r in run(con, "SELECT ts FROM events ORDER BY seq").fetchall()]
    assert ts == sorted(ts) and len(ts) == 30
    assert run(con, "SELECT count(*) FROM holds WHERE NOT open").fetchall() == [(15,)]


def test_ties_on_ts_keep_segment_order(trace_dir, store):
    write_stream(
        trace_dir / "s.arrows",
        events(
            ts=[5, 5, 5],
            kind=["ACQUIRE", "RELEASE", "ACQUIRE"],
            value=pa.array([1, 2, 3], pa.int64()),
        ),
    )
    ingest(trace_dir, store)
    assert run(connect_checked(store), "SELECT value FROM events ORDER BY seq").fetchall() == [
        (1,),
        (2,),
        (3,),
    ]


def test_truncated_stream_keeps_complete_batches_and_reports_bytes_lost(trace_dir, store):
    path = write_stream(trace_dir / "cut.arrows", _ten(0), batch_rows=2)
    data = path.read_bytes()
    path.write_bytes(data[:-150])  # cut inside the last batch (and the end-of-stream mark)
    m = ingest(trace_dir, store)
    assert m.events == 8
    assert m.bytes_lost > 0
    assert any("cut off after batch 3" in n and f"{m.bytes_lost} bytes lost" in n for n in m.notes)


def test_arrow_file_without_footer_is_read_as_stream(trace_dir, store):
    path = trace_dir / "f.arrow"
    table = pa.table(_ten(0))
    with pa.OSFile(str(path), "wb") as f:
        w = ipc.new_file(f, table.schema)
        for b in table.to_batches(max_chunksize=5):
            w.write_batch(b)
        # the writer dies here: no footer
    m = ingest(trace_dir, store)
    assert m.events == 10
    assert any("without its footer" in n for n in m.notes)


def test_empty_segment_is_noted_not_fatal(trace_dir, store):
    write_stream(trace_dir / "a.arrows", _ten(0))
    (trace_dir / "b.arrows").write_bytes(b"")
    m = ingest(trace_dir, store)
    assert m.events == 10
    assert any("b.arrows: empty segment" in n for n in m.notes)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("g.arrows", b"this is not arrow at all" * 10, "g.arrows: not an Arrow IPC stream"),
        ("g.parquet", b"PAR1 garbage", "g.parquet: not a Parquet file"),
        ("g.arrow", b"garbage garbage", "g.arrow: not an Arrow IPC file"),
    ],
)
def test_garbage_segment_is_refused_by_name(trace_dir, store, name, content, message):
    write_stream(trace_dir / "a.arrows", _ten(0))
    (trace_dir / name).write_bytes(content)
    with pytest.raises(SchemaError, match=message):
        ingest(trace_dir, store)


def test_wrong_type_and_missing_column_are_refused(trace_dir, store):
    bad = _ten(0)
    bad["task"] = pa.array(["x"] * 10)
    write_stream(trace_dir / "bad.arrows", bad)
    with pytest.raises(SchemaError, match=r"bad.arrows, column 'task': has type string"):
        ingest(trace_dir, store)
    bad = _ten(0)
    del bad["thread"]
    write_stream(trace_dir / "bad.arrows", bad)
    with pytest.raises(SchemaError, match=r"column 'thread': required column"):
        ingest(trace_dir, store)


def test_bad_row_in_a_later_batch_is_named(trace_dir, store):
    cols = _ten(0)
    cols["kind"] = ["ACQUIRE"] * 7 + ["GRAB"] + ["RELEASE"] * 2
    write_stream(trace_dir / "rows.arrows", cols, batch_rows=3)
    with pytest.raises(
        SchemaError, match=r"rows.arrows, column 'kind', batch 2, row 1: kind 'GRAB'"
    ):
        ingest(trace_dir, store)


def test_refused_trace_leaves_the_store_as_it_was(trace_dir, store, tmp_path):
    write_stream(trace_dir / "a.arrows", _ten(0))
    m = ingest(trace_dir, store)
    before = _tree(store)
    write_stream(trace_dir / "z.arrows", events(ts=[1], kind=["NOPE"]))
    with pytest.raises(SchemaError):
        ingest(trace_dir, store)
    assert _tree(store) == before
    assert [p.name for p in store.iterdir()] == [m.trace_id]


def test_reingest_is_identical_and_a_second_trace_lands_beside(trace_dir, store, tmp_path):
    write_stream(trace_dir / "a.arrows", _ten(0), batch_rows=3)
    write_stream(
        trace_dir / "t.arrows",
        {"task": pa.array([1], pa.int64()), "name": ["one"]},
        metadata={"gigi.table": "tasks"},
    )
    first = ingest(trace_dir, store)
    tree = _tree(store)
    again = ingest(trace_dir, store)
    assert again.trace_id == first.trace_id
    assert _tree(store) == tree
    other = tmp_path / "other"
    other.mkdir()
    write_stream(other / "a.arrows", _ten(500))
    second = ingest(other, store)
    assert second.trace_id != first.trace_id
    assert sorted(p.name for p in store.iterdir()) == sorted([first.trace_id, second.trace_id])
    with pytest.raises(IngestError, match="store holds 2 traces, pick one with --trace"):
        locate(store)
    assert locate(store, second.trace_id).manifest.events == 10


def test_rows_of_one_task_from_several_segments_merge(trace_dir, store):
    write_stream(trace_dir / "a.arrows", _ten(0))
    write_stream(
        trace_dir / "t1.arrows",
        {"task": pa.array([1], pa.int64()), "name": ["job"], "start": pa.array([10], pa.int64())},
        metadata={"gigi.table": "tasks"},
    )
    write_stream(
        trace_dir / "t2.arrows",
        {"task": pa.array([1], pa.int64()), "end": pa.array([99], pa.int64())},
        metadata={"gigi.table": "tasks"},
    )
    ingest(trace_dir, store)
    assert run(connect_checked(store), 'SELECT task, name, start, "end" FROM tasks').fetchall() == [
        (1, "job", 10, 99)
    ]


def test_missing_or_empty_trace_dir(tmp_path, store):
    with pytest.raises(IngestError, match="no such trace directory"):
        ingest(tmp_path / "nope", store)
    (tmp_path / "empty").mkdir()
    with pytest.raises(IngestError, match="no segments"):
        ingest(tmp_path / "empty", store)


_VICTIM = textwrap.dedent("""
    import sys, time
    import gigi.probes as gp
    gp.enable(sys.argv[1], interval=0.02)
    pool = gp.resource("kill.pool", capacity=8)
    i = 0
    while True:
        with gp.task("loop"):
            pool.acquire(i % 8); pool.use(i % 8); pool.release(i % 8)
        i += 1
        if i == 2000:
            print("ready", flush=True)
        if i % 200 == 0:
            time.sleep(0.001)
""")


def test_sigkill_leaves_every_flushed_segment_readable(trace_dir, store):
    proc = subprocess.Popen(
        [sys.executable, "-c", _VICTIM, str(trace_dir)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while len(list(trace_dir.glob("events-*.arrows"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    m = ingest(trace_dir, store)
    assert m.events >= 3 and m.bytes_lost == 0
    con = connect_checked(store)
    kinds = run(con, "SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind").fetchall()
    counts = [n for _, n in kinds]
    # Events of one loop iteration may straddle the last flush, never more.
    assert max(counts) - min(counts) <= 2
