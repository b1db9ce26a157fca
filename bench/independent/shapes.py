"""The shapes: simulated workloads, each with the diagnosis it must get (or none).

Each shape draws its own rates, sizes, task counts and durations from its seed, within
ranges chosen for this generator (not those of gigi's scenario suite). A shape function
sets up resources and processes on a ``Sim`` and returns the clock reading at which the
workload stops starting new work; the run goes a little past it so that work in flight ends.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .sim import ACQUIRE, RELEASE, WAIT, Lock, Log, Pool, Resource, Sim, Task


@dataclass(frozen=True)
class Truth:
    """What rank 1 of the diagnosis must say about a faulty shape."""

    resource: str
    failure_mode: str
    # prefix of rank 1's first culprit task's name; None: the culprit is not checked (no task
    # is to blame, or the blame is spread over a group of like tasks)
    culprit: str | None


@dataclass(frozen=True)
class Shape:
    name: str
    short: str  # a column label
    title: str
    truth: Truth | None  # None: healthy, no finding expected
    build: Callable[[Sim, random.Random], int]


def _session(sim: Sim, label: str) -> tuple[int, Task]:
    th = sim.thread()
    return th, sim.begin(f"{label} (thread {th})", th)


def _think(sim: Sim, mean_ns: float):
    return sim.sleep(sim.exp_ns(mean_ns))


def _closed_loop_think(threads: int, hold: float, rho: float, n: int, least: float) -> float:
    """The mean think time (ms) at which THREADS callers, each holding one of N units for
    HOLD ms on average, keep the units busy a share RHO of the time; LEAST at the least."""
    return max(least, threads * hold / (rho * n) - hold)


def _callers(
    sim: Sim,
    rng: random.Random,
    pool: Pool,
    end: int,
    count: int,
    name: Callable[[int, int], str],
    *,
    start_ms: float,
    hold: float,
    think: float,
) -> None:
    """COUNT callers in closed loops on POOL until END: caller k, after up to START_MS, runs
    a task named ``name(k, i)`` for its i-th request that takes a unit, uses it for an
    exponential HOLD ms and gives it back, then thinks an exponential THINK ms."""

    def caller(k: int):
        th = sim.thread()
        yield sim.sleep(sim.ms(rng.uniform(0, start_ms)))
        i = 0
        while sim.now < end:
            i += 1
            t = sim.begin(name(k, i), th)
            unit = yield pool.acquire(t)
            d = sim.exp_ns(sim.ms(hold))
            pool.use(t, unit, dur=d)
            yield sim.sleep(d)
            pool.release(t, unit)
            sim.end(t)
            yield _think(sim, sim.ms(think))

    for k in range(count):
        sim.spawn(caller(k))


# --- (a) a SELECT keeps a table's metadata lock, INSERTs pile up ----------------------------


def mdl_pileup(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(3.0, 6.0)
    end = sim.at(horizon)
    mdl = Lock(sim, "mariadb.mdl", declare_capacity=rng.random() < 0.5)
    table = rng.randrange(100, 900)
    other = table + rng.randrange(1, 60)
    start = sim.at(rng.uniform(0.05, 0.2) * horizon)
    held = sim.s(rng.uniform(0.45, 0.7) * horizon)
    inserters = rng.randint(3, 9)
    hold_mean = sim.ms(rng.uniform(0.2, 1.5))
    think_mean = sim.ms(rng.uniform(3.0, 15.0))

    def select():
        th, sess = _session(sim, "connection app_ro@10.1.4.7")
        yield sim.until(start)
        t = sim.begin(
            "SELECT o.id, o.total FROM orders o WHERE o.day = ? (txn open)", th, parent=sess
        )
        yield mdl.acquire(t, table)
        d = sim.ms(rng.uniform(1.0, 6.0))
        mdl.use(t, table, dur=d)
        yield sim.sleep(d + held)  # the client never commits until much later
        mdl.release(t, table)
        sim.end(t)
        sim.end(sess)

    def inserter(k: int, obj: int, think: float):
        th, sess = _session(sim, f"connection app_rw{k}@10.1.4.{20 + k}")
        yield sim.sleep(sim.ms(rng.uniform(0, 40)))
        i = 0
        while sim.now < end:
            i += 1
            name = "INSERT INTO orders" if obj == table else "UPDATE customers SET seen = now()"
            t = sim.begin(f"{name} ... /* c{k} #{i} */", th, parent=sess)
            yield mdl.acquire(t, obj)
            d = sim.exp_ns(hold_mean)
            mdl.use(t, obj, dur=d)
            yield sim.sleep(d)
            mdl.release(t, obj)
            sim.end(t)
            yield _think(sim, think)
        sim.end(sess)

    sim.spawn(select())
    for k in range(inserters):
        sim.spawn(inserter(k, table, think_mean))
    for k in range(rng.randint(1, 2)):  # bystanders on another table
        sim.spawn(inserter(100 + k, other, think_mean * 4))
    return end


# --- (b) a pool with one hog among many short requests --------------------------------------


def pool_hog(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(2.5, 5.0)
    end = sim.at(horizon)
    n = rng.randint(2, 5)
    first = rng.randrange(3, 40)
    pool = Pool(sim, "app.db_conns", n, "connections", objects=list(range(first, first + n)))
    hog_start = sim.at(rng.uniform(0.03, 0.12) * horizon)
    hog_end = hog_start + sim.s(rng.uniform(0.45, 0.75) * horizon)
    threads = rng.randint(6, 14)
    hold = rng.uniform(2.0, 6.0)
    rho = rng.uniform(0.75, 0.95)
    think = _closed_loop_think(threads, hold, rho, n, 0.3)

    def hog():
        th = sim.thread()
        yield sim.until(hog_start)
        t = sim.begin("report export: SELECT * FROM ledger ORDER BY ts", th)
        conn = yield pool.acquire(t)
        while sim.now < hog_end:
            pool.use(t, conn, dur=sim.ms(rng.uniform(0.5, 2.0)))
            yield sim.sleep(sim.ms(rng.uniform(20, 60)))
        pool.release(t, conn)
        sim.end(t)

    sim.spawn(hog())
    _callers(
        sim,
        rng,
        pool,
        end,
        threads,
        lambda k, i: f"GET /api/v2/items/{rng.randrange(10_000)} (w{k}.{i})",
        start_ms=10,
        hold=hold,
        think=think,
    )
    return end


# --- (c) a hot row: many short transactions, nobody dominant -------------------------------


def hot_row(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(2.0, 4.0)
    end = sim.at(horizon)
    rows = Lock(sim, "db.row_lock", declare_capacity=rng.random() < 0.5)
    hot = rng.randrange(1, 50)
    sessions = rng.randint(6, 12)
    hot_p = rng.uniform(0.6, 0.9)
    hold = rng.uniform(0.8, 3.0)
    load = rng.uniform(0.95, 1.5)  # offered busy share of the hot row
    think = max(0.3, sessions * hot_p * hold / load - hold)

    def session(k: int):
        th, sess = _session(sim, f"pgbench client {k}")
        yield sim.sleep(sim.ms(rng.uniform(0, 5)))
        i = 0
        while sim.now < end:
            i += 1
            row = hot if rng.random() < hot_p else rng.randrange(1000, 100_000)
            table = "branches" if row == hot else "accounts"
            t = sim.begin(
                f"UPDATE {table} SET balance = balance + ? WHERE id = {row}", th, parent=sess
            )
            yield rows.acquire(t, row)
            d = sim.exp_ns(sim.ms(hold))
            rows.use(t, row, dur=d // 2)
            yield sim.sleep(d)
            rows.release(t, row)
            sim.end(t)
            yield _think(sim, sim.ms(think))
        sim.end(sess)

    for k in range(sessions):
        sim.spawn(session(k))
    return end


# --- (d) leaks: KV-cache cells of aborted streams, connections of an error path -------------


def kv_leak(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(3.0, 6.0)
    end = sim.at(horizon)
    cap = rng.choice([256, 384, 512, 1024])
    kv = Pool(sim, "llm.kv_cells", cap, "cells")
    slots = rng.randint(3, 7)
    lo, hi = cap // 32, cap // 12
    mean_cells = (lo + hi) / 2
    # leak until what is left holds 40-80% of what the slots ask for at once (never less
    # than the largest request: the pool stays usable, just short)
    left = max(1.2 * hi, rng.uniform(0.4, 0.8) * slots * mean_cells)
    leaks = max(3, round((cap - left) / mean_cells))
    aborts = deque(sorted(sim.at(rng.uniform(0.05, 0.75) * horizon) for _ in range(leaks)))
    leaked = [0]
    decode = rng.uniform(8.0, 30.0)
    think = rng.uniform(1.0, 5.0)

    def slot(k: int):
        th = sim.thread()
        yield sim.sleep(sim.ms(rng.uniform(0, 5)))
        i = 0
        while sim.now < end:
            i += 1
            cells = rng.randint(lo, hi)
            aborted = bool(aborts) and sim.now >= aborts[0] and leaked[0] + cells <= cap - left
            if aborted:
                aborts.popleft()
                leaked[0] += cells
            stream = aborted or rng.random() < 0.3
            route = "POST /v1/chat/completions stream=true" if stream else "POST /v1/completions"
            t = sim.begin(f"{route} slot {k} #{i}", th)
            yield kv.acquire(t, cells)
            steps = rng.randint(2, 5)
            for _ in range(1 if aborted else steps):
                kv.use(t, 0, cells, dur=sim.ms(0.3))
                yield sim.sleep(sim.exp_ns(sim.ms(decode / steps)))
            if not aborted:  # the bug: a stream the client closed never frees its cells
                kv.release(t, 0, cells)
            sim.end(t)
            yield _think(sim, sim.ms(think))

    for k in range(slots):
        sim.spawn(slot(k))
    return end


def conn_leak(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(3.0, 6.0)
    end = sim.at(horizon)
    n = rng.randint(8, 16)
    first = rng.randrange(5, 200)
    pool = Pool(sim, "srv.backend_conns", n, "connections", objects=list(range(first, first + n)))
    threads = rng.randint(n + 2, 2 * n + 4)
    hold = rng.uniform(2.0, 8.0)
    rho = rng.uniform(0.35, 0.6)
    think = _closed_loop_think(threads, hold, rho, n, 0.3)
    leaks = n - rng.randint(1, 3)
    timeouts = deque(sorted(sim.at(rng.uniform(0.05, 0.65) * horizon) for _ in range(leaks)))

    def handler(k: int):
        th = sim.thread()
        yield sim.sleep(sim.ms(rng.uniform(0, 10)))
        i = 0
        while sim.now < end:
            i += 1
            leaks_now = bool(timeouts) and sim.now >= timeouts[0]
            if leaks_now:
                timeouts.popleft()
            checkout = leaks_now or rng.random() < 0.2
            route = "GET /checkout" if checkout else f"GET /catalog/{rng.randrange(500)}"
            t = sim.begin(f"{route} (req {k}.{i})", th)
            conn = yield pool.acquire(t)
            d = sim.exp_ns(sim.ms(hold))
            pool.use(t, conn, dur=d)
            yield sim.sleep(d)
            if not leaks_now:  # the bug: the payment-timeout path returns without check-in
                pool.release(t, conn)
            sim.end(t)
            yield _think(sim, sim.ms(think))

    for k in range(threads):
        sim.spawn(handler(k))
    return end


# --- (e) undo history grows behind a long transaction ---------------------------------------


class _Mvcc:
    """Open transactions and committed undo that purge may free once no older view needs it."""

    def __init__(self, sim: Sim, log: Log) -> None:
        self.sim, self.log = sim, log
        self.active: dict[int, int] = {}  # task -> start
        self.committed: deque[tuple[int, int]] = deque()  # (commit ts, records)

    def begin(self, t: Task) -> None:
        self.active[t.id] = self.sim.now

    def commit(self, t: Task, records: int) -> None:
        self.active.pop(t.id, None)
        if records:
            self.committed.append((self.sim.now, records))

    def purgeable(self, limit: int) -> int:
        oldest = min(self.active.values(), default=self.sim.now + 1)
        freed = 0
        while self.committed and self.committed[0][0] < oldest and freed < limit:
            freed += self.committed.popleft()[1]
        return freed


def _purge(sim: Sim, log: Log, mvcc: _Mvcc, every: float, batch: int, stop: int, name: str):
    th = sim.thread()
    t = sim.begin(name, th, kind="background")
    while sim.now < stop or mvcc.committed:
        freed = mvcc.purgeable(batch)
        while freed > 0:  # a RELEASE per undo page freed
            page = min(freed, 64)
            log.truncate(t, page)
            freed -= page
        yield sim.sleep(sim.exp_ns(sim.ms(every)))
        if sim.now > stop + sim.s(2):
            break
    sim.end(t)


def undo_growth(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(3.0, 6.0)
    end = sim.at(horizon)
    log = Log(sim, "innodb.undo_history")
    mvcc = _Mvcc(sim, log)
    clients = rng.randint(3, 8)
    think = rng.uniform(3.0, 10.0)
    long_start = sim.at(rng.uniform(0.1, 0.25) * horizon)
    long_end = long_start + sim.s(rng.uniform(0.45, 0.6) * horizon)
    long_every = rng.uniform(5.0, 20.0)
    long_records = rng.randint(5, 30)

    def client(k: int):
        th, sess = _session(sim, f"mysqld connection {k}")
        i = 0
        while sim.now < end:
            i += 1
            t = sim.begin(f"txn {k}.{i}: UPDATE stock SET qty = qty - 1", th, parent=sess)
            mvcc.begin(t)
            records = rng.randint(1, 6)
            yield sim.sleep(sim.exp_ns(sim.ms(0.5)))
            log.append(t, records)
            yield sim.sleep(sim.exp_ns(sim.ms(0.5)))
            mvcc.commit(t, records)
            sim.end(t)
            yield _think(sim, sim.ms(think))
        sim.end(sess)

    def long_txn():
        th = sim.thread()
        yield sim.until(long_start)
        t = sim.begin("long txn: UPDATE orders SET status = 'archived' (batch)", th)
        mvcc.begin(t)
        written = 0
        while sim.now < long_end:
            n = rng.randint(long_records // 2 + 1, long_records)
            log.append(t, n)
            written += n
            yield sim.sleep(sim.exp_ns(sim.ms(long_every)))
        mvcc.commit(t, written)
        sim.end(t)

    for k in range(clients):
        sim.spawn(client(k))
    sim.spawn(long_txn())
    sim.spawn(
        _purge(sim, log, mvcc, rng.uniform(3.0, 12.0), rng.randint(300, 900), end, "purge thread")
    )
    return end


# --- (f) a pool too small for the load -----------------------------------------------------


def underprovisioned(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(2.0, 4.0)
    end = sim.at(horizon)
    n = rng.randint(3, 8)
    numbered = rng.random() < 0.5
    pool = Pool(
        sim, "svc.render_workers", n, "workers", objects=list(range(1, n + 1)) if numbered else None
    )
    threads = rng.randint(2 * n, 4 * n)
    hold = rng.uniform(2.0, 8.0)
    rho = rng.uniform(1.3, 2.2)
    think = _closed_loop_think(threads, hold, rho, n, 0.2)
    _callers(
        sim,
        rng,
        pool,
        end,
        threads,
        lambda k, i: f"render thumbnail {rng.randrange(10**6)} (c{k}.{i})",
        start_ms=5,
        hold=hold,
        think=think,
    )
    return end


# --- (g) a lock held and never used while others wait for it --------------------------------


def idle_lock(sim: Sim, rng: random.Random) -> int:
    """A report query locks the parent table of a join it only reads the child of, and keeps
    it for its whole run; writers of the parent wait. The lock is held, unused, while its
    holder works through another object of the same resource: held, not needed."""
    horizon = rng.uniform(3.0, 6.0)
    end = sim.at(horizon)
    locks = Lock(sim, "db.table_lock", declare_capacity=rng.random() < 0.5)
    parent = rng.randrange(10, 400)
    child = parent + rng.randrange(1, 20)
    third = child + rng.randrange(1, 20)
    start = sim.at(rng.uniform(0.05, 0.15) * horizon)
    stop = start + sim.s(rng.uniform(0.5, 0.7) * horizon)
    writers = rng.randint(3, 7)
    think = rng.uniform(10.0, 40.0)

    def report():
        th, sess = _session(sim, "connection reporting@10.2.0.9")
        yield sim.until(start)
        t = sim.begin("SELECT i.* FROM invoices i JOIN customers c USING (cid)", th, parent=sess)
        yield locks.acquire(t, parent)
        yield locks.acquire(t, child)
        while sim.now < stop:  # reads invoice pages only
            d = sim.ms(rng.uniform(0.2, 1.0))
            locks.use(t, child, dur=d)
            yield sim.sleep(d + sim.ms(rng.uniform(2.0, 10.0)))
        locks.release(t, child)
        locks.release(t, parent)
        sim.end(t)
        sim.end(sess)

    def writer(k: int, obj: int, label: str, think_ms: float):
        th, sess = _session(sim, f"connection app{k}@10.2.1.{k}")
        yield sim.sleep(sim.ms(rng.uniform(0, 30)))
        i = 0
        while sim.now < end:
            i += 1
            t = sim.begin(f"{label} /* {k}.{i} */", th, parent=sess)
            yield locks.acquire(t, obj)
            d = sim.ms(rng.uniform(0.3, 2.0))
            locks.use(t, obj, dur=d)
            yield sim.sleep(d)
            locks.release(t, obj)
            sim.end(t)
            yield _think(sim, sim.ms(think_ms))
        sim.end(sess)

    sim.spawn(report())
    for k in range(writers):
        sim.spawn(writer(k, parent, "UPDATE customers SET last_seen = now()", think))
    for k in range(rng.randint(1, 3)):
        sim.spawn(writer(50 + k, third, "INSERT INTO audit_log", think * 2))
    return end


def idle_slots(sim: Sim, rng: random.Random) -> int:
    """Slow clients keep worker slots while their headers trickle in, doing nothing with
    them, and the real requests queue for a slot."""
    horizon = rng.uniform(2.5, 5.0)
    end = sim.at(horizon)
    n = rng.randint(6, 12)
    pool = Pool(sim, "web.worker_slots", n, "slots", objects=list(range(1, n + 1)))
    slow = n - rng.randint(1, 2)
    clients = rng.randint(4, 10)
    hold = rng.uniform(1.0, 4.0)
    think = rng.uniform(2.0, 8.0)

    def slow_client(k: int):
        th = sim.thread()
        yield sim.sleep(sim.ms(rng.uniform(20, 200)))
        i = 0
        while sim.now < end:
            i += 1
            t = sim.begin(f"keep-alive conn from 203.0.113.{k}: headers trickling in #{i}", th)
            s = yield pool.acquire(t)
            yield sim.sleep(sim.s(rng.uniform(0.25, 0.8)))  # no USE: nothing to process
            pool.release(t, s)
            sim.end(t)
            yield sim.sleep(sim.ms(rng.uniform(1, 20)))

    for k in range(slow):
        sim.spawn(slow_client(k))
    _callers(
        sim,
        rng,
        pool,
        end,
        clients,
        lambda k, i: f"GET /static/app.{k}.js #{i}",
        start_ms=10,
        hold=hold,
        think=think,
    )
    return end


# --- (h) use after release, double release --------------------------------------------------


def use_after_release(sim: Sim, rng: random.Random) -> int:
    """Response buffers handed out from a free list; one filter writes its trailer into a
    buffer after handing it back (it may already be another request's), and now and then
    hands it back twice."""
    horizon = rng.uniform(2.0, 4.0)
    end = sim.at(horizon)
    nbuf = rng.randint(16, 64)
    first = rng.randrange(1, 1000) * 64
    bufs = Pool(
        sim, "io.response_buffers", nbuf, "buffers", objects=list(range(first, first + nbuf))
    )
    workers = rng.randint(3, 6)
    faulty_share = rng.uniform(0.2, 0.5)
    double_share = rng.uniform(0.1, 0.4)
    think = rng.uniform(1.0, 4.0)

    def worker(k: int):
        th = sim.thread()
        i = 0
        while sim.now < end:
            i += 1
            late = k == 0 and rng.random() < faulty_share
            name = f"gzip filter: flush trailer #{i}" if late else f"GET /files/{i} (w{k})"
            t = sim.begin(name, th)
            buf = yield bufs.acquire(t)
            d = sim.ms(rng.uniform(0.5, 2.0))
            bufs.use(t, buf, dur=d)
            yield sim.sleep(d)
            bufs.release(t, buf)
            if late:  # the bug: the trailer goes into the buffer already handed back
                yield sim.sleep(sim.ms(rng.uniform(0.02, 0.3)))
                bufs.use(t, buf, dur=sim.ms(0.05))
                if rng.random() < double_share:
                    sim.emit(RELEASE, bufs, t, buf)  # and hands it back twice
            sim.end(t)
            yield _think(sim, sim.ms(think))

    for k in range(workers):
        sim.spawn(worker(k))
    return end


# --- healthy ---------------------------------------------------------------------------------


class _BufferPool(Resource):
    """Page frames pinned by page number; a miss waits for one disk that reads a page at a
    time. Big enough for the working set: it never fills."""

    def __init__(self, sim: Sim, frames: int, read_ms: float) -> None:
        super().__init__(sim, "engine.buffer_pool", capacity=frames, unit="pages", sharing="pool")
        self.resident: set[int] = set()
        self.read_ns = sim.ms(read_ms)
        self.disk_free = 0

    def fix(self, t: Task, page: int):
        if page not in self.resident:
            done = max(self.sim.now, self.disk_free) + self.read_ns
            self.disk_free = done
            self.sim.emit(WAIT, self, t, page, 1, done - self.sim.now)
            yield self.sim.until(done)
            self.resident.add(page)
        self.sim.emit(ACQUIRE, self, t, page, 1)

    def unfix(self, t: Task, page: int) -> None:
        self.sim.emit(RELEASE, self, t, page, 1)


def healthy_oltp(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(1.2, 2.2)
    end = sim.at(horizon)
    frames = rng.choice([128, 256, 512])
    bp = _BufferPool(sim, frames, rng.uniform(0.08, 0.3))
    hot_pages = int(frames * rng.uniform(0.4, 0.7))
    log = Log(sim, "engine.undo_log")
    mvcc = _Mvcc(sim, log)
    rows = Lock(sim, "engine.row_locks", declare_capacity=rng.random() < 0.5)
    nrows = rng.randint(2000, 10_000)
    clients = rng.randint(4, 8)
    think = rng.uniform(6.0, 15.0)
    cold = rng.uniform(0.005, 0.03)

    def client(k: int):
        th, sess = _session(sim, f"engine session {k}")
        i = 0
        while sim.now < end:
            i += 1
            t = sim.begin(f"txn {k}.{i}: new order", th, parent=sess)
            mvcc.begin(t)
            want = {rng.randrange(20) if rng.random() < 0.1 else rng.randrange(nrows)}
            if rng.random() < 0.5:
                want.add(rng.randrange(nrows))
            mine = sorted(want)
            for r in mine:
                yield rows.acquire(t, r)
            for _ in range(rng.randint(1, 3)):
                cold_page = rng.random() < cold
                page = 100_000 + rng.randrange(10**6) if cold_page else rng.randrange(hot_pages)
                yield from bp.fix(t, page)
                bp.use(t, page, dur=sim.ms(0.02))
                yield sim.sleep(sim.exp_ns(sim.ms(0.1)))
                bp.unfix(t, page)
            records = rng.randint(1, 4)
            log.append(t, records)
            for r in mine:
                rows.use(t, r)
                rows.release(t, r)
            mvcc.commit(t, records)
            sim.end(t)
            yield _think(sim, sim.ms(think))
        sim.end(sess)

    for k in range(clients):
        sim.spawn(client(k))
    sim.spawn(
        _purge(sim, log, mvcc, rng.uniform(2.0, 8.0), rng.randint(200, 600), end, "purge worker")
    )
    return end


def cache_warmup(sim: Sim, rng: random.Random) -> int:
    """A result cache filled from cold: it rises to its capacity and stays there, an evictor
    giving back the least recently used entries."""
    horizon = rng.uniform(2.0, 4.0)
    end = sim.at(horizon)
    cap = rng.randint(150, 600)
    cache = Resource(sim, "app.result_cache", capacity=cap, unit="entries", sharing="pool")
    keys = int(cap * rng.uniform(1.3, 2.5))
    skew = rng.uniform(1.2, 2.0)
    resident: dict[int, None] = {}  # insertion order = LRU order (moved on hit)
    readers = rng.randint(2, 5)
    think = rng.uniform(0.3, 1.5)

    def reader(k: int):
        th = sim.thread()
        i = 0
        while sim.now < end:
            i += 1
            key = 1 + int(keys * rng.random() ** skew)
            t = sim.begin(f"GET /product/{key} (r{k}.{i})", th)
            if key in resident:
                resident.pop(key)
                resident[key] = None
                cache.use(t, key)
            else:
                yield sim.sleep(sim.exp_ns(sim.ms(0.5)))  # computes the result
                if key not in resident:
                    sim.emit(ACQUIRE, cache, t, key, 1)
                    cache.use(t, key)
                    resident[key] = None
            sim.end(t)
            yield _think(sim, sim.ms(think))

    def evictor():
        th = sim.thread()
        t = sim.begin("cache evictor", th, kind="background")
        while sim.now < end:
            while len(resident) > cap:
                old = next(iter(resident))
                del resident[old]
                sim.emit(RELEASE, cache, t, old, 1)
            yield sim.sleep(sim.ms(rng.uniform(1.0, 3.0)))
        sim.end(t)

    for k in range(readers):
        sim.spawn(reader(k))
    sim.spawn(evictor())
    return end


def healthy_pool(sim: Sim, rng: random.Random) -> int:
    horizon = rng.uniform(2.0, 4.0)
    end = sim.at(horizon)
    n = rng.randint(8, 20)
    pool = Pool(sim, "svc.http_clients", n, "connections", objects=list(range(1, n + 1)))
    threads = rng.randint(n, 3 * n)
    hold = rng.uniform(1.0, 5.0)
    rho = rng.uniform(0.3, 0.6)
    think = _closed_loop_think(threads, hold, rho, n, 0.5)
    _callers(
        sim,
        rng,
        pool,
        end,
        threads,
        lambda k, i: f"fetch upstream /v1/prices (c{k}.{i})",
        start_ms=20,
        hold=hold,
        think=think,
    )
    return end


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape(
            "mdl_pileup",
            "mdl",
            "a SELECT in an open transaction keeps the table's metadata lock; INSERTs pile up",
            Truth("mariadb.mdl", "contention", "SELECT o.id"),
            mdl_pileup,
        ),
        Shape(
            "pool_hog",
            "hog",
            "one report holds a connection of a small pool most of the run; requests queue",
            Truth("app.db_conns", "contention", "report export"),
            pool_hog,
        ),
        Shape(
            "hot_row",
            "hotrow",
            "a hot row updated by many short transactions, no dominant holder",
            Truth("db.row_lock", "contention", None),
            hot_row,
        ),
        Shape(
            "kv_leak",
            "kvleak",
            "KV-cache cells of streams the client closed are never freed; later requests wait",
            Truth("llm.kv_cells", "leak", "POST /v1/chat/completions stream=true"),
            kv_leak,
        ),
        Shape(
            "conn_leak",
            "connleak",
            "an error path never checks its connection back in; later requests wait for any",
            Truth("srv.backend_conns", "leak", "GET /checkout"),
            conn_leak,
        ),
        Shape(
            "undo_growth",
            "undo",
            "the undo history grows while a long transaction is open; purge catches up after",
            Truth("innodb.undo_history", "unbounded_growth", "long txn"),
            undo_growth,
        ),
        Shape(
            "underprovisioned",
            "small",
            "a worker pool too small for uniform short jobs",
            Truth("svc.render_workers", "under_provisioning", None),
            underprovisioned,
        ),
        Shape(
            "idle_lock",
            "idlelock",
            "a report keeps the parent table's lock it never reads while writers of it wait",
            Truth("db.table_lock", "inefficient_policy", "SELECT i.*"),
            idle_lock,
        ),
        Shape(
            "idle_slots",
            "idleslot",
            "slow clients keep worker slots they do nothing with while requests queue",
            Truth("web.worker_slots", "inefficient_policy", "keep-alive conn"),
            idle_slots,
        ),
        Shape(
            "use_after_release",
            "uar",
            "a filter writes to a buffer after handing it back, sometimes hands it back twice",
            Truth("io.response_buffers", "inconsistent_state", "gzip filter"),
            use_after_release,
        ),
        Shape(
            "healthy_oltp",
            "oltp",
            "an OLTP engine: buffer pool, purged undo log, short row locks, modest waits",
            None,
            healthy_oltp,
        ),
        Shape(
            "cache_warmup",
            "warmup",
            "a cache that warms up from cold and levels off at its capacity",
            None,
            cache_warmup,
        ),
        Shape("healthy_pool", "pool", "a connection pool under light load", None, healthy_pool),
    )
}
