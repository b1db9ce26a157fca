"""The native probe runtime: a C program built against it writes segments that round-trip
through ingest exactly; a killed process leaves what it flushed readable; overload drops are
counted exactly; off means no trace; a fork gives two processes of their own."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.ipc as ipc
import pytest

from gigi.cli import main as cli
from gigi.ingest import ingest
from gigi.probes import native
from gigi.queries import connect
from tests.conftest import build_native

PROGRAM = Path(__file__).parent / "native" / "program.c"


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    return build_native(PROGRAM, tmp_path_factory.mktemp("native"))


def run(program: Path, trace: Path | None, *args: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    if trace is not None:
        environ["GIGI_TRACE"] = str(trace)
    environ.update(env)
    return subprocess.run(
        [str(program), *args], env=environ, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_segments_round_trip_through_ingest_exactly(program, tmp_path):
    trace = tmp_path / "trace"
    run(program, trace, "basic", "50")
    for seg in trace.glob("*.arrows"):  # every segment is a plain Arrow IPC stream
        ipc.open_stream(seg.read_bytes()).read_all().validate(full=True)
    manifest = ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store" / manifest.trace_id)
    assert manifest.events == 50 * 4 + 2 and manifest.dropped == 0
    got = rows(
        con,
        """SELECT kind, resource, object, amount, site, value, dur IS NULL
           FROM events ORDER BY seq""",
    )
    want = [(1, "test.log", 0, 4096, None, None, False)]
    for i in range(50):
        a = i % 3 + 1
        want += [
            (0, "test.pool", i, a, 10, None, False),
            (1, "test.pool", i, a, 11, None, False),
            (2, "test.pool", i, 1, 12, 1000 + i, False),
            (3, "test.pool", i, a, None, None, False),
        ]
    want.append((0, "test.log", 0, 1, None, None, True))  # the wait still open at exit
    assert got == want
    # every request is a task of its own, a child of the purge job, and ends
    tasks = rows(con, 'SELECT name, kind, parent, start IS NOT NULL, "end" IS NOT NULL FROM tasks')
    purge = [t for t in tasks if t[0] == "purge"]
    assert purge == [("purge", "background", purge[0][2], True, True)]
    (purge_id,) = rows(con, "SELECT task FROM tasks WHERE name = 'purge'")[0]
    requests = [t for t in tasks if t[0] == "request"]
    assert len(requests) == 50
    assert {(k, p, s, e) for _, k, p, s, e in requests} == {("foreground", purge_id, True, True)}
    per_task = rows(
        con,
        """SELECT count(*) FROM events e JOIN tasks t USING (task)
           WHERE t.name = 'request' GROUP BY task""",
    )
    assert {n for (n,) in per_task} == {4}
    assert rows(con, "SELECT resource, capacity, unit, sharing FROM resources ORDER BY 1") == [
        ("test.log", None, "bytes", "log"),
        ("test.pool", 8, "slots", "pool"),
    ]
    assert rows(con, "SELECT site, file, line, function, kind, verified FROM sites ORDER BY 1") == [
        (10, "src/pool.c", 40, "pool_get", 0, True),
        (11, "src/pool.c", 52, "pool_get", 1, True),
        (12, "src/pool.c", 60, "pool_use", 2, True),
    ]
    # holds pair by the spec's rule: every request's ACQUIRE with its RELEASE
    assert rows(con, "SELECT count(*), count(*) FILTER (WHERE open) FROM holds") == [(51, 1)]
    # waits are recorded with their real length, which is never negative
    assert rows(con, "SELECT min(dur) >= 0 FROM events WHERE kind = 0 AND dur IS NOT NULL") == [
        (True,)
    ]


@pytest.mark.parametrize("clock", ["", "monotonic"])
def test_timestamps_are_the_callers_monotonic_clock(program, tmp_path, clock):
    """Whether the runtime stamps with the TSC (where the kernel's own clock is the TSC) or
    with clock_gettime (GIGI_CLOCK=monotonic), the trace holds CLOCK_MONOTONIC ns: inside the
    span the caller saw, with a 50 ms wait 50 ms long and events 20 ms apart."""
    import time

    trace = tmp_path / "trace"
    before = time.monotonic_ns()
    run(program, trace, "clock", **({"GIGI_CLOCK": clock} if clock else {}))
    after = time.monotonic_ns()
    con = connect(trace)
    (wait_ts, wait_dur), *acquires = rows(con, "SELECT ts, dur FROM events ORDER BY ts")
    start, end = rows(con, "SELECT start, \"end\" FROM tasks WHERE name = 'sleeper'")[0]
    assert before <= start <= wait_ts and acquires[-1][0] <= end <= after
    assert 50e6 <= wait_dur < 50e6 + 10e6
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(acquires)]
    assert len(gaps) == 2 and all(20e6 <= g < 20e6 + 10e6 for g in gaps), gaps
    assert wait_ts + wait_dur <= acquires[0][0]


def test_threads_and_drops_add_up_exactly(program, tmp_path):
    trace = tmp_path / "trace"
    # rings of 64 records and a writer that only drains when nudged: most events are dropped
    out = run(program, trace, "threads", "2000", GIGI_RING_RECORDS="64", GIGI_INTERVAL_MS="100000")
    dropped = int(out)
    manifest = ingest(trace, tmp_path / "store")
    assert dropped > 0
    assert manifest.dropped == dropped
    assert manifest.events + manifest.dropped == 4 * 2000 * 4  # recorded or counted, never lost
    con = connect(tmp_path / "store" / manifest.trace_id)
    assert rows(con, "SELECT count(DISTINCT thread) FROM events") == [(4,)]
    assert rows(con, "SELECT sum(dropped) FROM resources WHERE resource = 'test.pool'") == [
        (dropped,)
    ]


def test_lossless_mode_waits_for_the_writer_instead_of_dropping(program, tmp_path):
    # the same overload, with threads that wait for room: every event is kept
    trace = tmp_path / "trace"
    out = run(
        program,
        trace,
        "threads",
        "2000",
        GIGI_RING_RECORDS="64",
        GIGI_INTERVAL_MS="100000",
        GIGI_BLOCK_MS="-1",
    )
    assert int(out) == 0
    manifest = ingest(trace, tmp_path / "store")
    assert (manifest.events, manifest.dropped) == (4 * 2000 * 4, 0)
    con = connect(tmp_path / "store" / manifest.trace_id)
    # each thread's events in the order it made them, none lost between two segments
    assert rows(
        con,
        "SELECT count(*) FROM (SELECT ts < lag(ts) OVER (PARTITION BY thread ORDER BY seq) AS back"
        " FROM events) WHERE back",
    ) == [(0,)]


def test_a_killed_process_leaves_every_flushed_segment_readable(program, tmp_path):
    trace = tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    env.update(GIGI_TRACE=str(trace), GIGI_INTERVAL_MS="5")
    proc = subprocess.Popen(
        [str(program), "killed", "100"], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "flushed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    manifest = ingest(trace, tmp_path / "store")
    assert manifest.events >= 400  # everything flushed before the kill, and maybe more
    con = connect(tmp_path / "store" / manifest.trace_id)
    firsts = rows(con, "SELECT count(*) FROM events WHERE object < 100")
    assert firsts == [(400,)]


def test_off_records_nothing(program, tmp_path):
    trace = tmp_path / "trace"
    assert run(program, None, "enabled").strip() == "0"
    run(program, None, "basic", "10")
    assert not trace.exists()
    assert run(program, trace, "enabled").strip() == "1"


def test_fork_gives_each_process_its_own_segments_and_tasks(program, tmp_path):
    trace = tmp_path / "trace"
    run(program, trace, "fork", "20")
    pids = {p.name.split("-")[1] for p in trace.glob("events-*.arrows")}
    assert len(pids) == 2
    manifest = ingest(trace, tmp_path / "store")
    assert manifest.events == 3 * 20 * 4  # before the fork once, after it in each process
    con = connect(tmp_path / "store" / manifest.trace_id)
    assert rows(con, "SELECT count(*) FROM tasks WHERE name = 'request'") == [(60,)]
    assert rows(
        con,
        "SELECT count(*) FROM events WHERE object >= 1000000 AND object < 2000000",
    ) == [(80,)]


def test_cli_prints_flags_that_build_a_program(tmp_path, capsys):
    assert cli(["probes", "cflags"]) == 0
    cflags = capsys.readouterr().out.split()
    assert cli(["probes", "libs", "--out", str(tmp_path / "lib")]) == 0
    libs = capsys.readouterr().out.split()
    assert libs[-1] == "-lpthread" and Path(libs[0]).is_file()
    binary = tmp_path / "p"
    subprocess.run([native.compiler(), *cflags, str(PROGRAM), *libs, "-o", str(binary)], check=True)
    assert run(binary, tmp_path / "t", "enabled").strip() == "1"


@pytest.mark.skipif(sys.platform != "linux", reason="the runtime reads Linux thread ids")
def test_events_carry_real_thread_ids(program, tmp_path):
    trace = tmp_path / "trace"
    run(program, trace, "threads", "10")
    manifest = ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store" / manifest.trace_id)
    (pid,) = {p.name.split("-")[1] for p in trace.glob("events-*.arrows")}
    threads = {t for (t,) in rows(con, "SELECT DISTINCT thread FROM events")}
    assert len(threads) == 4 and int(pid) not in threads and all(t > 0 for t in threads)


def test_a_threads_task_is_named_by_what_the_thread_is_called(program, tmp_path):
    """A thread's own task carries the thread's name (a pool's worker-3, a server's process
    title's program) beside its id, not a bare "thread 4711": the process of a server that
    forks one per connection says what it is."""
    trace = tmp_path / "trace"
    run(program, trace, "threads", "10")
    manifest = ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store" / manifest.trace_id)
    threads = {t for (t,) in rows(con, "SELECT DISTINCT thread FROM events")}
    names = {n for (n,) in rows(con, "SELECT name FROM tasks WHERE name LIKE 'worker-%'")}
    assert len(names) == 4 and {int(n.split()[1]) for n in names} == threads, names
    assert {n.split()[0] for n in names} == {f"worker-{k}" for k in range(4)}


def test_nested_events_are_recorded_once_by_the_caller_or_else_the_callee(program, tmp_path):
    """A wrapper and its callee performing the same event record it once, as the wrapper's
    (whose object is the one its callers name), whether its site comes after the call or
    before it. Where the wrapper's site is on a path not taken (a second attempt), the
    callee's is recorded, with its own time, which a scope that silenced its callees lost;
    held back through two wrappers, it is the outer one's when that records its own.
    Releases in a loop of callees are one, the wrapper's, or each recorded when the wrapper
    records none; a function's own event in a loop is recorded each time."""
    trace = tmp_path / "trace"
    run(program, trace, "scopes")
    manifest = ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store" / manifest.trace_id)
    got = rows(con, "SELECT site, object, amount FROM events WHERE site >= 30 ORDER BY ts, seq")
    # a segment leaves out the optional columns whose every row holds the default (no event
    # here waits or carries a value), and the reader fills them in
    columns = {
        c
        for seg in trace.glob("events-*.arrows")
        for c in ipc.open_stream(seg.read_bytes()).schema.names
    }
    assert columns == {"ts", "kind", "resource", "task", "thread", "amount", "object", "site"}
    assert rows(con, "SELECT DISTINCT dur, value FROM events") == [(0, None)]
    assert got == [
        (30, 1, 1),
        (32, 2, 1),
        (31, 3, 1),
        (36, 4, 1),
        (33, 10, 3),
        (34, 15, 1),
        (34, 16, 1),
        (35, 20, 1),
        (35, 21, 1),
    ]


def test_validation_removes_planted_false_candidates_and_keeps_true_ones(program, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gigi.schema import SITES

    trace = tmp_path / "trace"
    run(program, trace, "planted")
    kinds = {10: 0, 11: 1, 12: 2, 13: 3, 20: 1, 21: 3, 22: 2, 23: 0, 30: 1, 31: 1, 32: 3}
    # 31 and 32 are never reached, in a function f20 calls through a helper: 31's ACQUIRE
    # was f20's to record (the outermost of nested events), so it goes with f20's
    functions = {s: f"f{s}" for s in kinds} | {31: "inner", 32: "inner"}
    sites = pa.table(
        {
            "site": list(kinds),
            "file": ["pool.c"] * len(kinds),
            "line": [100 + s for s in kinds],
            "function": [functions[s] for s in kinds],
            "kind": list(kinds.values()),
            "resource": ["test.pool"] * len(kinds),
            "origin": ["heuristic"] * len(kinds),
            "verified": [True] * len(kinds),
        },
        schema=SITES.arrow_schema,
    )
    (tmp_path / "scan" / "hierarchy").mkdir(parents=True)
    pq.write_table(sites, tmp_path / "scan" / "sites.parquet")
    calls = pa.table({"function": ["f20", "helper"], "callee": ["helper", "inner"]})
    pq.write_table(calls, tmp_path / "scan" / "hierarchy" / "calls.parquet")
    out = tmp_path / "valid"
    assert cli(["validate", str(trace), "--sites", str(tmp_path / "scan"), "--out", str(out)]) == 0
    kept = set(pq.read_table(out / "sites.parquet").column("site").to_pylist())
    assert kept == {10, 11, 12, 13, 30, 32}  # never reached: nothing speaks against them
    report = __import__("json").loads((out / "validation.json").read_text())
    assert {r["site"] for r in report["removed"]} == {20, 21, 22, 23, 31}
    why = next(r["reason"] for r in report["removed"] if r["site"] == 31)
    assert why.startswith("not reached: f20 (site 20), which calls inner"), why
    assert {k: v["removed"] for k, v in report["by_kind"].items()} == {
        "WAIT": 1,
        "ACQUIRE": 2,
        "USE": 1,
        "RELEASE": 1,
    }
    assert report["by_kind"]["ACQUIRE"]["exercised"] == 2


def test_validate_without_a_sites_table_says_so(program, tmp_path, capsys):
    trace = tmp_path / "trace"
    run(program, trace, "basic", "3")
    missing = tmp_path / "nowhere"
    assert cli(["validate", str(trace), "--sites", str(missing), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no sites table" in err and str(missing) in err
    assert not (tmp_path / "o").exists()


def test_sampling_keeps_an_objects_events_together_and_says_so(program, tmp_path):
    trace = tmp_path / "trace"
    run(program, trace, "basic", "400", GIGI_SAMPLE="test.pool=4")
    manifest = ingest(trace, tmp_path / "store")
    con = connect(tmp_path / "store" / manifest.trace_id)
    kept = rows(
        con,
        "SELECT object, count(*) FROM events WHERE resource = 'test.pool' GROUP BY object",
    )
    assert {n for _, n in kept} == {4}  # a request's WAIT, ACQUIRE, USE, RELEASE together
    assert 400 * 0.1 < len(kept) < 400 * 0.45
    assert rows(con, "SELECT count(*) FROM holds WHERE resource = 'test.pool' AND open") == [(0,)]
    assert rows(con, "SELECT resource, sample_every FROM resources ORDER BY 1") == [
        ("test.log", 1),
        ("test.pool", 4),
    ]
    assert manifest.sample_every == {"test.pool": 4}
