"""The scanner on the labeled corpus (offline), its outputs, and the OpenAI path over real HTTP
against a loopback server that answers well, badly, slowly and with made-up sites."""

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gigi.cli import main
from gigi.scan import builtin_include_dir, scan, write
from gigi.scan._labels import evaluate, load_labels
from gigi.scan._parse import ScanError
from gigi.schema import SITES, normalize_batch

CORPUS = Path(__file__).parent / "scan_corpus"


@pytest.fixture(scope="module")
def offline():
    return scan(CORPUS, jobs=2)


def test_offline_scan_meets_the_goals_on_the_corpus(offline):
    ev = evaluate(offline, load_labels(CORPUS / "labels.json"))
    verified = ev["verified"]["all"]
    assert verified["precision"] >= 0.85 and verified["recall"] >= 0.80, verified
    assert ev["verified"]["all"]["fp"] <= ev["recall"]["all"]["fp"]  # verification prunes
    assert ev["recall"]["all"]["fp"] > 0  # ... and had something to prune
    for kind in ("WAIT", "ACQUIRE", "USE", "RELEASE"):
        assert ev["verified"][kind]["tp"] > 0, kind
    assert ev["resources"] == {"tp": 6, "fp": [], "fn": []}  # the decoys are not resources
    assert verified["placed"] >= 0.8 * verified["tp"]  # and the lines are where probes go


def test_every_verdict_has_its_reason(offline):
    assert all(why for _, _, why in offline.candidates)
    rejected = {(c.function, c.kind): why for c, ok, why in offline.candidates if not ok}
    assert "acquires or releases" in rejected[("LRUCache::Release", "USE")]
    # and a made-up candidate is refused with what is wrong with it
    from gigi.scan._offline import Candidate
    from gigi.scan._verify import verify

    fn = next(f for u in offline.units for f in u.functions if f.name == "bp_lookup")
    lookup = Candidate(fn.file, fn.name, fn.line + 2, "ACQUIRE", "buf_pool", "", "1", "test", "")
    v = verify(lookup, fn, {"buf_pool", "frame"}, True, set())
    assert not v.ok and "a lookup is not an acquisition" in v.reason


BLOCK_CACHE = Path(__file__).parent / "native" / "block_cache.c"


def test_a_miss_is_a_wait_on_a_branch_and_ordinary_io_is_not():
    r = scan(BLOCK_CACHE, jobs=1)
    waits = [(c.function, c.line, ok, why) for c, ok, why in r.candidates if c.kind == "WAIT"]
    # the branch bc_get takes when bc_find had no block, around the disk read; no loop there
    assert [(f, line, ok) for f, line, ok, _ in waits] == [("bc_get", 44, True)]
    assert "a miss" in waits[0][3] and "disk_read_block" in waits[0][3]
    # the flush's branch writes to disk too, on its own walk: offered as a wait, it is refused
    from gigi.scan._offline import Candidate
    from gigi.scan._verify import verify

    fn = next(f for u in r.units for f in u.functions if f.name == "bc_flush")
    branch = next(b for b in fn.branches if "disk_write_block" in b.body_calls)
    flush = Candidate(fn.file, fn.name, branch.line, "WAIT", "block_cache", "", "1", "test", "")
    v = verify(flush, fn, {"block_cache", "block"}, True, set())
    assert not v.ok and "ordinary work, not a slow path" in v.reason, v.reason


def test_the_tree_s_given_include_folders_beat_guessed_ones(tmp_path):
    """Two platforms' headers of one name (include/arch/beos, include/arch/unix): the folder
    the build names is searched first, for "..." includes too."""
    for arch, body in (("beos", "sem_id lock;"), ("unix", "int lock;")):
        d = tmp_path / "include" / "arch" / arch
        d.mkdir(parents=True)
        (d / "arch_mutex.h").write_text(f"struct mutex_t {{ {body} int owners; }};\n")
    (tmp_path / "mutex.c").write_text(
        '#include "arch_mutex.h"\nint owners(struct mutex_t *m) { return m->owners; }\n'
    )
    unix = tmp_path / "include" / "arch" / "unix"
    r = scan(tmp_path, jobs=1, only=["mutex.c"], include_dirs=[unix])
    assert [d.message for u in r.units for d in u.diagnostics] == []


def test_builtin_headers_are_found_and_diagnostics_reported(tmp_path):
    assert builtin_include_dir() is not None
    assert scan(CORPUS, jobs=1).stats["diagnostics"] == 0
    (tmp_path / "bad.c").write_text('#include "missing.h"\nint f(void) { return g(); }\n')
    r = scan(tmp_path, jobs=1)
    messages = [d.message for u in r.units for d in u.diagnostics]
    assert any("missing.h" in m for m in messages), messages


def test_a_header_is_read_in_the_context_of_the_source_that_includes_it(tmp_path):
    """pool.h is not self-contained (its types come from base.h, which pool.c includes first):
    read alone it gives errors and int members; read as pool.c sees it, neither. A header no
    source includes is still parsed alone, and a file without a compile command borrows its
    neighbour's."""
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "base.h").write_text("typedef unsigned long long u64;\ntypedef struct Page Page;\n")
    (tmp_path / "pool.h").write_text(
        "struct Pool {\n  u64 nFree;\n  Page *pFree;\n};\nstatic inline u64 pool_free(struct"
        " Pool *p) { return p->nFree; }\n"
    )
    (tmp_path / "pool.c").write_text(
        '#include "base.h"\n#include "pool.h"\nstruct Page { Page *pNext; };\n'
        "Page *pool_get(struct Pool *p) { Page *g = p->pFree; p->pFree = g->pNext; return g; }\n"
    )
    (tmp_path / "lonely.h").write_text("struct Lonely { int n; };\n")
    commands = tmp_path / "compile_commands.json"
    commands.write_text(
        json.dumps(
            [
                {
                    "directory": str(tmp_path),
                    "file": "pool.c",
                    "arguments": ["cc", f"-I{inc}", "-c", "pool.c"],
                }
            ]
        )
    )
    r = scan(tmp_path, compile_commands=commands, jobs=1)
    assert r.stats["diagnostics"] == 0, [d for u in r.units for d in u.diagnostics]
    assert sorted(u.file for u in r.units) == ["include/base.h", "lonely.h", "pool.c", "pool.h"]
    members = {m.name: m.type for u in r.units for m in u.members if m.record == "Pool"}
    assert members == {"nFree": "u64", "pFree": "Page *"}
    functions = {f.name: f.file for u in r.units for f in u.functions}
    assert functions == {"pool_free": "pool.h", "pool_get": "pool.c"}
    assert "Lonely" in {rec.name for u in r.units for rec in u.records}


