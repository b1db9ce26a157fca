"""Trace directory to store: ``ingest(trace_dir, store)``, perf samples beside it
(``ingest(..., perf=)``, ``ingest_perf``), OpenTelemetry spans (``ingest_otlp``), and finding
traces in a store."""

from gigi.ingest._locate import StoreEntry, locate
from gigi.ingest._otlp import OtlpSummary, ingest_otlp
from gigi.ingest._perf import PerfSummary, parse_perf_script
from gigi.ingest._segments import Segment, list_segments, open_segment
from gigi.ingest._store import MANIFEST, Manifest, SegmentInfo, ingest, ingest_perf

__all__ = [
    "MANIFEST",
    "Manifest",
    "OtlpSummary",
    "PerfSummary",
    "Segment",
    "SegmentInfo",
    "StoreEntry",
    "ingest",
    "ingest_otlp",
    "ingest_perf",
    "list_segments",
    "locate",
    "open_segment",
    "parse_perf_script",
]
