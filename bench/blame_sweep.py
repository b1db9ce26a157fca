"""The blame sweep (``gigi.metrics._attribution_kernel``) against a baseline kernel, on the
waits and holds of a lake's trace, in one process: time of each (median of ``--repeat`` runs)
and the ratio, and whether their blame agrees.

    python bench/blame_sweep.py LAKE --baseline OLD_KERNEL.py [--repeat 3] [--every NS]

LAKE is a lake such as ``bench/lake_scale.py --keep`` writes; OLD_KERNEL.py a copy of the
kernel module from another commit (``git show REV:gigi/metrics/_attribution_kernel.py``).
A kernel that reads fractions a cell at a time gets ``--every`` (default: what the diagnosis
uses for this trace, ``read_every``; 0 reads them at every instant); a baseline from before
that reads them at every instant. Besides the rows, the bench prints how far apart the two
put each culprit's blame, as a share of all blame.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lake", type=Path)
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--every", type=int, default=None)
    args = ap.parse_args()

    from gigi.diagnosis._metrics import BLAME_HOLDERS, BLAME_WAITS, _codes
    from gigi.lake._duckdb import connect_lake
    from gigi.lake._scope import open_lake
    from gigi.metrics import _attribution_kernel as current
    from gigi.metrics.attribution import Intervals, _keys, _points, read_every

    con = connect_lake(open_lake(args.lake), keep_order=False)
    names = [r[0] for r in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
    w, h = con.sql(BLAME_WAITS).to_arrow_table(), con.sql(BLAME_HOLDERS).to_arrow_table()
    col = lambda t, c: t.column(c).to_numpy().astype(np.int64)  # noqa: E731
    waits = Intervals(
        _codes(w.column("resource"), names),
        col(w, "task"),
        col(w, "ts"),
        col(w, "end_ts"),
        np.ones(w.num_rows, np.int64),
        col(w, "seq"),
        col(w, "object"),
    )
    holders = Intervals(
        _codes(h.column("resource"), names),
        col(h, "task"),
        col(h, "start"),
        col(h, "end"),
        col(h, "amount"),
        np.zeros(h.num_rows, np.int64),
        col(h, "object"),
    )
    w_key, h_key, key_res, key_obj = _keys(waits, holders)
    inputs = (
        *_points(waits, holders),
        w_key,
        waits.task,
        h_key,
        holders.task,
        holders.weight,
        key_res,
        key_obj,
    )
    inputs = tuple(np.ascontiguousarray(x, dtype=np.int64) for x in inputs)
    # a fresh copy: numba cannot load its own cache of a module loaded from a path
    copy = Path(tempfile.mkdtemp(prefix="blame-baseline-")) / "baseline_kernel.py"
    shutil.copyfile(args.baseline, copy)
    spec = importlib.util.spec_from_file_location("baseline_kernel", copy)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    if args.every is None:
        info = con.sql('SELECT events, "end" - start FROM trace_info').fetchall()[0]
        args.every = read_every(info[0], max(info[1], 1))
    print(f"{waits.start.size:,} waits, {holders.start.size:,} holds, {inputs[0].size:,} points")
    print(f"fractions read every {args.every:,} ns (0: at every instant)")
    result, times = {}, {}
    for name, kernel in (("baseline", baseline.sweep), ("current", current.sweep)):
        given = inputs
        if "every" in inspect.signature(kernel.py_func).parameters:
            given = (*inputs, args.every)
        kernel(*(x[:100] for x in given[:4]), *given[4:])  # compile
        runs = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = kernel(*given)
            runs.append(time.perf_counter() - t)
        times[name] = statistics.median(runs)
        result[name] = out
        print(f"{name:9s} median {times[name]:.2f} s of {[round(r, 2) for r in runs]}")
    print(f"current / baseline: {times['current'] / times['baseline']:.3f}x")
    blame = {}
    for name, (wi, c, r, d, v) in result.items():
        keep = v > 0
        blame[name] = dict(
            zip(zip(wi[keep], c[keep], r[keep], d[keep], strict=True), v[keep], strict=True)
        )
    a, b = blame["baseline"], blame["current"]
    worst = max((abs(a[k] - b[k]) for k in a.keys() & b.keys()), default=0.0)
    print(f"same rows: {a.keys() == b.keys()} ({len(a):,}); largest difference {worst:.3g} ns")
    by_culprit = [{}, {}]
    for side, rows in zip(by_culprit, (a, b), strict=True):
        for (_w, c, r, _d), v in rows.items():
            side[c, r] = side.get((c, r), 0.0) + v
    total = max(sum(by_culprit[0].values()), 1.0)
    apart = max(
        (abs(by_culprit[0].get(k, 0.0) - by_culprit[1].get(k, 0.0)) for k in by_culprit[0]),
        default=0.0,
    )
    print(f"largest difference of a culprit's blame (by resource): {apart / total:.4%} of all")
    shutil.rmtree(copy.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
