"""Perf samples: the text of ``perf script`` becomes a ``samples`` table beside a trace's events.

What ``perf script`` prints, and what this reads of it::

    burn 18668/18668 [000] 14929.509834:     250000 cpu-clock:
    \t            115e compact_everything+0x15 (/srv/app/burn)
    \t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)
    <blank line>

A sample starts with a header line: comm (may hold spaces), tid or pid/tid, [cpu], the time in
seconds (µs or, with ``--ns``, ns digits), the period, the event name and a colon. Without
``-g`` the header line ends with the one frame (ip, symbol+offset, (dso)); with ``-g`` each
frame is a line of its own starting with a tab, innermost first, and a blank line ends the
sample. ``-F`` may leave out comm, pid, cpu, period, event, sym, symoff or dso; time and tid
(or pid) are needed to place a sample. A single number before the time is perf's default
field, the tid. Lines perf adds for other fields (srcline, tracepoint payloads) are skipped;
``PERF_RECORD_*`` side-band lines are not samples; ``#`` lines are perf's header, read for the
clock it names.

Clock. Trace timestamps are CLOCK_MONOTONIC ns. ``perf record -k mono`` (``--clockid
monotonic``) stamps samples with the same clock; without it perf uses its own clock (the
kernel's sched_clock), which on most x86 machines runs close to CLOCK_MONOTONIC but is not it.
``offset_ns`` is added to every perf time; ``perf script --header`` lets ingest say which
clock perf used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gigi.errors import IngestError
from gigi.schema import SAMPLES_SCHEMA

SAMPLES_FILE = "samples.parquet"
BATCH_ROWS = 1 << 16

# pid[/tid], [cpu], time: the first such run of tokens on the line (what comes before it is
# comm, which may hold spaces and digits), then period and event (together optional), then
# whatever follows on the line.
_HEADER = re.compile(
    r"(?<!\S)(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+"
    r"(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d+):"
    r"(?:\s+(?:(?P<period>\d+)\s+)?(?P<event>\S+?):(?=\s|$))?"
    r"\s*(?P<rest>.*?)\s*$"
)
_GROUPS = ("pid", "tid", "cpu", "sec", "frac", "period", "event", "rest")
_CLOCKID = re.compile(r"^#\s*clockid:\s*(\S+)")
UNKNOWN = "[unknown]"


@dataclass
class PerfSummary:
    """What one perf file held; kept in the manifest's ``perf``."""

    file: str
    samples: int = 0
    lines: int = 0
    skipped: int = 0  # side-band (PERF_RECORD_*) records that are not samples
    events: dict[str, int] = field(default_factory=dict)  # samples per perf event
    threads: int = 0
    first_ts: int | None = None  # ns on the trace's clock, offset applied
    last_ts: int | None = None
    offset_ns: int = 0
    # "monotonic" when perf's header names CLOCK_MONOTONIC, "perf" when the header shows no
    # clock id (perf's own clock), another clock's name, or "unknown" without a header
    clock: str = "unknown"
    in_trace: int = 0  # samples within the trace's time range
    on_trace_threads: int = 0  # samples on threads that have events in the trace


def _error(path: str, line_no: int, what: str, line: str) -> IngestError:
    shown = line.rstrip("\n")
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return IngestError(f"{path}:{line_no}: {what}: {shown!r}")


def _function(sym: str | None, dso: str | None) -> str:
    """The frame's function: the symbol without its offset, else ``[dso name]``."""
    if sym:
        cut = sym.rfind("+0x")
        if cut > 0:
            sym = sym[:cut]
        if sym and sym != UNKNOWN:
            return sym
    if dso and dso != UNKNOWN:
        return f"[{os.path.basename(dso)}]"
    return UNKNOWN


def _frame(text: str) -> tuple[str, str | None] | None:
    """(function, dso) of a frame's text (``ip [symbol[+0xoff]] [(dso)]``), or None when it
    is no frame."""
    parts = text.split(None, 1)
    if not parts:
        return None
    try:
        int(parts[0], 16)
    except ValueError:
        return None
    if len(parts) == 1:
        return UNKNOWN, None
    rest = parts[1].rstrip()
    sym, dso = rest, None
    if rest.endswith(")"):
        cut = rest.rfind(" (")
        if cut >= 0 and "(" not in rest[cut + 2 : -1]:
            sym, dso = rest[:cut].rstrip(), rest[cut + 2 : -1]
        elif rest.startswith("(") and "(" not in rest[1:-1]:
            sym, dso = "", rest[1:-1]
    if dso == "inlined":  # perf --inline marks inlined frames so
        dso = None
    return _function(sym, dso), dso


