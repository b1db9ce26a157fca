"""Metric kernels against their SQL twins and a single numpy pass, on a generated trace.

    python bench/metrics.py [--events 10000000] [--repeats 3]

Builds the synthetic trace of bench/ingest.py, ingests it, loads the columns once, then times
(median of the repeats): the numba per-resource totals kernel, its DuckDB SQL twin over the
same store, and one numpy pass over the same columns (bincount of units by resource and kind:
the memory-bandwidth reference); and the whole `diagnose`. Prints the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ingest import make_trace  # noqa: E402

from gigi.diagnosis import diagnose  # noqa: E402
from gigi.ingest import ingest  # noqa: E402
from gigi.metrics import sql_twin  # noqa: E402
from gigi.metrics.totals import resource_totals  # noqa: E402
from gigi.queries import connect  # noqa: E402


def timed(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--diagnose", action="store_true", help="also time the whole diagnose")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gigi-bench-metrics-"))
    try:
        make_trace(scratch / "trace", args.events)
        ingest(scratch / "trace", scratch / "store")
        con = connect(scratch / "store")
        names = [r for (r,) in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
        start, end = con.sql('SELECT start, "end" FROM trace_info').fetchall()[0]
        t = con.sql(
            "SELECT kind, resource, amount, ts, coalesce(dur, -1) AS dur FROM events ORDER BY seq"
        ).to_arrow_table()
        codes = {n: i for i, n in enumerate(names)}
        res = np.array(
            [
                codes[x]
                for x in t.column("resource")
                .dictionary_encode()
                .combine_chunks()
                .dictionary.to_pylist()
            ]
        )[t.column("resource").dictionary_encode().combine_chunks().indices.to_numpy()]
        kind, amount = t.column("kind").to_numpy(), t.column("amount").to_numpy()
        ts, dur = t.column("ts").to_numpy(), t.column("dur").to_numpy()
        resource_totals(
            kind[:10], res[:10], amount[:10], ts[:10], dur[:10], len(names), start, end
        )  # compile / load outside the timing
        k = timed(
            lambda: resource_totals(kind, res, amount, ts, dur, len(names), start, end),
            args.repeats,
        )
        sql = sql_twin("resource_totals")
        q = timed(lambda: con.sql(sql).fetchall(), args.repeats)
        n = timed(
            lambda: np.bincount(res * 4 + kind, weights=amount, minlength=4 * len(names)),
            args.repeats,
        )
        d = timed(lambda: diagnose(scratch / "store"), 1) if args.diagnose else None
        print(f"{args.events:,} events, {len(names)} resources")
        print(f"numba totals kernel   {k:7.3f} s")
        print(f"DuckDB SQL twin       {q:7.3f} s   twin / kernel {q / k:5.2f}x")
        print(f"numpy single pass     {n:7.3f} s   kernel / numpy {k / n:5.2f}x")
        if d is not None:
            print(f"diagnose (all)        {d:7.3f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