def test_cli_writes_sites_the_diagnosis_accepts(tmp_path, capsys):
    assert main(["scan", str(CORPUS), "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    assert "6 resources" in said and "verified" in said
    sites = pq.read_table(tmp_path / "out" / "sites.parquet")
    normalize_batch(sites, SITES, path="sites.parquet")  # trace format v1, or it raises
    assert sites.num_rows == 26 and set(sites.column("verified").to_pylist()) == {True}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["kinds"]["USE"]["rejected"][0]["reason"]
    cands = pq.read_table(tmp_path / "out" / "candidates.parquet").to_pylist()
    acquire = next(c for c in cands if c["function"] == "log_reserve" and c["kind"] == "ACQUIRE")
    assert (acquire["object_expr"], acquire["amount_expr"]) == ("lsn", "n")
    assert main(["scan", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 2


def test_cli_names_the_commonest_parse_errors_and_what_to_do(tmp_path, capsys):
    """A tree not configured: the header its configure step makes is missing, and the
    errors after it follow from that; the scan says so first, and what would help."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "pool.c").write_text(
        '#include "config.h"\nint pool_size(void) { return POOL_SIZE + PACKAGE_COUNT; }\n'
    )
    assert main(["scan", str(src), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    errors = [x.strip() for x in lines[1:] if " x " in x]
    assert errors[0] == "1 x 'config.h' file not found (in 1 file)", lines
    assert any("run its configure step" in x for x in lines), lines
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["stats"]["commonest_errors"][0]["message"] == "'config.h' file not found"


# --- the OpenAI path, for real, over loopback HTTP ---------------------------------------------

RESOURCES = {"conn_pool": ("pool", "connections", ["conn"])}
EVENTS = {
    "pool_checkout": [
        {"kind": "WAIT", "line": 27, "object": "", "amount": "1", "why": "cond wait loop"},
        {"kind": "ACQUIRE", "line": 32, "object": "c", "amount": "1", "why": "pops idle"},
    ],
    "pool_checkin": [
        {"kind": "RELEASE", "line": 43, "object": "c", "amount": "1", "why": "pushes back"},
        {"kind": "RELEASE", "line": 58, "why": "a line outside the function"},
        {"kind": "ACQUIRE", "line": 41, "function": "pool_steal", "why": "no such function"},
    ],
    "conn_query": [{"kind": "USE", "line": 50, "object": "c", "why": "queries through c"}],
}


class _Fake(BaseHTTPRequestHandler):
    seen: list = []
    malformed_once = {"pool_checkin"}
    slow_once = {"conn_query"}

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Fake.seen.append((self.path, self.headers.get("Authorization", "")))
        request = json.loads(body["messages"][1]["content"])
        if "record" in request:
            guess = RESOURCES.get(request["record"])
            answer = (
                {
                    "resource": True,
                    "sharing": guess[0],
                    "unit": guess[1],
                    "objects": guess[2],
                    "why": "hands out connections",
                }
                if guess
                else {"resource": False}
            )
            content = json.dumps(answer)
        else:
            name = request["function"]
            if name in _Fake.malformed_once:
                _Fake.malformed_once.discard(name)
                content = '{"events": [{"kind": "GRAB", "line": 1}]'  # broken JSON
            else:
                if name in _Fake.slow_once:
                    _Fake.slow_once.discard(name)
                    time.sleep(1.5)  # beyond the client's timeout: retried
                content = json.dumps({"events": EVENTS.get(name, [])})
        reply = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Fake.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_llm_scan_over_http_rejects_bad_answers_and_caches(endpoint, tmp_path):
    from gigi.scan._llm import LLMBackend

    def backend():
        return LLMBackend(
            model="fake-1",
            base_url=endpoint,
            api_key="sk-secret-123",
            cache_dir=tmp_path / "cache",
            timeout=1.0,
            retries=2,
            source_root=CORPUS,
        )

    b = backend()
    r = scan(CORPUS / "conn_pool.c", backend=b, jobs=1)
    got = {(c.function, c.kind, c.line): (ok, why) for c, ok, why in r.candidates}
    assert got[("pool_checkout", "WAIT", 27)][0] and got[("pool_checkout", "ACQUIRE", 32)][0]
    assert got[("pool_checkin", "RELEASE", 43)][0] and got[("conn_query", "USE", 50)][0]
    assert "outside pool_checkin" in got[("pool_checkin", "RELEASE", 58)][1]
    assert "no function pool_steal" in got[("pool_steal", "ACQUIRE", 41)][1]
    rep = b.report()
    # the broken answer and the slow one were retried: more calls than requests
    assert rep["phase2"]["calls"] > len({f for f, _, _ in got if f != "pool_steal"})
    assert rep["phase1"]["prompt_tokens"] > 0 and rep["phase2"]["rejected_answers"] == []
    assert all(path.endswith("/chat/completions") for path, _ in _Fake.seen)
    out = write(r, tmp_path / "out")
    assert "sk-secret-123" not in json.dumps(out) and "sk-secret" not in repr(b)
    calls = len(_Fake.seen)
    again = backend()
    r2 = scan(CORPUS / "conn_pool.c", backend=again, jobs=1)
    assert len(_Fake.seen) == calls  # nothing sent: every answer came from the cache
    assert [(c.function, c.kind, c.line, ok) for c, ok, _ in r2.candidates] == [
        (c.function, c.kind, c.line, ok) for c, ok, _ in r.candidates
    ]


def test_llm_needs_an_endpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = main(["scan", str(CORPUS), "--out", str(tmp_path), "--llm", "openai", "--model", "m"])
    assert code == 2
    assert "needs an endpoint" in capsys.readouterr().err


def test_a_tree_without_a_build_finds_its_headers_and_scans_only_what_is_named(tmp_path):
    """No compile commands: a header in another folder is found for a quoted include, and
    ``only`` scans the files named, with the headers they include."""
    (tmp_path / "include").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "include" / "pool.h").write_text("struct pool { int used; int capacity; };\n")
    (tmp_path / "src" / "pool.c").write_text('#include "pool.h"\nint f(void) { return 0; }\n')
    (tmp_path / "src" / "other.c").write_text("int g(void) { return 1; }\n")
    r = scan(tmp_path, only=["src/pool.c"], jobs=1)
    assert r.stats["diagnostics"] == 0
    assert {u.file for u in r.units} == {"src/pool.c", "include/pool.h"}
    with pytest.raises(ScanError, match="no source file src/none.c"):
        scan(tmp_path, only=["src/none.c"], jobs=1)


def test_only_a_folder_of_a_tree_is_scanned_in_place(tmp_path, capsys):
    """``--only`` names files or folders of the tree (relative to it, or absolute paths in
    it): a folder's source files are scanned, the rest of the tree is there for their
    includes and nothing needs copying. A folder with no source, a path outside the tree, are
    one line each."""
    tree = tmp_path / "tree"
    for d in ("include", "src/storage", "src/access", "docs"):
        (tree / d).mkdir(parents=True)
    (tree / "include" / "pool.h").write_text("struct pool { int used; int capacity; };\n")
    (tree / "src" / "storage" / "a.c").write_text('#include "pool.h"\nint a(void) { return 0; }\n')
    (tree / "src" / "storage" / "b.c").write_text("int b(void) { return 0; }\n")
    (tree / "src" / "access" / "c.c").write_text("int c(void) { return 0; }\n")
    r = scan(tree, only=["src/storage"], jobs=1)
    assert {u.file for u in r.units} == {"src/storage/a.c", "src/storage/b.c", "include/pool.h"}
    r = scan(tree, only=[str(tree / "src" / "access"), "src/storage/b.c"], jobs=1)
    assert {u.file for u in r.units} == {"src/access/c.c", "src/storage/b.c"}
    with pytest.raises(ScanError, match="no folder with C or C.. source files docs$"):
        scan(tree, only=["docs"], jobs=1)
    with pytest.raises(ScanError, match="not under the scanned tree"):
        scan(tree, only=[str(tmp_path)], jobs=1)
    with pytest.raises(ScanError, match="an empty path"):
        scan(tree, only=[""], jobs=1)
    out = tmp_path / "out"
    assert main(["scan", str(tree), "--out", str(out), "--only", "src/storage", "--jobs", "1"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["stats"]["files"] == 2
    assert main(["scan", str(tree), "--out", str(out), "--only", "../elsewhere"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "../elsewhere: not under the scanned tree" in err[0], err


def test_the_real_codebases_labels_are_well_formed():
    """tests/scan_real: what bench/scan_eval.py scores the scanner against."""
    import json

    seen = 0
    for path in sorted((CORPUS.parent / "scan_real").glob("*.json")):
        labels = json.loads(path.read_text())
        for key in ("codebase", "marker", "files", "functions", "decoys"):
            assert key in labels, (path.name, key)
        # where its tree comes from: Debian's source package, or a pinned source distribution
        assert "package" in labels or {"project", "version"} <= set(labels.get("sdist", ()))
        assert labels["marker"] in labels["files"] or labels["files"], path.name
        named = [(f["file"], f["function"]) for f in labels["functions"]]
        decoys = [(d["file"], d["function"]) for d in labels["decoys"]]
        assert len(set(named)) == len(named) and not set(named) & set(decoys), path.name
        for f in labels["functions"]:
            assert f["file"] in labels["files"] and f["kinds"] and f["why"], (path.name, f)
            assert set(f["kinds"]) <= {"WAIT", "ACQUIRE", "USE", "RELEASE"}, (path.name, f)
        seen += 1
    assert seen >= 4


WRAPPERS = """
#include <stdint.h>
#include <string.h>
#define PAGE_SIZE 4096
typedef struct frame frame_t;
typedef struct buf_pool buf_pool_t;
struct frame { char data[PAGE_SIZE]; };
frame_t *bp_get_page(buf_pool_t *bp, uint64_t page_no);
void bp_release_page(buf_pool_t *bp, frame_t *f);

/* thin wrappers, as real code has them: by return, through a local, and by a parameter */
frame_t *bp_get_page_nowait(buf_pool_t *bp, uint64_t page_no) {
    return bp_get_page(bp, page_no);
}

frame_t *bp_get_zeroed(buf_pool_t *bp, uint64_t page_no) {
    frame_t *f = bp_get_page(bp, page_no);
    memset(f->data, 0, PAGE_SIZE);
    return f;
}

frame_t *bp_get_twice(buf_pool_t *bp, uint64_t page_no) {
    return bp_get_zeroed(bp, page_no);
}

void bp_put(buf_pool_t *bp, void *frame) {
    if (frame)
        bp_release_page(bp, (frame_t *)(frame));
}

/* not wrappers: one that keeps the page to itself, one that releases in a loop, one that
   releases only when some state says so; and a file's own helper, which carries the event
   to the function of the interface that calls it */
int bp_checksum(buf_pool_t *bp, uint64_t page_no) {
    frame_t *f = bp_get_page(bp, page_no);
    int sum = f->data[0];
    return sum;
}

void bp_put_all(buf_pool_t *bp, frame_t **frames, int n) {
    for (int i = 0; i < n; i++)
        bp_release_page(bp, frames[i]);
}

void bp_put_if_clean(buf_pool_t *bp, frame_t *f) {
    if (f->data[0] == 0)
        bp_release_page(bp, f);
}

static frame_t *get_quietly(buf_pool_t *bp, uint64_t page_no) {
    return bp_get_page(bp, page_no);
}

frame_t *bp_get_quietly(buf_pool_t *bp) { return get_quietly(bp, 0); }
"""


def test_a_thin_wrapper_performs_its_callees_event(tmp_path):
    (tmp_path / "buffer_pool.c").write_text((CORPUS / "buffer_pool.c").read_text())
    (tmp_path / "wrappers.c").write_text(WRAPPERS)
    r = scan(tmp_path, jobs=1)
    kinds: dict[str, set[str]] = {}
    for c in r.verified():
        if c.file == "wrappers.c" and c.why.startswith("a thin wrapper"):
            kinds.setdefault(c.function, set()).add(c.kind)
    # bp_get_page waits for a free frame before it pins one: its wrappers wait there too
    assert kinds == {
        "bp_get_page_nowait": {"WAIT", "ACQUIRE"},
        "bp_get_zeroed": {"WAIT", "ACQUIRE"},  # through the local it returns
        "bp_get_twice": {"WAIT", "ACQUIRE"},  # a wrapper of a wrapper
        "bp_put": {"RELEASE"},  # through a cast, behind a test of its parameter
        "bp_get_quietly": {"WAIT", "ACQUIRE"},  # through get_quietly, which records none
    }
    sites = [c for c in r.verified() if c.function == "bp_get_page_nowait"]
    # the trace format's origins: a rule of the offline scan is a heuristic
    assert [c.origin for c in sites if c.kind == "ACQUIRE"] == ["heuristic"]


LOCK_API = """
#include <pthread.h>
#include <semaphore.h>
typedef struct { pthread_mutex_t m; } my_mutex_t;
typedef sem_t my_sem_t;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static long hits;

/* a lock API: each function's job is one call to the platform's locks */
void my_mutex_lock(pthread_mutex_t *mutex) {
    if (pthread_mutex_lock(mutex))
        abort();
}
void my_mutex_unlock(pthread_mutex_t *mutex) { pthread_mutex_unlock(mutex); }
void my_sem_wait(sem_t *sem) { sem_wait(sem); }
void my_sem_post(sem_t *sem) { sem_post(sem); }
void stats_lock_take(void) { pthread_mutex_lock(&stats_lock); }
void stats_lock_give(void) { pthread_mutex_unlock(&stats_lock); }

/* not a lock API: the lock guards the function's own work */
void count_hit(void) {
    pthread_mutex_lock(&stats_lock);
    hits++;
    pthread_mutex_unlock(&stats_lock);
}

/* a record's own lock, through a macro that checks the call and panics when it fails */
void panic(const char *msg);
#define LOCK_CHECKED(m) do { if (pthread_mutex_lock(m)) { panic("lock"); } } while (0)
#define UNLOCK_CHECKED(m) do { if (pthread_mutex_unlock(m)) { panic("unlock"); } } while (0)
struct daemon { pthread_mutex_t per_ip_mutex; int per_ip_count; };
void ip_count_lock(struct daemon *d) { LOCK_CHECKED(&d->per_ip_mutex); }
void ip_count_unlock(struct daemon *d) { UNLOCK_CHECKED(&d->per_ip_mutex); }
void ip_count_add(struct daemon *d) { ip_count_lock(d); d->per_ip_count++; ip_count_unlock(d); }
/* one of a table of locks, tried through a local set to its address */
static pthread_mutex_t item_locks[16];
void *item_trylock(unsigned int hv) {
    pthread_mutex_t *lock = &item_locks[hv & 15];
    if (pthread_mutex_trylock(lock) == 0)
        return lock;
    return NULL;
}
/* a record that is nothing but its lock guards nothing */
struct only_lock { pthread_mutex_t m; };
void only_lock_take(struct only_lock *w) { pthread_mutex_lock(&w->m); }
"""


def _sites_by(tmp_path, name: str, text: str, why: str):
    """Scan one snippet: the scan, and its verified sites whose reason matches WHY, as
    (function, kind, resource)."""
    (tmp_path / name).write_text(text)
    r = scan(tmp_path, jobs=1)
    return r, {(c.function, c.kind, c.resource) for c in r.verified() if re.search(why, c.why)}


def test_a_lock_api_hands_out_its_lock(tmp_path):
    r, got = _sites_by(tmp_path, "locks.c", LOCK_API, r"^its job is (pthread|sem)_\w+ on \w+$")
    assert got == {
        ("my_mutex_lock", "ACQUIRE", "pthread_mutex_t"),
        ("my_mutex_unlock", "RELEASE", "pthread_mutex_t"),
        ("my_sem_wait", "WAIT", "sem_t"),
        ("my_sem_wait", "ACQUIRE", "sem_t"),
        ("my_sem_post", "RELEASE", "sem_t"),
        ("stats_lock_take", "ACQUIRE", "stats_lock"),
        ("stats_lock_give", "RELEASE", "stats_lock"),
        ("item_trylock", "ACQUIRE", "item_locks"),
    }
    _, got = _sites_by(tmp_path, "locks.c", LOCK_API, r"on \w+\.\w+$")
    assert got == {
        ("ip_count_lock", "ACQUIRE", "daemon.per_ip_mutex"),
        ("ip_count_unlock", "RELEASE", "daemon.per_ip_mutex"),
    }
    sharing = {g.name: g.sharing for g in r.resources}
    assert sharing["pthread_mutex_t"] == "exclusive" and sharing["sem_t"] == "pool"


TIMED = """
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
/* a timed wait on a condition, the program ended when the wait itself fails */
int my_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, long ns)
{
    struct timespec ts;
    int r;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    r = pthread_cond_timedwait(cond, mutex, &ts);
    if (r == 0)
        return 0;
    if (r == ETIMEDOUT)
        return -1;
    abort();
}

/* a barrier: every party waits until all have arrived */
int my_barrier_wait(pthread_barrier_t *barrier)
{
    int r = pthread_barrier_wait(barrier);
    if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD)
        abort();
    return r;
}

extern long my_time_now(void);

/* a try when there is no time to wait, else a wait until a deadline read off the clock */
int my_mutex_timedlock(pthread_mutex_t *mutex, long timeout)
{
    int rv;
    if (timeout <= 0) {
        rv = pthread_mutex_trylock(mutex);
    } else {
        struct timespec ts;
        timeout += my_time_now();
        ts.tv_sec = timeout / 1000000;
        ts.tv_nsec = timeout % 1000000 * 1000;
        rv = pthread_mutex_timedlock(mutex, &ts);
    }
    return rv;
}
"""


MECHANISMS = """
/* a process lock, taken through the methods of whichever mechanism it was made with */
struct proc_lock;
typedef struct lock_methods {
    int (*acquire)(struct proc_lock *);
    int (*timedacquire)(struct proc_lock *, long);
    int (*release)(struct proc_lock *);
    int (*cleanup)(void *);
} lock_methods_t;
typedef struct proc_lock { const lock_methods_t *meth; int fd; int curr_locked; } proc_lock_t;

int proc_lock_lock(proc_lock_t *m) { return m->meth->acquire(m); }
int proc_lock_timedlock(proc_lock_t *m, long t) { return m->meth->timedacquire(m, t); }
int proc_lock_unlock(proc_lock_t *m) { return m->meth->release(m); }
int proc_lock_destroy(proc_lock_t *m) { return m->meth->cleanup(m); }
"""


@pytest.mark.parametrize(
    "text, wanted",
    [
        # abort() on the path where the one call failed is a check, and a clock read for
        # the deadline is no work either (a parameter moved by the clock read in one branch
        # is still tested as the caller's)
        (
            TIMED,
            {
                ("my_cond_timedwait", "WAIT", "pthread_cond_t"),
                ("my_barrier_wait", "WAIT", "pthread_barrier_t"),
                ("my_mutex_timedlock", "ACQUIRE", "pthread_mutex_t"),
                ("my_mutex_timedlock", "WAIT", "pthread_mutex_t"),
            },
        ),
        # a call through a function pointer named for taking or giving back a lock (a
        # method of the mechanism the lock was made with); a method named for anything
        # else is not one
        (
            MECHANISMS,
            {
                ("proc_lock_lock", "ACQUIRE", "proc_lock_t"),
                ("proc_lock_timedlock", "WAIT", "proc_lock_t"),
                ("proc_lock_timedlock", "ACQUIRE", "proc_lock_t"),
                ("proc_lock_unlock", "RELEASE", "proc_lock_t"),
            },
        ),
    ],
    ids=["checks-and-clocks", "methods"],
)
def test_a_lock_api_by_what_its_one_call_is(tmp_path, text, wanted):
    """A function whose job is one lock call is a lock API on what it hands over, whatever
    else it does beside the call that is no work, and however the call reaches the lock."""
    _, got = _sites_by(tmp_path, "locks.c", text, r"^its job is")
    assert got == wanted


REGION = """
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* a bump arena: blocks carved from one region, from the front or from the far end */
struct region { uint8_t *memory; size_t size; size_t pos; size_t end; };

void *region_carve(struct region *r, size_t n, int from_end) {
    void *ret;
    if (n > r->end - r->pos)
        return NULL;
    if (from_end) {
        ret = &r->memory[r->end - n];
        r->end -= n;
    } else {
        ret = &r->memory[r->pos];
        r->pos += n;
    }
    return ret;
}
void *region_rewind(struct region *r, size_t keep) {
    memmove(r->memory, r->memory + r->pos - keep, keep);
    r->pos = keep;
    r->end = r->size;
    return r->memory;
}
/* an arena of blocks whose positions sit in a part embedded by value */
typedef struct blk_data { uint8_t *last; uint8_t *end; struct blk_pool *next; } blk_data_t;
typedef struct blk_pool { blk_data_t d; size_t max; struct blk_pool *current; } blk_pool_t;

void *blk_grow(blk_pool_t *pool, size_t n) {
    uint8_t *m = malloc(4096);
    blk_pool_t *fresh = (blk_pool_t *)m;
    if (m == NULL)
        return NULL;
    fresh->d.end = m + 4096;
    m += sizeof(blk_data_t);
    fresh->d.last = m + n;  /* a block just made, set up: nothing given back */
    pool->current->d.next = fresh;
    return m;
}
void *blk_alloc(blk_pool_t *pool, size_t n) {
    blk_pool_t *p = pool->current;
    uint8_t *m = p->d.last;
    if ((size_t)(p->d.end - m) < n)
        return blk_grow(pool, n);
    p->d.last = m + n;
    return m;
}
void blk_reset(blk_pool_t *pool) {
    for (blk_pool_t *p = pool; p; p = p->d.next)
        p->d.last = (uint8_t *)p + sizeof(blk_pool_t);
    pool->current = pool;
}
/* not an arena: a sequence number moved on and handed out is an id, not bytes */
struct session { uint8_t *outbuf; uint16_t last_id; };
uint16_t session_next_id(struct session *s) {
    s->last_id++;
    return s->last_id;
}
/* a reference count spelt out, and an object torn down when its last holder lets go */
#include <pthread.h>
struct header { struct header *next; char *value; };
struct reply { struct header *first_header; pthread_mutex_t mutex; int reference_count; };
void reply_hold(struct reply *r) {
    pthread_mutex_lock(&r->mutex);
    r->reference_count++;
    pthread_mutex_unlock(&r->mutex);
}
void reply_destroy(struct reply *r) {
    pthread_mutex_lock(&r->mutex);
    if (--r->reference_count != 0) {
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    pthread_mutex_unlock(&r->mutex);
    pthread_mutex_destroy(&r->mutex);
    while (r->first_header) {
        struct header *h = r->first_header;
        r->first_header = h->next;
        free(h);
    }
    free(r);
}
"""


def test_an_arena_is_found_by_what_carving_does(tmp_path):
    r, got = _sites_by(tmp_path, "region.c", REGION, r"")
    assert {(f, k) for f, k, r in got if r == "blk_pool"} == {
        ("blk_alloc", "ACQUIRE"),
        ("blk_reset", "RELEASE"),
    }, got
    got = {x for x in got if x[2] != "blk_pool"}
    assert got == {
        ("region_carve", "ACQUIRE", "region"),
        ("region_rewind", "RELEASE", "region"),
        # the bytes it keeps, moved to the front before the rest goes back: a use
        ("region_rewind", "USE", "region"),
        ("reply_hold", "ACQUIRE", "reply"),
        ("reply_destroy", "RELEASE", "reply"),
    }
    arena = next(g for g in r.resources if g.name == "region")
    assert (arena.unit, arena.positions) == ("bytes", ["region.end", "region.pos"])
    assert "session" not in {g.name for g in r.resources}


APPENDED = """
#include <stdlib.h>
#include <string.h>
typedef int result_code;
/* a text buffer that grows: nothing in its names says buffer, count or capacity */
struct textbuf { char *bytes; size_t filled; size_t room; size_t cap; };

result_code textbuf_put(struct textbuf *t, const void *data, size_t n) {
    size_t at = t->filled;
    size_t need = at + n + 1;
    if (need > t->cap)
        return -1;
    if (need > t->room) {
        char *grown = realloc(t->bytes, need * 2);
        if (!grown)
            return -1;
        t->bytes = grown;
        t->room = need * 2;
    }
    memcpy(&t->bytes[at], data, n);
    t->filled = at + n;
    t->bytes[t->filled] = 0;
    return 0;
}
void textbuf_clear(struct textbuf *t) {
    t->filled = 0;
}
/* reading it takes nothing */
size_t textbuf_len(const struct textbuf *t) {
    return t->filled;
}
/* a record whose bytes are allocated anew but never appended to: a setting, not a buffer */
struct label { char *text; size_t len; };
void label_set(struct label *l, const char *s, size_t n) {
    l->text = realloc(l->text, n + 1);
    l->len = n;
}
"""


def test_a_growable_buffer_is_found_by_what_appending_does(tmp_path):
    """A record whose bytes are allocated anew at another size, and which a copy into those
    bytes moves a length of forward, is a buffer of bytes: the append takes them (and the
    copy uses them), setting the length back gives them back."""
    r, got = _sites_by(tmp_path, "textbuf.c", APPENDED, r"")
    assert {x for x in got if x[2] == "textbuf"} == {
        ("textbuf_put", "ACQUIRE", "textbuf"),
        ("textbuf_put", "USE", "textbuf"),
        ("textbuf_clear", "RELEASE", "textbuf"),
    }, got
    buf = next(g for g in r.resources if g.name == "textbuf")
    assert (buf.unit, buf.positions) == ("bytes", ["textbuf.filled"])
    assert "label" not in {g.name for g in r.resources}


SLOTS = """
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>
/* connection slots counted against a limit, under a name that says nothing of counting */
struct conn {
    struct conn *next;
    int fd;
    char *read_buffer;
    volatile bool resuming;
    struct daemon *owner;
};
struct daemon {
    struct conn *head;
    unsigned int connections;
    unsigned int connection_limit;
    unsigned int num_opts;
    int wake_fd;
    pthread_mutex_t lock;
};
/* a macro that writes a byte to wake a thread: no I/O of a unit's data */
#define WAKE_UP(d) ((void)(write((d)->wake_fd, "w", 1) > 0))

int daemon_add(struct daemon *d, struct conn *c) {
    if (d->connections >= d->connection_limit)
        return -1;
    d->connections++;
    c->next = d->head;
    d->head = c;
    return 0;
}
/* a count of the settings given, lowered: no unit given back */
void daemon_option(struct daemon *d, int opt) {
    if (opt == 0)
        d->num_opts--;
}
/* a state flag set and a thread woken: nothing of the connection used */
void daemon_resume(struct conn *c) {
    pthread_mutex_lock(&c->owner->lock);
    c->resuming = true;
    pthread_mutex_unlock(&c->owner->lock);
    WAKE_UP(c->owner);
}
"""


def test_a_count_compared_with_its_limit_counts_units(tmp_path):
    r, got = _sites_by(tmp_path, "slots.c", SLOTS, r"")
    assert ("daemon_add", "ACQUIRE", "daemon") in got
    assert not {(f, k) for f, k, _ in got if f in ("daemon_option", "daemon_resume")}


SETTLED = """
#include <string.h>
struct item { struct item *next; char data[32]; };
struct slab { struct item *free_items; unsigned int n_used; unsigned int n_max; char conf[64]; };
extern int bind_item(struct item *it);

struct item *slab_take(struct slab *s) {
    struct item *it = s->free_items;
    if (it == NULL || s->n_used >= s->n_max)
        return NULL;
    s->free_items = it->next;
    s->n_used++;
    if (bind_item(it) != 0) {
        s->n_used--;  /* the take undone when binding failed: no unit given back */
        return NULL;
    }
    return it;
}
/* a unit's settings written: none of its data used */
void slab_configure(struct slab *s, const char *conf) { memcpy(s->conf, conf, sizeof s->conf); }
/* named for reporting: what it hands out is its report, not a unit taken */
struct item *slab_dump_first(struct slab *s) { return slab_take(s); }
"""


def test_an_undone_take_settings_and_reports_are_no_events(tmp_path):
    _, got = _sites_by(tmp_path, "slab.c", SETTLED, r"")
    assert got == {("slab_take", "ACQUIRE", "slab")}, got


PADDED = """
#include <stdlib.h>
static size_t used;
extern void other_platform_step(int i);
/* a short function, padded by another platform's code the build leaves out */
void *my_realloc(void *ptr, size_t size) {
#ifdef SOME_OTHER_PLATFORM
    other_platform_step(0);
    other_platform_step(1);
    other_platform_step(2);
    other_platform_step(3);
    other_platform_step(4);
    other_platform_step(5);
    other_platform_step(6);
    other_platform_step(7);
    other_platform_step(8);
    other_platform_step(9);
    other_platform_step(10);
    other_platform_step(11);
    other_platform_step(12);
    other_platform_step(13);
    other_platform_step(14);
    other_platform_step(15);
    other_platform_step(16);
    other_platform_step(17);
    other_platform_step(18);
    other_platform_step(19);
    other_platform_step(20);
    other_platform_step(21);
    other_platform_step(22);
    other_platform_step(23);
    other_platform_step(24);
    other_platform_step(25);
    other_platform_step(26);
    other_platform_step(27);
    other_platform_step(28);
    other_platform_step(29);
    other_platform_step(30);
    other_platform_step(31);
    other_platform_step(32);
    other_platform_step(33);
    other_platform_step(34);
    other_platform_step(35);
    other_platform_step(36);
    other_platform_step(37);
    other_platform_step(38);
    other_platform_step(39);
#endif
    size_t old = *((size_t *)ptr - 1);
    void *p = realloc((size_t *)ptr - 1, size + sizeof(size_t));
    if (p == NULL)
        return NULL;
    used -= old;
    used += size;
    return (size_t *)p + 1;
}
"""


def test_a_wrapper_s_length_is_what_the_compiler_sees(tmp_path):
    _, got = _sites_by(tmp_path, "realloc.c", PADDED, r"")
    assert got == {("my_realloc", "ACQUIRE", "used"), ("my_realloc", "RELEASE", "used")}, got


ALLOCATOR = """
#include <stdlib.h>
#include <string.h>
#define PREFIX sizeof(size_t)
static size_t used;

static void *try_alloc_internal(size_t size) {
    void *ptr = malloc(size + PREFIX);
    if (!ptr) return NULL;
    *(size_t *)ptr = size;
    used += size;
    return (char *)ptr + PREFIX;
}
void *my_alloc(size_t size) {
    void *p = try_alloc_internal(size);
    if (!p) abort();
    return p;
}
void my_free(void *ptr) {
    if (ptr == NULL) return;
    char *real = (char *)ptr - PREFIX;
    used -= *(size_t *)real;
    free(real);
}
/* not allocators: memory kept to itself, and a report */
size_t my_checksum(const char *s) {
    char *copy = strdup(s);
    size_t n = strlen(copy);
    free(copy);
    return n;
}
size_t my_used(void) { return used; }
"""


def test_an_allocator_that_counts_takes_and_gives_back_its_budget(tmp_path):
    r, got = _sites_by(tmp_path, "alloc.c", ALLOCATOR, r"counted in|^a thin wrapper")
    assert {
        ("try_alloc_internal", "ACQUIRE", "used"),  # what malloc gave, through a local
        ("my_alloc", "ACQUIRE", "used"),  # its wrapper
        ("my_free", "RELEASE", "used"),  # a pointer made from its parameter
    } <= got
    assert not {f for f, _, _ in got} & {"my_checksum", "my_used"}  # no budget; a report
    assert {g.name: g.sharing for g in r.resources}["used"] == "pool"


SLABS = """
#include <stddef.h>
/* size classes of fixed-size chunks, each with an untyped free list and a count */
typedef struct _item { struct _item *next; struct _item *prev; int refcount; char data[]; } item;
typedef struct {
    unsigned int size;
    void *slots;            /* the free chunks */
    unsigned int sl_curr;   /* how many are free */
} slabclass_t;
static slabclass_t slabclass[64];

void *slab_alloc(unsigned int id) {
    slabclass_t *p = &slabclass[id];
    void *ret = NULL;
    item *it = NULL;
    if (p->sl_curr != 0) {
        it = (item *)p->slots;
        p->slots = it->next;
        p->sl_curr--;
        ret = (void *)it;
    }
    return ret;
}

void slab_free(void *ptr, unsigned int id) {
    slabclass_t *p = &slabclass[id];
    item *it = (item *)ptr;
    it->next = p->slots;
    p->slots = it;
    p->sl_curr++;
}
"""


def test_size_classes_with_an_untyped_free_list_are_a_pool(tmp_path):
    """A ``void *`` free list gets its element type from the code that pops and pushes it,
    and a pointer named ``ret`` is what the allocator hands out, not a status code."""
    (tmp_path / "slabs.c").write_text(SLABS)
    r = scan(tmp_path, jobs=1)
    pool = {g.name: g for g in r.resources}["slabclass_t"]
    assert pool.sharing == "pool" and pool.elements == ["_item"]
    got = {(c.function, c.kind) for c in r.verified() if c.resource == "slabclass_t"}
    assert {("slab_alloc", "ACQUIRE"), ("slab_free", "RELEASE")} <= got


def test_sites_of_every_rule_are_what_the_trace_format_accepts(tmp_path):
    """Sites of the wrapper, lock API, allocator and free-list rules written as a sites table
    pass the trace format's own check (an origin outside its list once broke ingest)."""
    from gigi.schema import TABLES, normalize_batch

    (tmp_path / "buffer_pool.c").write_text((CORPUS / "buffer_pool.c").read_text())
    for name, text in (
        ("wrappers.c", WRAPPERS),
        ("locks.c", LOCK_API),
        ("alloc.c", ALLOCATOR),
        ("slabs.c", SLABS),
    ):
        (tmp_path / name).write_text(text)
    r = scan(tmp_path, jobs=1)
    write(r, tmp_path / "out")
    sites = pq.read_table(tmp_path / "out" / "sites.parquet")
    assert sites.num_rows >= 15
    normalize_batch(sites, TABLES["sites"], path="sites.parquet")


ARENA = """
#include <stddef.h>
/* an arena of blocks: each allocation moves the block's position past what it hands out */
typedef struct block { char *last; char *end; struct block *next; } block_t;
typedef struct arena { block_t *current; block_t first; size_t max; } arena_t;

static void *arena_alloc_small(arena_t *a, size_t size) {
    block_t *b = a->current;
    do {
        char *m = b->last;
        if ((size_t)(b->end - m) >= size) {
            b->last = m + size;
            return m;
        }
        b = b->next;
    } while (b);
    return NULL;
}

void *arena_alloc(arena_t *a, size_t size) { return arena_alloc_small(a, size); }

/* not an allocation: a report of the room left */
size_t arena_room(arena_t *a) { return (size_t)(a->current->end - a->current->last); }
"""


def test_an_arena_allocates_by_moving_its_position(tmp_path):
    (tmp_path / "arena.c").write_text(ARENA)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind) for c in r.verified()}
    assert {("arena_alloc_small", "ACQUIRE"), ("arena_alloc", "ACQUIRE")} <= got
    assert not {k for f, k in got if f == "arena_room"}


REFCOUNTED = """
#include <stdlib.h>
/* objects shared by reference count, and the table of the shared ones, with its budget */
typedef struct obj { int type; int refcount; void *ptr; } robj;
struct shared { robj *ok, *err; robj *ints[100]; int n_used; int capacity; };

robj *createObject(int type, void *ptr) {
    robj *o = malloc(sizeof(*o));
    o->type = type;
    o->ptr = ptr;
    o->refcount = 1;
    return o;
}
robj *createIntObject(long v) { return createObject(1, (void *)v); }
void incrRefCount(robj *o) { o->refcount++; }
void decrRefCount(robj *o) {
    if (o->refcount == 1) free(o);
    else o->refcount--;
}
/* creating the table itself is no reference taken */
struct shared *createSharedObjects(void) { return calloc(1, sizeof(struct shared)); }
"""


def test_a_constructor_that_hands_out_a_first_reference_acquires(tmp_path):
    """``create`` in a name means the resource is made, unless what is made is one of its
    objects, handed out with its count set."""
    (tmp_path / "obj.c").write_text(REFCOUNTED)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind) for c in r.verified()}
    assert {
        ("createObject", "ACQUIRE"),
        ("createIntObject", "ACQUIRE"),
        ("incrRefCount", "ACQUIRE"),
        ("decrRefCount", "RELEASE"),
    } <= got
    assert not {k for f, k in got if f == "createSharedObjects"}


