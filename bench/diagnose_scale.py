"""`diagnose` on large generated traces: time and peak memory per stage.

    python bench/diagnose_scale.py [--events 10000000 100000000]

For each size: builds the synthetic trace of bench/ingest.py, ingests it, then runs the whole
diagnosis once and prints every stage's time and the process's peak RSS at its end (each
size in a fresh process, so the peaks do not carry over), with the events per second overall
and the peak against the trace's size in memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def one(events: int, keep: Path | None) -> None:
    from ingest import make_trace

    from gigi.diagnosis import diagnose
    from gigi.diagnosis._stages import peak_rss
    from gigi.ingest import ingest

    scratch = keep / str(events) if keep else Path(tempfile.mkdtemp(prefix="gigi-bench-diag-"))
    try:
        made = ingested = 0.0
        nbytes = events * 45  # the generated columns, about 45 bytes an event
        if not (scratch / "store").exists():
            t = time.perf_counter()
            nbytes = make_trace(scratch / "trace", events)
            made = time.perf_counter() - t
            t = time.perf_counter()
            ingest(scratch / "trace", scratch / "store")
            ingested = time.perf_counter() - t
            shutil.rmtree(scratch / "trace")
        before = peak_rss()
        t = time.perf_counter()
        d = diagnose(scratch / "store")
        total = time.perf_counter() - t
        print(
            json.dumps(
                {
                    "events": events,
                    "trace_bytes": nbytes,
                    "make_s": made,
                    "ingest_s": ingested,
                    "rss_before": before,
                    "diagnose_s": total,
                    "stages": d.stages.rows,
                    "findings": [(f.failure_mode, f.resource) for f in d.findings],
                }
            )
        )
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, nargs="+", default=[10_000_000, 100_000_000])
    ap.add_argument("--keep", type=Path, help="keep the stores here and reuse them next time")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one, args.keep)
        return
    gib = 2**30
    for n in args.events:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n)]
            + (["--keep", str(args.keep)] if args.keep else []),
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            print(f"{n:,} events: failed\n{out.stderr.strip()}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{n:,} events ({r['trace_bytes'] / gib:.2f} GiB in memory): made in "
            f"{r['make_s']:.1f} s, ingested in {r['ingest_s']:.1f} s, "
            f"peak RSS before diagnose {r['rss_before'] / gib:.2f} GiB"
        )
        for name, seconds, rss in r["stages"]:
            print(f"  {name:42s} {seconds:8.2f} s   peak RSS {rss / gib:6.2f} GiB")
        peak = max(rss for _, _, rss in r["stages"])
        print(
            f"  diagnose {r['diagnose_s']:.1f} s = {n / r['diagnose_s'] / 1e6:.2f} M events/s; "
            f"peak RSS {peak / gib:.2f} GiB = {peak / r['trace_bytes']:.2f}x the trace in memory; "
            f"findings {r['findings']}"
        )


if __name__ == "__main__":
    main()
