"""Accuracy of the diagnosis over the scenario suite, and how it holds up as events are lost.

    python bench/scenarios.py [--rates 0,10,20,...,90] [--seeds 3]

Records every scenario once, then for each drop rate removes that share of the events at
random (several seeds) and diagnoses again. A faulty scenario counts as right when rank 1 names
its resource, failure mode and culprit; a healthy one when nothing is found. Prints the
accuracy table per scenario at 0% and 20%, and the curve of overall accuracy against the rate.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from gigi.diagnosis import diagnose
from gigi.ingest import ingest
from gigi.scenarios import all_scenarios


def _write(path: Path, table: pa.Table, name: str | None = None) -> None:
    if name:
        table = table.replace_schema_metadata({"gigi.table": name})
    with pa.OSFile(str(path), "wb") as f, ipc.new_stream(f, table.schema) as w:
        w.write_table(table)


def _right(scenario, target) -> bool:
    d = diagnose(target)
    if scenario.truth is None:
        return not d.findings
    if not d.findings:
        return False
    f = d.findings[0]
    if (f.resource, f.failure_mode) != (scenario.truth.resource, scenario.truth.failure_mode):
        return False
    if scenario.truth.culprit is None:
        return not f.culprit_tasks
    if not f.culprit_tasks:
        return False
    name = d.con.execute("SELECT name FROM tasks WHERE task = ?", [f.culprit_tasks[0]]).fetchall()
    return bool(name) and name[0][0].startswith(scenario.truth.culprit)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default=",".join(str(r) for r in range(0, 100, 10)))
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="gigi-scenarios-"))
    try:
        results: dict[str, dict[int, float]] = {}
        for s in all_scenarios():
            s.run(scratch / s.name)
            ingest(scratch / s.name, scratch / f"{s.name}-store")
            entry = next(
                p
                for p in (scratch / f"{s.name}-store").iterdir()
                if p.is_dir() and not p.name.startswith(".")
            )
            events = pa.concat_tables(
                pq.read_table(p) for p in sorted((entry / "events").glob("*"))
            ).drop_columns(["seq"])
            results[s.name] = {}
            for rate in rates:
                hits = 0
                for seed in range(args.seeds):
                    rng = random.Random(seed)
                    keep = pa.array([rng.random() * 100 >= rate for _ in range(events.num_rows)])
                    trace = scratch / f"{s.name}-{rate}-{seed}"
                    trace.mkdir()
                    _write(trace / "events.arrows", events.filter(keep))
                    for small in ("tasks", "resources", "sites"):
                        _write(
                            trace / f"{small}.arrows",
                            pq.read_table(entry / f"{small}.parquet"),
                            small,
                        )
                    hits += _right(s, trace)
                    shutil.rmtree(trace)
                results[s.name][rate] = hits / args.seeds
            print(
                f"{s.name:24s} " + " ".join(f"{results[s.name][r]:4.2f}" for r in rates),
                file=sys.stderr,
            )
        print(f"{'scenario':24s} " + " ".join(f"{r:3d}%" for r in rates))
        for name, row in results.items():
            print(f"{name:24s} " + " ".join(f"{row[r]:4.2f}" for r in rates))
        overall = [sum(row[r] for row in results.values()) / len(results) for r in rates]
        print(f"{'all':24s} " + " ".join(f"{v:4.2f}" for v in overall))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
