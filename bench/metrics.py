"""Metric kernels against their SQL twins and a single numpy pass, on a generated trace.

    python bench/metrics.py [--events 10000000] [--repeats 3]

Builds the synthetic trace of bench/ingest.py (waits of spread lengths), ingests it, loads
the columns once, then times (median of the repeats) each numba kernel, its DuckDB SQL twin
over the same store, and one numpy pass over the same columns (the memory-bandwidth
reference: a bincount, or where order matters a sort): the per-resource totals, the hold-time
and wait-time distributions (reference: a sort of the durations), and the per-task shares
(whose twin, a join of elementary time segments, runs on the first --twin-events events
only, the ratio then per event; reference: a sort of the boundaries' times, against which
the boundaries' sort and sweep alone are timed too). Optionally the whole `diagnose`.
Prints the ratios.
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
from gigi.metrics.holdtime import hold_time  # noqa: E402
from gigi.metrics.totals import resource_totals  # noqa: E402
from gigi.queries import connect  # noqa: E402


def timed(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def _distributions(con, names, repeats):
    from gigi.diagnosis._metrics import _codes

    out = []
    for label, view, col, twin in (
        ("hold-time distribution", "holds", "hold_ns", "hold_time"),
        ("wait-time distribution", "waits", "dur", "wait_time"),
    ):
        t = con.sql(f"SELECT resource, {col} FROM {view}").to_arrow_table()
        res, ns = _codes(t.column("resource"), names), t.column(col).to_numpy()
        hold_time(res[:10], ns[:10], len(names))
        k = timed(lambda res=res, ns=ns: hold_time(res, ns, len(names)), repeats)
        sql = sql_twin(twin)
        q = timed(lambda sql=sql: con.sql(sql).fetchall(), repeats)
        # quantiles need the values in order: one numpy sort is the reference pass
        n = timed(lambda ns=ns: np.sort(ns), repeats)
        out.append((label, k, q, n, 1.0))
    return out


def _shares(scratch: Path, twin_events: int, repeats: int):
    """The per-task shares (pair codes, bincounts, the sort of the boundaries and the sweep)
    on the whole trace's columns; its twin on a prefix of the trace, scaled per event."""
    from gigi.diagnosis._metrics import _task_table, task_inputs

    con = connect(scratch / "store")
    names = [r for (r,) in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
    w, h, e = task_inputs(con)
    _task_table(w.slice(0, 10), h.slice(0, 10), e.slice(0, 10), names)  # compile / load
    k = timed(lambda: _task_table(w, h, e, names), repeats)
    amount, start = h.column("amount").to_numpy(), h.column("acquire_ts").to_numpy()
    end = h.column("end_ts").to_numpy()
    whole = con.sql("SELECT count(*) FROM events").fetchall()[0][0]
    part = scratch / "prefix"
    if not part.exists():
        from gigi.ingest import ingest as _ingest

        make_trace(part / "trace", twin_events, spread_waits=True)
        _ingest(part / "trace", part / "store")
    small = connect(part / "store")
    sql = sql_twin("task_shares")
    q = timed(lambda: small.sql(sql).fetchall(), 1)
    # the pack, sort and sweep of the boundaries alone, against one numpy sort of their times
    from gigi.diagnosis._metrics import _codes, _factorize
    from gigi.metrics.tasks import task_shares

    wres, hres = _codes(w.column("resource"), names), _codes(h.column("resource"), names)
    keys = np.concatenate([w.column("task").to_numpy(), h.column("task").to_numpy()])
    keys = keys * len(names) + np.concatenate([wres, hres])  # (task, resource) as _task_table
    _, pair = _factorize(keys)
    n_pairs = int(pair.max()) + 1 if len(pair) else 0
    res_of_pair = np.zeros(n_pairs, np.int64)
    res_of_pair[pair] = np.concatenate([wres, hres])
    wts, wend = w.column("ts").to_numpy(), w.column("end_ts").to_numpy()
    args = (
        {"pair": pair[: len(wres)], "start": wts, "end": wend},
        {"pair": pair[len(wres) :], "start": start, "end": end, "amount": amount},
        {"pair": pair[:0], "ts": start[:0], "amount": amount[:0]},
        res_of_pair,
        len(names),
    )
    sweep = timed(lambda: task_shares(*args), repeats)
    stamps = np.concatenate([wts, wend, start, end])
    one_pass = timed(lambda: np.sort(stamps), repeats)
    n = one_pass
    return [
        ("per-task shares (all)", k, q, n, whole / twin_events),
        ("  of which sort + sweep", sweep, None, one_pass, 1.0),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--twin-events", type=int, default=200_000)
    ap.add_argument("--diagnose", action="store_true", help="also time the whole diagnose")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gigi-bench-metrics-"))
    try:
        make_trace(scratch / "trace", args.events, spread_waits=True)
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
        rows = [("per-resource totals", k, q, n, 1.0)]
        rows += _distributions(con, names, args.repeats)
        rows += _shares(scratch, args.twin_events, args.repeats)
        d = timed(lambda: diagnose(scratch / "store"), 1) if args.diagnose else None
        print(f"{args.events:,} events, {len(names)} resources; medians of {args.repeats}")
        head = f"{'kernel':24s} {'numba':>8s} {'SQL twin':>9s} {'numpy':>8s}"
        print(f"{head}  twin/kernel  kernel/numpy")
        for name, kern, twin, base, scale in rows:
            twin_s = f"{twin:8.3f}s" if twin is not None else f"{'-':>9s}"
            ratio = f"{twin * scale / kern:10.1f}x" if twin is not None else f"{'-':>11s}"
            print(f"{name:24s} {kern:7.3f}s {twin_s} {base:7.3f}s  {ratio}  {kern / base:11.2f}x")
        if d is not None:
            print(f"diagnose (all)        {d:7.3f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
