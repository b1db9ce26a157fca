"""Trace directory to store: ``ingest(trace_dir, store)``, and finding traces in a store."""

from gigi.ingest._locate import StoreEntry, locate
from gigi.ingest._segments import Segment, list_segments, open_segment
from gigi.ingest._store import MANIFEST, Manifest, SegmentInfo, ingest

__all__ = [
    "MANIFEST",
    "Manifest",
    "Segment",
    "SegmentInfo",
    "StoreEntry",
    "ingest",
    "list_segments",
    "locate",
    "open_segment",
]