def _verified(tmp_path, name: str, text: str) -> set[tuple[str, str]]:
    """(function, kind) of each verified site of the scan of one file NAME holding TEXT."""
    (tmp_path / name).write_text(text)
    return {(c.function, c.kind) for c in scan(tmp_path, jobs=1).verified()}


HOLDERS_COUNTED = """
#include <stdlib.h>
struct conn;
struct addrinfo;
/* a backend that counts its holders, and an address shared by reference count: each taken
   and given back through the caller's own handle on it, nothing handed out */
struct backend { struct conn *conns; int load; int max_load; long requests; };
struct address { struct addrinfo *ai; unsigned int refcount; long max_age; };

void backend_assign(struct backend *b) { ++b->load; }
void backend_reset(struct backend *b) { --b->load; }
void backend_count_request(struct backend *b) { b->requests++; }
void address_inc(struct address *a) { __atomic_add_fetch(&a->refcount, 1, __ATOMIC_SEQ_CST); }
void address_dec(struct address *a) {
    if (__atomic_sub_fetch(&a->refcount, 1, __ATOMIC_SEQ_CST) == 0)
        free(a);
}
"""


def test_a_hold_counted_on_the_resource_handed_in_is_taken_and_given_back(tmp_path):
    """A count of the resource's own holders raised on the one the caller names is an
    ACQUIRE of it, and lowered a RELEASE, both of that object; a statistic raised is
    neither."""
    (tmp_path / "backend.c").write_text(HOLDERS_COUNTED)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.object_expr) for c in r.verified()}
    assert {
        ("backend_assign", "ACQUIRE", "b"),
        ("backend_reset", "RELEASE", "b"),
        ("address_inc", "ACQUIRE", "a"),
        ("address_dec", "RELEASE", "a"),
    } <= got
    assert not {k for f, k, _ in got if f == "backend_count_request"}


QUOTA = """
struct msg { struct msg *next; int mid; };
/* a client's messages in flight, bounded by a quota the peer grants */
struct msg_data { struct msg *inflight; int msg_count; int inflight_quota; int inflight_maximum; };
struct client { struct msg_data msgs_out; int sock; };

void decrement_send_quota(struct client *c)
{
    if (c->msgs_out.inflight_quota > 0)
        c->msgs_out.inflight_quota--;
}

void increment_send_quota(struct client *c)
{
    if (c->msgs_out.inflight_quota < c->msgs_out.inflight_maximum)
        c->msgs_out.inflight_quota++;
}
"""


def test_a_quota_taken_after_a_test_that_one_is_left_is_acquired(tmp_path):
    """A quota counts what is left: lowering it after a test that some is left takes a
    unit, which the caller keeps though nothing is handed out; raising it gives one back."""
    (tmp_path / "quota.c").write_text(QUOTA)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind) for c in r.verified() if c.resource == "msg_data"}
    assert got == {("decrement_send_quota", "ACQUIRE"), ("increment_send_quota", "RELEASE")}


SPARE_OR_MAKE = """
struct conn { struct conn *next; int fd; };
/* a server's connections: those in use, and a pool of spare ones */
struct server { struct conn *conns_pool; struct conn *conns; int lim_conns; int max_conns; };
extern struct conn *conn_init(struct server *srv);

struct conn *server_get_conn(struct server *srv)
{
    struct conn *con;
    --srv->lim_conns;
    if (srv->conns_pool) {
        con = srv->conns_pool;
        srv->conns_pool = con->next;
    } else {
        con = conn_init(srv);
    }
    con->next = srv->conns;
    return (srv->conns = con);
}
"""


def test_a_spare_taken_else_one_made_waits_in_the_else(tmp_path):
    """An if on whether the pool has a spare, whose then-branch takes it and whose
    else-branch makes the same local anew by a call: the else is the slow way, a WAIT."""
    (tmp_path / "server.c").write_text(SPARE_OR_MAKE)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.line) for c in r.verified() if c.resource == "server"}
    assert ("server_get_conn", "WAIT", 14) in got, got
    assert "ACQUIRE" in {k for f, k, _ in got if f == "server_get_conn"}, got


OUT_PARAM_POOL = """
#include <stddef.h>
struct buf { struct buf *next; char data[64]; };
/* spare buffers, kept on a list, counted */
struct buf_pool { struct buf *spare; int n_spare; int capacity; };

/* hands a spare out through the caller's pointer */
void buf_pool_spare_out(struct buf_pool *p, struct buf **out)
{
    struct buf *b = p->spare;
    *out = NULL;
    if (b == NULL)
        return;
    p->spare = b->next;
    p->n_spare--;
    *out = b;
}

/* relinks the caller's own list through its pointer: hands nothing out */
void buf_list_cut(struct buf_pool *p, struct buf **head)
{
    struct buf *b = *head;
    if (b != NULL) {
        *head = b->next;
        p->n_spare--;
    }
}
"""


def test_what_is_read_off_the_pool_and_handed_out_through_a_pointer_is_acquired(tmp_path):
    """A unit read off the resource and stored through a pointer to a pointer the caller
    passed is handed out, as a return would hand it; relinking the caller's own list
    through such a pointer hands nothing out."""
    got = _verified(tmp_path, "bufs.c", OUT_PARAM_POOL)
    assert ("buf_pool_spare_out", "ACQUIRE") in got, got
    assert ("buf_list_cut", "ACQUIRE") not in got, got


TORN_DOWN = """
#include <stdlib.h>
struct req;
/* a connection: its requests, counted, and the holders that share it */
struct connection { struct req *reqs; int n_reqs; int max_reqs; int refcount; };

/* tears one connection down: frees it, no hold given back */
void connection_free(struct connection *con)
{
    free(con->reqs);
    free(con);
}

/* drops a hold, and frees it when it was the last */
void connection_unref(struct connection *con)
{
    if (--con->refcount == 0)
        free(con);
}
"""


def test_freeing_the_resource_handed_in_with_no_count_lowered_is_its_teardown(tmp_path):
    """Freeing the resource's own record the function was handed, with no count lowered,
    tears that instance down: no RELEASE; dropping a hold first and freeing at zero is
    one."""
    got = _verified(tmp_path, "conn.c", TORN_DOWN)
    assert ("connection_unref", "RELEASE") in got, got
    assert not {k for f, k in got if f == "connection_free"}, got


CONST_SETTING = """
struct item { struct item *next; int v; };
/* a queue of items waiting, and the defaults it was given to read */
struct item_queue {
    struct item *first; struct item *last; int count; int max; const struct item *defaults;
};

void item_queue_push(struct item_queue *q, struct item *it)
{
    it->next = 0;
    if (q->last)
        q->last->next = it;
    else
        q->first = it;
    q->last = it;
    q->count++;
}

void item_queue_set_defaults(struct item_queue *q, const struct item *defaults)
{
    q->defaults = defaults;
}
"""


def test_a_pointer_to_what_cannot_be_changed_lists_no_units(tmp_path):
    """A member pointing to what cannot be changed through it (``const struct item *``) is
    a setting read, not a list of units: storing the caller's pointer there queues no
    work, as linking an item onto the queue's last does."""
    got = _verified(tmp_path, "queue.c", CONST_SETTING)
    assert ("item_queue_push", "ACQUIRE") in got, got
    assert not {k for f, k in got if f == "item_queue_set_defaults"}, got


GUARDED = """
#include <pthread.h>
#include <stdint.h>
typedef struct frame frame_t;
typedef struct buf_pool buf_pool_t;
frame_t *bp_get_page(buf_pool_t *bp, uint64_t page_no);
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t item_locks[64];

/* a wrapper that takes a lock around its one call */
frame_t *bp_get_page_locked(buf_pool_t *bp, uint64_t page_no) {
    frame_t *f;
    pthread_mutex_lock(&pool_lock);
    f = bp_get_page(bp, page_no);
    pthread_mutex_unlock(&pool_lock);
    return f;
}

/* one lock of a table of them, by hash */
void item_lock(uint32_t hv) { pthread_mutex_lock(&item_locks[hv & 63]); }
void item_unlock(uint32_t hv) { pthread_mutex_unlock(&item_locks[hv & 63]); }
"""


def test_a_wrapper_may_lock_around_its_call_and_a_lock_table_is_a_lock(tmp_path):
    (tmp_path / "buffer_pool.c").write_text((CORPUS / "buffer_pool.c").read_text())
    (tmp_path / "guarded.c").write_text(GUARDED)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.resource) for c in r.verified() if c.file == "guarded.c"}
    assert ("bp_get_page_locked", "ACQUIRE", "buf_pool") in got
    assert ("item_lock", "ACQUIRE", "item_locks") in got
    assert ("item_unlock", "RELEASE", "item_locks") in got


SEM_API = """
#include <errno.h>
#include <semaphore.h>
#include <stdlib.h>
typedef sem_t my_sem_t;
static int custom;
static void my_sem_wait_posix(my_sem_t *sem) {
    int r;
    do
        r = sem_wait(sem);
    while (r == -1 && errno == EINTR);  /* a retry on a signal, not a wait of its own */
    if (r)
        abort();
}
static void my_sem_wait_custom(my_sem_t *sem) { (void)sem; }
/* the public one picks the platform's */
void my_sem_wait(my_sem_t *sem) {
    if (custom)
        my_sem_wait_custom(sem);
    else
        my_sem_wait_posix(sem);
}
"""


def test_a_lock_helper_retrying_on_a_signal_is_a_lock_and_its_caller_too(tmp_path):
    (tmp_path / "sem.c").write_text(SEM_API)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind) for c in r.verified()}
    assert {("my_sem_wait_posix", "ACQUIRE"), ("my_sem_wait", "ACQUIRE")} <= got


ATOMIC_BUDGET = """
#include <stdatomic.h>
#include <stdlib.h>
/* a budget counted through macros over C11 and GCC atomics, as allocators keep one */
static _Atomic size_t used_memory;
static size_t peak_objects;
#define atomicIncr(var, n) atomic_fetch_add_explicit(&var, (n), memory_order_relaxed)
#define atomicDecr(var, n) atomic_fetch_sub_explicit(&var, (n), memory_order_relaxed)
#define stat_alloc(n) atomicIncr(used_memory, (n))
#define stat_free(n) atomicDecr(used_memory, (n))

static void *try_alloc(size_t size) {
    size_t *p = malloc(size + sizeof(size_t));
    if (!p) return NULL;
    *p = size;
    stat_alloc(size);
    __atomic_add_fetch(&peak_objects, 1, __ATOMIC_RELAXED);
    return p + 1;
}
void *my_alloc(size_t size) {
    void *p = try_alloc(size);
    if (!p) abort();
    return p;
}
void my_free(void *ptr) {
    size_t *real = (size_t *)ptr - 1;
    stat_free(*real);
    free(real);
}
/* not a wrapper of my_free: it gives back two blocks, a job of its own */
struct report { void *rows; };
void free_report(struct report *r) {
    my_free(r->rows);
    my_free(r);
}
"""


def test_atomic_operations_count_whatever_macro_spells_them(tmp_path):
    r, got = _sites_by(tmp_path, "zalloc.c", ATOMIC_BUDGET, r"counted in|^a thin wrapper")
    fns = {f.name: f for u in r.units for f in u.functions}
    steps = {(a.target, a.op) for a in fns["try_alloc"].assigns if a.op != "="}
    # a file's own variables are members of its file's record
    assert steps == {("zalloc_c.used_memory", "+="), ("zalloc_c.peak_objects", "+=")}
    assert ("zalloc_c.used_memory", "-=") in {(a.target, a.op) for a in fns["my_free"].assigns}
    assert {c.callee for c in fns["try_alloc"].calls} >= {
        "__c11_atomic_fetch_add",
        "__atomic_add_fetch",
    }
    assert got == {
        ("try_alloc", "ACQUIRE", "used_memory"),
        ("my_alloc", "ACQUIRE", "used_memory"),
        ("my_free", "RELEASE", "used_memory"),
    }


MACRO_OPS = """
#define refcount_incr(it) ++(it->refcount)
#define refcount_decr(it) --(it->refcount)
typedef struct item { int refcount; struct item *next; } item;
extern unsigned getLRUClock(void);
void hold(item *it) { refcount_incr(it); }
void drop(item *it) { refcount_decr(it); }
unsigned lru_now(void) { return getLRUClock(); }
#define COUNT_UP(val) do { *(val) += 1; } while (0)
void hold_again(item *it) { COUNT_UP(&it->refcount); }
"""


