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


def locate(target: str | os.PathLike, trace: str | None = None) -> StoreEntry:
    """Resolve ``target`` to one ingested trace.

    ``target`` is a store entry (holds ``manifest.json``), a store (pick the trace with
    ``trace`` when it holds several) or a raw trace directory, which is ingested into a
    temporary store that lives as long as the process.
    """
    path = Path(target)
    if not path.exists():
        raise IngestError(f"{path}: no such store or trace directory")
    if (path / MANIFEST).is_file():
        return StoreEntry(path, Manifest.load(path / MANIFEST))
    entries = store_entries(path) if path.is_dir() else []
    if entries:
        names = [e.name for e in entries]
        if trace is None:
            if len(entries) == 1:
                return StoreEntry(entries[0], Manifest.load(entries[0] / MANIFEST))
            raise IngestError(
                f"{path}: store holds {len(entries)} traces, pick one with "
                f"--trace: {', '.join(names)}"
            )
        if trace not in names:
            raise IngestError(
                f"{path}: no trace {trace!r} in this store{did_you_mean(trace, names)}"
            )
        entry = path / trace
        return StoreEntry(entry, Manifest.load(entry / MANIFEST))
    if path.is_dir() and list_segments(path):
        tmp = Path(tempfile.mkdtemp(prefix="gigi-store-"))
        atexit.register(shutil.rmtree, tmp, True)
        manifest = ingest(path, tmp)
        return StoreEntry(tmp / manifest.trace_id, manifest)
    raise IngestError(
        f"{path}: neither a gigi store nor a trace directory (no manifest.json, no segments)"
    )
