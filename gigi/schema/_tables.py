"""Trace format v1: the tables, their columns and the kind codes.

This module is the one place that knows column names and types; every other part of gigi
imports them from ``gigi.schema``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa

VERSION = "1"

# Schema metadata keys of trace format v1.
META_VERSION = b"gigi.version"
META_TABLE = b"gigi.table"
META_HOST = b"gigi.host"
META_PID = b"gigi.pid"
META_CLOCK = b"gigi.clock"
META_SAMPLE_EVERY = b"gigi.sample_every"
META_WRITER = b"gigi.writer"
# Not in the spec's list, but a writer's own key (writers may add their own): the id of the
# trace, shared by all segments that one recording session writes.
META_TRACE_ID = b"gigi.trace_id"

SEGMENT_SUFFIXES = (".arrows", ".arrow", ".feather", ".parquet")

# Instants (events.ts, ts + dur, a task's start and end) lie strictly between -2^62 and 2^62 ns,
# about 146 years either side of the clock's zero: the difference of any two, and an instant
# plus one, then fit int64, and the views compute hold and wait lengths and the trace's end so.
INSTANT_LIMIT = 2**62
# The amounts of a trace's events add up to less than this, and so do the events its
# resources say were dropped: any sum of them, running sums of amounts in and out, and a sum
# plus a count of events then fit int64, as the views compute them.
TOTAL_LIMIT = 2**62


class Kind(enum.IntEnum):
    """The four events of a resource's life."""

    WAIT = 0
    ACQUIRE = 1
    USE = 2
    RELEASE = 3


KIND_NAMES = tuple(k.name for k in Kind)


class Type(enum.Enum):
    """How a reader accepts a column: the logical type, before normalization."""

    INT64 = "int64"  # any integer type whose values fit int64
    INT32 = "int32"  # any integer type whose values fit int32
    KIND = "kind"  # an integer code 0-3, or a kind name (utf8 or dictionary of utf8)
    STRING = "utf8"  # utf8, large utf8 or dictionary of utf8
    BOOL = "bool"


@dataclass(frozen=True)
class Column:
    name: str
    type: Type
    required: bool = False
    nullable: bool = True
    # Value filled in when an optional column is absent (None: null).
    default: object = None
    # Values a string column may take; None: any.
    choices: tuple[str, ...] | None = None
    # Least and greatest value an integer column may take (None: what its type holds), and
    # the rule as a message says it.
    low: int | None = None
    high: int | None = None
    rule: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def arrow_schema(self) -> pa.Schema:
        """The normalized schema: what ingest writes and every query reads."""
        return pa.schema(
            [pa.field(c.name, ARROW_TYPE[c.type], nullable=c.nullable) for c in self.columns],
            metadata={META_VERSION: VERSION.encode(), META_TABLE: self.name.encode()},
        )


ARROW_TYPE = {
    Type.INT64: pa.int64(),
    Type.INT32: pa.int32(),
    Type.KIND: pa.uint8(),
    Type.STRING: pa.string(),
    Type.BOOL: pa.bool_(),
}

_INSTANT = {
    "low": -INSTANT_LIMIT + 1,
    "high": INSTANT_LIMIT - 1,
    "rule": "ns strictly between -2^62 and 2^62",
}

EVENTS = Table(
    "events",
    (
        Column("ts", Type.INT64, required=True, nullable=False, **_INSTANT),
        Column("kind", Type.KIND, required=True, nullable=False),
        Column("resource", Type.STRING, required=True, nullable=False),
        Column("task", Type.INT64, required=True, nullable=False),
        Column("thread", Type.INT64, required=True, nullable=False),
        Column("amount", Type.INT64, nullable=False, default=1),
        Column("dur", Type.INT64, default=0),
        Column("object", Type.INT64, nullable=False, default=0),
        Column("site", Type.INT32),
        Column("value", Type.INT64),
    ),
)

TASKS = Table(
    "tasks",
    (
        Column("task", Type.INT64, required=True, nullable=False),
        Column("name", Type.STRING),
        Column("kind", Type.STRING, choices=("foreground", "background")),
        Column("parent", Type.INT64),
        Column("start", Type.INT64, **_INSTANT),
        Column("end", Type.INT64, **_INSTANT),
    ),
)

RESOURCES = Table(
    "resources",
    (
        Column("resource", Type.STRING, required=True, nullable=False),
        Column("capacity", Type.INT64),
        Column("unit", Type.STRING),
        Column("sharing", Type.STRING, choices=("exclusive", "shared", "pool", "log")),
        # Writer's own columns (allowed by the spec): events the writer lost for this resource,
        # and the 1-in-N sampling it applied to it.
        Column("dropped", Type.INT64, nullable=False, default=0, low=0, rule="events >= 0"),
        Column(
            "sample_every",
            Type.INT64,
            nullable=False,
            default=1,
            low=1,
            rule="N >= 1 (one event kept in N)",
        ),
    ),
)

SITES = Table(
    "sites",
    (
        Column("site", Type.INT32, required=True, nullable=False),
        Column("file", Type.STRING),
        Column("line", Type.INT32),
        Column("function", Type.STRING),
        Column("kind", Type.KIND),
        Column("resource", Type.STRING),
        Column("origin", Type.STRING, choices=("llm", "heuristic", "manual", "adapter")),
        Column("verified", Type.BOOL),
    ),
)

TABLES = {t.name: t for t in (EVENTS, TASKS, RESOURCES, SITES)}

# What the store adds to `events`: the event's position in the trace's total order (by `ts`,
# ties kept in segment order). Every derived view orders by it.
STORE_EVENTS_SCHEMA = EVENTS.arrow_schema.append(pa.field("seq", pa.int64(), nullable=False))

# Pairing of ACQUIRE to RELEASE, written by ingest beside `events` (see queries/views/holds.sql).
HOLD_PAIRS_SCHEMA = pa.schema(
    [
        pa.field("acquire_seq", pa.int64()),  # null: the hold began before the trace
        pa.field("release_seq", pa.int64()),  # null: still open at the end
        pa.field("amount", pa.int64(), nullable=False),
    ]
)

# Perf samples, written by ``ingest --perf`` beside the events (see gigi/ingest/_perf.py and
# queries/views/samples.sql, which documents each column).
SAMPLES_SCHEMA = pa.schema(
    [
        pa.field("sample", pa.int64(), nullable=False),  # 0-based, in the perf file's order
        pa.field("ts", pa.int64(), nullable=False),  # ns on the trace's clock
        pa.field("thread", pa.int64(), nullable=False),  # OS thread id (perf's tid)
        pa.field("pid", pa.int64()),  # process id; null when perf script did not print it
        pa.field("comm", pa.string()),  # the thread's command name
        pa.field("cpu", pa.int32()),  # null when not recorded
        pa.field("event", pa.string()),  # perf event: cpu-clock, cycles, instructions:u
        pa.field("period", pa.int64()),  # events the sample stands for (cpu-clock: ns)
        pa.field("leaf", pa.string(), nullable=False),  # innermost function
        pa.field("leaf_dso", pa.string()),  # binary or library of the innermost function
        pa.field("stack", pa.list_(pa.string()), nullable=False),  # functions, innermost first
        pa.field("folded", pa.string(), nullable=False),  # outermost first, joined by ';'
        pa.field("line", pa.int64(), nullable=False),  # 1-based line of the sample in the file
    ],
    metadata={META_TABLE: b"samples"},
)