def test_an_operator_a_macro_spells_is_read_and_a_clock_is_no_lock(tmp_path):
    from gigi.scan._offline import lock_calls

    (tmp_path / "ops.c").write_text(MACRO_OPS)
    fns = {f.name: f for u in scan(tmp_path, jobs=1).units for f in u.functions}
    assert [(a.target, a.target_base, a.op) for a in fns["hold"].assigns] == [
        ("item.refcount", "it", "+=")
    ]
    assert [(a.target, a.op) for a in fns["drop"].assigns] == [("item.refcount", "-=")]
    # what an address points to is what was addressed: *(&it->refcount) += 1
    assert [(a.target, a.target_base, a.op) for a in fns["hold_again"].assigns] == [
        ("item.refcount", "it", "+=")
    ]
    assert lock_calls(fns["lru_now"], unlock=False) == []


WORDS = """
#include <pthread.h>
typedef struct slot { struct slot *next; char data[64]; } slot_t;
/* Structure for storing items: a free list of slots with a count and a limit. Blocks of
   slots are handed out one at a time. */
typedef struct store {
    slot_t *free_slots;
    int n_free;
    int capacity;
    union { long as_long; double as_double; } last;  /* a record with no name of its own */
    pthread_mutex_t mutex;
} store_t;
"""


def test_a_record_is_named_by_whole_words_and_an_unnamed_one_names_nothing(tmp_path):
    from gigi.scan._offline import phase1

    (tmp_path / "store.c").write_text(WORDS)
    u = scan(tmp_path, jobs=1).units[0]
    store = next(g for g in phase1(u.records, u.members) if g.name == "store")
    # "storing" holds no ring (a log), nor "Blocks" a lock (shared)
    assert (store.sharing, store.unit, store.elements) == ("pool", "slots", ["slot"])
    assert not any("(" in m.element for m in u.members)


def test_a_record_is_filed_once_where_it_is_defined(tmp_path):
    (tmp_path / "core.h").write_text("typedef struct pool_s pool_t;\n")
    (tmp_path / "palloc.h").write_text(
        '#include "core.h"\nstruct pool_s { char *last; char *end; pool_t *next; };\n'
    )
    (tmp_path / "palloc.c").write_text(
        '#include "palloc.h"\nvoid *pool_alloc(pool_t *p) { return p->last; }\n'
    )
    (tmp_path / "other.c").write_text('#include "core.h"\n#include "palloc.h"\n')
    r = scan(tmp_path, jobs=1)
    found = [(x.name, x.file) for u in r.units for x in u.records]
    assert found == [("pool_s", "palloc.h")]


ENTRIES = """
#include <stdlib.h>
struct node { struct node *left, *right; unsigned int key; };
/* an entry of the table, kept while anyone holds it */
struct entry {
	unsigned int expire;      /* expiration date */
	unsigned int ref_cnt;     /* reference count, can only purge when zero */
	unsigned long lock;       /* spinlock of the entry */
	struct node by_key;       /* node in the table's tree */
};
struct table {
	struct node *keys;        /* tree of entries */
	unsigned int size;        /* maximum number of entries */
	unsigned int current;     /* number of entries in use */
	unsigned long lock;       /* spinlock of the table */
};
extern struct entry *tree_lookup(struct node *root, unsigned int key);

struct entry *entry_new(struct table *t, unsigned int key)
{
	struct entry *e;
	if (t->current >= t->size)
		return NULL;
	e = malloc(sizeof(*e));
	if (!e)
		return NULL;
	t->current++;
	e->ref_cnt = 0;
	e->by_key.key = key;
	return e;
}

void entry_free(struct table *t, struct entry *e)
{
	t->current--;
	free(e);
}

struct entry *entry_get(struct table *t, unsigned int key)
{
	struct entry *e = tree_lookup(t->keys, key);
	if (e)
		e->ref_cnt++;
	return e;
}

void entry_put(struct entry *e)
{
	e->ref_cnt--;
}

unsigned int table_fill(const struct table *t)
{
	return t->current * 100 / t->size;
}
"""


def test_an_entry_counted_by_reference_is_its_own_pool_beside_its_table(tmp_path):
    """An entry with a reference count and a spinlock word is a pool of references (the word
    guards its bookkeeping, it does not make the entry a lock); the table's lookup that takes
    a reference on the entry it returns ACQUIREs the entry, though it works on the table
    most, and the put gives back that entry; plain trailing comments are read."""
    (tmp_path / "table.c").write_text(ENTRIES)
    r = scan(tmp_path, jobs=1)
    assert {g.name: g.sharing for g in r.resources if g.name in ("entry", "table")} == {
        "entry": "pool",
        "table": "pool",
    }
    refs = next(m for u in r.units for m in u.members if m.name == "ref_cnt")
    assert refs.comment.startswith("reference count")
    got = {(c.function, c.kind, c.resource, c.object_expr) for c in r.verified()}
    assert {("entry_get", "ACQUIRE", "entry", "e"), ("entry_put", "RELEASE", "entry", "e")} <= got
    assert not {f for f, *_ in got} & {"table_fill"}


HANDED_LOCK = """
typedef struct lwlock { unsigned int state; int waiters; } lwlock;
/* a buffer's header: its tag, its pins, the lock on its contents */
typedef struct buffer_desc { int tag; unsigned int refcount; lwlock content_lock; } buffer_desc;
extern buffer_desc *descriptors;
extern void LWLockAcquire(lwlock *lock, int mode);
extern void LWLockRelease(lwlock *lock);

/* Lock or unlock the contents of BUFFER, which the caller has pinned. */
void lock_buffer(int buffer, int mode)
{
	buffer_desc *buf = &descriptors[buffer - 1];
	if (mode == 0)
		LWLockRelease(&buf->content_lock);
	else
		LWLockAcquire(&buf->content_lock, mode);
}

#define BUFFER_LOCK_UNLOCK 0
#define BUFFER_LOCK_SHARE 1

/* a mode that takes the lock, and one that gives it back */
void share_buffer(int buffer) { lock_buffer(buffer, BUFFER_LOCK_SHARE); }
void unlock_buffer(int buffer) { lock_buffer(buffer, BUFFER_LOCK_UNLOCK); }

/* Look at the contents of BUFFER under its lock. */
int buffer_tag(int buffer)
{
	buffer_desc *buf = &descriptors[buffer - 1];
	int tag;
	LWLockAcquire(&buf->content_lock, 1);
	tag = buf->tag;
	LWLockRelease(&buf->content_lock);
	return tag;
}
"""


def test_a_lock_taken_on_what_the_caller_names_and_kept_is_its_acquire(tmp_path):
    """The content lock of the buffer the caller names, taken and not given back on that
    path, is held by the caller: an ACQUIRE though nothing is returned (a Release-named call
    gives a lock back, it takes none). Taken and given back around work, it is no event; a
    wrapper asking for an UNLOCK mode takes nothing."""
    (tmp_path / "buf.c").write_text(HANDED_LOCK)
    got = {(c.function, c.kind, c.line) for c in scan(tmp_path, jobs=1).verified()}
    # the LWLockAcquire, and the wrapper taking it in a mode that locks (not the one that
    # gives it back: BUFFER_LOCK_UNLOCK)
    assert got == {("lock_buffer", "ACQUIRE", 16), ("share_buffer", "ACQUIRE", 23)}


HOLDER_COUNT = """
typedef struct page { struct page *next; unsigned long slab; } page_t;
/* a pool of pages: the free ones linked, and how many are free */
typedef struct page_pool {
	page_t *free_pages; unsigned long pfree; unsigned long size;
} page_pool_t;
extern void page_join(page_pool_t *pool, page_t *page);

/* Give PAGE back to POOL: counted free, then joined with its free neighbours. */
void page_free(page_pool_t *pool, page_t *page)
{
	pool->pfree++;
	page->slab = 0;
	page_join(pool, page);
}
"""


def test_a_count_lowered_on_the_holder_leaves_the_object_to_be_put_back(tmp_path):
    """Lowering the pool's count of pages in use (raising its free count) gives the page
    back; setting the page up and joining it to its neighbours after that is the rest of
    giving it back, not a use of a page already released."""
    (tmp_path / "pages.c").write_text(HOLDER_COUNT)
    got = {(c.function, c.kind, c.line) for c in scan(tmp_path, jobs=1).verified()}
    assert got == {("page_free", "RELEASE", 12)}  # pool->pfree++


LOCK_MACROS = r"""
#include <stddef.h>
#include <pthread.h>
#define cpu_relax() __asm__ volatile("" ::: "memory")
#define __pl_try(l) ({ void __unsupported_size_for_pl_try__(char *, int); \
	(sizeof(*(l)) == 8) ? !__atomic_exchange_n((l), 1, __ATOMIC_ACQUIRE) : \
	(__unsupported_size_for_pl_try__(__FILE__, __LINE__), 0); })
#define SPIN_LOCK(l) do { while (__builtin_expect(!__pl_try(l), 0)) cpu_relax(); } while (0)
#define SPIN_UNLOCK(l) ({ __atomic_store_n((l), 0, __ATOMIC_RELEASE); })
#define mutex_lock(m) pthread_mutex_lock(m)

struct entry { struct entry *next; int key; };
/* a table of entries: how many are in use out of its size, under its own spinlock */
struct table { struct entry *free; unsigned int current; unsigned int size; unsigned long lock; };

struct entry *__entry_new(struct table *t)
{
	struct entry *e = t->free;
	if (!e || t->current >= t->size)
		return NULL;
	t->free = e->next;
	t->current++;
	return e;
}

/* the table's lock taken around the real work */
struct entry *entry_new(struct table *t)
{
	struct entry *e;
	SPIN_LOCK(&t->lock);
	e = __entry_new(t);
	SPIN_UNLOCK(&t->lock);
	return e;
}

void table_lock(struct table *t)
{
	SPIN_LOCK(&t->lock);
}

void other(pthread_mutex_t *m)
{
	mutex_lock(m);
}
"""


def test_a_lock_a_macro_spells_is_one_call_and_an_alias_stays_its_call(tmp_path):
    """A spinlock macro that expands to loops, atomics and a size-checked helper reads as one
    call named for it (so a function that takes it around its one call is a wrapper); a
    macro that is one plain call stays that call, with its arguments as written."""
    (tmp_path / "q.c").write_text(LOCK_MACROS)
    r = scan(tmp_path, jobs=1)
    fns = {f.name: f for u in r.units for f in u.functions}
    assert [(c.callee, c.args) for c in fns["entry_new"].calls] == [
        ("SPIN_LOCK", ["&t->lock"]),
        ("__entry_new", ["t"]),
        ("SPIN_UNLOCK", ["&t->lock"]),
    ]
    assert fns["entry_new"].loops == [] and fns["table_lock"].loops == []
    assert [(c.callee, c.args) for c in fns["other"].calls] == [("pthread_mutex_lock", ["m"])]
    got = {(c.function, c.kind) for c in r.verified()}
    assert ("entry_new", "ACQUIRE") in got  # a wrapper of __entry_new, its lock aside


SLOT_CACHE = """
#include <vector>
struct cell { int pos; int seq; };
class slot_cache {
public:
    slot_cache(int n) : cells(n), used(0), size(n) {
        for (auto &c : cells)
            c.pos = -1;
        used = 0;
    }
    ~slot_cache() { used = 0; }
    int take(int pos) {
        for (int i = 0; i < size; i++) {
            if (cells[i].pos < 0) {
                cells[i].pos = pos;
                used++;
                return i;
            }
        }
        return -1;
    }
    void give(int i) {
        cells[i].pos = -1;
        used--;
    }
private:
    std::vector<cell> cells;
    int used;
    int size;
};
"""


def test_a_classes_slots_are_taken_by_index_and_its_structors_move_nothing(tmp_path):
    """A C++ cache of cells: the method that marks a free cell used and returns its index
    takes a slot (the index names what it took), the one that clears it gives it back; the
    constructor and destructor set the cache up and tear it down, and move no units."""
    (tmp_path / "cache.cpp").write_text(SLOT_CACHE)
    got = {(c.function, c.kind, c.object_expr) for c in scan(tmp_path, jobs=1).verified()}
    assert got == {("slot_cache::take", "ACQUIRE", "i"), ("slot_cache::give", "RELEASE", "")}


USED_SET = """
#include <set>
#include <vector>
/* the cells of a cache: the position each holds, and which are in use */
class slot_cells {
public:
    void occupy(unsigned i, int p) {
        pos[i] = p;
        used.insert(i);
    }
    void rm(unsigned i) {
        pos[i] = -1;
        used.erase(i);
    }
    unsigned n_used() const { return used.size(); }
    unsigned capacity() const { return pos.size(); }
private:
    std::vector<int> pos;
    std::set<unsigned> used;
};
"""


def test_a_set_of_cells_in_use_counts_them_by_its_methods(tmp_path):
    """A standard container member is a count its methods move: inserting the cell the
    caller names into the set of those in use takes it, erasing it gives it back; reading
    the set's size moves nothing. Both name the cell."""
    (tmp_path / "cells.cpp").write_text(USED_SET)
    r = scan(tmp_path, jobs=1)
    fns = {f.name: f for u in r.units for f in u.functions}
    assert [(a.target, a.op) for a in fns["slot_cells::occupy"].assigns if a.op != "="] == [
        ("slot_cells.used", "+=")
    ]
    got = {(c.function, c.kind, c.object_expr) for c in r.verified()}
    assert got == {("slot_cells::occupy", "ACQUIRE", "i"), ("slot_cells::rm", "RELEASE", "i")}


METHODS_BY_CLASS = (
    USED_SET
    + """
/* another class with a method of the same name, that gives nothing back */
class name_table {
public:
    void rm(unsigned i) { names[i] = 0; }
private:
    const char *names[16];
};

/* a cache of two streams of cells */
class stream_cache {
public:
    void drop(unsigned s, unsigned i) {
        auto & cells = streams[s];
        cells.rm(i);
    }
private:
    slot_cells streams[2];
};
"""
)


def test_a_method_is_known_by_its_class_through_a_local_reference(tmp_path):
    """A method called on a local reference (cells.rm(i), cells a slot_cells &) is its
    class's, though another class has a method of that name: the wrapper that calls it
    releases what it releases."""
    (tmp_path / "cells.cpp").write_text(METHODS_BY_CLASS)
    got = {(c.function, c.kind) for c in scan(tmp_path, jobs=1).verified()}
    assert ("stream_cache::drop", "RELEASE") in got, got
    assert ("name_table::rm", "RELEASE") not in got


SUMMARIES = """
#include <stddef.h>
typedef struct obj { int refcount; int type; void *ptr; } robj;
/* the shared objects every client reads: handed out with a reference taken */
struct shared_objects { robj *integers[100]; robj *crlf; int n_shared; int max_shared; };
struct shared_objects shared;

void incr_ref(robj *o) { if (o->refcount < 1000) o->refcount++; }
void decr_ref(robj *o) { if (o->refcount == 1) o->ptr = NULL; else o->refcount--; }
void decr_ref_void(void *o) { decr_ref(o); }
void atomic_add(int *value, int n) { __atomic_add_fetch(value, n, __ATOMIC_RELAXED); }

/* not thin: it decides, and takes a reference on what it hands out */
robj *get_integer(long value) {
    robj *o;
    if (value < 0 || value >= 100)
        return NULL;
    o = shared.integers[value];
    incr_ref(o);
    return o;
}
void take_two(robj *a) { atomic_add(&a->refcount, 2); }

/* a library's atomics, not in the tree: what their names say */
struct queue { unsigned idlers; };
extern unsigned apr_atomic_add32(volatile unsigned *mem, unsigned val);
extern unsigned apr_atomic_inc32(volatile unsigned *mem);
void one_less(struct queue *q) { apr_atomic_add32(&q->idlers, -1); }
void one_more(struct queue *q) { apr_atomic_inc32(&q->idlers); }
"""


def test_a_count_moved_by_a_call_is_read_as_if_written_inline(tmp_path):
    (tmp_path / "objects.c").write_text(SUMMARIES)
    r = scan(tmp_path, jobs=1)
    fns = {f.name: f for u in r.units for f in u.functions}

    def moved(name):
        return {(a.target, a.target_base, a.op) for a in fns[name].assigns if a.op != "="}

    assert moved("get_integer") == {("obj.refcount", "o", "+=")}
    assert ("obj.refcount", "o", "-=") in moved("decr_ref_void")  # a summary of a summary
    assert moved("take_two") == {("obj.refcount", "a", "+=")}  # through the pointer's target
    assert moved("one_less") == {("queue.idlers", "q", "-=")}  # an add of a negative
    assert moved("one_more") == {("queue.idlers", "q", "+=")}
    kept = {(c.function, c.kind) for c in r.verified()}
    assert ("get_integer", "ACQUIRE") in kept


def test_headers_installed_apart_and_the_builds_defines_reach_the_parse(tmp_path, capsys):
    lib = tmp_path / "lib" / "include"
    lib.mkdir(parents=True)
    (lib / "mylib.h").write_text("typedef struct { int n_free; int capacity; } pool_t;\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "use.c").write_text(
        "#include <mylib.h>\n#ifdef HAVE_CONFIG_H\n"
        "int configured(pool_t *p) { return p->n_free; }\n#endif\n"
    )
    bare = scan(src, jobs=1)
    assert bare.stats["diagnostics"] == bare.stats["errors"] == 1  # mylib.h not found
    r = scan(src, jobs=1, include_dirs=[lib], defines=["HAVE_CONFIG_H"])
    assert r.stats["diagnostics"] == 0
    assert [f.name for u in r.units for f in u.functions] == ["configured"]
    with pytest.raises(ScanError, match="no such include folder"):
        scan(src, jobs=1, include_dirs=[tmp_path / "nowhere"])
    with pytest.raises(ScanError, match="not a macro to define"):
        scan(src, jobs=1, defines=["-O2"])
    out = tmp_path / "out"
    assert main(["scan", str(src), "--out", str(out), "-I", str(lib), "-D", "HAVE_CONFIG_H"]) == 0
    assert "0 parse diagnostics (0 errors)" in capsys.readouterr().out


SET_UP = """
#include <stddef.h>
typedef struct item { struct item *next; struct item *prev; int used; int flags; } item;
/* the item pool: a free list with a count */
typedef struct pool { item *free_items; int n_free; int capacity; } pool_t;

static pool_t pool;

item *item_alloc_pull(void) {
    item *it = pool.free_items;
    if (it == NULL)
        return NULL;
    pool.free_items = it->next;
    pool.n_free--;
    return it;
}

/* not thin: it sets the new item up, field by field, and hands it out */
item *item_take(int flags, int hot, int cold, int temp) {
    item *it = item_alloc_pull();
    if (it == NULL)
        return NULL;
    it->next = it->prev = 0;
    it->used = 0;
    it->flags = flags;
    if (hot)
        it->flags |= 1;
    else if (cold)
        it->flags |= 2;
    else if (temp)
        it->flags |= 4;
    if (flags & 8)
        it->flags |= 16;
    if (flags & 32)
        it->flags |= 64;
    if (flags & 128)
        it->flags |= 256;
    if (flags & 512)
        it->flags |= 1024;
    if (flags & 2048)
        it->flags |= 4096;
    if (flags & 8192)
        it->flags |= 16384;
    if (flags & 32768)
        it->flags |= 65536;
    if (flags & 131072)
        it->flags |= 262144;
    if (flags & 524288)
        it->flags |= 1048576;
    return it;
}
"""


