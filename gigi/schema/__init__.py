"""Trace format v1: schemas, kind codes, validation and normalization."""

from gigi.schema._normalize import check_schema, normalize_batch, table_schema
from gigi.schema._tables import (
    EVENTS,
    HOLD_PAIRS_SCHEMA,
    KIND_NAMES,
    META_CLOCK,
    META_HOST,
    META_PID,
    META_SAMPLE_EVERY,
    META_TABLE,
    META_TRACE_ID,
    META_VERSION,
    META_WRITER,
    RESOURCES,
    SEGMENT_SUFFIXES,
    SITES,
    STORE_EVENTS_SCHEMA,
    TABLES,
    TASKS,
    VERSION,
    Column,
    Kind,
    Table,
    Type,
)

__all__ = [
    "EVENTS", "HOLD_PAIRS_SCHEMA", "KIND_NAMES", "META_CLOCK", "META_HOST", "META_PID",
    "META_SAMPLE_EVERY", "META_TABLE", "META_TRACE_ID", "META_VERSION", "META_WRITER",
    "RESOURCES", "SEGMENT_SUFFIXES", "SITES", "STORE_EVENTS_SCHEMA", "TABLES", "TASKS",
    "VERSION", "Column", "Kind", "Table", "Type", "check_schema", "normalize_batch",
    "table_schema",
]