class _Builder:
    """The samples being parsed, as rows, handed out as record batches."""

    def __init__(self, offset_ns: int) -> None:
        self.offset_ns = offset_ns
        self.count = 0
        self.rows: list[tuple] = []

    def add(
        self, head: tuple, comm: str | None, frames: list[tuple[str, str | None]], line_no: int
    ) -> None:
        pid, tid, cpu, sec, frac, period, event, _ = head
        ns = int(sec) * 1_000_000_000 + int((frac + "000000000")[:9]) + self.offset_ns
        stack = [f for f, _ in frames] or [UNKNOWN]
        self.rows.append(
            (
                self.count,
                ns,
                int(tid if tid is not None else pid),
                int(pid) if tid is not None else None,
                comm,
                int(cpu) if cpu is not None else None,
                event,
                int(period) if period is not None else None,
                stack[0],
                frames[0][1] if frames else None,
                stack,
                ";".join(reversed(stack)),
                line_no,
            )
        )
        self.count += 1

    def __len__(self) -> int:
        return len(self.rows)

    def batch(self) -> pa.RecordBatch:
        columns = list(zip(*self.rows, strict=True)) or [[] for _ in SAMPLES_SCHEMA.names]
        self.rows = []
        return pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, SAMPLES_SCHEMA, strict=True)],
            schema=SAMPLES_SCHEMA,
        )


def parse_perf_script(
    path: str | os.PathLike, *, offset_ns: int = 0, summary: PerfSummary | None = None
) -> Iterator[pa.RecordBatch]:
    """Yield the samples of a ``perf script`` text file as batches of ``SAMPLES_SCHEMA``.

    A line that is neither a sample header, a frame, a continuation of a sample, a comment
    nor blank raises ``IngestError`` naming the file and the line. ``summary`` (when given)
    is filled in on the way.
    """
    path = Path(path)
    name = str(path)
    s = summary if summary is not None else PerfSummary(path.name)
    s.offset_ns = offset_ns
    out = _Builder(offset_ns)
    head: tuple | None = None  # the sample being read: its header's fields
    comm: str | None = None
    head_line = 0
    frames: list[tuple[str, str | None]] = []
    header_frame: tuple[str, str | None] | None = None
    saw_header = False
    threads: set[str] = set()
    events: dict[str | None, int] = {}

    def finish() -> None:
        nonlocal head
        if head is None:
            return
        out.add(head, comm, frames or ([header_frame] if header_frame else []), head_line)
        events[head[6]] = events.get(head[6], 0) + 1
        head = None

    try:
        f = path.open("r", encoding="utf-8", errors="replace", newline=None)
    except OSError as e:
        raise IngestError(f"{path}: cannot read ({e.strerror or e})") from None
    line_no = 0
    search = _HEADER.search
    with f:
        for line_no, line in enumerate(f, 1):
            if line[:1] == "\t":  # a frame of the sample's call stack
                if head is None:
                    raise _error(name, line_no, "a stack frame outside any sample", line)
                fr = _frame(line)
                if fr is None:
                    raise _error(name, line_no, "not a stack frame (ip symbol (dso))", line)
                frames.append(fr)
                continue
            if line.isspace() or not line:
                finish()
                continue
            if line[:1] == "#":
                saw_header = True
                if m := _CLOCKID.match(line):
                    s.clock = m.group(1)
                continue
            m = search(line)
            if m is not None:
                finish()
                fields = m.group(*_GROUPS)
                event, rest = fields[6], fields[7]
                if rest.startswith("PERF_RECORD_") or (event or "").startswith("PERF_RECORD_"):
                    s.skipped += 1
                    continue
                head, head_line, frames = fields, line_no, []
                comm = line[: m.start()].strip() or None
                header_frame = _frame(rest) if rest else None
                threads.add(fields[1] or fields[0])
                if len(out) >= BATCH_ROWS:
                    yield out.batch()
                continue
            if head is not None and line[:1].isspace():
                continue  # srcline, inline or payload lines perf adds under a sample
            raise _error(
                name,
                line_no,
                "not a perf script sample line (comm tid time: period event: ...)",
                line,
            )
    finish()
    s.lines = line_no
    s.samples = out.count
    s.events = {(ev or "samples"): n for ev, n in sorted(events.items(), key=lambda kv: -kv[1])}
    s.threads = len(threads)
    if saw_header and s.clock == "unknown":
        s.clock = "perf"  # perf's header names no clock id: its own clock
    if len(out) or out.count == 0:
        yield out.batch()


