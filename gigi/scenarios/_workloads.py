"""The workloads of the scenario suite. Each is a few threads and the probes; time.sleep
stands for work and I/O. Resource names follow the systems they imitate."""

from __future__ import annotations

import random
import threading
import time

import gigi.probes as gp
from gigi.scenarios import Scenario, Truth


def _run_threads(
    *targets, stop_after: float | None = None, settled: threading.Event | None = None
) -> None:
    """Run TARGETS, each given the stop event, for STOP_AFTER seconds: counted from when
    SETTLED is set, when given (a warm-up as slow as a loaded machine makes it)."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=t, args=(stop,), name=getattr(t, "__name__", "worker"))
        for t in targets
    ]
    for t in threads:
        t.start()
    if settled is not None:
        settled.wait(60)
    if stop_after is not None:
        time.sleep(stop_after)
    stop.set()
    for t in threads:
        t.join()


class _Lock:
    """An exclusive lock per object, recorded as WAIT / ACQUIRE / USE / RELEASE."""

    def __init__(self, resource: str) -> None:
        self.res = gp.resource(resource, unit="locks", sharing="exclusive")
        self.locks: dict[int, threading.Lock] = {}
        self.guard = threading.Lock()

    def _lock(self, obj: int) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(obj, threading.Lock())

    def acquire(self, obj: int) -> None:
        lock = self._lock(obj)
        if not lock.acquire(blocking=False):
            with self.res.wait(obj):
                lock.acquire()
        self.res.acquire(obj)

    def release(self, obj: int) -> None:
        self.res.release(obj)
        self._lock(obj).release()


class _Pool:
    """Units handed out from a fixed capacity; takers wait for room."""

    def __init__(self, resource: str, capacity: int, unit: str) -> None:
        self.res = gp.resource(resource, capacity=capacity, unit=unit, sharing="pool")
        self.capacity = capacity
        self.free = capacity
        self.cond = threading.Condition()

    def acquire(self, units: int, stop: threading.Event | None = None, obj: int = 0) -> bool:
        """Take ``units`` (for ``obj``, when the units belong to something: a connection)."""
        with self.cond:
            if self.free < units:
                with self.res.wait(0, units):
                    while self.free < units:
                        if stop is not None and stop.is_set():
                            return False
                        self.cond.wait(0.01)
            self.free -= units
        self.res.acquire(obj, units)
        return True

    def release(self, units: int, obj: int = 0) -> None:
        self.res.release(obj, units)
        with self.cond:
            self.free += units
            self.cond.notify_all()


# --- MySQL #75540: long transaction, undo growth, purge floods the buffer pool ---------------


def _undo_purge(seconds: float) -> None:
    from gigi import demo

    cfg = demo.DemoConfig(seconds=max(seconds, 4.0), long_txn_start=0.4, long_txn_length=1.4)
    demo.run_workload(cfg)


def _undo_healthy(seconds: float) -> None:
    from gigi import demo

    demo.run_workload(demo.DemoConfig(seconds=max(seconds, 2.5), long_txn_length=0.0))


# --- metadata locks ----------------------------------------------------------------------------


def _mdl_select_keeps_lock(seconds: float) -> None:
    """MDEV-34989: a SELECT in an open transaction keeps the table's MDL; INSERTs hang."""
    mdl = _Lock("mdl.table")
    held = threading.Event()  # the INSERTs come once the SELECT has the lock, however loaded

    def select(stop):
        with gp.task("SELECT * FROM t1 (open transaction)"):
            mdl.acquire(1)
            held.set()
            mdl.res.use(1)
            time.sleep(0.001)
            stop.wait(seconds * 0.8)  # the transaction stays open, the lock kept
            mdl.release(1)

    def inserter(n):
        def run(stop):
            held.wait()
            time.sleep(0.05)
            i = 0
            while not stop.is_set():
                i += 1
                with gp.task(f"INSERT INTO t1 #{n}.{i}"):
                    mdl.acquire(1)
                    mdl.res.use(1)
                    time.sleep(0.0005)
                    mdl.release(1)
                time.sleep(0.002)

        return run

    _run_threads(select, *(inserter(n) for n in range(4)), stop_after=seconds)