def test_a_function_that_sets_up_and_hands_out_an_object_acquires_it(tmp_path):
    r, got = _sites_by(tmp_path, "items.c", SET_UP, r".")
    assert ("item_alloc_pull", "ACQUIRE", "pool") in got
    assert ("item_take", "ACQUIRE", "pool") in got  # returns what item_alloc_pull took
    # zeroing the fields of what it just took gives nothing back
    assert not {(f, k) for f, k, _ in got if k == "RELEASE"}


def test_compile_commands_paths_are_the_entrys_and_a_linked_source_is_dropped(tmp_path):
    """libclang parses in the scanner's folder: every path an entry names is made absolute
    from its directory, separate (-I inc) or joined (-Iinc); and the source leaves the
    arguments by whatever name the build gave it (a link configure made)."""
    from gigi.scan._parse import compile_flags, load_compile_commands

    build = tmp_path / "src" / "port"
    build.mkdir(parents=True)
    (build / "posix_sema.c").write_text("int sema;\n")
    (build / "pg_sema.c").symlink_to("posix_sema.c")
    entry = {
        "directory": str(build),
        "file": "pg_sema.c",
        "arguments": ["cc", "-c", "-I", "../inc", "-Iinc2", "-iquote", "q", "pg_sema.c"],
    }
    (tmp_path / "cc.json").write_text(json.dumps([entry]))
    flags = compile_flags(
        build / "posix_sema.c", tmp_path, load_compile_commands(tmp_path / "cc.json")
    )
    assert flags[:5] == ["-I", f"{build}/../inc", f"-I{build}/inc2", "-iquote", f"{build}/q"]
    assert not any(f.endswith(".c") for f in flags)
    r = scan(tmp_path / "src", compile_commands=tmp_path / "cc.json", jobs=1)
    assert r.stats["diagnostics"] == 0


QUEUES = """
#include <pthread.h>
#include <stddef.h>
#include <sys/queue.h>

/* A job handed from the listener to the workers. */
typedef struct job { int fd; STAILQ_ENTRY(job) link; } job_t;

/* The workers' queue of jobs, and a free list of spare jobs. */
typedef struct job_queue {
    STAILQ_HEAD(job_head, job) head;
    pthread_mutex_t lock;
    job_t *spare;
    int n_spare;
} job_queue_t;

void jq_push(job_queue_t *q, job_t *j)
{
    pthread_mutex_lock(&q->lock);
    STAILQ_INSERT_TAIL(&q->head, j, link);
    pthread_mutex_unlock(&q->lock);
}

job_t *jq_pop(job_queue_t *q)
{
    job_t *j;
    pthread_mutex_lock(&q->lock);
    j = STAILQ_FIRST(&q->head);
    if (j != NULL)
        STAILQ_REMOVE_HEAD(&q->head, link);
    pthread_mutex_unlock(&q->lock);
    return j;
}

extern void wake_a_worker(void);

/* a wrapper that hands the job it was given to jq_push, which takes it */
void dispatch(job_queue_t *q, job_t *j)
{
    jq_push(q, j);
    wake_a_worker();
}

/* A request, and a hand-linked list of those waiting their turn. */
typedef struct req { struct req *next; int id; } req_t;
typedef struct req_queue { req_t *first; req_t *last; int n_waiting; } req_queue_t;

void rq_add(req_queue_t *b, req_t *r)
{
    r->next = NULL;
    if (b->last)
        b->last->next = r;
    else
        b->first = r;
    b->last = r;
}

req_t *rq_next(req_queue_t *b)
{
    req_t *r = b->first;
    if (r != NULL)
        b->first = r->next;
    return r;
}
"""


def test_a_queue_takes_a_place_when_work_is_linked_in_and_gives_it_back_when_taken_off(
    tmp_path,
):
    """A queue of work is a free list the other way round: what is linked in holds its
    place until a consumer takes it off. A list head spelled by sys/queue.h's macros (a
    record of a first and a last pointer) lists what it points to, and the mutex a queue
    keeps for its bookkeeping does not make it a lock."""
    from gigi.scan._offline import phase1

    r, got = _sites_by(tmp_path, "queues.c", QUEUES, r": work queued$|^takes work off")
    assert got == {
        ("jq_push", "ACQUIRE", "job_queue"),
        ("jq_pop", "RELEASE", "job_queue"),
        ("rq_add", "ACQUIRE", "req_queue"),
        ("rq_next", "RELEASE", "req_queue"),
    }, got
    queue = next(g for g in phase1(r.units[0].records, r.units[0].members) if g.name == "job_queue")
    assert queue.sharing == "pool" and "job" in queue.elements
    objects = {(c.function, c.object_expr) for c in r.verified() if c.resource == "job_queue"}
    assert objects >= {("jq_push", "j"), ("jq_pop", "j")}
    wrapped = {(c.function, c.kind) for c in r.verified() if c.why.startswith("a thin wrapper")}
    assert wrapped == {("dispatch", "ACQUIRE")}, wrapped


REPLACEABLE = """
#include <stddef.h>
#include <string.h>
#include <stdio.h>

/* the allocator a user may replace */
typedef struct {
    void *(*local_malloc)(size_t size);
    void (*local_free)(void *ptr);
} my_allocator_t;

static my_allocator_t my_allocator = { 0, 0 };

void *my_malloc(size_t size) {
    if (size > 0)
        return my_allocator.local_malloc(size);
    return NULL;
}

void my_free(void *ptr) { my_allocator.local_free(ptr); }

char *my_strdup(const char *s) {
    size_t len = strlen(s) + 1;
    char *m = my_malloc(len);
    if (m == NULL)
        return NULL;
    return memcpy(m, s, len);
}

/* an error message: a copy when there is memory for one, else a literal */
const char *unknown_error(int err) {
    char buf[32];
    char *copy;
    snprintf(buf, sizeof(buf), "error %d", err);
    copy = my_strdup(buf);
    return copy != NULL ? copy : "error";
}
"""


def test_an_allocator_the_program_lets_be_replaced_is_its_heap(tmp_path):
    """Calls through function pointers named for the C library's memory functions are the
    program's own heap, counted or not, and its wrappers take their events from it; a
    function that may hand out a string literal instead owns nothing it returns."""
    r, got = _sites_by(tmp_path, "heap.c", REPLACEABLE, r"")
    assert got == {
        ("my_malloc", "ACQUIRE", "my_allocator_t"),
        ("my_free", "RELEASE", "my_allocator_t"),
        ("my_strdup", "ACQUIRE", "my_allocator_t"),
    }, got


RETRIED = """
#include <sched.h>
#include <stddef.h>

/* A lock word: 0 free, 1 held. */
typedef struct spin_lock { int state; int n_waiters; } spin_lock_t;

/* Take the lock if it is free. */
int spin_try(spin_lock_t *l) { return __sync_bool_compare_and_swap(&l->state, 0, 1); }

/* Take the lock, yielding until it is free. */
void spin_take(spin_lock_t *l)
{
    while (!spin_try(l))
        sched_yield();
}

void spin_give(spin_lock_t *l) { __sync_lock_release(&l->state); }

/* A pool of buffers on a free list. */
typedef struct buf { struct buf *next_free; char data[512]; } buf_t;
typedef struct buf_pool { buf_t *free_list; int n_free; } buf_pool_t;

buf_t *pool_get(buf_pool_t *p)
{
    buf_t *b = p->free_list;
    if (b != NULL) {
        p->free_list = b->next_free;
        p->n_free--;
    }
    return b;
}

/* Wait for a buffer: retry until one is free. */
buf_t *pool_get_waiting(buf_pool_t *p)
{
    buf_t *b;
    while ((b = pool_get(p)) == NULL)
        sched_yield();
    return b;
}
"""


def test_what_a_wait_loop_got_at_last_the_function_has(tmp_path):
    """A loop that retries an ACQUIRE leaves its function holding what it got: the buffer it
    returns, or the lock it handed its own parameter to, each an ACQUIRE beside the WAIT."""
    r, got = _sites_by(tmp_path, "spin.c", RETRIED, r"")
    assert {("spin_take", "WAIT", "spin_lock"), ("spin_take", "ACQUIRE", "spin_lock")} <= got
    assert {
        ("pool_get_waiting", "WAIT", "buf_pool"),
        ("pool_get_waiting", "ACQUIRE", "buf_pool"),
    } <= got
    taken = {c.function: c.object_expr for c in r.verified() if c.kind == "ACQUIRE"}
    assert taken["spin_take"] == "l"


REFILL = """
#include <stddef.h>
#include <stdio.h>
typedef struct obj { struct obj *next_free; char data[64]; } obj_t;
typedef struct obj_cache { obj_t *free_list; int n_free; int n_fails; } obj_cache_t;

extern void grow(obj_cache_t *c);

obj_t *cache_take(obj_cache_t *c)
{
    obj_t *o = c->free_list;
    if (o == NULL) {
        grow(c);
        o = c->free_list;
        if (o == NULL)
            return NULL;
    }
    c->free_list = o->next_free;
    c->n_free--;
    return o;
}

/* an empty list only noted, not refilled: no wait */
obj_t *cache_try(obj_cache_t *c)
{
    obj_t *o = c->free_list;
    if (o == NULL) {
        c->n_fails++;
        fprintf(stderr, "cache empty\\n");
        return NULL;
    }
    c->free_list = o->next_free;
    c->n_free--;
    return o;
}
"""


def test_a_free_list_found_empty_and_refilled_is_a_wait(tmp_path):
    """The branch taken when a free list gave nothing, which makes more and takes from the
    list again, is the slow path of taking one: a WAIT, whatever the call that makes more
    is named. A branch that only notes the empty list is not."""
    r, got = _sites_by(tmp_path, "cache.c", REFILL, r"empty")
    assert got == {("cache_take", "WAIT", "obj_cache")}, got
    kinds = {(c.function, c.kind) for c in r.verified()}
    assert {("cache_take", "ACQUIRE"), ("cache_try", "ACQUIRE")} <= kinds
    assert ("cache_try", "WAIT") not in kinds


KEPT = """
#include <stddef.h>
#include <pthread.h>
typedef struct buf { char *start; char *end; } buf_t;

/* A client connection: its socket, its buffers, what it is doing. */
typedef struct conn {
    int fd;
    struct conn *data;
    buf_t *in;
    buf_t *out;
    int n_requests;
    pthread_mutex_t lock;
} conn_t;

/* The server's configuration, and the free connections it keeps. */
typedef struct server_conf {
    int port;
    const char *name;
    conn_t *free_conns;
    unsigned free_conn_n;
    unsigned max_conns;
} server_conf_t;

conn_t *conn_get(server_conf_t *srv, int fd)
{
    conn_t *c = srv->free_conns;
    if (c == NULL)
        return NULL;
    srv->free_conns = c->data;
    srv->free_conn_n--;
    c->fd = fd;
    return c;
}

void conn_put(server_conf_t *srv, conn_t *c)
{
    c->data = srv->free_conns;
    srv->free_conns = c;
    srv->free_conn_n++;
}
"""


def test_a_free_list_another_record_keeps_is_the_pools(tmp_path):
    """A record that keeps a free list of a resource's objects (a server's free
    connections, with their count) holds that list for the resource: taking from it and
    putting back are the resource's ACQUIRE and RELEASE, though the server is no pool."""
    r, got = _sites_by(tmp_path, "conn.c", KEPT, r"")
    assert {("conn_get", "ACQUIRE", "conn"), ("conn_put", "RELEASE", "conn")} <= got, got
    conn = next(g for g in r.resources if g.name == "conn")
    assert conn.keepers == ["server_conf"]
    kept = {m.name for m in conn.members if m.record == "server_conf"}
    assert kept == {"free_conns", "free_conn_n"}


def test_a_function_named_for_measuring_or_reporting_is_no_use(tmp_path):
    """Reading an object's data to size it or to print it looks at the resource; copying
    out of it works through it."""
    text = (
        REFILL
        + """
#include <string.h>
size_t obj_compute_size(obj_cache_t *c, obj_t *o) { return strlen(o->data); }
void obj_dump(obj_cache_t *c, obj_t *o) { fprintf(stderr, "%s\\n", o->data); }
void obj_copy_out(obj_cache_t *c, obj_t *o, char *out) { memcpy(out, o->data, 64); }
"""
    )
    r, got = _sites_by(tmp_path, "cache.c", text, r"")
    uses = {f for f, k, _ in got if k == "USE"}
    assert "obj_copy_out" in uses and not uses & {"obj_compute_size", "obj_dump"}, uses


def test_reading_what_a_unit_is_is_no_use(tmp_path):
    """An object's type, encoding or state says what it is, and its socket or the action
    pending on it how it is handled, not what it holds: touching them is no USE; reading
    its data is."""
    text = (
        REFILL.replace(
            "typedef struct obj { struct obj *next_free; char data[64]; } obj_t;",
            "typedef struct obj { struct obj *next_free; int type; int sock; int wait_type;"
            " int clsid; int uid; int klen; char data[64]; } obj_t;",
        )
        + """
int obj_is_string(obj_cache_t *c, obj_t *o) { return o->type == 1; }
void obj_watch(obj_cache_t *c, obj_t *o, int fd) { o->sock = fd; o->wait_type = 2; }
int obj_first_byte(obj_cache_t *c, obj_t *o) { return o->data[0]; }
/* its id, its class's and the length of its key say what it is too */
int obj_class_of(obj_cache_t *c, obj_t *o) { return o->clsid + o->uid + o->klen; }
"""
    )
    assert "int type;" in text
    r, got = _sites_by(tmp_path, "cache.c", text, r"")
    uses = {f for f, k, _ in got if k == "USE"}
    assert "obj_first_byte" in uses, uses
    assert not uses & {"obj_is_string", "obj_watch", "obj_class_of"}, uses


SPARE = """
#include <stddef.h>
#include <stdlib.h>
typedef struct chunk { struct chunk *next; int used; char data[64]; } chunk_t;
/* size classes of chunks: the spare ones of each, and their count */
typedef struct chunk_class { chunk_t *slots; unsigned int sl_curr; unsigned int size; } chunk_class;

extern void new_page(chunk_class *p);
extern chunk_t *page_alloc(chunk_class *p);

/* none spare: a page is cut into more, then one is taken (the count is stepped, so it
   counts, whatever it is called) */
chunk_t *class_alloc(chunk_class *p)
{
    chunk_t *it = NULL;
    if (p->sl_curr == 0)
        new_page(p);
    if (p->sl_curr != 0) {
        it = p->slots;
        p->slots = it->next;
        p->sl_curr--;
    }
    return it;
}

/* the spare one first; failing that, a new one made */
chunk_t *class_get(chunk_class *p)
{
    chunk_t *c = p->slots;
    if (c) {
        p->slots = c->next;
        p->sl_curr--;
        return c;
    }
    c = page_alloc(p);
    return c;
}

/* the same test on a chunk handed in, for a choice of work: no shortage */
chunk_t *class_dup(chunk_class *p, chunk_t *src)
{
    chunk_t *c;
    if (src->used == 0)
        return src;
    c = p->slots;
    if (c == NULL)
        return NULL;
    p->slots = c->next;
    p->sl_curr--;
    return c;
}

typedef struct queue { chunk_t *last; } queue_t;

/* room in the last chunk first (a test that starts with a macro); else a new chunk from
   the function that takes one */
char *queue_space(chunk_class *p, queue_t *q, int want)
{
    chunk_t *c = q->last;
    if (NULL != c && c->used + want <= 64)
        return c->data + c->used;
    c = class_alloc(p);
    return c ? c->data : NULL;
}

/* room in the first spare chunk: carve from it and jump past the slow path; else a new
   one */
char *class_carve(chunk_class *p, int want)
{
    chunk_t *c = p->slots;
    char *mem;
    if (c && c->used + want <= 64) {
        mem = c->data + c->used;
        c->used += want;
        goto done;
    }
    c = class_alloc(p);
    mem = c->data;
    c->used = want;
done:
    return mem;
}

/* a spare one unlinked through a pointer to the list's head; else one made */
chunk_t *class_unlink(chunk_class *p)
{
    chunk_t *c, **ref = &p->slots;
    if ((c = *ref) != NULL) {
        *ref = c->next;
        p->sl_curr--;
        goto found;
    }
    c = malloc(sizeof(*c));
found:
    c->next = NULL;
    return c;
}
"""


def test_the_slow_way_to_a_spare_unit_is_a_wait(tmp_path):
    """Taking a unit has a slow path where none is spare: a count or list found empty and
    more made before the take, or a fast path that returns a spare unit with the making of
    a new one after it. Either is the WAIT; a branch on an object the caller handed in is
    a choice of work, and a condition that starts with a macro is still read."""
    r, got = _sites_by(tmp_path, "class.c", SPARE, r"none is spare|fast path")
    waits = {"class_alloc", "class_get", "queue_space", "class_carve", "class_unlink"}
    assert {f for f, k, _ in got if k == "WAIT"} == waits
    kinds = {(c.function, c.kind) for c in r.verified()}
    takes = {"class_alloc", "class_get", "class_dup", "class_unlink"}
    assert {(f, "ACQUIRE") for f in takes} <= kinds
    assert ("class_dup", "WAIT") not in kinds
    why = next(c.why for c in r.verified() if (c.function, c.kind) == ("queue_space", "WAIT"))
    assert "(NULL != c && c -> used + want <= 64)" in why, why


BACK = """
#include <stddef.h>
struct server;
/* a client connection, taken from the pool its server keeps */
typedef struct conn { struct conn *next; struct server *srv; int fd; int n_requests; } conn_t;
typedef struct server { conn_t *conns; conn_t *conns_pool; unsigned int n_free; } server_t;
typedef struct page { struct cache *pCache; struct page *pDirty; int nRef; } page_t;
typedef struct cache { page_t *pFree; int nPage; } cache_t;

conn_t *conn_take(server_t *srv)
{
    conn_t *con = srv->conns_pool;
    if (con == NULL)
        return NULL;
    srv->conns_pool = con->next;
    srv->n_free--;
    con->next = srv->conns;
    srv->conns = con;
    return con;
}

void conn_give(server_t *srv, conn_t *con)
{
    con->next = srv->conns_pool;
    srv->conns_pool = con;
    srv->n_free++;
}
"""


