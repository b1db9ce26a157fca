"""The scanner's precision and recall per kind and per stage, and its speed.

    python bench/scan_eval.py [--no-sqlite]

On the labeled corpus (tests/scan_corpus) and on SQLite's page cache, pager and WAL (fetched
from Debian's source packages by tests/sqlite/fetch.py; labels in tests/sqlite/labels.json):
per kind, what the offline recall proposed and what passed static verification, with
precision and recall against the labels. Then the whole of SQLite's src/ scanned offline:
lines, files, wall time, lines per second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests" / "sqlite"))

from fetch import SUBSET, link_files, prepare, sqlite_tree  # noqa: E402

from gigi.scan import scan  # noqa: E402
from gigi.scan._labels import evaluate, load_labels  # noqa: E402


def table(name: str, ev: dict) -> None:
    print(f"\n{name}")
    print(
        f"{'kind':8s} {'stage':9s} {'tp':>4s} {'fp':>4s} {'fn':>4s} {'precision':>9s} "
        f"{'recall':>7s}"
    )
    for kind in ("WAIT", "ACQUIRE", "USE", "RELEASE", "all"):
        for stage in ("recall", "verified"):
            m = ev[stage][kind]
            print(
                f"{kind:8s} {stage:9s} {m['tp']:4d} {m['fp']:4d} {m['fn']:4d} "
                f"{m['precision']:9.1%} {m['recall']:7.1%}"
            )
    r = ev["resources"]
    print(f"resources: {r['tp']} found, false {r['fp']}, missed {r['fn']}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args()
    corpus = HERE / "tests" / "scan_corpus"
    table("corpus (offline)", evaluate(scan(corpus), load_labels(corpus / "labels.json")))
    if args.no_sqlite:
        return
    tree = sqlite_tree()
    if tree is None:
        print("\nSQLite: cannot fetch its source (needs apt with Debian's source packages)")
        return
    commands = prepare(tree, generated=True)
    sub = link_files(tree, SUBSET, Path(tempfile.mkdtemp(prefix="gigi-sqlite-sub-")))
    try:
        r = scan(sub, compile_commands=commands)
        table(
            "SQLite page cache, pager, WAL (offline)",
            evaluate(r, load_labels(HERE / "tests" / "sqlite" / "labels.json")),
        )
        print(f"parse diagnostics: {r.stats['diagnostics']}")
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    t = time.perf_counter()
    whole = scan(tree / "src", compile_commands=commands)
    wall = time.perf_counter() - t
    st = whole.stats
    print(
        f"\nSQLite src/ offline: {st['files']} files, {st['lines']:,} lines, "
        f"{st['functions']:,} functions in {wall:.1f} s ({st['lines'] / wall:,.0f} lines/s; "
        f"parse {st['parse_s']:.1f} s on {os.cpu_count()} cores), "
        f"{st['diagnostics']} parse diagnostics, {len(whole.verified())} verified sites"
    )


if __name__ == "__main__":
    main()
