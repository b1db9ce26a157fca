"""Recording state: the per-thread rings, the background writer and the segments it writes.

Each thread owns one ring of fixed-width records (single producer); the writer thread is the
single consumer. The producer publishes a record by advancing ``head`` after packing it; the
writer copies ``[tail, head)`` and then advances ``tail``. Neither side ever blocks the other.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

import gigi
from gigi.errors import ProbeError
from gigi.probes._accel import RING_SLOTS, RingBase, fastpath
from gigi.probes._records import (
    FIELDS,
    HAS_VALUE,
    NULL_DUR,
    RECORD,
    RECORD_SIZE,
    RID_SHIFT,
)
from gigi.probes._segments import write_events, write_rows
from gigi.probes._tasks import TaskInfo, current_task, new_task_id
from gigi.schema import (
    META_CLOCK,
    META_HOST,
    META_PID,
    META_SAMPLE_EVERY,
    META_TABLE,
    META_TRACE_ID,
    META_VERSION,
    META_WRITER,
    RESOURCES,
    SITES,
    TASKS,
    VERSION,
)


@dataclass
class ProbeConfig:
    """How the Python probes record. Every field has a default; see ``gigi.probes.enable``."""

    # Directory the segments go to; created if missing. Anything the traced program emits
    # (resource names, task names, site files) ends up in files there.
    trace_dir: Path
    # Seconds between flushes of the rings to a new events segment. Shorter: less lost on a
    # crash, more (smaller) segments.
    interval: float = 0.5
    # Records each thread's ring holds (rounded up to a power of two); 64 bytes each, so the
    # default costs 4 MiB per thread that emits events.
    buffer_events: int = 65536
    # When a ring is full: "drop" counts the event as lost and returns at once (the program is
    # never blocked); "block" waits for the writer to make room.
    policy: Literal["drop", "block"] = "drop"
    # Records (64 bytes each) that threads with a full ring may hand to the writer while it
    # catches up, over all threads, before events are dropped or (policy "block") wait.
    backlog_events: int = 1 << 18
    # Names the trace in every segment; ingest uses it as the trace's id in the store.
    trace_id: str | None = None

    def __post_init__(self) -> None:
        self.trace_dir = Path(self.trace_dir)
        if self.policy not in ("drop", "block"):
            raise ProbeError(f"policy must be 'drop' or 'block', got {self.policy!r}")
        if self.interval <= 0:
            raise ProbeError(f"interval must be > 0 seconds, got {self.interval}")
        if self.buffer_events < 1:
            raise ProbeError(f"buffer_events must be >= 1, got {self.buffer_events}")
        if self.backlog_events < 0:
            raise ProbeError(f"backlog_events must be >= 0, got {self.backlog_events}")


class Ring(RingBase):
    __slots__ = (
        *RING_SLOTS,
        "drops",
        "thread",
        "implicit_task",
        "open_waits",
        "alive",
        "take_lock",
    )

    def __init__(self, records: int, thread: int, implicit_task: int) -> None:
        self.cap = 0
        self.resize(records)
        self.thread = thread
        self.alive = threading.current_thread()
        self.take_lock = threading.Lock()
        self.reset(implicit_task)

    def resize(self, records: int) -> None:
        """Hold at least ``records`` records (a power of two); only while nobody writes."""
        cap = (1 << max(records - 1, 1).bit_length()) * RECORD_SIZE
        if cap != self.cap:
            self.cap = cap
            self.mask = cap - 1
            self.buf = bytearray(cap)

    def reset(self, implicit_task: int) -> None:
        """Empty the ring for a new recording session."""
        self.head = 0
        self.tail = 0
        self.limit = self.cap  # head may grow up to tail + cap: the producer's only check
        self.drops: dict[int, int] = {}  # code -> events lost; written by the owner only
        self.implicit_task = implicit_task
        self.open_waits: list = []

    def take(self) -> bytes:
        """Copy out the published records and free their space.

        The writer calls it, and so does the owner thread when its ring is full (to hand the
        records to the writer's backlog); the lock keeps the two apart.
        """
        with self.take_lock:
            return self._take()

    def _take(self) -> bytes:
        t, h = self.tail, self.head
        if h == t:
            return b""
        a, b = t & self.mask, h & self.mask
        view = memoryview(self.buf)
        if a < b:
            chunk = bytes(view[a:b])
        else:
            chunk = bytes(view[a:]) + bytes(view[:b])
        self.tail = h
        self.limit = h + self.cap
        return chunk


# The calling thread's ring, kept across recording sessions (a new session adopts it).
local = threading.local()
_rec: Recorder | None = None
_all_rings: list[Ring] = []  # every live thread's ring, for adoption by the next session
_all_rings_lock = threading.Lock()


class Recorder:
    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.trace_id = config.trace_id or f"{self.host}-{self.pid}-{time.time_ns():x}"
        self.rings: list[Ring] = []
        self.lock = threading.Lock()
        self.tasks: dict[int, TaskInfo] = {}  # every task of this process, by id
        self.dirty_tasks: set[int] = set()  # tasks to (re)write at the next flush
        self.sites: list[dict] = []
        self.seq = 0
        self.wake = threading.Event()
        self.stopping = False
        self.write_error: BaseException | None = None
        self.written: dict[int, int] = {}  # code -> events written, for accounting
        self.retired_drops: dict[int, int] = {}  # code -> events lost by finished threads
        self.snapshot_key: tuple | None = None
        self.backlog: list[tuple[Ring, bytes]] = []  # full rings' records waiting for the writer
        self.backlog_bytes = 0  # what the last resources/sites snapshot held
        try:
            config.trace_dir.mkdir(parents=True, exist_ok=True)
            probe = config.trace_dir / f".gigi-write-test-{self.pid}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise ProbeError(
                f"{config.trace_dir}: cannot write the trace there ({e.strerror or e})"
            ) from None
        self.writer = threading.Thread(target=self._run, name="gigi-writer", daemon=True)
        with _all_rings_lock:
            _all_rings[:] = [r for r in _all_rings if r.alive.is_alive()]
            adopted = list(_all_rings)
        for ring in adopted:  # threads that recorded in an earlier session
            ring.resize(config.buffer_events)
            task = new_task_id()
            ring.reset(task)
            self.task_started(TaskInfo(task, ring.alive.name, None, None, time.monotonic_ns()))
            self.rings.append(ring)

    # --- producer side (called from traced threads) --------------------------------------
    def new_ring(self) -> Ring:
        th = threading.current_thread()
        task = new_task_id()
        ring = Ring(self.config.buffer_events, threading.get_native_id(), task)
        self.task_started(TaskInfo(task, th.name, None, None, time.monotonic_ns()))
        with self.lock:
            self.rings.append(ring)
        with _all_rings_lock:
            _all_rings.append(ring)
        local.ring = ring
        if fastpath is not None:
            fastpath.bind(ring)
        return ring

    def task_started(self, info: TaskInfo) -> None:
        with self.lock:
            self.tasks[info.task] = info
            self.dirty_tasks.add(info.task)

    def task_ended(self, task: int, end: int) -> None:
        with self.lock:
            info = self.tasks.get(task)
            if info is not None:
                info.end = end
                self.dirty_tasks.add(task)

    def full(self, ring: Ring, code, amount, obj, site, value, dur) -> None:
        if not self.wake.is_set():
            self.wake.set()
        if self._to_backlog(ring):
            _put(ring, time.monotonic_ns(), code, current_task.get(), amount, obj, site, value, dur)
            return
        if self.config.policy == "block" and not self.stopping:
            while ring.head >= ring.limit and self.writer.is_alive():
                self.wake.set()
                time.sleep(0.0002)
            if ring.head < ring.limit:
                _put(
                    ring,
                    time.monotonic_ns(),
                    code,
                    current_task.get(),
                    amount,
                    obj,
                    site,
                    value,
                    dur,
                )
                return
        ring.drops[code] = ring.drops.get(code, 0) + 1

    def _to_backlog(self, ring: Ring) -> bool:
        """Move a full ring's records to the writer's backlog if the budget allows (owner side).

        The writer may be slow to get the GIL back from a busy thread; the backlog lets the
        thread go on recording meanwhile, within ``backlog_events``.
        """
        with self.lock:
            if self.backlog_bytes + ring.cap > self.config.backlog_events * RECORD_SIZE:
                return False
            self.backlog_bytes += ring.cap
        chunk = ring.take()
        with self.lock:
            self.backlog.append((ring, chunk))
            self.backlog_bytes += len(chunk) - ring.cap
        return ring.head < ring.limit

    # --- writer side ---------------------------------------------------------------------
    def start(self) -> None:
        self.writer.start()

    def _run(self) -> None:
        timeout = self.config.interval
        while not self.stopping:
            self.wake.wait(timeout)
            self.wake.clear()
            if self.stopping:
                break
            try:
                fill = self.flush()
            except BaseException as e:  # noqa: BLE001 - the traced program must go on
                self.write_error = e
                continue
            # Come back before the fullest ring can fill: aim to find it at most a quarter full.
            if fill > 0.25:
                timeout = max(timeout * 0.25 / fill, 0.005)
            else:
                timeout = min(timeout * 2, self.config.interval)

    def flush(self, final: bool = False) -> float:
        """Write out what the rings hold; return the fullest ring's fill (0-1) found."""
        with self.lock:
            rings = list(self.rings)
            backlog, self.backlog, self.backlog_bytes = self.backlog, [], 0
        parts = list(backlog)
        fill = 1.0 if backlog else 0.0
        for ring in rings:
            chunk = ring.take()
            fill = max(fill, len(chunk) / ring.cap)
            if final:
                chunk += _open_waits(ring)
            if chunk:
                parts.append((ring, chunk))
        with self.lock:
            keep = []
            for r in self.rings:
                if r.alive.is_alive() or r.head != r.tail or r.open_waits:
                    keep.append(r)
                else:  # a finished thread's ring: keep only its loss counts
                    for code, n in r.drops.items():
                        self.retired_drops[code] = self.retired_drops.get(code, 0) + n
            self.rings = keep
        if parts:
            try:
                self._write_events(parts)
            except OSError as e:  # disk full, directory gone: these records are lost, counted
                self.write_error = e
                records = np.frombuffer(b"".join(c for _, c in parts), np.int64)
                counts = np.bincount(records.reshape(-1, len(FIELDS))[:, 1] & ~HAS_VALUE)
                with self.lock:
                    for c in np.nonzero(counts)[0]:
                        self.retired_drops[int(c)] = self.retired_drops.get(int(c), 0) + int(
                            counts[c]
                        )
        try:
            self._write_tasks(final)
            self._write_snapshots()
        except OSError as e:
            self.write_error = e
        return fill

    def _meta(self, table: str, extra: dict | None = None) -> dict[bytes, bytes]:
        meta = {
            META_VERSION: VERSION.encode(),
            META_TABLE: table.encode(),
            META_HOST: self.host.encode(),
            META_PID: str(self.pid).encode(),
            META_CLOCK: b"monotonic",
            META_WRITER: f"gigi-python {gigi.__version__}".encode(),
            META_TRACE_ID: self.trace_id.encode(),
        }
        meta.update(extra or {})
        return meta

    def _write_events(self, parts: list[tuple[Ring, bytes]]) -> None:
        from gigi.probes._resource import declared

        infos = declared()
        sampled = {i.sample_every for i in infos}
        extra = {META_SAMPLE_EVERY: str(sampled.pop()).encode()} if len(sampled) == 1 else {}
        self.seq += 1
        counts = write_events(
            self.config.trace_dir / f"events-{self.pid}-{self.seq:06d}.arrows",
            self._meta("events", extra),
            [i.name for i in infos],
            [(ring.thread, ring.implicit_task, chunk) for ring, chunk in parts],
        )
        for c, n in counts.items():
            self.written[c] = self.written.get(c, 0) + n

    def _write_tasks(self, final: bool) -> None:
        with self.lock:
            rows = [self.tasks[t] for t in sorted(self.dirty_tasks)]
            self.dirty_tasks.clear()
            if final:
                # Threads' own tasks end with the process (or the thread).
                now = time.monotonic_ns()
                for ring in self.rings:
                    info = self.tasks.get(ring.implicit_task)
                    if info is not None and info.end is None:
                        info.end = now
                        rows.append(info)
        if not rows:
            return
        schema = TASKS.arrow_schema
        cols = {c: [getattr(r, c) for r in rows] for c in schema.names}
        self.seq += 1
        path = self.config.trace_dir / f"tasks-{self.pid}-{self.seq:06d}.arrows"
        write_rows(path, self._meta("tasks"), schema, cols)

    def drops(self) -> dict[int, int]:
        """Events lost so far, by code (rid << RID_SHIFT | kind)."""
        with self.lock:
            rings = list(self.rings)
            total = dict(self.retired_drops)
        for ring in rings:
            for code, n in list(ring.drops.items()):
                total[code] = total.get(code, 0) + n
        return total

    def _write_snapshots(self) -> None:
        """Rewrite this process's resources and sites tables (cumulative, replaced whole)."""
        from gigi.probes._resource import declared

        infos = declared()
        dropped = [0] * len(infos)
        for code, n in self.drops().items():
            dropped[code >> RID_SHIFT] += n
        with self.lock:
            sites = list(self.sites)
        key = (len(infos), tuple(dropped), len(sites))
        if key == self.snapshot_key:
            return
        self.snapshot_key = key
        write_rows(
            self.config.trace_dir / f"resources-{self.pid}.arrows",
            self._meta("resources"),
            RESOURCES.arrow_schema,
            {
                "resource": [i.name for i in infos],
                "capacity": [i.capacity for i in infos],
                "unit": [i.unit for i in infos],
                "sharing": [i.sharing for i in infos],
                "dropped": dropped,
                "sample_every": [i.sample_every for i in infos],
            },
        )
        if sites:
            write_rows(
                self.config.trace_dir / f"sites-{self.pid}.arrows",
                self._meta("sites"),
                SITES.arrow_schema,
                {c: [s.get(c) for s in sites] for c in SITES.arrow_schema.names},
            )

    def stop(self) -> None:
        """Stop the writer and flush everything, open waits (null dur) and open tasks included."""
        self.stopping = True
        self.wake.set()
        if self.writer.is_alive() and self.writer is not threading.current_thread():
            self.writer.join()
        self.flush(final=True)


def _put(ring: Ring, ts, code, task, amount, obj, site, value, dur) -> None:
    """Write one record at the ring's head (the caller checked there is room)."""
    coded, packed = with_value(code, value)
    RECORD.pack_into(
        ring.buf, ring.head & ring.mask, ts, coded, task, amount, obj, site, packed, dur
    )
    ring.head += RECORD_SIZE


def with_value(code: int, value: int | None) -> tuple[int, int]:
    """The record's code and value field for an optional ``value``."""
    return (code, 0) if value is None else (code | HAS_VALUE, value)


def _open_waits(ring: Ring) -> bytes:
    out = bytearray()
    for w in list(ring.open_waits):
        w.ring = None
        code, value = with_value(w.code, w.value)
        out += RECORD.pack(w.ts, code, w.task, w.amount, w.object, w.site, value, NULL_DUR)
    ring.open_waits.clear()
    return bytes(out)


# --- module-level entry points the hot path calls -------------------------------------------
def new_ring() -> Ring:
    rec = _rec
    if rec is None:
        raise ProbeError("gigi probes are not recording")  # unreachable while methods are off
    return rec.new_ring()


def full(ring: Ring, code, amount, obj, site, value, dur) -> None:
    rec = _rec
    if rec is not None:
        rec.full(ring, code, amount, obj, site, value, dur)


def emit(ts, code, task, amount, obj, site, value, dur) -> None:
    """Write one record into the calling thread's ring (the slow, general path)."""
    rec = _rec
    if rec is None:
        return
    try:
        r = local.ring
    except AttributeError:
        r = rec.new_ring()
    if r.head < r.limit:
        _put(r, ts, code, task, amount, obj, site, value, dur)
    else:
        rec.full(r, code, amount, obj, site, value, dur)


@dataclass
class Stats:
    """What a recording session has done so far, by resource name."""

    written: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    # The last error the writer met (its records are counted in dropped), or None.
    write_error: str | None = None