def _mdl_parent_never_used(seconds: float) -> None:
    """MDEV-34836: a read query holds the parent table it never uses while it works on the
    child table, and DDL on the parent waits."""
    mdl = _Lock("mdl.table")

    def reader(stop):
        with gp.task("SELECT ... FROM child JOIN parent (reads child only)"):
            mdl.acquire(1)  # parent
            mdl.acquire(2)  # child
            while not stop.wait(0.002):
                mdl.res.use(2)
            mdl.release(2)
            mdl.release(1)

    def ddl(n):
        statement = "ALTER TABLE parent ADD COLUMN c INT" if n == 0 else "INSERT INTO parent"

        def run(stop):
            time.sleep(0.05 + 0.1 * n)
            with gp.task(f"{statement} #{n}"):
                mdl.acquire(1)
                mdl.res.use(1)
                mdl.release(1)

        return run

    def child_writer(stop):
        i = 0
        while not stop.is_set():
            i += 1
            with gp.task(f"UPDATE child #{i}"):
                mdl.acquire(3)
                mdl.res.use(3)
                mdl.release(3)
            time.sleep(0.003)

    _run_threads(reader, *(ddl(n) for n in range(4)), child_writer, stop_after=seconds)


# --- row locks ---------------------------------------------------------------------------------


def _row_lock_batch(seconds: float) -> None:
    """A batch job holds a row lock for long while many short transactions wait for it."""
    rows = _Lock("innodb.row_lock")

    def batch(stop):
        time.sleep(0.1)
        with gp.task("batch job: UPDATE accounts (nightly)"):
            rows.acquire(42)
            for _ in range(5):
                rows.res.use(42)
                stop.wait(seconds * 0.15)
            rows.release(42)

    def short(n):
        def run(stop):
            rng = random.Random(n)
            i = 0
            while not stop.is_set():
                i += 1
                row = 42 if rng.random() < 0.5 else rng.randrange(100, 200)
                with gp.task(f"txn {n}.{i}: UPDATE accounts WHERE id={row}"):
                    rows.acquire(row)
                    rows.res.use(row)
                    time.sleep(0.0005)
                    rows.release(row)
                time.sleep(0.002)

        return run

    _run_threads(batch, *(short(n) for n in range(4)), stop_after=seconds)


def _pg_lock_chain(seconds: float) -> None:
    """A idles in transaction holding row 1; sessions B1..B3 each hold a row of their own and
    wait for row 1; sessions C1..C3 wait for the Bs' rows. The root blocker is A, not a B."""
    rows = _Lock("pg.row_lock")
    a_holds = threading.Event()
    b_hold = [threading.Event() for _ in range(3)]

    def a(stop):
        with gp.task("session A: idle in transaction"):
            rows.acquire(1)
            rows.res.use(1)
            a_holds.set()
            stop.wait(seconds * 0.8)
            rows.release(1)

    def b(n):
        def run(stop):
            a_holds.wait()
            time.sleep(0.02 * n)
            with gp.task(f"session B{n}: UPDATE t SET .. WHERE id IN ({10 + n}, 1)"):
                rows.acquire(10 + n)
                rows.res.use(10 + n)
                b_hold[n].set()
                rows.acquire(1)
                rows.res.use(1)
                rows.release(1)
                rows.release(10 + n)

        return run

    def c(n):
        def run(stop):
            b_hold[n].wait()
            time.sleep(0.01)
            with gp.task(f"session C{n}: UPDATE t SET .. WHERE id = {10 + n}"):
                rows.acquire(10 + n)
                rows.res.use(10 + n)
                rows.release(10 + n)

        return run

    _run_threads(a, *(b(n) for n in range(3)), *(c(n) for n in range(3)), stop_after=seconds)


def _healthy_locks(seconds: float) -> None:
    """Short transactions on a few hot rows: brief waits, nobody to blame for long."""
    rows = _Lock("innodb.row_lock")

    def short(n):
        def run(stop):
            rng = random.Random(n)
            i = 0
            while not stop.is_set():
                i += 1
                row = rng.randrange(1, 20)
                with gp.task(f"txn {n}.{i}"):
                    rows.acquire(row)
                    rows.res.use(row)
                    time.sleep(0.0003)
                    rows.release(row)
                time.sleep(0.001)

        return run

    _run_threads(*(short(n) for n in range(4)), stop_after=seconds)


# --- pools -------------------------------------------------------------------------------------