def test_a_free_list_kept_by_what_the_objects_point_to_is_the_pools(tmp_path):
    """A server its connections point back to may still keep their free list: taking the
    head's next off it is a pop, not a put back, and the connection set as the head is
    the one given back. A page's pointer named for its cache is its way back, no list."""
    r, got = _sites_by(tmp_path, "srv.c", BACK, r"")
    assert ("conn_take", "ACQUIRE", "conn") in got, got
    assert ("conn_take", "RELEASE", "conn") not in got, got
    given = [c for c in r.verified() if (c.function, c.kind) == ("conn_give", "RELEASE")]
    assert [c.object_expr for c in given] == ["con"], given
    conn = next(g for g in r.resources + r.unconfirmed if g.name == "conn")
    assert "server" in conn.keepers
    cache = next((g for g in r.resources + r.unconfirmed if g.name == "cache"), None)
    assert cache is None or "page" not in cache.keepers


LOAD = """
/* a backend process, and the requests it is serving: its load */
typedef struct proc { struct proc *next; int pid; unsigned int load; } proc_t;
/* a backend host: its processes, spawned on demand up to a limit */
typedef struct host {
    proc_t *first;
    proc_t *unused_procs;
    unsigned int num_procs;
    unsigned int active_procs;
    unsigned int max_procs;
    unsigned int max_load_per_proc;
} host_t;

void proc_load_inc(host_t *host, proc_t *proc) { ++proc->load; }
void proc_load_dec(host_t *host, proc_t *proc) { --proc->load; }
"""


def test_a_load_stepped_up_and_down_takes_and_gives_back(tmp_path):
    """The requests a backend serves are counted by its load: raising it takes a place,
    lowering it gives one back."""
    r, got = _sites_by(tmp_path, "proc.c", LOAD, r"")
    kinds = {(f, k) for f, k, _ in got}
    assert {("proc_load_inc", "ACQUIRE"), ("proc_load_dec", "RELEASE")} <= kinds, got


TERMINATED = """
#include <pthread.h>
/* the idle workers waiting for a connection */
typedef struct idlers_info {
    int idlers;
    int terminated;
    pthread_mutex_t idlers_mutex;
    pthread_cond_t wait_for_idler;
} idlers_info;

/* tells every waiter to stop: a state of the whole, set under the lock; it takes nothing */
int idlers_term(idlers_info *q)
{
    int rv = pthread_mutex_lock(&q->idlers_mutex);
    if (rv != 0)
        return rv;
    q->terminated = 1;
    pthread_cond_broadcast(&q->wait_for_idler);
    return pthread_mutex_unlock(&q->idlers_mutex);
}

/* how many wait: a number reported, not a use */
int idlers_num(idlers_info *q)
{
    return q->idlers;
}

/* one idle worker taken, waiting for one while there is none */
void idlers_take(idlers_info *q)
{
    pthread_mutex_lock(&q->idlers_mutex);
    while (q->idlers == 0)
        pthread_cond_wait(&q->wait_for_idler, &q->idlers_mutex);
    q->idlers--;
    pthread_mutex_unlock(&q->idlers_mutex);
}
"""


def test_a_state_of_the_whole_set_true_takes_nothing(tmp_path):
    """Setting a member true takes a unit only where it is a flag or a count of holding
    (in_use, pinned): a queue marked terminated under its lock, its waiters woken by a
    broadcast (no compare-and-swap, whatever its name holds; no I/O in a thread's mutex),
    hands out nothing and uses nothing; nor does reporting how many wait."""
    (tmp_path / "q.c").write_text(TERMINATED)
    got = {(c.function, c.kind) for c in scan(tmp_path, jobs=1).verified()}
    assert {f for f, _ in got} & {"idlers_term", "idlers_num"} == set(), got
    assert ("idlers_take", "ACQUIRE") in got, got
    from gigi.scan._offline import CAS

    named = ["pg_atomic_compare_exchange_u32", "__sync_bool_compare_and_swap", "atomic_cas_32"]
    assert all(CAS.search(n) for n in named)
    assert not CAS.search("apr_thread_cond_broadcast")


FOUND_AND_REFERENCED = """
#include <stddef.h>
/* an item, counted by the references held on it */
typedef struct item { struct item *next; unsigned short refcount; int nkey; } item;
/* a slab class: the free items of one size, and how many */
typedef struct { item *slots; unsigned int sl_curr; unsigned int size; } slabclass_t;
/* a cache of recent lookups: a fixed set of key slots, the last key asked for */
typedef struct lookup_cache {
    const char *keys[64];
    unsigned int n_used;
    unsigned int capacity;
    const char *last_key;
    int last_nkey;
} lookup_cache;

extern item *assoc_find(const char *key, int nkey);

/* a lookup through the cache: it takes a reference on the item it found */
item *cache_find(lookup_cache *lc, const char *key, int nkey)
{
    item *it = assoc_find(key, nkey);
    if (it != NULL)
        it->refcount++;
    lc->last_key = key;
    lc->last_nkey = nkey;
    return it;
}
"""


def test_a_reference_taken_on_another_resources_object_is_its_acquire(tmp_path):
    """A function working on one resource (a cache of lookups) that takes a reference on
    an object of another (an item of a slab class) acquires from that other one."""
    from gigi.scan._recall import counts_moved

    (tmp_path / "items.c").write_text(FOUND_AND_REFERENCED)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.resource) for c in r.verified()}
    assert ("cache_find", "ACQUIRE", "slabclass_t") in got, got
    fn = next(f for u in r.units for f in u.functions if f.name == "cache_find")
    slabs = {g.name: g for g in r.resources if g.name == "slabclass_t"}
    assert counts_moved(fn, slabs, "lookup_cache") == {"slabclass_t"}
    assert counts_moved(fn, slabs, "slabclass_t") == set()  # its own: read as its work


FILE_STATICS = """
#include <stdlib.h>
struct block { struct block *next; char data[64]; };
/* a pool kept in the file's own variables, as C code often keeps one, not in a struct */
static struct block *free_blocks;
static unsigned int blocks_used, blocks_alloced;
static struct block spare_block;  /* a record by value: its members are its own */

static void add_blocks(int n) {
    struct block *new = malloc(n * sizeof(struct block));
    if (!new)
        return;
    for (int i = 0; i < n - 1; i++)
        new[i].next = &new[i + 1];
    new[n - 1].next = free_blocks;
    free_blocks = new;
    blocks_alloced += n;
}

struct block *block_get(void) {
    struct block *b;
    if (!free_blocks)
        add_blocks(16);
    if (!free_blocks)
        return NULL;
    b = free_blocks;
    free_blocks = b->next;
    blocks_used++;
    return b;
}

/* gives back a whole chain, linked through its last block */
void block_put_chain(struct block *chain) {
    struct block *tmp;
    for (tmp = chain; tmp->next; tmp = tmp->next)
        blocks_used--;
    tmp->next = free_blocks;
    free_blocks = chain;
    blocks_used--;
}

unsigned int block_stats(void) { return blocks_used + spare_block.data[0]; }
"""


def test_a_files_own_variables_are_a_record_and_may_be_a_pool(tmp_path):
    r, got = _sites_by(tmp_path, "blockpool.c", FILE_STATICS, r"")
    members = {(m.record, m.name, m.element) for u in r.units for m in u.members}
    # tentative definitions (``static int n;``) too; a record held by value is not one
    assert {
        ("blockpool_c", "free_blocks", "block"),
        ("blockpool_c", "blocks_used", ""),
        ("blockpool_c", "blocks_alloced", ""),
    } <= members
    assert not any(name == "spare_block" for _, name, _ in members)
    fns = {f.name: f for u in r.units for f in u.functions}
    assert ("blockpool_c.free_blocks", "=") in {(a.target, a.op) for a in fns["block_get"].assigns}
    # the pop, its slow path (none spare: make more) and the push of a chain, on one resource
    assert {(f, k) for f, k, res in got if res == "blockpool_c"} >= {
        ("block_get", "ACQUIRE"),
        ("block_get", "WAIT"),
        ("block_put_chain", "RELEASE"),
    }
    assert not {f for f, _, _ in got} & {"block_stats"}
    assert {res for _, _, res in got} == {"blockpool_c"}


FILE_LOCKS = """
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/sem.h>
#include <time.h>
#include <unistd.h>
/* a cross-process lock over the platform's file locks and semaphores, its handle in a
   member of a member */
struct os_lock { int fd; int semid; };
typedef struct proc_lock { struct os_lock os; int curr_locked; pthread_mutex_t m; } proc_lock;
static struct flock lock_it = {F_WRLCK, SEEK_SET, 0, 0, 0};
static struct flock unlock_it = {F_UNLCK, SEEK_SET, 0, 0, 0};
static struct sembuf op_on = {0, -1, SEM_UNDO}, op_off = {0, 1, SEM_UNDO};

int flock_acquire(proc_lock *l) {
    int rc;
    do
        rc = flock(l->os.fd, LOCK_EX);
    while (rc < 0 && errno == EINTR);  /* restarted when a signal came: no wait of its own */
    if (rc < 0)
        return errno;
    l->curr_locked = 1;
    return 0;
}
int flock_release(proc_lock *l) {
    l->curr_locked = 0;
    return flock(l->os.fd, LOCK_UN);
}
int fcntl_acquire(proc_lock *l) {
    int rc = fcntl(l->os.fd, F_SETLKW, &lock_it);
    l->curr_locked = 1;
    return rc;
}
int fcntl_release(proc_lock *l) {
    l->curr_locked = 0;
    return fcntl(l->os.fd, F_SETLKW, &unlock_it);
}
int fcntl_flags(proc_lock *l) { return fcntl(l->os.fd, F_GETFL, 0); }  /* no lock */
int sysv_acquire(proc_lock *l) {
    l->curr_locked = 1;
    return semop(l->os.semid, &op_on, 1);
}
int sysv_release(proc_lock *l) {
    l->curr_locked = 0;
    return semop(l->os.semid, &op_off, 1);
}
/* a timed lock waits with a deadline; a try does not wait */
int timed_acquire(proc_lock *l, const struct timespec *deadline) {
    if (deadline == NULL)
        return pthread_mutex_trylock(&l->m);
    return pthread_mutex_timedlock(&l->m, deadline);
}
"""


def test_file_locks_and_semaphores_are_locks_by_what_they_are_handed(tmp_path):
    _, got = _sites_by(tmp_path, "plock.c", FILE_LOCKS, r"^its job is")
    assert got == {
        ("flock_acquire", "ACQUIRE", "proc_lock.os"),
        ("flock_release", "RELEASE", "proc_lock.os"),
        ("fcntl_acquire", "ACQUIRE", "proc_lock.os"),
        ("fcntl_release", "RELEASE", "proc_lock.os"),
        ("sysv_acquire", "ACQUIRE", "proc_lock.os"),
        ("sysv_release", "RELEASE", "proc_lock.os"),
        ("timed_acquire", "ACQUIRE", "proc_lock.m"),
        ("timed_acquire", "WAIT", "proc_lock.m"),
    }, got
    _, waits = _sites_by(tmp_path, "plock.c", FILE_LOCKS, r"")
    assert ("flock_acquire", "WAIT") not in {(f, k) for f, k, _ in waits}


AVAILABLE = """
#include <stddef.h>
/* an arena whose position is named for the room it leaves (first_avail): moved forward, it
   carves bytes out, and gives none back */
typedef struct memnode { struct memnode *next; char *first_avail; char *endp; } memnode_t;

void *node_carve(memnode_t *node, size_t size) {
    char *mem;
    if ((size_t)(node->endp - node->first_avail) < size)
        return NULL;
    mem = node->first_avail;
    node->first_avail += size;
    return mem;
}

void node_clear(memnode_t *node, char *start) { node->first_avail = start; }
"""


def test_an_arenas_position_moved_forward_gives_nothing_back(tmp_path):
    r, got = _sites_by(tmp_path, "node.c", AVAILABLE, r"")
    arena = next(g for g in r.resources if g.name == "memnode")
    assert arena.positions == ["memnode.first_avail"]
    assert {(f, k) for f, k, _ in got} == {("node_carve", "ACQUIRE"), ("node_clear", "RELEASE")}


TRANSFER_ROUNDS = """
#include <unistd.h>
/* a log whose writer sends what it holds in rounds: moving data, not waiting for room */
struct log_entry { struct log_entry *next; char payload[256]; int offset; int length; };
typedef struct log_queue {
    struct log_entry *entries; struct log_entry *free_entries; int fd; int n_queued; int max_logs;
} log_queue;
extern int read_write(int fd, char *buf, int len);

void log_write_out(log_queue *q) {
    while (q->entries) {
        struct log_entry *e = q->entries;
        if (read_write(q->fd, e->payload + e->offset, e->length) < 0)
            return;
        q->entries = e->next;
        e->next = q->free_entries;
        q->free_entries = e;
        q->n_queued--;
    }
}

/* one that sleeps until the writer has made room waits */
void log_wait_room(log_queue *q) {
    while (q->n_queued >= q->max_logs) {
        log_write_out(q);
        usleep(1000);
    }
}
"""


def test_a_loop_that_moves_data_in_rounds_is_no_wait(tmp_path):
    r = _sites_by(tmp_path, "logq.c", TRANSFER_ROUNDS, r"")[0]
    waits = {c.function for c in r.verified() if c.kind == "WAIT"}
    assert waits == {"log_wait_room"}, waits
    why = [w for c, ok, w in r.candidates if c.function == "log_write_out" and c.kind == "WAIT"]
    assert why and all("moves data (read_write)" in w for w in why), why


POOL_REFERENCES = """
typedef struct block { struct block *next; char data[64]; } block_t;
typedef struct mem_pool { block_t *free_blocks; unsigned n_free; unsigned max_blocks; } mem_pool_t;
/* an array draws from its pool: a pointer named for what it points to keeps no list */
typedef struct array { mem_pool_t *pool; int nelts; } array_t;
/* a set of idle pools does keep a list of them */
typedef struct pool_set { mem_pool_t *idle_pools; unsigned n_idle; } pool_set_t;
void array_init(array_t *a, mem_pool_t *p) { a->pool = p; a->nelts = 0; }
block_t *pool_get(mem_pool_t *p) {
    block_t *b = p->free_blocks;
    if (b) { p->free_blocks = b->next; p->n_free--; }
    return b;
}
void pool_put(mem_pool_t *p, block_t *b) {
    b->next = p->free_blocks;
    p->free_blocks = b;
    p->n_free++;
}
"""


def test_a_pointer_named_for_its_pool_is_no_list_of_pools(tmp_path):
    r, got = _sites_by(tmp_path, "pools.c", POOL_REFERENCES, r"")
    pool = next(g for g in r.resources if g.name == "mem_pool")
    assert pool.keepers == ["pool_set"], pool.keepers
    assert not {f for f, _, _ in got} & {"array_init"}, got


def test_a_condition_that_starts_with_a_macro_is_spelt_where_it_is_used(tmp_path):
    """libclang spells an expression that starts with a macro of the same file from the
    macro's definition on: the if's own text, between its parentheses, is used instead."""
    (tmp_path / "m.c").write_text(
        "struct l { unsigned count; };\n#define size_of(X) ((X)->count)\n"
        "int full(struct l *q, unsigned max) {\n"
        "    if (size_of(q) >= max) return 1;\n"
        "    while (size_of(q) > max) q->count--;\n"
        "    return 0;\n}\n"
    )
    r = scan(tmp_path, jobs=1)
    fn = next(f for u in r.units for f in u.functions if f.name == "full")
    assert [b.cond for b in fn.branches] == ["size_of ( q ) >= max"]
    assert [lp.cond for lp in fn.loops] == ["size_of ( q ) > max"]


def test_a_cpp_files_namespace_variables_are_its_record_too(tmp_path):
    (tmp_path / "pool.cc").write_text(
        "struct block { block *next; char data[64]; };\n"
        "namespace {\nblock *free_blocks;\nunsigned blocks_used;\n}\n"
        "block *block_get() {\n    block *b = free_blocks;\n    if (!b) return nullptr;\n"
        "    free_blocks = b->next;\n    blocks_used++;\n    return b;\n}\n"
        "void block_put(block *b) { b->next = free_blocks; free_blocks = b; blocks_used--; }\n"
    )
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.resource) for c in r.verified()}
    assert {("block_get", "ACQUIRE", "pool_cc"), ("block_put", "RELEASE", "pool_cc")} <= got, got


SHARED = """
#include <stdlib.h>
#include <string.h>
typedef struct view { char *ptr; long len; int refcnt; } view_t;
typedef struct chunk { struct chunk *next; view_t *view; } chunk_t;

view_t *view_new(long len)
{
    view_t *v = calloc(1, sizeof(*v));
    v->ptr = malloc(len);
    v->len = len;
    v->refcnt = 1;
    return v;
}

void chunk_share(chunk_t *d, const chunk_t *c)
{
    d->view = c->view;
    ++d->view->refcnt;
}

void view_release(view_t *v)
{
    if (0 == --v->refcnt) {
        free(v->ptr);
        free(v);
    }
}

/* a pool of items: an accessor of an item's field is no use of it, a copy into it is */
typedef struct item { struct item *next; long weight; char data[32]; } item_t;
typedef struct pool { item_t *free; unsigned int nfree; unsigned int max; } pool_t;

item_t *pool_get(pool_t *p)
{
    item_t *it = p->free;
    if (it) {
        p->free = it->next;
        p->nfree--;
    }
    return it;
}

long item_weight(pool_t *p, const item_t *it)
{
    return it->weight;
}

void item_fill(pool_t *p, item_t *it, const char *s)
{
    memcpy(it->data, s, sizeof(it->data));
}
"""


def test_a_record_shared_by_reference_is_a_resource(tmp_path):
    """A record no structure proposes is one when the code shares it by reference: a count
    raised in one place and lowered in another that frees the object at zero. A reference
    taken on an object reached from a parameter is an ACQUIRE. A getter that only reads a
    field of a pool's item (not its data) is no USE of it; a copy into the item is."""
    r, got = _sites_by(tmp_path, "view.c", SHARED, r".")
    guess = next(g for g in r.resources if g.name == "view")
    assert "shared by reference" in guess.reasons[0]
    assert {("chunk_share", "ACQUIRE"), ("view_release", "RELEASE")} <= {
        (f, k) for f, k, res in got if res == "view"
    }
    assert ("item_fill", "USE", "pool") in got
    assert not any(f == "item_weight" for f, _, _ in got)
    why = next(w for c, ok, w in r.candidates if c.function == "item_weight" and not ok)
    assert "an accessor" in why


