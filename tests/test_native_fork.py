"""The native runtime never hangs a program that forks, as pre-forking servers do: a child
forked while the parent's writer waits, or while it is mid-flush, runs to its end under load,
and every process's segments read and ingest, each child's events all written or counted as
dropped."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gigi.ingest import ingest, list_segments, open_segment
from gigi.queries import connect
from tests.conftest import build_native

PROGRAM = Path(__file__).parent / "native" / "fork_storm.c"
EVENTS = 2_000_000  # per child (a multiple of 4: pairs, from one thread or two)
HANG = 20  # s: far more than the 0.5 s a run takes, loaded machine included


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    return build_native(PROGRAM, tmp_path_factory.mktemp("native_fork"))


def run(program: Path, trace: Path, *args: str, **env: str) -> None:
    """Run the program and its children to their end; a hang fails the test, and kills them."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    environ.update(GIGI_TRACE=str(trace), **env)
    proc = subprocess.Popen([str(program), *args], env=environ, start_new_session=True)
    try:
        rc = proc.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"fork_storm {' '.join(args)} still running after {HANG} s: hung")
    assert rc == 0, f"a process (or a child it waited for) failed: {rc}"


def read_trace(trace: Path) -> tuple[dict[int, Counter], dict[int, int]]:
    """Read every segment with gigi's reader; per pid, events by emitter and events dropped."""
    events: dict[int, Counter] = {}
    dropped: dict[int, int] = {}
    segments = list_segments(trace)
    assert segments and not list(trace.glob("*.tmp"))
    for path in segments:
        seg = open_segment(path)
        assert seg.schema is not None and seg.bytes_lost == 0, (path.name, seg.notes)
        table = pa.Table.from_batches(list(seg.batches_iter()), schema=seg.schema)
        table.validate(full=True)
        pid = int(seg.schema.metadata[b"gigi.pid"])
        if seg.table == "events":
            who = pc.divide(table["object"], pa.scalar(1_000_000_000, pa.int64()))
            events.setdefault(pid, Counter()).update(who.to_pylist())
        elif seg.table == "resources":
            dropped[pid] = sum(table["dropped"].to_pylist())
    return events, dropped


def check_children(trace: Path, store: Path, children: set[int]) -> None:
    """Each child's events are all in the trace or counted as dropped, none of them twice and
    none of another process's; the trace ingests."""
    events, dropped = read_trace(trace)
    parents = [pid for pid, counts in events.items() if 0 in counts]
    assert len(parents) == 1 and set(events[parents[0]]) == {0}
    by_child = {}
    for pid, counts in events.items():
        if pid != parents[0]:
            (who,) = counts  # a child writes its own events only
            assert counts[who] > 0
            by_child[who] = counts[who] + dropped.get(pid, 0)
    assert by_child == {who: EVENTS for who in children}
    manifest = ingest(trace, store)
    assert manifest.events == sum(sum(c.values()) for c in events.values())
    assert manifest.dropped == sum(dropped.values())
    con = connect(store / manifest.trace_id)
    sql = "SELECT object // 1000000000, count(*) FROM events GROUP BY 1"
    assert dict(con.execute(sql).fetchall()) == dict(sum(events.values(), Counter()))


def test_children_forked_while_the_writer_waits_finish(program, tmp_path):
    # the parent's writer waits on its condition variable when the parent forks; each child's
    # first nudge (its ring half full) signalled the copy, which still counted that writer as a
    # waiter, and blocked forever
    trace = tmp_path / "trace"
    run(program, trace, "late", "4", str(EVENTS))
    check_children(trace, tmp_path / "store", {1, 2, 3, 4})


def test_forks_mid_flush_under_load_finish_and_every_segment_reads(program, tmp_path):
    # three forks while the writer writes a segment out and another thread keeps emitting; each
    # child emits from two threads and the first forks a grandchild (100) of its own
    trace = tmp_path / "trace"
    run(program, trace, "storm", "3", str(EVENTS), GIGI_RING_RECORDS="262144")
    check_children(trace, tmp_path / "store", {1, 2, 3, 100})