def _httpd_send_buffer(seconds: float) -> None:
    """An httpd worker keeps filling send buffer space for a client that stopped reading, so
    the other workers wait for buffer space."""
    buf = _Pool("httpd.send_buffer", 64, "KiB")

    def stuck(stop):
        with gp.task("worker 0: GET /big.iso (client stopped reading)"):
            held = 0
            while held < 48 and not stop.is_set():
                if buf.acquire(8, stop, obj=1000):  # buffer space of connection 1000
                    buf.res.use(1000, 8)
                    held += 8
            stop.wait()
            buf.release(held, obj=1000)

    def worker(n):
        def run(stop):
            time.sleep(0.05)
            i = 0
            while not stop.is_set():
                i += 1
                conn = n * 100_000 + i
                with gp.task(f"worker {n}: GET /page/{i}"):
                    if not buf.acquire(16, stop, obj=conn):
                        break
                    buf.res.use(conn, 16)
                    time.sleep(0.003)
                    buf.release(16, obj=conn)

        return run

    _run_threads(stuck, *(worker(n) for n in range(1, 5)), stop_after=seconds)


def _llama_kv_leak(seconds: float) -> None:
    """llama.cpp server: KV-cache cells of aborted requests are never freed."""
    kv = _Pool("llama.kv_cache", 512, "cells")

    def slot(n):
        def run(stop):
            i = 0
            while not stop.is_set():
                i += 1
                aborted = (i + n) % 4 == 0
                name = f"slot {n}: request {i}" + (" (aborted by client)" if aborted else "")
                with gp.task(name):
                    if not kv.acquire(8, stop):
                        break
                    kv.res.use(0, 8)
                    time.sleep(0.004)
                    if not aborted:  # the bug: an aborted request's cells stay allocated
                        kv.release(8)
                time.sleep(0.002)

        return run

    _run_threads(*(slot(n) for n in range(3)), stop_after=seconds)


class _Scoreboard:
    """httpd's scoreboard: numbered worker slots (the objects); takers wait for any free one."""

    def __init__(self, resource: str, slots: int) -> None:
        self.res = gp.resource(resource, capacity=slots, unit="slots", sharing="pool")
        self.free = list(range(1, slots + 1))
        self.cond = threading.Condition()

    def take(self, stop: threading.Event) -> int | None:
        with self.cond:
            if not self.free:
                with self.res.wait(0):
                    while not self.free:
                        if stop.is_set():
                            return None
                        self.cond.wait(0.01)
            slot = self.free.pop()
        self.res.acquire(slot)
        return slot

    def give_back(self, slot: int) -> None:
        self.res.release(slot)
        with self.cond:
            self.free.append(slot)
            self.cond.notify()


def _httpd_slowloris(seconds: float) -> None:
    """httpd prefork/worker MPM under slow clients (the Slowloris shape): each slow connection
    keeps a worker slot for as long as it trickles its headers in, doing almost no work in
    it, while real requests queue for a slot. The policy (a slot per connection, however
    idle) is at fault: the event MPM or mod_reqtimeout frees the slot."""
    board = _Scoreboard("httpd.worker_slots", 6)

    def slow_client(n):
        def run(stop):
            i = 0
            while not stop.is_set():
                i += 1
                with gp.task(f"slow client {n}: GET / (headers a byte at a time)"):
                    slot = board.take(stop)
                    if slot is None:
                        break
                    # a header line now and then, never a whole request: the worker has
                    # nothing to process (no USE) and the slot idles until the timeout
                    stop.wait(0.4)
                    board.give_back(slot)

        return run

    def client(n):
        def run(stop):
            time.sleep(0.05)
            i = 0
            while not stop.is_set():
                i += 1
                with gp.task(f"client {n}: GET /index.html #{i}"):
                    slot = board.take(stop)
                    if slot is None:
                        break
                    board.res.use(slot, 1)
                    time.sleep(0.002)
                    board.give_back(slot)
                time.sleep(0.003)

        return run

    _run_threads(
        *(slow_client(n) for n in range(5)), *(client(n) for n in range(4)), stop_after=seconds
    )