SPIN_MACROS = """
/* a spin lock of the code's own, built on atomics, taken and given back through macros */
typedef struct { volatile int v; } spin_t;
#define SPIN_LOCK(l) do { while (__atomic_exchange_n(&(l)->v, 1, __ATOMIC_ACQUIRE)) ; } while (0)
#define SPIN_UNLOCK(l) __atomic_store_n(&(l)->v, 0, __ATOMIC_RELEASE)
typedef struct queue { spin_t lock; int length; } queue_t;
typedef struct waiter { queue_t *queue; int prio; } waiter_t;

int waiter_prio(waiter_t *p) { return p->prio; }

void waiter_queue_lock(waiter_t *p)
{
    SPIN_LOCK(&p->queue->lock);
}

/* its own work under the lock: a guard, no lock handed out */
int queue_next_id(queue_t *q)
{
    int id;
    SPIN_LOCK(&q->lock);
    id = q->length++;
    SPIN_UNLOCK(&q->lock);
    return id;
}
"""


def test_a_lock_macro_of_the_codes_own_is_read_by_its_name(tmp_path):
    """A lock macro built on no platform call (atomics) is a lock by the last word of its
    name: a function whose job is taking it hands the lock out; one that takes and gives it
    back around work of its own only guards that work."""
    _, got = _sites_by(tmp_path, "spin.c", SPIN_MACROS, r"^its job is")
    assert got == {("waiter_queue_lock", "ACQUIRE", "waiter.queue")}


def test_a_record_of_options_is_no_resource(tmp_path):
    """A record named for options (``runopts``) is settings however its members look; the
    same members in a pool's record make a resource."""
    text = """
#include <pthread.h>
typedef struct listener { struct listener *next; int fd; } listener_t;
typedef struct svr_runopts {
    listener_t *listeners; unsigned int listen_count; unsigned int max_listeners;
    pthread_mutex_t lock;
} svr_runopts;
typedef struct conn_pool {
    listener_t *free; unsigned int free_count; unsigned int max_conns; pthread_mutex_t lock;
} conn_pool_t;
"""
    (tmp_path / "opts.c").write_text(text)
    r = scan(tmp_path, jobs=1)
    names = {g.name for g in r.resources + r.unconfirmed}
    assert "conn_pool" in names and "svr_runopts" not in names, names


GETTERS = """
#include <stddef.h>
/* a buffer of chains whose lock is taken through a table of the program's lock functions,
   each call behind its own test that the buffer has a lock */
struct lock_fns { void (*lock)(int mode, void *l); void (*unlock)(int mode, void *l); };
extern struct lock_fns lock_fns_;
#define BUF_LOCK(b) do { if ((b)->lock) lock_fns_.lock(0, (b)->lock); } while (0)
#define BUF_UNLOCK(b) do { if ((b)->lock) lock_fns_.unlock(0, (b)->lock); } while (0)
typedef struct chain {
    struct chain *next; size_t off; void (*readcb)(void *); void *cbarg; char data[64];
} chain_t;
typedef struct buffer {
    chain_t *first; chain_t *free_chains; size_t total_len; size_t max_len;
    void *lock; int own_lock; /* the lock, and whether the buffer made it */
} buffer_t;

chain_t *buf_take_chain(buffer_t *b)
{
    chain_t *c;
    BUF_LOCK(b);
    c = b->free_chains;
    if (c) {
        b->free_chains = c->next;
        b->total_len -= c->off;
    }
    BUF_UNLOCK(b);
    return c;
}

void buf_set_cb(buffer_t *b, chain_t *c, void (*readcb)(void *), void *cbarg)
{
    BUF_LOCK(b);
    c->readcb = readcb;
    c->cbarg = cbarg;
    BUF_UNLOCK(b);
}

size_t buf_get_length(buffer_t *b)
{
    size_t n;
    BUF_LOCK(b);
    n = b->total_len;
    BUF_UNLOCK(b);
    return n;
}
"""


def test_a_getter_under_a_lock_it_gives_back_holds_nothing(tmp_path):
    """A function that takes the buffer's lock, reads a number and gives the lock back
    before it returns is a getter: no ACQUIRE of the lock, and no USE, though its lock and
    unlock sit each behind its own test of the same condition; one that stores a chain's
    callback so is a setter. Taking a chain off the free list under the same lock is an ACQUIRE."""
    r, got = _sites_by(tmp_path, "buffer.c", GETTERS, r".")
    assert ("buf_take_chain", "ACQUIRE", "buffer") in got
    assert not any(f == "buf_get_length" for f, _, _ in got)
    why = {w for c, ok, w in r.candidates if c.function == "buf_get_length" and not ok}
    assert any("gives back" in w or "an accessor" in w for w in why), why
    assert not any(f == "buf_set_cb" for f, _, _ in got)
    why = {w for c, ok, w in r.candidates if c.function == "buf_set_cb" and not ok}
    assert any("a setter" in w for w in why), why


CHAINS = """
#include <stdlib.h>
#include <string.h>
/* blocks of a fixed size off a free list; data longer than one block takes a chain */
struct block { struct block *next; char key[40]; };
static struct block *block_free;
static unsigned int blocks_used, blocks_alloced;

static void add_blocks(int n)
{
    struct block *new = malloc(n * sizeof(struct block));
    if (new) {
        for (int i = 0; i < n - 1; i++)
            new[i].next = &new[i + 1];
        new[n - 1].next = block_free;
        block_free = new;
        blocks_alloced += n;
    }
}

static struct block *new_block(void)
{
    struct block *b = NULL;
    if (!block_free)
        add_blocks(50);
    if (block_free) {
        b = block_free;
        block_free = b->next;
        blocks_used++;
    }
    return b;
}

void blocks_free(struct block *b)
{
    struct block *tmp;
    for (; b; b = tmp) {
        tmp = b->next;
        b->next = block_free;
        block_free = b;
        blocks_used--;
    }
}

static struct block *blocks_fill(const char *data, size_t len)
{
    struct block *b, *ret = NULL, **prev = &ret;
    do {
        size_t n = len > 40 ? 40 : len;
        if (!(b = new_block())) {
            blocks_free(ret);
            return NULL;
        }
        memcpy(b->key, data, n);
        data += n;
        len -= n;
        *prev = b;
        prev = &b->next;
    } while (len != 0);
    return ret;
}

struct block *blocks_alloc(const char *data, size_t len)
{
    return blocks_fill(data, len);
}
"""


def test_a_chain_of_units_taken_in_a_loop_is_handed_out(tmp_path):
    """A function that takes a unit on every turn of a loop and links each into the chain it
    returns acquires them, for the function of the interface that wraps it."""
    r, got = _sites_by(tmp_path, "blocks.c", CHAINS, r"links what new_block acquires|wrapper")
    assert ("blocks_alloc", "ACQUIRE") in {(f, k) for f, k, _ in got}, got


RESETS = """
#include <stdlib.h>
/* forward records kept on a free list when done */
struct frec { struct frec *next_free; int flags; char *stash; struct frec *dependent; };
struct daemon { struct frec *free_frecs; int frecs_used; int frecs_max; };
extern struct daemon *daemon;

struct frec *get_new_frec(void)
{
    struct frec *f = daemon->free_frecs;
    if (f) {
        daemon->free_frecs = f->next_free;
        daemon->frecs_used++;
    }
    return f;
}

void free_frec(struct frec *f)
{
    free(f->stash);
    f->next_free = daemon->free_frecs;
    daemon->free_frecs = f;
    f->stash = NULL;
    f->flags = 0;
    f->dependent = NULL;
}
"""


def test_fields_cleared_after_a_release_are_no_use_of_it(tmp_path):
    """A function that gives a record back and then clears its fields (``f->stash = NULL``)
    releases it: a store of nothing into the record resets it, it does not use it."""
    r, got = _sites_by(tmp_path, "forward.c", RESETS, r".")
    assert ("free_frec", "RELEASE") in {(f, k) for f, k, _ in got}, r.candidates


BY_INDEX = """
/* buffers in an array, the free ones linked by index under a spin lock of the program's */
typedef volatile int slock_t;
extern void spin_acquire(slock_t *l);
extern void spin_release(slock_t *l);
typedef struct desc { int buf_id; int refcount; int free_next; } desc_t;
typedef struct buffer_control {
    slock_t strategy_lock;
    int first_free; /* head of the list of unused buffers */
    unsigned int n_allocs;
} buffer_control_t;
extern desc_t *descriptors;
extern buffer_control_t *control;

desc_t *get_free_buffer(void)
{
    desc_t *buf = 0;
    spin_acquire(&control->strategy_lock);
    if (control->first_free >= 0) {
        buf = &descriptors[control->first_free];
        control->first_free = buf->free_next;
        buf->free_next = -2;
        control->n_allocs++;
    }
    spin_release(&control->strategy_lock);
    return buf;
}

void free_buffer(desc_t *buf)
{
    spin_acquire(&control->strategy_lock);
    buf->free_next = control->first_free;
    control->first_free = buf->buf_id;
    spin_release(&control->strategy_lock);
}
"""


def test_a_free_list_linked_by_index_is_a_pool(tmp_path):
    """A list of free units linked by their index in an array, not by pointers (a head that
    is an int, each unit's next an int): its record is a pool of the units, though a spin
    lock sits beside the head, and putting a unit's index at the head gives the unit back."""
    r, got = _sites_by(tmp_path, "freelist.c", BY_INDEX, r".")
    pool = next(g for g in r.resources if g.name == "buffer_control")
    assert pool.sharing == "pool" and "desc" in pool.elements
    assert {("get_free_buffer", "ACQUIRE"), ("free_buffer", "RELEASE")} <= {
        (f, k) for f, k, res in got if res == "buffer_control"
    }, got


SYNC_BUILTINS = """
#include <stdlib.h>
/* a message shared by reference, counted with GCC's __sync builtins through macros */
#define ATOMIC_INC(data) ((void) __sync_fetch_and_add(data, 1))
#define ATOMIC_DEC_AND_FETCH(data) __sync_sub_and_fetch(data, 1)
typedef struct msg { int refcnt; char *raw; int len; } msg_t;

msg_t *msg_add_ref(msg_t *m)
{
    ATOMIC_INC(&m->refcnt);
    return m;
}

void msg_destruct(msg_t **pm)
{
    msg_t *m = *pm;
    if (ATOMIC_DEC_AND_FETCH(&m->refcnt) == 0) {
        free(m->raw);
        free(m);
    }
    *pm = NULL;
}
"""


def test_gcc_sync_builtins_step_a_count(tmp_path):
    """``__sync_fetch_and_add`` and ``__sync_sub_and_fetch``, called by name where a macro
    expands to them, raise and lower the count they point to, as C11's atomics do: a
    message shared by reference is taken and dropped through them."""
    r, got = _sites_by(tmp_path, "msg.c", SYNC_BUILTINS, r".")
    assert {("msg_add_ref", "ACQUIRE"), ("msg_destruct", "RELEASE")} <= {
        (f, k) for f, k, _ in got
    }, r.candidates


USERS_COUNTED = """
#include <stdlib.h>
/* per-client entries counted by their users, whatever the count is called */
typedef struct ip_count { unsigned int addr; unsigned int count; } ip_count_t;
extern ip_count_t *ip_find(unsigned int addr);
extern void ip_remove(ip_count_t *key);

ip_count_t *ip_limit_add(unsigned int addr)
{
    ip_count_t *key = ip_find(addr);
    if (key)
        key->count++;
    return key;
}

void ip_limit_del(ip_count_t *key)
{
    if (0 == --key->count) {
        ip_remove(key);
        free(key);
    }
}
"""


def test_a_count_of_users_torn_down_at_zero_is_a_reference_count(tmp_path):
    """A count not named for references (``count``) that one function raises and another
    lowers, tearing the object down when it reaches zero, counts the object's holders: the
    record is shared by reference, whatever its count is called."""
    r, got = _sites_by(tmp_path, "limit.c", USERS_COUNTED, r".")
    guess = next(g for g in r.resources if g.name == "ip_count")
    assert "shared by reference" in guess.reasons[0]
    assert ("ip_limit_del", "RELEASE", "ip_count") in got, r.candidates


ANONYMOUS = """
typedef struct { struct slot *next; int id; } slot_t;
typedef struct {
    slot_t *free_slots; int n_free; int max_slots;
    struct { int inserted; int written; } counters;
} slot_pool_t;

int pool_counters(slot_pool_t *p, struct { int a; } *out)
{
    struct { int x; } local = { p->counters.inserted };
    out->a = local.x;
    return p->n_free;
}
"""


def test_no_result_of_the_scan_carries_a_path_of_its_machine(tmp_path):
    """clang spells a record with no name of its own by where it was declared, a path of
    the machine that scanned; no type the scan keeps (a member's, a parameter's, a local's)
    carries it."""
    (tmp_path / "anon.c").write_text(ANONYMOUS)
    r = scan(tmp_path, jobs=1)
    spelt = [m.type for u in r.units for m in u.members]
    spelt += [t for u in r.units for f in u.functions for t, _ in f.params]
    spelt += [t for u in r.units for f in u.functions for t in f.locals.values()]
    assert any("unnamed" in t for t in spelt), spelt
    assert not [t for t in spelt if str(tmp_path) in t or " at " in t], spelt


STASH = """
#include <stdlib.h>
/* a per-thread cache of blocks kept for reuse, counted by a count named for its list */
typedef struct block { struct block *next; char data[56]; } block_t;
typedef struct alloc_cache { block_t *quar; int num_quar; int max_quar; } alloc_cache_t;

block_t *alloc_obtain(alloc_cache_t *a)
{
    block_t *p = a->quar;
    if (p) {
        a->quar = p->next;
        a->num_quar--;
        return p;
    }
    return malloc(sizeof(block_t));
}

void alloc_release(alloc_cache_t *a, block_t *mem)
{
    mem->next = a->quar;
    a->quar = mem;
    a->num_quar++;
}
"""


REGIONS = """
#include <stddef.h>
/* regions kept for reuse on a list linked through an untyped pointer, cast as it is popped */
struct regional { char *next; char data[100]; };
struct reg_cache { struct regional *reg_list; int num_reg_blocks; int max_reg_blocks; };
extern struct regional *regional_create(void);
extern void regional_destroy(struct regional *r);

struct regional *reg_obtain(struct reg_cache *a)
{
    if (a->num_reg_blocks > 0) {
        struct regional *r = a->reg_list;
        a->reg_list = (struct regional *)r->next;
        r->next = NULL;
        a->num_reg_blocks--;
        return r;
    }
    return regional_create();
}

void reg_release(struct reg_cache *a, struct regional *r)
{
    if (a->num_reg_blocks >= a->max_reg_blocks) {
        regional_destroy(r);
        return;
    }
    r->next = (char *)a->reg_list;
    a->reg_list = r;
    a->num_reg_blocks++;
}
"""


@pytest.mark.parametrize(
    "name, text, obtain, release",
    [("alloc.c", STASH, "alloc_obtain", "alloc_release"),
     ("regions.c", REGIONS, "reg_obtain", "reg_release")],
)  # fmt: skip
def test_a_count_of_a_stash_falls_as_units_are_taken(tmp_path, name, text, obtain, release):
    """A count named for a list whose head is popped to hand the unit out (``num_quar``
    beside ``quar``) counts the units left to take: lowered where one is taken, it is no
    release, and raised where one is put back, no acquire; and the list holds free units,
    whatever it is named, so pushing one on it gives it back. A typed list linked through
    an untyped pointer, cast back as it is popped (``(struct regional *)r->next``), is
    popped as one linked by a typed pointer is."""
    r, got = _sites_by(tmp_path, name, text, r".")
    kinds = {(f, k) for f, k, _ in got}
    assert (obtain, "ACQUIRE") in kinds and (obtain, "RELEASE") not in kinds, r.candidates
    assert (release, "RELEASE") in kinds and (release, "ACQUIRE") not in kinds, r.candidates


BUCKET = """
/* members of a rate-limit group share a token bucket, refilled on a timer */
struct token_bucket { long read_limit; long read_maximum; unsigned int last_updated; };
struct member { struct member *next; int fd; };
struct rate_group {
    struct member *members; int n_members; long max_members; struct token_bucket bucket;
};

void bucket_refill(struct rate_group *g, long n)
{
    g->bucket.read_limit += n;
    if (g->bucket.read_limit > g->bucket.read_maximum)
        g->bucket.read_limit = g->bucket.read_maximum;
}
"""


def test_a_token_bucket_holds_what_is_left_to_spend(tmp_path):
    """The levels of a record named for tokens, credits or a budget (``token_bucket``'s
    ``read_limit``, but not its maximum) count what is left to spend, whatever they are
    called: a refill that raises one gives units back."""
    r, got = _sites_by(tmp_path, "bucket.c", BUCKET, r".")
    assert ("bucket_refill", "RELEASE") in {(f, k) for f, k, _ in got}, r.candidates


def _dies_once(args):
    """A parse that kills its worker when it meets a file named dies.c: only the first time
    (the MARKER file not yet made) unless ALWAYS."""
    path, marker, always = args
    if path.endswith("dies.c") and (always or not Path(marker).exists()):
        Path(marker).touch()
        os._exit(11)
    return path


def test_a_parse_worker_that_dies_costs_only_a_retry(tmp_path):
    """A worker dying mid-scan (libclang's bindings have crashed in garbage collection on a
    file they parse fine the next time) sends the files not yet taken to a new pool: every
    file comes back once, in order. A file that kills every pool is named, in one line."""
    from gigi.scan._scan import _pooled

    marker = str(tmp_path / "died")
    work = [(f"f{i}.c", marker, False) for i in range(9)]
    work += [("dies.c", marker, False), ("last.c", marker, False)]
    assert list(_pooled(_dies_once, work, 2)) == [w[0] for w in work]
    assert Path(marker).exists()
    always = [("a.c", marker, True), ("dies.c", marker, True)]
    with pytest.raises(ScanError, match=r"^dies.c: a parse worker died 3 times"):
        list(_pooled(_dies_once, always, 2))


WAITERS = """
#include <pthread.h>
typedef struct event { struct event *next; int fd; } event;
/* an event loop's base: the events added, and who waits for the running callback */
typedef struct event_base {
    pthread_mutex_t lock; pthread_cond_t current_done; event *current_event;
    event *inserted; int current_event_waiters; int event_count; int event_count_max;
} event_base;

/* a delete that waits, counted among its waiters, for the callback running the event */
int event_del(event_base *base, event *ev)
{
    if (base->current_event == ev) {
        ++base->current_event_waiters;
        pthread_cond_wait(&base->current_done, &base->lock);
    }
    return base->inserted == ev ? -1 : 0;
}
"""