def write_samples(
    perf_file: str | os.PathLike,
    out: Path,
    *,
    offset_ns: int = 0,
) -> PerfSummary:
    """Parse ``perf_file`` into the Parquet file ``out``; return what it held."""
    summary = PerfSummary(Path(perf_file).name)
    lo = hi = None
    with pq.ParquetWriter(out, SAMPLES_SCHEMA) as writer:
        for batch in parse_perf_script(perf_file, offset_ns=offset_ns, summary=summary):
            if batch.num_rows:
                ts = batch.column("ts")
                bmin, bmax = pc.min(ts).as_py(), pc.max(ts).as_py()
                lo = bmin if lo is None else min(lo, bmin)
                hi = bmax if hi is None else max(hi, bmax)
            writer.write_batch(batch)
    summary.first_ts, summary.last_ts = lo, hi
    return summary


def _trace_threads(events_dir: Path) -> set[int]:
    """The OS threads that have events in an ingested trace (read column by column)."""
    threads: set[int] = set()
    for part in sorted(events_dir.glob("*.parquet")):
        pf = pq.ParquetFile(part)
        for batch in pf.iter_batches(columns=["thread"], batch_size=1 << 20):
            threads.update(pc.unique(batch.column(0)).to_pylist())
    return threads


def attach_samples(
    entry_dir: Path,
    perf_file: str | os.PathLike,
    *,
    start: int | None,
    end: int | None,
    offset_ns: int = 0,
) -> tuple[PerfSummary, list[str]]:
    """Write ``entry_dir/samples.parquet`` from ``perf_file`` (under a temporary name, then
    renamed); return what it held and notes on how well it lines up with the trace, whose
    events span ``start``..``end`` ns."""
    tmp = entry_dir / f".{SAMPLES_FILE}.tmp"
    try:
        summary = write_samples(perf_file, tmp, offset_ns=offset_ns)
        notes = []
        if summary.samples:
            table = pq.read_table(tmp, columns=["ts", "thread"])
            ts = table.column("ts")
            if start is not None and end is not None:
                inside = pc.and_(pc.greater_equal(ts, start), pc.less_equal(ts, end))
                summary.in_trace = pc.sum(inside.cast("int64")).as_py() or 0
            threads = pa.array(sorted(_trace_threads(entry_dir / "events")), pa.int64())
            on = pc.is_in(table.column("thread"), value_set=threads)
            summary.on_trace_threads = pc.sum(on.cast("int64")).as_py() or 0
            notes = _notes(summary)
        os.replace(tmp, entry_dir / SAMPLES_FILE)
        return summary, notes
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _notes(s: PerfSummary) -> list[str]:
    """Warnings for samples that will not line up with the trace's events."""
    notes = []
    if s.clock not in ("monotonic", "unknown"):
        clock = "perf's own clock" if s.clock == "perf" else f"clock {s.clock}"
        notes.append(
            f"{s.file}: perf recorded with {clock}, not CLOCK_MONOTONIC like the trace; "
            "record with `perf record -k mono`, or give --perf-offset"
        )
    if s.in_trace == 0:
        notes.append(
            f"{s.file}: none of the {s.samples:,} samples falls within the trace's time range; "
            "was perf recorded with -k mono at the same time (else --perf-offset NS)?"
        )
    if s.on_trace_threads == 0:
        notes.append(
            f"{s.file}: no sample is on a thread that has events in the trace "
            "(perf script prints thread ids with its default fields or -F tid)"
        )
    return notes
