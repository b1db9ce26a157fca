"""Finding a trace to query: a store entry, a store of one or more traces, or a raw trace."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gigi.errors import IngestError, did_you_mean
from gigi.ingest._segments import list_segments
from gigi.ingest._store import MANIFEST, Manifest, ingest


@dataclass(frozen=True)
class StoreEntry:
    """One ingested trace: its directory in a store and its manifest."""

    path: Path
    manifest: Manifest


def store_entries(store: Path) -> list[Path]:
    return sorted(
        p.parent for p in store.glob(f"*/{MANIFEST}") if not p.parent.name.startswith(".")
    )


def locate_entry(path: Path, trace: str | None = None) -> Path:
    """The entry directory of one ingested trace: ``path`` itself, or the store's only (or
    named) trace."""
    if (path / MANIFEST).is_file():
        return path
    entries = store_entries(path) if path.is_dir() else []
    if not entries:
        raise IngestError(f"{path}: not a gigi store (no manifest.json in it or under it)")
    names = [e.name for e in entries]
    if trace is None:
        if len(entries) == 1:
            return entries[0]
        raise IngestError(
            f"{path}: store holds {len(entries)} traces, pick one with --trace: {', '.join(names)}"
        )
    if trace not in names:
        raise IngestError(f"{path}: no trace {trace!r} in this store{did_you_mean(trace, names)}")
    return path / trace


def locate(target: str | os.PathLike, trace: str | None = None) -> StoreEntry:
    """Resolve ``target`` to one ingested trace.

    ``target`` is a store entry (holds ``manifest.json``), a store (pick the trace with
    ``trace`` when it holds several) or a raw trace directory, which is ingested into a
    temporary store that lives as long as the process (once while its segments stay as they
    are: a process that diagnoses a trace and then queries it ingests it once).
    """
    path = Path(target)
    if not path.exists():
        raise IngestError(f"{path}: no such store or trace directory")
    if (path / MANIFEST).is_file() or (path.is_dir() and store_entries(path)):
        entry = locate_entry(path, trace)
        return StoreEntry(entry, Manifest.load(entry / MANIFEST))
    if path.is_dir() and list_segments(path):
        return _ingested(path)
    raise IngestError(
        f"{path}: neither a gigi store nor a trace directory (no manifest.json, no segments)"
    )


# raw trace directory and its segments' (name, size, mtime) -> its temporary store's entry
_INGESTED: dict[tuple, StoreEntry] = {}


def _ingested(path: Path) -> StoreEntry:
    segments = tuple(
        (p.name, (st := p.stat()).st_size, st.st_mtime_ns) for p in list_segments(path)
    )
    key = (str(path.resolve()), segments)
    entry = _INGESTED.get(key)
    if entry is not None and (entry.path / MANIFEST).is_file():
        return entry
    tmp = Path(tempfile.mkdtemp(prefix="gigi-store-"))
    atexit.register(shutil.rmtree, tmp, True)
    manifest = ingest(path, tmp)
    entry = _INGESTED[key] = StoreEntry(tmp / manifest.trace_id, manifest)
    return entry