def test_a_count_of_waiters_is_no_count_of_units(tmp_path):
    """Raising the count of the tasks waiting for a callback to finish takes nothing: a delete
    that waits, counted among the waiters, does not ACQUIRE."""
    (tmp_path / "event.c").write_text(WAITERS)
    r = scan(tmp_path, jobs=1)
    kinds = {c.kind for c in r.verified() if c.function == "event_del"}
    assert "ACQUIRE" not in kinds, r.candidates


HEADER_LOCKS = """
#include <stdint.h>
typedef struct buf_desc { uint32_t state; int buf_id; } buf_desc;
typedef struct ring { int *buffers; int current; int ring_size; } ring;
extern buf_desc *descriptors;
extern uint32_t lock_buf_hdr(buf_desc *buf);
/* giving the header lock back is a store of the state without its lock bit */
#define unlock_buf_hdr(buf, s) ((buf)->state = (s) & ~1u)

/* the ring's next buffer, its header locked, when no one pins it; its state through STATE */
buf_desc *ring_next(ring *r, uint32_t *state)
{
    buf_desc *buf;
    uint32_t local;
    if (++r->current >= r->ring_size)
        r->current = 0;
    buf = &descriptors[r->buffers[r->current]];
    local = lock_buf_hdr(buf);
    if ((local & 0xffff) == 0) {
        *state = local;
        return buf;
    }
    unlock_buf_hdr(buf, local);
    return 0;
}

extern void wait_list_lock(buf_desc *buf);
extern void wait_list_unlock(buf_desc *buf);

/* set a value the holder publishes, under the wait list's lock it gives back at once */
void publish_value(buf_desc *buf, uint64_t *valptr, uint64_t val)
{
    wait_list_lock(buf);
    *valptr = val;
    wait_list_unlock(buf);
}
"""


def test_an_out_parameter_hands_out_only_what_comes_of_the_resource(tmp_path):
    """An ACQUIRE hands its caller something of the resource: a store through a pointer the
    caller gave counts when its value comes of the resource, as the state a kept lock
    answers does (``*state = lock_buf_hdr(buf)``), and not when it is the caller's own value
    stored under a lock given back at once (``*valptr = val``)."""
    from gigi.scan._offline import Candidate
    from gigi.scan._verify import verify

    (tmp_path / "ring.c").write_text(HEADER_LOCKS)
    r = scan(tmp_path, jobs=1)
    fns = {f.name: f for u in r.units for f in u.functions}

    def acquire(name: str):
        fn = fns[name]
        line = next(c.line for c in fn.calls if c.callee in ("lock_buf_hdr", "wait_list_lock"))
        c = Candidate(fn.file, name, line, "ACQUIRE", "buf_desc", "", "1", "test", "")
        return verify(c, fn, {"buf_desc"}, True, set())

    assert acquire("ring_next").ok, acquire("ring_next").reason
    v = acquire("publish_value")
    assert not v.ok, v.reason


RELEASE_ALL = """
/* a lock of the server's own, its functions in another file */
typedef struct lwlock { unsigned state; int tranche; } lwlock;
extern void lw_lock_release(lwlock *lock);
extern void hold_interrupts(void);
typedef struct held_lock { lwlock *lock; int mode; } held_lock;

/* the locks this backend holds, the last taken last */
typedef struct lock_table { held_lock held[200]; int num_held; int max_held; } lock_table;
static lock_table *mine;

/* on error: give back every lock held (each release drops it from the table) */
void lw_lock_release_all(void)
{
    while (mine->num_held > 0) {
        hold_interrupts();
        lw_lock_release(mine->held[mine->num_held - 1].lock);
    }
}
"""


def test_a_loop_that_gives_locks_back_drains_and_waits_for_nothing(tmp_path):
    """A loop whose only call that looks like blocking gives a lock back (``while (held > 0)
    release(...)``) drains what is held: no WAIT."""
    (tmp_path / "lwlock.c").write_text(RELEASE_ALL)
    r = scan(tmp_path, jobs=1)
    waits = [(c.function, why) for c, ok, why in r.candidates if c.kind == "WAIT"]
    assert waits == [], waits


REBASED = """
#include <stddef.h>
typedef struct memnode { struct memnode *next; size_t index; } memnode;
/* an allocator: free nodes by size class, and a budget of how much it may keep free */
typedef struct allocator {
    void *mutex; size_t max_index; size_t max_free_index; size_t current_free_index;
    memnode *free[20];
} allocator;
extern void allocator_lock(allocator *a);
extern void allocator_unlock(allocator *a);

/* set how much the allocator may keep free: the budget left moves with its bound */
void allocator_max_free_set(allocator *a, size_t size)
{
    size_t max_free_index;
    allocator_lock(a);
    max_free_index = (size + 4095) >> 12;
    a->current_free_index += max_free_index;
    a->current_free_index -= a->max_free_index;
    a->max_free_index = max_free_index;
    if (a->current_free_index > max_free_index)
        a->current_free_index = max_free_index;
    allocator_unlock(a);
}
"""


def test_a_count_moved_by_its_limit_is_rebased_not_given_back(tmp_path):
    """Setting a new bound moves the budget left by the new bound and the old one: no unit is
    taken or given back, and the setter has no ACQUIRE or RELEASE."""
    (tmp_path / "alloc.c").write_text(REBASED)
    r = scan(tmp_path, jobs=1)
    moved = [(c.kind, c.why) for c in r.verified() if c.kind in ("ACQUIRE", "RELEASE")]
    assert moved == [], moved


UNLINKED = """
#include <stddef.h>
typedef struct stream {
    struct stream *lru_next; struct stream *lru_prev; int on_list; int fd;
} stream;
/* the streams kept open for reuse, the most recent first */
typedef struct outnet {
    stream *reuse_first; stream *reuse_last; int num_reuse; int max_reuse;
} outnet;

/* put S at the front of the reuse list */
void reuse_list_push(outnet *o, stream *s)
{
    s->lru_prev = NULL;
    s->lru_next = o->reuse_first;
    if (o->reuse_first)
        o->reuse_first->lru_prev = s;
    else
        o->reuse_last = s;
    o->reuse_first = s;
    s->on_list = 1;
}

/* take S off the reuse list */
void reuse_list_remove(outnet *o, stream *s)
{
    if (s->lru_prev)
        s->lru_prev->lru_next = s->lru_next;
    else
        o->reuse_first = s->lru_next;
    if (s->lru_next)
        s->lru_next->lru_prev = s->lru_prev;
    else
        o->reuse_last = s->lru_prev;
    s->lru_next = NULL;
    s->lru_prev = NULL;
    s->on_list = 0;
}
"""


def test_a_list_s_head_set_to_the_removed_node_s_link_links_nothing_in(tmp_path):
    """Unlinking a node handed in (``first = s->lru_next``) sets the head to what follows it,
    not to it: no push, but a take off the list; the push sets it to the node."""
    from gigi.scan._offline import queue_moves

    (tmp_path / "outnet.c").write_text(UNLINKED)
    r = scan(tmp_path, jobs=1)
    fns = {f.name: f for u in r.units for f in u.functions}
    queues = {"outnet.reuse_first", "outnet.reuse_last"}
    removed = queue_moves(fns["reuse_list_remove"], {"outnet", "stream"}, queues, set())
    assert removed.pushes == [], removed
    assert [a.target for a in removed.pops] == ["outnet.reuse_first", "outnet.reuse_last"]
    pushed = queue_moves(fns["reuse_list_push"], {"outnet", "stream"}, queues, set())
    assert "outnet.reuse_first" in [a.target for a in pushed.pushes], pushed


GROWABLE = """
#include <pthread.h>
#include <string.h>
typedef struct pool pool;
extern void *palloc(pool *p, unsigned long size);
/* a growable array of fixed-size elements, carved from a pool */
typedef struct array_header {
    pool *pool;
    int elt_size;
    int nelts;
    int nalloc;
    char *elts;
} array_header;

/* the next slot: the array doubled first when full */
void *array_push(array_header *arr)
{
    if (arr->nelts == arr->nalloc) {
        int new_size = (arr->nalloc <= 0) ? 1 : arr->nalloc * 2;
        char *new_data = palloc(arr->pool, arr->elt_size * new_size);
        memcpy(new_data, arr->elts, arr->nalloc * arr->elt_size);
        arr->elts = new_data;
        arr->nalloc = new_size;
    }
    ++arr->nelts;
    return arr->elts + (arr->elt_size * (arr->nelts - 1));
}

/* every slot given back, the storage kept */
void array_clear(array_header *arr)
{
    arr->nelts = 0;
}

/* every slot given back when there are many: a test of the count, not of the value it gets */
void array_trim(array_header *arr)
{
    if (arr->nelts > 10)
        arr->nelts = 0;
}

/* a string buffer, in samples and elsewhere */
struct chunk { unsigned long size; char *area; unsigned long data; };
struct sample { int type; struct chunk str; };
struct proxy { int id; struct chunk name; };

/* a new string at the end of a chunk: it hands out its bytes */
char *chunk_newstr(struct chunk *chk)
{
    if (chk->data + 1 >= chk->size)
        return 0;
    chk->area[chk->data++] = 0;
    return chk->area + chk->data;
}

/* a sample padded up to a key's size: its data raised, nothing given back */
int sample_pad(struct sample *smp, unsigned long key_size)
{
    if (smp->str.data < key_size) {
        memset(smp->str.area + smp->str.data, 0, key_size - smp->str.data);
        smp->str.data = key_size;
    }
    return smp->type;
}
"""


def test_a_growable_array_hands_out_its_next_slot(tmp_path):
    """A record whose function tests a count against another of its members, raises it and
    returns an address made of it hands out slots (an arena's next block, returned
    directly): the push ACQUIREs (and WAITs where it grows), a clear gives every slot back.
    A position raised to what a test around it compared it with gives nothing back."""
    r, got = _sites_by(tmp_path, "array.c", GROWABLE, r"")
    assert {(f, k) for f, k, res in got if res == "array_header"} == {
        ("array_push", "ACQUIRE"),
        ("array_push", "WAIT"),
        ("array_clear", "RELEASE"),
        ("array_trim", "RELEASE"),
    }, got
    assert ("sample_pad", "RELEASE") not in {(f, k) for f, k, _ in got}, got


def test_validation_takes_a_diagnosis_share_of_memory(tmp_path, monkeypatch):
    """A validation run's holds are a whole run's, as a diagnosis's are (PostgreSQL's: 41
    million events): validate connects with the machine's share that diagnose takes, not
    DuckDB's 2 GB default, under which it ran out of memory."""
    import pyarrow as pa

    import gigi.probes as gp
    import gigi.queries as queries
    from gigi.queries._connect import memory_limit
    from gigi.scan._validate import validate
    from gigi.schema import SITES

    pool = gp.resource("validate.pool")
    gp.enable(tmp_path / "trace")
    pool.acquire(object=1)
    pool.release(object=1)
    gp.disable()
    seen = []
    real = queries.connect

    def connect(*args, **kwargs):
        seen.append(kwargs.get("memory_limit"))
        return real(*args, **kwargs)

    monkeypatch.setattr(queries, "connect", connect)
    sites = pa.Table.from_pylist(
        [
            {
                "site": 1,
                "file": "p.c",
                "line": 1,
                "function": "f",
                "kind": 1,
                "resource": "validate.pool",
                "origin": "heuristic",
                "verified": True,
            }
        ],
        schema=SITES.arrow_schema,
    )
    v = validate(tmp_path / "trace", sites)
    assert seen == [memory_limit()] and v.by_kind["ACQUIRE"]["candidates"] == 1, seen


def test_validation_counts_waits_answered_as_the_range_join_did(tmp_path):
    """validate.sql tells a wait that another task's hold overlapped by running counts of the
    holds begun before it ended and released by the time it began (a range join of waits
    and holds grew as their product: 16 CPU minutes on a 41-million-event run). On random
    traces (waits, holds of several tasks, objects, open holds and lost ACQUIREs) it keeps
    and counts what the range join did."""
    import re

    import numpy as np
    import pyarrow as pa

    from gigi.queries import connect
    from gigi.scan._validate import QUERY
    from tests.conftest import events, write_stream

    new = QUERY.read_text()
    join = """answered AS (
    SELECT w.seq
    FROM w
    JOIN h
        ON h.resource = w.resource
        AND h.acquire_ts < w.end_ts
        AND coalesce(h.release_ts, w.end_ts + 1) > w.ts
    WHERE h.acquire_seq IS NOT NULL AND h.task <> w.task
    GROUP BY w.seq
),
"""
    old = re.sub(r"swept AS \(.*?\nanswered AS \(.*?\n\),\n", join, new, flags=re.S)
    assert "swept" not in old and "JOIN h" in old
    rng = np.random.default_rng(3)
    answered = 0
    for trial in range(8):
        n = 600
        ts = np.sort(rng.integers(0, 10_000, n))
        kind = rng.choice([0, 1, 2, 3], n, p=[0.25, 0.3, 0.15, 0.3]).astype(np.uint8)
        d = tmp_path / str(trial)
        d.mkdir()
        write_stream(
            d / "e.arrows",
            events(
                ts=ts,
                kind=pa.array(kind, pa.uint8()),
                resource=list(rng.choice(["a", "b"], n)),
                task=rng.integers(1, 5, n),
                thread=rng.integers(1, 5, n),
                object=pa.array(rng.integers(0, 3, n), pa.int64()),
                dur=pa.array(np.where(kind == 0, rng.integers(0, 400, n), 0), pa.int64()),
                site=pa.array(rng.integers(1, 9, n), pa.int32()),
            ),
        )
        con = connect(d, variables={"validate_min_share": 0.2})
        con.register(
            "candidates",
            pa.table(
                {"site": list(range(1, 9)) * 4, "kind": [k for k in range(4) for _ in range(8)]}
            ),
        )
        got, want = con.sql(new).fetchall(), con.sql(old).fetchall()
        assert got == want, trial
        answered += sum(r[3] for r in got if r[1] == 0)
    assert answered > 0


def _candidates(triples):
    """A sites table of (site, kind, resource) for validate: one function per site."""
    import pyarrow as pa

    rows = [
        {"site": s, "file": "f.c", "line": s, "function": f"f{s}", "kind": k, "resource": r}
        for s, k, r in triples
    ]
    for row in rows:
        row.update(origin="heuristic", verified=True)
    return pa.Table.from_pylist(rows, schema=SITES.arrow_schema)


def test_validation_does_not_judge_acquires_whose_releases_count_other_units(tmp_path):
    """A log's reservations take bytes (2,000 an append) and its write-out, probed without an
    amount, gives back 1: unit by unit no hold ever closes, yet the ACQUIRE is the log's
    own. Validation keeps it, not judged, and says why; an ACQUIRE of a resource whose
    RELEASEs count the same units and never come is still removed."""
    import numpy as np
    import pyarrow as pa

    from gigi.scan._validate import validate
    from tests.conftest import events, write_stream

    n = 400
    ts = np.arange(n, dtype=np.int64) * 1_000
    flush = np.arange(n) % 8 == 7
    kind = np.where(flush, 3, 1).astype(np.uint8)
    write_stream(
        tmp_path / "e.arrows",
        events(
            ts=np.concatenate([ts, ts + 1]),
            kind=pa.array(np.concatenate([kind, np.ones(n, np.uint8)]), pa.uint8()),
            resource=["wal"] * n + ["pool"] * n,
            task=np.concatenate([np.arange(n) % 4 + 1, np.arange(n) % 4 + 1]),
            amount=pa.array(np.concatenate([np.where(flush, 1, 2_000), np.ones(n)]), pa.int64()),
            site=pa.array([2 if f else 1 for f in flush] + [3] * n, pa.int32()),
        ),
    )
    sites = _candidates(((1, 1, "wal"), (2, 3, "wal"), (3, 1, "pool")))
    v = validate(tmp_path, sites)
    why = {r["site"]: (r["keep"], r["reason"]) for r in v.rows}
    assert why[1][0] and why[1][1].startswith("not judged: its RELEASEs give back 1 unit"), why
    assert not why[3][0] and "it takes nothing" in why[3][1], why


def test_validation_removes_an_acquire_whose_only_releases_go(tmp_path):
    """An ACQUIRE site whose holds were closed only by a RELEASE site that validation removes
    (most of its RELEASEs end no hold: a release that names objects some other way) would
    never be released in the build deployed without that RELEASE: a count that only grows.
    It goes with it. One released at a site that stays is kept."""
    import pyarrow as pa

    from gigi.scan._validate import validate
    from tests.conftest import events, write_stream

    rows = []  # (resource, kind, object, site)
    for i in range(20):
        rows += [("a", 1, i + 1, 1), ("a", 3, i + 1, 2), ("b", 1, i + 1, 3), ("b", 3, i + 1, 4)]
    rows += [("a", 3, 1_000 + j, 2) for j in range(100)]  # objects never acquired
    resource, kind, obj, site = zip(*rows, strict=True)
    write_stream(
        tmp_path / "e.arrows",
        events(
            ts=[10 * i for i in range(len(rows))],
            kind=pa.array(kind, pa.uint8()),
            resource=list(resource),
            task=[1 + i % 4 for i in range(len(rows))],
            object=pa.array(obj, pa.int64()),
            site=pa.array(site, pa.int32()),
        ),
    )
    sites = _candidates(((1, 1, "a"), (2, 3, "a"), (3, 1, "b"), (4, 3, "b")))
    v = validate(tmp_path, sites)
    kept = {r["site"]: r["keep"] for r in v.rows}
    assert kept == {1: False, 2: False, 3: True, 4: True}, v.rows


PIN_FLAG = """
#include <stdbool.h>
typedef struct buf { int refcount; int usage; int id; } buf_t;
typedef struct pool { buf_t *bufs; int nfree; int nbufs; } pool_t;

/* pins B; returns whether it was in use lately: a truth value, not what it took */
bool pin_buffer(buf_t *b)
{
    bool result;
    b->refcount++;
    result = b->usage > 0;
    return result;
}

void unpin_buffer(buf_t *b)
{
    b->refcount--;
}
"""


def test_a_function_returning_a_truth_value_hands_out_no_object(tmp_path):
    """The pin's object is the buffer it is handed, not the flag it returns: a bool names
    no object, and a pin recorded on the flag would never meet its unpin."""
    (tmp_path / "pin.c").write_text(PIN_FLAG)
    r = scan(tmp_path, jobs=1)
    got = {(c.function, c.kind, c.object_expr) for c in r.verified()}
    assert {("pin_buffer", "ACQUIRE", "b"), ("unpin_buffer", "RELEASE", "b")} <= got, got
