"""The instrumenter: probes at every verified site of the corpus, code that compiles, the
original recovered byte for byte, and a scanned, instrumented C program diagnosed end to end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gigi.cli import main as cli
from gigi.probes import native
from gigi.scan._instrument import strip
from tests.test_scan_rules import CAS_LOCK

HERE = Path(__file__).parent
CORPUS = HERE / "scan_corpus"


def build(tmp_path: Path, name: str, *sources: Path, flags: tuple = ()) -> Path:
    """SOURCES compiled and linked with the native runtime into TMP_PATH/NAME."""
    binary = tmp_path / name
    subprocess.run(
        [
            native.compiler(),
            "-O2",
            *flags,
            *native.cflags(),
            *map(str, sources),
            *native.libs(tmp_path / "lib"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    return binary


def run_traced(binary: Path, tmp_path: Path, *args: str) -> tuple[Path, bytes]:
    """BINARY run with GIGI_TRACE=TMP_PATH/trace: the trace and what it printed."""
    trace = tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    done = subprocess.run(
        [str(binary), *args],
        env={**env, "GIGI_TRACE": str(trace)},
        check=True,
        capture_output=True,
    )
    return trace, done.stdout


def compile_object(source: Path, obj: Path) -> subprocess.CompletedProcess:
    """SOURCE compiled (not linked) with the native runtime's flags, as C11 with warnings."""
    return subprocess.run(
        [
            native.compiler(),
            "-std=c11",
            "-Wall",
            *native.cflags(),
            "-c",
            str(source),
            "-o",
            str(obj),
        ],
        capture_output=True,
        text=True,
    )


