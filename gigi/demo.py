"""An embedded, self-contained workload for ``gigi-query demo``.

A small database-like engine: a bounded buffer pool of page frames over a one-channel disk, an
undo log that write transactions fill and a background purge task empties, client
transactions, and MVCC's rule that purge may not remove undo records that an older open
transaction might still read. One long transaction keeps writing, so the undo log grows while
purge stands still; when it commits, purge reads the whole backlog through the buffer pool,
evicting the clients' pages and hogging the disk, and client throughput collapses. This is the
mechanism of MySQL bug #75540. Every resource is recorded with ``gigi.probes``.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gigi.probes as gp


@dataclass
class DemoConfig:
    """Shape of the demo workload; the defaults show the collapse and the recovery in about
    seven seconds."""

    # Seconds the clients run.
    seconds: float = 7.0
    # Client threads running transactions.
    clients: int = 4
    # Frames in the buffer pool.
    pool_pages: int = 64
    # Pages the clients read most (they fit in the pool with room to spare).
    hot_pages: int = 48
    # Share of client reads that go to cold pages (misses even when healthy).
    cold_share: float = 0.01
    # Seconds one disk read takes; the disk serves one read at a time.
    disk_read: float = 0.0005
    # When the long transaction starts and how long it keeps writing, seconds.
    long_txn_start: float = 0.8
    long_txn_length: float = 2.2
    # Undo records the long transaction writes per second.
    long_txn_rate: float = 8000.0
    # Undo records per undo page (what purge must read back).
    records_per_undo_page: int = 32
    # Pages purge pins at once while it works through a backlog.
    purge_batch: int = 24
    seed: int = 7


class Disk:
    """One read at a time: a slow device that every miss queues for."""

    def __init__(self, read_seconds: float) -> None:
        self.read_seconds = read_seconds
        self.lock = threading.Lock()

    def read(self) -> None:
        with self.lock:
            time.sleep(self.read_seconds)


class BufferPool:
    """Page frames with pin counts and LRU eviction of unpinned frames."""

    def __init__(self, frames: int, disk: Disk) -> None:
        self.frames = frames
        self.disk = disk
        self.lru: collections.OrderedDict[int, int] = collections.OrderedDict()  # page -> pins
        self.cond = threading.Condition()
        self.res = gp.resource("engine.buffer_pool", capacity=frames, unit="pages", sharing="pool")
        self.s_fix = gp.site(
            "demo/buffer_pool.py", 40, "BufferPool.fix", "ACQUIRE", "engine.buffer_pool"
        )
        self.s_miss = gp.site(
            "demo/buffer_pool.py", 52, "BufferPool.fix", "WAIT", "engine.buffer_pool"
        )
        self.s_use = gp.site(
            "demo/buffer_pool.py", 70, "BufferPool.read", "USE", "engine.buffer_pool"
        )
        self.s_unfix = gp.site(
            "demo/buffer_pool.py", 80, "BufferPool.unfix", "RELEASE", "engine.buffer_pool"
        )

    def fix(self, page: int) -> None:
        """Pin ``page``, reading it from disk (evicting another) when it is not resident."""
        with self.cond:
            if page in self.lru:
                self.lru[page] += 1
                self.lru.move_to_end(page)
                self.res.acquire(page, 1, self.s_fix)
                return
        with self.res.wait(page, 1, self.s_miss):
            self.disk.read()
            with self.cond:
                while page not in self.lru and len(self.lru) >= self.frames:
                    victim = next((p for p, pins in self.lru.items() if pins == 0), None)
                    if victim is not None:
                        del self.lru[victim]
                        break
                    self.cond.wait(0.01)
                self.lru[page] = self.lru.get(page, 0) + 1
                self.lru.move_to_end(page)
        self.res.acquire(page, 1, self.s_fix, len(self.lru))

    def use(self, page: int) -> None:
        self.res.use(page, 1, self.s_use)

    def unfix(self, page: int) -> None:
        self.res.release(page, 1, self.s_unfix)
        with self.cond:
            self.lru[page] -= 1
            self.cond.notify()


class UndoLog:
    """Undo records: transactions append them, purge frees them once no reader needs them."""

    def __init__(self, records_per_page: int) -> None:
        self.res = gp.resource("engine.undo_log", unit="records", sharing="log")
        self.history = gp.resource("engine.purge_queue", unit="transactions", sharing="log")
        self.s_append = gp.site("demo/undo.py", 20, "UndoLog.append", "ACQUIRE", "engine.undo_log")
        self.s_free = gp.site("demo/undo.py", 44, "Purge.run", "RELEASE", "engine.undo_log")
        self.s_idle = gp.site("demo/undo.py", 31, "Purge.run", "WAIT", "engine.purge_queue")
        self.records_per_page = records_per_page
        self.lock = threading.Condition()
        self.committed: collections.deque[tuple[int, int, int]] = collections.deque()
        self.active: dict[int, int] = {}  # txn -> commit number it started after
        self.clock = 0
        self.next_undo_page = 1_000_000

    def begin(self, txn: int) -> None:
        with self.lock:
            self.active[txn] = self.clock

    def append(self, records: int) -> None:
        self.res.acquire(0, records, self.s_append)
        self.res.use(0, records, self.s_append)  # the change is written into them

    def commit(self, txn: int, records: int) -> None:
        with self.lock:
            self.active.pop(txn, None)
            self.clock += 1
            if records:
                self.committed.append((self.clock, txn, records))
            self.lock.notify_all()

    def purgeable(self) -> tuple[int, int] | None:
        """The oldest committed transaction no open transaction may still read, if any."""
        with self.lock:
            if not self.committed:
                return None
            oldest_view = min(self.active.values(), default=self.clock)
            number, txn, records = self.committed[0]
            if number <= oldest_view:
                return self.committed.popleft()[1:]
            return None


def _client(
    n: int,
    cfg: DemoConfig,
    pool: BufferPool,
    undo: UndoLog,
    stop: threading.Event,
    done: list[float],
) -> None:
    rng = random.Random(cfg.seed + n)
    i = 0
    while not stop.is_set():
        i += 1
        with gp.task(f"client-{n} txn {i}", kind="foreground") as t:
            undo.begin(t.id)
            for _ in range(4):
                if rng.random() < cfg.cold_share:
                    page = rng.randrange(10_000, 100_000)
                else:
                    page = rng.randrange(cfg.hot_pages)
                pool.fix(page)
                pool.use(page)
                pool.unfix(page)
            undo.append(2)
            undo.commit(t.id, 2)
        done.append(time.monotonic())
        time.sleep(0.0004)


def _long_transaction(cfg: DemoConfig, undo: UndoLog, stop: threading.Event) -> None:
    if stop.wait(cfg.long_txn_start):
        return
    with gp.task("long txn: UPDATE orders SET ...", kind="foreground") as t:
        undo.begin(t.id)
        written = 0
        end = time.monotonic() + cfg.long_txn_length
        step = 50
        while time.monotonic() < end and not stop.is_set():
            undo.append(step)
            written += step
            time.sleep(step / cfg.long_txn_rate)
        undo.commit(t.id, written)


def _purge(cfg: DemoConfig, pool: BufferPool, undo: UndoLog, stop: threading.Event) -> None:
    """Free undo records of transactions no reader needs, a page of records at a time."""
    per_page = cfg.records_per_undo_page
    with gp.task("purge", kind="background"):
        backlog = 0  # purgeable records not yet freed
        while not stop.is_set():
            while (work := undo.purgeable()) is not None:
                backlog += work[1]
            if backlog < per_page:
                with undo.history.wait(0, 1, undo.s_idle):
                    with undo.lock:
                        undo.lock.wait(0.005)
                continue
            # Read the undo pages of the backlog, a batch of pinned pages at a time.
            batch = []
            for _ in range(min(backlog // per_page, cfg.purge_batch)):
                undo.next_undo_page += 1
                batch.append(undo.next_undo_page)
                pool.fix(undo.next_undo_page)
            for page in batch:
                pool.use(page)
                undo.res.release(0, per_page, undo.s_free)
                backlog -= per_page
                pool.unfix(page)


def run(trace_dir: Path, cfg: DemoConfig | None = None) -> list[float]:
    """Run the workload recording into ``trace_dir``; return client commit times (monotonic s)."""
    gp.enable(trace_dir, interval=0.25, buffer_events=1 << 16)
    try:
        return run_workload(cfg or DemoConfig())
    finally:
        gp.disable()


def run_workload(cfg: DemoConfig) -> list[float]:
    """Run the workload under whatever recording is on; return client commit times."""
    disk = Disk(cfg.disk_read)
    pool = BufferPool(cfg.pool_pages, disk)
    undo = UndoLog(cfg.records_per_undo_page)
    stop = threading.Event()
    done: list[float] = []
    threads = [
        threading.Thread(target=_client, args=(n, cfg, pool, undo, stop, done), name=f"client-{n}")
        for n in range(cfg.clients)
    ]
    threads.append(threading.Thread(target=_purge, args=(cfg, pool, undo, stop), name="purge"))
    threads.append(
        threading.Thread(target=_long_transaction, args=(cfg, undo, stop), name="long-txn")
    )
    for th in threads:
        th.start()
    time.sleep(cfg.seconds)
    stop.set()
    for th in threads:
        th.join()
    return done