def _httpd_use_after_release(seconds: float) -> None:
    """An httpd filter keeps writing to a bucket brigade's buffer after handing it back to the
    connection's allocator (the shape of httpd's use-after-free reports in its filters and
    mod_http2): the buffer may already belong to another request."""
    bufs = _Lock("httpd.brigade_buffer")
    rng = random.Random(3)

    def worker(n):
        def run(stop):
            i = 0
            while not stop.is_set():
                i += 1
                buf = rng.randint(1, 40)
                late = n == 0 and i % 3 == 0  # the faulty filter, on some responses
                name = f"worker {n}: " + ("deflate filter flush" if late else f"GET /{i}")
                with gp.task(name):
                    bufs.acquire(buf)
                    bufs.res.use(buf, 1)
                    time.sleep(0.001)
                    bufs.release(buf)
                    if late:  # the bug: the trailer goes into the buffer it gave back
                        bufs.res.use(buf, 1)
                time.sleep(0.002)

        return run

    _run_threads(*(worker(n) for n in range(3)), stop_after=seconds)


def _llama_long_context(seconds: float) -> None:
    """llama.cpp server with a unified KV cache: one request with a huge context takes most of
    the cells for its whole generation, and the short chat requests wait for cells. Cells
    are tagged with their slot's sequence (the object: seq_id + 1, as 0 means the whole
    cache); a chat waits for cells of any sequence."""
    kv = _Pool("llama.kv_cache", 512, "cells")

    def long_request(stop):
        time.sleep(0.05)
        with gp.task("slot 0: summarize 400-page document (n_ctx 448)"):
            for _ in range(14):  # prompt processing takes cells one ubatch at a time
                if not kv.acquire(32, stop, obj=1):
                    return
                kv.res.use(1, 32)
            while not stop.wait(0.01):  # decoding token after token, using its cells
                kv.res.use(1, 448)
            kv.release(448, obj=1)

    def chat(n):
        def run(stop):
            i = 0
            while not stop.is_set():
                i += 1
                with gp.task(f"slot {n}: chat completion #{i}"):
                    if not kv.acquire(48, stop, obj=n + 1):
                        break
                    kv.res.use(n + 1, 48)
                    time.sleep(0.004)
                    kv.release(48, obj=n + 1)
                time.sleep(0.001)

        return run

    _run_threads(long_request, *(chat(n) for n in range(1, 5)), stop_after=seconds)


def _pg_wal_buffers(seconds: float) -> None:
    """PostgreSQL wal_buffers too small for the write load: every writer waits for space."""
    wal = _Pool("pg.wal_buffers", 16, "pages")

    def writer(n):
        def run(stop):
            rng = random.Random(n)
            i = 0
            while not stop.is_set():
                i += 1
                pages = rng.randint(2, 4)
                with gp.task(f"backend {n}: INSERT batch {i}"):
                    if not wal.acquire(pages, stop):
                        break
                    wal.res.use(0, pages)
                    time.sleep(0.003)  # until the WAL writer flushes them
                    wal.release(pages)

        return run

    _run_threads(*(writer(n) for n in range(8)), stop_after=seconds)


def _healthy_wal(seconds: float) -> None:
    wal = _Pool("pg.wal_buffers", 16, "pages")

    def writer(n):
        def run(stop):
            i = 0
            while not stop.is_set():
                i += 1
                with gp.task(f"backend {n}: INSERT {i}"):
                    wal.acquire(2, stop)
                    wal.res.use(0, 2)
                    time.sleep(0.001)
                    wal.release(2)
                time.sleep(0.004)

        return run

    _run_threads(*(writer(n) for n in range(2)), stop_after=seconds)


# --- caches ------------------------------------------------------------------------------------


def _query_cache_invalidated(seconds: float) -> None:
    """A query cache whose entries are invalidated by writes before they are ever hit."""
    cache = gp.resource("mysql.query_cache", capacity=1000, unit="entries", sharing="pool")

    def readers(stop):
        i = 0
        while not stop.is_set():
            i += 1
            with gp.task(f"SELECT ... FROM orders WHERE id={i}"):
                cache.acquire(i)  # the result is stored ...
            time.sleep(0.0005)

    def writer(stop):
        with gp.task("UPDATE stream on orders"):
            done = 0
            while not stop.wait(0.001):
                # ... and each write invalidates what the reads stored, unused
                newest = done + 20
                for entry in range(done + 1, newest):
                    cache.release(entry)
                done = newest - 1

    _run_threads(readers, writer, stop_after=seconds)


