"""Ingest throughput and peak memory, against pyarrow alone on the same segments.

    python bench/ingest.py [--events 10000000] [--repeats 3] [--dir DIR]

Writes a synthetic trace (8 writer threads' worth of overlapping segments of 1M-event batches)
once, then, in fresh subprocesses and interleaved: the baseline (pyarrow reads every segment
and writes it to Parquet, no validation, no sort) and `gigi.ingest.ingest`. Prints the median
wall time and peak RSS of each, the ratio gigi / baseline, and peak RSS against the trace's
in-memory (Arrow) size.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

BATCH = 1 << 20
WRITERS = 8


def make_trace(trace: Path, events: int, seed: int = 1, spread_waits: bool = False) -> int:
    """Write the synthetic trace; return its in-memory size in bytes. Waits last 500 ns, or
    with ``spread_waits`` anything from 100 ns to 5 us."""
    rng = np.random.default_rng(seed)
    trace.mkdir(parents=True)
    per_writer = events // WRITERS
    names = pa.array(["bench.buffer_pool", "bench.undo_log", "bench.lock"])
    nbytes = 0
    for w in range(WRITERS):
        path = trace / f"events-{w}.arrows"
        ts0 = 0
        with pa.OSFile(str(path), "wb") as f:
            writer = None
            for start in range(0, per_writer, BATCH):
                n = min(BATCH, per_writer - start)
                # ACQUIRE/RELEASE pairs on the same object, some WAITs and USEs in between.
                kind = np.tile(np.array([0, 1, 2, 3], np.uint8), n // 4 + 1)[:n]
                obj = np.repeat(rng.integers(1, 5000, n // 4 + 1), 4)[:n]
                ts = ts0 + np.cumsum(rng.integers(1, 2000, n))
                ts0 = int(ts[-1])
                batch = pa.record_batch(
                    {
                        "ts": pa.array(ts, pa.int64()),
                        "kind": pa.array(kind),
                        # one resource per WAIT/ACQUIRE/USE/RELEASE quad, so holds pair
                        "resource": pa.DictionaryArray.from_arrays(
                            pa.array(
                                np.repeat(rng.integers(0, 3, n // 4 + 1), 4)[:n].astype(np.int32)
                            ),
                            names,
                        ),
                        "task": pa.array(
                            np.repeat(np.arange(start, start + n) // 64, 1) + w * 10**9
                        ),
                        "thread": pa.array(np.full(n, 1000 + w, np.int64)),
                        "amount": pa.array(np.ones(n, np.int64)),
                        "dur": pa.array(
                            np.where(
                                kind == 0,
                                rng.integers(100, 5000, n) if spread_waits else 500,
                                0,
                            ).astype(np.int64)
                        ),
                        "object": pa.array(obj.astype(np.int64)),
                    }
                )
                if writer is None:
                    writer = ipc.new_stream(f, batch.schema)
                writer.write_batch(batch)
                nbytes += batch.nbytes
            writer.close()
    return nbytes


BASELINE = """
import json, resource, sys, time
from pathlib import Path
import pyarrow.ipc as ipc, pyarrow.parquet as pq
trace, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir()
t = time.perf_counter()
for p in sorted(trace.glob("*.arrows")):
    reader = ipc.open_stream(p)
    with pq.ParquetWriter(out / (p.stem + ".parquet"), reader.schema) as w:
        for b in reader:
            w.write_batch(b)
print(json.dumps({"s": time.perf_counter() - t,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

GIGI = """
import json, resource, sys, time
from gigi.ingest import ingest
from gigi.metrics import HoldPairer
HoldPairer()  # compile (or load) the numba kernel outside the timing
t = time.perf_counter()
m = ingest(sys.argv[1], sys.argv[2])
print(json.dumps({"s": time.perf_counter() - t, "events": m.events,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="scratch directory (default: tmp)")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(dir=args.dir, prefix="gigi-bench-"))
    try:
        t = time.perf_counter()
        nbytes = make_trace(scratch / "trace", args.events)
        print(
            f"trace: {args.events:,} events, {nbytes / 2**20:,.0f} MiB in memory, "
            f"written in {time.perf_counter() - t:.1f} s"
        )
        base, gigi = [], []
        for i in range(args.repeats):
            base.append(run(BASELINE, str(scratch / "trace"), str(scratch / f"base{i}")))
            gigi.append(run(GIGI, str(scratch / "trace"), str(scratch / f"store{i}")))
            shutil.rmtree(scratch / f"base{i}")
            shutil.rmtree(scratch / f"store{i}")
        assert all(g["events"] == args.events for g in gigi)
        for name, runs in (("pyarrow read+parquet", base), ("gigi ingest", gigi)):
            s = statistics.median(r["s"] for r in runs)
            rss = statistics.median(r["rss"] for r in runs)
            print(
                f"{name:22s} median {s:7.2f} s  {args.events / s / 1e6:6.2f} M events/s  "
                f"peak RSS {rss / 2**20:7.0f} MiB ({rss / nbytes:.2f}x the trace in memory)"
            )
        ratio = statistics.median(g["s"] for g in gigi) / statistics.median(b["s"] for b in base)
        print(f"gigi / baseline time: {ratio:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