def scan_and_probe(tmp_path: Path, name: str, text: str) -> tuple[Path, dict]:
    """TEXT as TMP_PATH/src/NAME, scanned and instrumented through the CLI: the folder of
    the probed sources and the instrumenter's report."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / name).write_text(text)
    assert cli(["scan", str(src), "--out", str(tmp_path / "sites")]) == 0
    out = tmp_path / "probed"
    assert cli(["instrument", str(src), "--sites", str(tmp_path / "sites"), "--out", str(out)]) == 0
    return out, json.loads((out / "gigi-instrument.json").read_text())


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("instrument")
    assert cli(["scan", str(CORPUS), "--out", str(work / "sites")]) == 0
    assert (
        cli(["instrument", str(CORPUS), "--sites", str(work / "sites"), "--out", str(work / "src")])
        == 0
    )
    return work / "sites", work / "src"


def test_every_site_is_placed_and_the_rest_is_byte_identical(probed):
    sites, src = probed
    report = json.loads((src / "gigi-instrument.json").read_text())
    table = pq.read_table(sites / "sites.parquet")
    assert report["placed"] == report["sites"] == table.num_rows > 0 and not report["skipped"]
    assert {p["kind"] for p in report["placements"]} == {"WAIT", "ACQUIRE", "USE", "RELEASE"}
    for original in CORPUS.iterdir():
        copy = src / original.name
        if original.name in report["files"]:
            assert copy.read_text() != original.read_text()
            assert strip(copy.read_text()) == original.read_text()
        else:
            assert copy.read_bytes() == original.read_bytes()


def test_the_instrumented_corpus_compiles_for_every_site_kind(probed, tmp_path):
    """With no warning of the probes' making, under the warnings a real build turns on
    (PostgreSQL's -Wdeclaration-after-statement, in every file that includes the header)."""
    _, src = probed
    for f in sorted(src.iterdir()):
        if f.suffix not in (".c", ".cc"):
            continue
        cc = native.compiler() if f.suffix == ".c" else "c++"
        std = "-std=c11" if f.suffix == ".c" else "-std=c++17"
        strict = ["-Wdeclaration-after-statement"] if f.suffix == ".c" else []
        out = subprocess.run(
            [
                cc,
                std,
                "-Wall",
                *strict,
                *native.cflags(),
                "-c",
                str(f),
                "-o",
                str(tmp_path / "x.o"),
            ],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, f"{f.name}: {out.stderr}"
        assert "gigi" not in out.stderr, out.stderr  # no warning of our making


def test_a_scanned_instrumented_program_is_diagnosed_with_its_source_lines(probed, tmp_path):
    sites, src = probed
    binary = build(tmp_path, "conn", src / "conn_pool.c", HERE / "native" / "conn_driver.c")
    trace, _ = run_traced(binary, tmp_path, "8", "200")
    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    d = json.loads(out.read_text())
    top = d["findings"][0]
    assert (top["rank"], top["resource"], top["failure_mode"]) == (
        1,
        "conn_pool",
        "under_provisioning",
    )
    assert {
        "file": "conn_pool.c",
        "line": 27,
        "function": "pool_checkout",
        "kind": "WAIT",
        "role": "victim",
    } in top["sites"]
    # the run speaks for every conn_pool site it reached
    valid = tmp_path / "valid"
    assert cli(["validate", str(trace), "--sites", str(sites), "--out", str(valid)]) == 0
    report = json.loads((valid / "validation.json").read_text())
    assert report["removed"] == []
    assert report["by_kind"]["WAIT"]["exercised"] == 1
    assert {k: v["exercised"] for k, v in report["by_kind"].items()} == {
        "WAIT": 1,
        "ACQUIRE": 1,
        "USE": 1,
        "RELEASE": 1,
    }


def test_a_wait_on_a_branch_spans_the_branch_and_compiles(tmp_path):
    original = (HERE / "native" / "block_cache.c").read_text()
    out, report = scan_and_probe(tmp_path, "block_cache.c", original)
    wait = next(p for p in report["placements"] if p["kind"] == "WAIT")
    assert (wait["function"], wait["line"], wait["placed"]) == ("bc_get", 44, True)
    assert wait["how"] == "around the branch at line 44"
    text = (out / "block_cache.c").read_text()
    assert strip(text) == original
    # the wait begins first thing in the miss's block, on its line; it ends with the block
    line = text[text.index('#line 1 "block_cache.c"') :].splitlines()[44]
    assert line.startswith("    if (b == NULL) {/*gigi{*/int gigi_in_wait_"), line
    assert "gigi_wait_begin(" in line and "cleanup(gigi_wait_cleanup)" in line
    done = compile_object(out / "block_cache.c", tmp_path / "x.o")
    assert done.returncode == 0 and "gigi" not in done.stderr, done.stderr


def test_instrument_refuses_a_folder_that_holds_files(probed, tmp_path, capsys):
    sites, _ = probed
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.c").write_text("int x;\n")
    code = cli(["instrument", str(CORPUS), "--sites", str(sites), "--out", str(busy)])
    assert code == 2 and "already holds files" in capsys.readouterr().err
    assert (busy / "mine.c").read_text() == "int x;\n"


def test_a_log_counted_by_its_end_position_records_how_far_it_moved(tmp_path):
    """A log whose size is its header's end position (frame_log.hdr.max_frame, as SQLite's
    WAL keeps WalIndexHdr.mxFrame): the scan makes it a resource of its own, the instrumenter
    records each change of that member, and the events add up to the frames in the log."""
    src = HERE / "native" / "frame_log"
    sites = tmp_path / "sites"
    assert cli(["scan", str(src), "--out", str(sites)]) == 0
    resources = {r["resource"]: r for r in pq.read_table(sites / "resources.parquet").to_pylist()}
    log = resources["frame_log.frames"]
    assert (log["sharing"], log["unit"], log["level"]) == ("log", "frames", "hdr.max_frame")
    # the cursor's own position is stepped (c->frame++), never set to a count: not a log
    assert not any(r.startswith("log_cursor") for r in resources)
    found = {
        (s["function"], s["kind"])
        for s in pq.read_table(sites / "sites.parquet").to_pylist()
        if s["resource"] == "frame_log.frames"
    }
    assert found == {("log_append", "ACQUIRE"), ("log_restart", "RELEASE")}
    out = tmp_path / "probed"
    assert cli(["instrument", str(src), "--sites", str(sites), "--out", str(out)]) == 0
    assert strip((out / "frame_log.c").read_text()) == (src / "frame_log.c").read_text()
    binary = build(
        tmp_path,
        "frame_log",
        out / "frame_log.c",
        HERE / "native" / "frame_log_driver.c",
        flags=("-Wall", "-Werror"),
    )
    trace, stdout = run_traced(binary, tmp_path)
    assert stdout.split() == [b"0", b"1"]  # the reader kept the first checkpoint back
    from gigi.queries import connect

    moved = connect(trace).execute(
        "SELECT t.name, e.kind, e.amount FROM events e JOIN tasks t USING (task) "
        "WHERE e.resource = 'frame_log.frames' ORDER BY e.seq"
    )
    assert moved.fetchall() == [
        ("append 5", 1, 5),
        ("append 3", 1, 3),
        ("checkpoint", 3, 8),
        ("append 2", 1, 2),
    ]


def test_only_functions_that_may_call_a_site_of_their_own_kind_open_a_scope(tmp_path):
    """A wrapper whose callee performs the same event opens a scope, so that the event is
    recorded once; a function that calls no such site only checks that no caller has one
    open; a call through a function pointer may reach anything."""
    from gigi.scan._instrument import _Nesting

    hierarchy = tmp_path / "hierarchy"
    hierarchy.mkdir()
    calls = [
        ("pool_put", "pool_put_locked", False),
        ("pool_put_locked", "memset", False),
        ("pool_drain", "release_hook", True),
    ]
    pq.write_table(
        pa.table(
            {
                "function": [c[0] for c in calls],
                "file": ["p.c"] * 3,
                "callee": [c[1] for c in calls],
                "line": [1, 2, 3],
                "indirect": [c[2] for c in calls],
            }
        ),
        hierarchy / "calls.parquet",
    )
    pq.write_table(
        pa.table({"name": ["pool_put", "pool_put_locked", "pool_drain"], "file": ["p.c"] * 3}),
        hierarchy / "functions.parquet",
    )
    sites = [
        {"function": f, "kind": "RELEASE", "resource": "pool", "verified": True}
        for f in ("pool_put", "pool_put_locked", "pool_drain")
    ]
    nesting = _Nesting(hierarchy, sites)
    assert nesting.own_scope("pool_put", "RELEASE", "pool")
    assert not nesting.own_scope("pool_put_locked", "RELEASE", "pool")
    assert nesting.own_scope("pool_drain", "RELEASE", "pool")
    assert not nesting.own_scope("pool_put", "ACQUIRE", "pool")
    # without a call graph, every function keeps its scope
    assert _Nesting(tmp_path / "none", sites).own_scope("pool_put_locked", "RELEASE", "pool")


def test_connections_lost_on_an_error_path_are_a_leak(probed, tmp_path):
    """gigi's own loop on a small server core: the scanned and instrumented pool, twelve
    connections, an error path that never checks its connection back in. The later requests
    wait for any connection while the running ones hold three: rank 1 is the leak, and its
    culprits are requests that took the error path."""
    _, src = probed
    binary = build(tmp_path, "leak", src / "conn_pool.c", HERE / "native" / "conn_leak_driver.c")
    trace, printed = run_traced(binary, tmp_path, "16", "60")
    assert b"lost 9 connections" in printed
    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    top = json.loads(out.read_text())["findings"][0]
    assert (top["rank"], top["resource"], top["failure_mode"]) == (1, "conn_pool", "leak"), top
    assert top["evidence"]["lost_units"] >= 6, top["evidence"]


SEM_API = """#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <time.h>

/* a lock API: each function's job is one call to the platform's semaphores */
void my_sem_wait(sem_t *sem) { sem_wait(sem); }
void my_sem_post(sem_t *sem) { sem_post(sem); }

static sem_t sem;

static void *worker(void *arg) {
    (void)arg;
    my_sem_wait(&sem);
    my_sem_post(&sem);
    return NULL;
}

int main(void) {
    pthread_t t;
    struct timespec pause = {0, 50 * 1000 * 1000};
    sem_init(&sem, 0, 1);
    my_sem_wait(&sem);  /* the only unit, held while the worker waits for it */
    pthread_create(&t, NULL, worker, NULL);
    nanosleep(&pause, NULL);
    my_sem_post(&sem);
    pthread_join(t, NULL);
    printf("done\\n");
    return 0;
}
"""


def test_a_wait_that_is_one_blocking_call_spans_the_call(tmp_path):
    """A lock API's wait (its job is sem_wait): the WAIT begins before the call and ends with
    it, before the ACQUIRE placed after the same statement; the worker's wait lasts as long
    as the main thread held the unit. The main thread's call, on a free unit, took the fast
    way (under GIGI_SLOW_CALL_NS): no wait is recorded for it."""
    out, report = scan_and_probe(tmp_path, "sem_api.c", SEM_API)
    how = {(p["function"], p["kind"]): p["how"] for p in report["placements"] if p["placed"]}
    assert how[("my_sem_wait", "WAIT")] == "around the call at line 7"
    assert strip((out / "sem_api.c").read_text()) == SEM_API
    binary = build(tmp_path, "sem_api", out / "sem_api.c", flags=("-Wall", "-Werror", "-pthread"))
    trace, stdout = run_traced(binary, tmp_path)
    assert stdout == b"done\n"
    from gigi.queries import connect

    events = (
        connect(trace)
        .execute("SELECT task, kind, dur FROM events WHERE resource = 'sem_t' ORDER BY seq")
        .fetchall()
    )
    by_task: dict[int, list] = {}
    for task, kind, dur in events:
        by_task.setdefault(task, []).append((kind, dur))
    kinds = sorted([k for k, _ in e] for e in by_task.values())
    assert kinds == [[0, 1, 3], [1, 3]]  # the worker: WAIT, ACQUIRE, RELEASE; main: no wait
    waits = [d for e in by_task.values() for k, d in e if k == 0]
    assert waits[0] >= 40_000_000  # ns: the worker waited ~50 ms


WRAPPED = """#include <stdio.h>
#include <stddef.h>

/* A pool of four buffers: handed out pinned, or NULL when all are taken. */
typedef struct buf { int pinned; struct buf *next_free; char data[64]; } buf_t;
typedef struct buf_pool { buf_t bufs[4]; buf_t *free_list; int n_free; } buf_pool_t;

static buf_pool_t pool;

buf_t *pool_get(buf_pool_t *p)
{
    buf_t *b = p->free_list;
    if (b == NULL)
        return NULL;
    p->free_list = b->next_free;
    p->n_free--;
    b->pinned = 1;
    return b;
}

void pool_put(buf_pool_t *p, buf_t *b)
{
    b->pinned = 0;
    b->next_free = p->free_list;
    p->free_list = b;
    p->n_free++;
}

/* the interface: a wrapper of the pool's own */
buf_t *buf_get(buf_pool_t *p) { return pool_get(p); }
void buf_put(buf_pool_t *p, buf_t *b) { pool_put(p, b); }

int main(void)
{
    for (int i = 0; i < 4; i++)
        pool_put(&pool, &pool.bufs[i]);
    buf_t *got[6];
    int n = 0;
    for (int i = 0; i < 6; i++) {
        buf_t *b = buf_get(&pool);
        if (b != NULL)
            got[n++] = b;
    }
    for (int i = 0; i < n; i++)
        buf_put(&pool, got[i]);
    printf("%d\\n", n);
    return 0;
}
"""


def test_an_acquire_handed_back_by_a_return_is_recorded_only_when_it_got_something(tmp_path):
    """A wrapper that returns what its callee acquired records the ACQUIRE after the call,
    with what it returned as the object, and only when that is not NULL: six tries on a
    pool of four record four ACQUIREs, each released by its own object."""
    out, report = scan_and_probe(tmp_path, "wrapped.c", WRAPPED)
    how = {(p["function"], p["kind"]): p["how"] for p in report["placements"] if p["placed"]}
    assert how[("buf_get", "ACQUIRE")].startswith("on what the return at line")
    assert strip((out / "wrapped.c").read_text()) == WRAPPED
    binary = build(tmp_path, "wrapped", out / "wrapped.c", flags=("-Wall", "-Werror"))
    trace, stdout = run_traced(binary, tmp_path)
    assert stdout == b"4\n"
    from gigi.queries import connect

    con = connect(trace)
    rows = con.execute(
        "SELECT kind, count(*), count(DISTINCT object), min(object) FROM events"
        " WHERE resource = 'buf_pool' AND kind IN (1, 3) GROUP BY kind ORDER BY kind"
    ).fetchall()
    # the main loop's four pool_puts before any get are RELEASEs too: 4 + 4
    assert [(k, n, d) for k, n, d, _ in rows] == [(1, 4, 4), (3, 8, 4)], rows
    assert all(lowest != 0 for *_, lowest in rows)


GUARDED_HEADER = """#ifndef POOL_H
#define POOL_H
#include <pthread.h>
/* a pool of connections, its lock taken by the functions below */
typedef struct conn { struct conn *next; int fd; } conn;
typedef struct pool { pthread_mutex_t mu; conn *free; int n_free; int max_conns; } pool;

static inline void pool_lock(pool *p)
{
    pthread_mutex_lock(&p->mu);
}

static inline void pool_unlock(pool *p)
{
    pthread_mutex_unlock(&p->mu);
}
#endif
"""

TWICE = """#include "pool.h"
#include "pool.h"

int pool_count(pool *p)
{
    int n;
    pool_lock(p);
    n = p->n_free;
    pool_unlock(p);
    return n;
}
"""


def test_a_header_with_sites_included_twice_compiles(tmp_path):
    """Sites in a header (a lock API defined inline) put its resource ids and its sites'
    registration before and after the header's own guard: a file that includes the header
    twice still compiles, and stripping the marks gives the header back byte for byte."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "pool.h").write_text(GUARDED_HEADER)
    (src / "main.c").write_text(TWICE)
    assert cli(["scan", str(src), "--out", str(tmp_path / "sites")]) == 0
    out = tmp_path / "probed"
    assert cli(["instrument", str(src), "--sites", str(tmp_path / "sites"), "--out", str(out)]) == 0
    placed = json.loads((out / "gigi-instrument.json").read_text())["placements"]
    assert {p["file"] for p in placed if p["placed"]} == {"pool.h"}, placed
    assert strip((out / "pool.h").read_text()) == GUARDED_HEADER
    done = compile_object(out / "main.c", tmp_path / "main.o")
    assert done.returncode == 0, done.stderr


# the spin lock of tests/test_scan_rules.py, taken by a program
SPIN = (
    CAS_LOCK
    + """#include <pthread.h>
#include <stdio.h>
#include <time.h>

static slab_t slab;

static void *hog(void *arg)
{
    (void)arg;
    struct timespec pause = {0, 50000000};
    spin_lock(&slab.mutex, 2);
    nanosleep(&pause, NULL);
    spin_unlock(&slab.mutex, 2);
    return NULL;
}

int main(void)
{
    /* a thousand takes nobody contends: no wait; then one behind a 50 ms hold */
    for (int i = 0; i < 1000; i++) {
        spin_lock(&slab.mutex, 1);
        spin_unlock(&slab.mutex, 1);
    }
    pthread_t t;
    pthread_create(&t, NULL, hog, NULL);
    struct timespec pause = {0, 10000000};
    nanosleep(&pause, NULL);
    spin_lock(&slab.mutex, 1);
    spin_unlock(&slab.mutex, 1);
    pthread_join(t, NULL);
    printf("done\\n");
    return 0;
}
"""
)


# the same lock, its loop waiting in a call only when the word is taken (PostgreSQL's PinBuffer
# around WaitBufHdrUnlocked): a probe before that if would begin a wait on every take
SPIN_WAITING = SPIN.replace(
    """void spin_lock(spin_t *mtx, long me) {
    for (;;) {
        if (mtx->lock == 0 && __sync_bool_compare_and_swap(&mtx->lock, 0, me))
            return;
        sched_yield();
    }
}""",
    """static void spin_wait_unlocked(spin_t *mtx) { while (mtx->lock != 0) sched_yield(); }
void spin_lock(spin_t *mtx, long me) {
    for (;;) {
        if (mtx->lock != 0)
            spin_wait_unlocked(mtx);
        if (__sync_bool_compare_and_swap(&mtx->lock, 0, me))
            return;
    }
}""",
)


# and with that call the statement of a case: a probe before its label would never run
SPIN_SWITCHED = SPIN_WAITING.replace(
    """        if (mtx->lock != 0)
            spin_wait_unlocked(mtx);""",
    """        switch (mtx->lock != 0) {
        case 1:
            spin_wait_unlocked(mtx);
            break;
        default:
            break;
        }""",
)


@pytest.mark.parametrize(
    "text", [SPIN, SPIN_WAITING, SPIN_SWITCHED], ids=["yield", "wait-call", "wait-case"]
)
def test_a_loop_that_always_runs_once_waits_only_when_it_goes_round_again(tmp_path, text):
    """A spin lock's ``for (;;)`` runs its body once on every take: that first pass is the
    fast path, no wait. A thousand takes nobody contends record no WAIT (a WAIT of a few ns
    each, the whole trace over); the one behind a 50 ms hold records one, as long as that."""
    assert text.count("spin_lock(spin_t") == 1
    out, report = scan_and_probe(tmp_path, "spin.c", text)
    how = {(p["function"], p["kind"]): p["how"] for p in report["placements"] if p["placed"]}
    loop = next(i for i, x in enumerate(text.splitlines(), 1) if "for (;;)" in x)
    assert how[("spin_lock", "WAIT")] == f"around the loop at line {loop}"
    binary = build(tmp_path, "spin", out / "spin.c", flags=("-Wall", "-Werror", "-pthread"))
    trace, stdout = run_traced(binary, tmp_path)
    assert stdout == b"done\n"
    from gigi.queries import connect

    con = connect(trace)
    waits = con.execute(
        "SELECT dur FROM events AS e JOIN sites AS s USING (site) "
        "WHERE e.kind = 0 AND s.function = 'spin_lock' ORDER BY seq"
    ).fetchall()
    takes = con.execute("SELECT count(*) FROM events WHERE kind = 1").fetchone()[0]
    assert takes == 1002 and len(waits) == 1, (takes, waits)
    assert waits[0][0] >= 30_000_000  # ns: behind the hog's 50 ms hold


DECLARED_FIRST = """
#include <pthread.h>
#include <stddef.h>

/* a pool of connections: taken from its free list, waited for when none is free */
typedef struct conn { struct conn *next; int fd; long used; } conn;
typedef struct conn_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    conn *free;
    int n_free;
    int max_conns;
} conn_pool;

conn *pool_get(conn_pool *p)
{
    conn *c;
    pthread_mutex_lock(&p->lock);
    while (p->free == NULL) {
        int woken = 0;
        pthread_cond_wait(&p->freed, &p->lock);
        woken++;
        (void)woken;
    }
    c = p->free;
    p->free = c->next;
    p->n_free--;
    pthread_mutex_unlock(&p->lock);
    return c;
}

void pool_put(conn_pool *p, conn *c)
{
    pthread_mutex_lock(&p->lock);
    c->next = p->free;
    p->free = c;
    p->n_free++;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

/* a use of a taken connection, its first line a declaration */
long conn_send(conn *c, long n)
{
    long before = c->used;
    long after = before + n;
    c->used = after;
    return after - before;
}
"""


def test_a_probe_never_stands_before_a_blocks_declarations(tmp_path):
    """A build with -Wdeclaration-after-statement (PostgreSQL's) wants no statement before a
    block's declarations: a wait begun in a loop's body begins after the body's leading
    declarations, and the instrumented file compiles clean with that warning an error."""
    out, report = scan_and_probe(tmp_path, "pool.c", DECLARED_FIRST)
    how = {(p["function"], p["kind"]): p["how"] for p in report["placements"] if p["placed"]}
    assert how[("pool_get", "WAIT")] == "around the loop at line 19"
    done = subprocess.run(
        [
            native.compiler(),
            "-std=gnu99",
            "-Wall",
            "-Wdeclaration-after-statement",
            "-Werror",
            *native.cflags(),
            "-c",
            str(out / "pool.c"),
            "-o",
            str(tmp_path / "pool.o"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    text = (out / "pool.c").read_text()
    body = text[text.index("int woken = 0;") :]
    assert body.index("gigi_wait_begin(") > body.index("int woken = 0;")


BORROWED = (
    DECLARED_FIRST
    + """
/* hands a connection out through its parameter, when asked to and one is free */
int pool_borrow(conn_pool *p, conn **out, int ready)
{
    if (ready &&
        (*out = pool_get(p)) != NULL)
        return 1;
    return 0;
}
"""
)


def test_a_probe_never_stands_inside_a_condition(tmp_path):
    """An ACQUIRE whose call is on the second line of an if's condition stands beside the if
    statement, as one on its first line does: the condition is no statement, and braces in
    it do not compile (PostgreSQL's deadlock.c did not)."""
    out, report = scan_and_probe(tmp_path, "pool.c", BORROWED)
    how = {(p["function"], p["kind"]): (p["line"], p["how"]) for p in report["placements"]}
    assert how[("pool_borrow", "ACQUIRE")] == (55, "after the statement at line 54")
    done = compile_object(out / "pool.c", tmp_path / "pool.o")
    assert done.returncode == 0, done.stderr


# A lock with a value its holder publishes, built apart (not scanned): who waits for it sleeps
# inside var_lock_wait_for until it is free or the value moves.
VAR_LOCK_H = """
#include <pthread.h>
/* a lock with a value its holder publishes: who waits for it sleeps until it is free or the
   value moves */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t moved;
    int held;
    long value;
} varlock_t;

void var_lock_acquire(varlock_t *l);
void var_lock_release(varlock_t *l);
int var_lock_wait_for(varlock_t *l, long old, long *now);
void var_lock_init(varlock_t *l);
"""

VAR_LOCK_C = """
#include <pthread.h>
#include "varlock.h"

void var_lock_acquire(varlock_t *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->held)
        pthread_cond_wait(&l->moved, &l->mu);
    l->held = 1;
    pthread_mutex_unlock(&l->mu);
}

void var_lock_release(varlock_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->held = 0;
    pthread_cond_broadcast(&l->moved);
    pthread_mutex_unlock(&l->mu);
}

/* 1 when the lock is free; else sleeps until the value moves past OLD, and gives it */
int var_lock_wait_for(varlock_t *l, long old, long *now)
{
    int free_;
    pthread_mutex_lock(&l->mu);
    while (l->held && l->value == old)
        pthread_cond_wait(&l->moved, &l->mu);
    free_ = !l->held;
    *now = l->value;
    pthread_mutex_unlock(&l->mu);
    return free_;
}


void var_lock_init(varlock_t *l)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->moved, NULL);
    l->held = 0;
    l->value = 0;
}
"""

INSERTIONS = """
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "varlock.h"

#define N_INSERT_LOCKS 4

/* the log's insertion locks: a writer holds one while it copies its record in, and
   publishes how far it got in the lock's value */
typedef struct {
    varlock_t lock;
    long padding[4];
} insert_lock_t;

static insert_lock_t insert_locks[N_INSERT_LOCKS];

void insert_lock_acquire(int i)
{
    var_lock_acquire(&insert_locks[i].lock);
}

void insert_lock_release(int i)
{
    var_lock_release(&insert_locks[i].lock);
}

/* wait until every insertion in progress has got past UPTO */
long wait_insertions(long upto)
{
    long done = upto;
    for (int i = 0; i < N_INSERT_LOCKS; i++) {
        long at = 0;
        do {
            if (var_lock_wait_for(&insert_locks[i].lock, at, &at)) {
                at = 0;
                break;
            }
        } while (at < upto);
        if (at != 0 && at < done)
            done = at;
    }
    return done;
}

static void *writer(void *arg)
{
    struct timespec pause = {0, 50000000};
    (void)arg;
    insert_lock_acquire(2);
    nanosleep(&pause, NULL);
    insert_lock_release(2);
    return NULL;
}

int main(void)
{
    pthread_t t;
    struct timespec pause = {0, 10000000};
    for (int i = 0; i < N_INSERT_LOCKS; i++)
        var_lock_init(&insert_locks[i].lock);
    for (int i = 0; i < 100; i++)
        wait_insertions(10); /* nobody inserting: no wait */
    pthread_create(&t, NULL, writer, NULL);
    nanosleep(&pause, NULL);
    wait_insertions(10); /* behind the writer's 50 ms insertion */
    pthread_join(t, NULL);
    printf("done\\n");
    return 0;
}
"""


def test_a_retry_loop_around_a_call_that_waits_waits_from_its_first_pass(tmp_path):
    """A do-while around a call that sleeps until a lock's holder is done (PostgreSQL's
    WaitXLogInsertionsToFinish around LWLockWaitForVar) blocks inside that call on its first
    pass, and often leaves after it: its wait begins just before the call, not with a second
    pass that never comes. The waiter behind a 50 ms insertion records a WAIT that long."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "varlock.h").write_text(VAR_LOCK_H)
    (tmp_path / "var_lock.c").write_text(VAR_LOCK_C.replace('"varlock.h"', '"src/varlock.h"'))
    out, report = scan_and_probe(tmp_path, "wal.c", INSERTIONS)
    how = {(p["function"], p["kind"]): p["how"] for p in report["placements"] if p["placed"]}
    assert how[("wait_insertions", "WAIT")] == "around the loop at line 35"
    binary = build(
        tmp_path,
        "wal",
        out / "wal.c",
        tmp_path / "var_lock.c",
        flags=("-Wall", "-Werror", "-pthread", f"-I{tmp_path / 'src'}"),
    )
    trace, stdout = run_traced(binary, tmp_path)
    assert stdout == b"done\n"
    from gigi.queries import connect

    con = connect(trace)
    waits = con.execute(
        "SELECT max(dur) FROM events AS e JOIN sites AS s USING (site) "
        "WHERE e.kind = 0 AND s.function = 'wait_insertions'"
    ).fetchone()[0]
    assert waits is not None and waits >= 30_000_000  # ns: behind the writer's 50 ms