def _healthy_cache_warmup(seconds: float) -> None:
    """A cache that warms up and then levels off at its capacity: hits, evictions, no growth."""
    cache = gp.resource("app.result_cache", capacity=200, unit="entries", sharing="pool")
    resident: list[int] = []
    lock = threading.Lock()

    def requests(stop):
        rng = random.Random(1)
        i = 0
        while not stop.is_set():
            i += 1
            key = rng.randrange(1, 400)
            with gp.task(f"GET /item/{key} #{i}"):
                with lock:
                    hit = key in resident
                    if hit:
                        cache.use(key)
                    else:
                        cache.acquire(key)
                        resident.append(key)
            time.sleep(0.0003)

    full = threading.Event()  # levelled off: the run goes on for SECONDS from here

    def evictor(stop):
        with gp.task("cache evictor", kind="background"):
            while not stop.wait(0.001):
                with lock:
                    if len(resident) >= 200:
                        full.set()
                    while len(resident) > 200:
                        cache.release(resident.pop(0))

    _run_threads(requests, evictor, stop_after=seconds, settled=full)


ALL = [
    Scenario(
        "mysql-75540",
        "MySQL #75540: undo log grows behind a long transaction, then purge floods the buffer pool",
        Truth("engine.undo_log", "unbounded_growth", "long txn"),
        _undo_purge,
        4.0,
    ),
    Scenario(
        "mdev-34989",
        "MariaDB MDEV-34989: a SELECT keeps a table's metadata lock and INSERTs hang behind it",
        Truth("mdl.table", "contention", "SELECT * FROM t1"),
        _mdl_select_keeps_lock,
    ),
    Scenario(
        "mdev-34836",
        "MariaDB MDEV-34836: a read query holds a parent table it never uses, blocking DDL on it",
        Truth("mdl.table", "inefficient_policy", "SELECT ... FROM child"),
        _mdl_parent_never_used,
    ),
    Scenario(
        "innodb-batch-row-lock",
        "A batch job holds a row lock while many short transactions wait",
        Truth("innodb.row_lock", "contention", "batch job"),
        _row_lock_batch,
    ),
    Scenario(
        "pg-lock-chain",
        "PostgreSQL lock chain: the root blocker is idle in transaction, not the session it blocks",
        Truth("pg.row_lock", "contention", "session A"),
        _pg_lock_chain,
    ),
    Scenario(
        "httpd-send-buffer",
        "Apache httpd: a worker fills send buffer space for a client that stopped reading",
        Truth("httpd.send_buffer", "contention", "worker 0"),
        _httpd_send_buffer,
    ),
    Scenario(
        "llama-kv-leak",
        "llama.cpp server: KV-cache cells of aborted requests are never freed",
        Truth("llama.kv_cache", "leak", "slot"),
        _llama_kv_leak,
    ),
    Scenario(
        "pg-wal-buffers",
        "PostgreSQL: wal_buffers too small for the write load",
        Truth("pg.wal_buffers", "under_provisioning", None),
        _pg_wal_buffers,
    ),
    Scenario(
        "mysql-query-cache",
        "MySQL query cache: entries invalidated before they are ever hit",
        Truth("mysql.query_cache", "inefficient_policy", "SELECT"),
        _query_cache_invalidated,
    ),
    Scenario(
        "httpd-slowloris",
        "httpd: slow clients keep worker slots they barely use while requests queue",
        Truth("httpd.worker_slots", "inefficient_policy", "slow client"),
        _httpd_slowloris,
    ),
    Scenario(
        "httpd-use-after-release",
        "httpd: a filter writes to a brigade buffer after giving it back",
        Truth("httpd.brigade_buffer", "inconsistent_state", "worker 0: deflate"),
        _httpd_use_after_release,
    ),
    Scenario(
        "llama-long-context",
        "llama.cpp server: one huge-context request holds most KV cells; chats wait",
        Truth("llama.kv_cache", "contention", "slot 0: summarize"),
        _llama_long_context,
    ),
    Scenario("healthy-engine", "The engine without the long transaction", None, _undo_healthy, 2.5),
    Scenario("healthy-row-locks", "Short transactions on hot rows", None, _healthy_locks),
    Scenario("healthy-wal", "WAL buffers large enough for the load", None, _healthy_wal),
    Scenario(
        "healthy-cache-warmup",
        "A cache that warms up and levels off at capacity",
        None,
        _healthy_cache_warmup,
    ),
]
