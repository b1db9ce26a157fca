"""A synthetic lake of up to 300M events, diagnosed on Spark local mode (memory capped) and on
one node (DuckDB and the numba kernels): time and peak memory per stage, as ratios, and the
cost per event from the smallest size to the largest.

    python bench/lake_scale.py [--events 10000000 30000000 100000000 300000000]
        [--dir DIR] [--spark-memory 4g] [--cores 2] [--engines duckdb spark] [--keep]
        [--stretched]

The lake is written straight into its layout (``gigi/ingest/_lake.py``) by vectorized numpy,
in time order, 8M events a block, at 2,000 events a second from 2026-11-30 00:00 UTC (300M
events span about two days, so two ``day`` partitions): requests that WAIT for, ACQUIRE, USE
and RELEASE either a connection pool (``db.pool``, 32 slots) or one of 5,000 row locks
(``row.lock``); 2% of the row-lock requests want row 7, which a background task (task 1)
holds for 8 s of every 10: the anomaly, contention on ``row.lock`` with task 1 to blame,
which each engine must find. Each engine runs in a fresh process; peak memory is the
largest resident set of that process and its children (Spark's JVM and Python workers),
sampled every 0.2 s, per stage. The first hour of the lake is also diagnosed alone at each size:
its cost must not grow with the lake.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

RATE = 2_000  # events a second
T0 = 1_795_996_800 * 10**9  # 2026-11-30T00:00:00Z, ns
BLOCK = 8 << 20  # events generated and sorted at once
PERIOD, HELD = 10 * 10**9, 8 * 10**9  # the background task holds row 7 for HELD of PERIOD
HOT_ROW, ROWS, POOL = 7, 5_000, 32
TRACE = "bench"
DAY_NS = 86_400 * 10**9


def make_lake(lake: Path, events: int, seed: int = 1) -> float:
    """Write the synthetic trace of ``events`` events (about) into ``lake``; seconds taken."""
    from gigi.ingest._lake import LAKE_HOLD_PAIRS_SCHEMA, MANIFESTS
    from gigi.ingest._store import Manifest
    from gigi.schema import STORE_EVENTS_SCHEMA, TABLES

    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    span = events * 10**9 // RATE
    n_req = events // 4
    n_batch = span // PERIOD + 1
    acq_seq = np.full(n_req + n_batch, -1, np.int64)
    acq_ts = np.zeros(n_req + n_batch, np.int64)
    names = np.array(["db.pool", "row.lock"], dtype=object)
    carry: dict[str, np.ndarray] | None = None
    seq = 0
    first, last = None, 0
    blocks = max(1, -(-n_req * 4 // BLOCK))
    edges = T0 + (np.arange(blocks + 1) * span) // blocks
    req_lo = 0
    for b in range(blocks):
        lo, hi = int(edges[b]), int(edges[b + 1])
        n = (n_req * (b + 1)) // blocks - req_lo
        req = np.arange(req_lo, req_lo + n, dtype=np.int64)
        req_lo += n
        t = np.sort(rng.integers(lo, hi, n))
        res = (rng.random(n) < 0.5).astype(np.int64)  # 0 db.pool, 1 row.lock
        obj = np.where(res == 1, rng.integers(1, ROWS + 1, n), 0)
        hot = (res == 1) & (rng.random(n) < 0.02)
        obj[hot] = HOT_ROW
        wait = rng.exponential(20_000, n).astype(np.int64)
        phase = (t - T0) % PERIOD
        blocked = hot & (phase < HELD)
        wait[blocked] += HELD - phase[blocked]
        hold = rng.exponential(2_000_000, n).astype(np.int64) + 100_000
        # the background task's holds of row 7 that begin in this block
        k = np.arange(-(-(lo - T0) // PERIOD), -(-(hi - T0) // PERIOD), dtype=np.int64)
        bt = T0 + k * PERIOD
        gen = {
            "ts": np.concatenate(
                [t, t + wait, t + wait + hold // 2, t + wait + hold, bt, bt + 1_000_000, bt + HELD]
            ),
            "kind": np.concatenate(
                [np.full(n, 0), np.full(n, 1), np.full(n, 2), np.full(n, 3)]
                + [np.full(len(k), c) for c in (1, 2, 3)]
            ),
            "res": np.concatenate([res] * 4 + [np.ones(3 * len(k), np.int64)]),
            "obj": np.concatenate([obj] * 4 + [np.full(3 * len(k), HOT_ROW)]),
            "task": np.concatenate([req + 1000] * 4 + [np.ones(3 * len(k), np.int64)]),
            "thread": np.concatenate([req % 256 + 100] * 4 + [np.ones(3 * len(k), np.int64)]),
            "dur": np.concatenate([wait, np.zeros(3 * n + 3 * len(k), np.int64)]),
            "hold": np.concatenate([req] * 4 + [n_req + k] * 3),  # which hold, for the pairs
        }
        if carry is not None:
            gen = {c: np.concatenate([carry[c], gen[c]]) for c in gen}
        order = np.argsort(gen["ts"], kind="stable")
        gen = {c: v[order] for c, v in gen.items()}
        cut = int(np.searchsorted(gen["ts"], hi)) if b < blocks - 1 else len(gen["ts"])
        out = {c: v[:cut] for c, v in gen.items()}
        carry = {c: v[cut:] for c, v in gen.items()}
        seqs = np.arange(seq, seq + cut, dtype=np.int64)
        if cut:
            first = int(out["ts"][0]) if first is None else first
            last = max(last, int((out["ts"] + out["dur"]).max()))
        seq += cut
        a = out["kind"] == 1
        acq_seq[out["hold"][a]] = seqs[a]
        acq_ts[out["hold"][a]] = out["ts"][a]
        table = pa.table(
            {
                "ts": out["ts"],
                "kind": out["kind"].astype(np.uint8),
                "resource": pa.array(names[out["res"]], pa.string()),
                "task": out["task"],
                "thread": out["thread"],
                "amount": np.ones(cut, np.int64),
                "dur": out["dur"],
                "object": out["obj"],
                "site": pa.nulls(cut, pa.int32()),
                "value": pa.nulls(cut, pa.int64()),
                "seq": seqs,
            },
            schema=STORE_EVENTS_SCHEMA,
        )
        _by_day(lake / "events" / f"trace={TRACE}", b, table, out["ts"])
        r = out["kind"] == 3
        h = out["hold"][r]
        pairs = pa.table(
            {
                "acquire_seq": acq_seq[h],
                "release_seq": seqs[r],
                "amount": np.ones(len(h), np.int64),
                "resource": pa.array(names[out["res"][r]], pa.string()),
                "acquire_ts": acq_ts[h],
                "release_ts": out["ts"][r],
            },
            schema=LAKE_HOLD_PAIRS_SCHEMA,
        )
        _by_day(lake / "hold_pairs" / f"trace={TRACE}", b, pairs.sort_by("acquire_ts"), None)
    small = {
        "tasks": pa.table(
            {
                "task": [1],
                "name": ["nightly batch"],
                "kind": ["background"],
                "parent": [None],
                "start": [T0],
                "end": [None],
            },
            schema=TABLES["tasks"].arrow_schema,
        ),
        "resources": pa.table(
            {
                "resource": ["db.pool", "row.lock"],
                "capacity": [POOL, None],
                "unit": ["slots", "locks"],
                "sharing": ["pool", "exclusive"],
                "dropped": [0, 0],
                "sample_every": [1, 1],
            },
            schema=TABLES["resources"].arrow_schema,
        ),
        "sites": TABLES["sites"].arrow_schema.empty_table(),
    }
    for name, table in small.items():
        (lake / name / f"trace={TRACE}").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, lake / name / f"trace={TRACE}" / "part-0.parquet")
    manifest = Manifest(
        trace_id=TRACE,
        events=seq,
        start=first,
        end=last,
        dropped=0,
        dropped_by_resource={},
        sample_every={},
        tasks=1,
        resources=2,
        sites=0,
        holds=int(n_req + n_batch),
        open_holds=0,
        segments_read=0,
        bytes_lost=0,
    )
    folder = lake / MANIFESTS / f"trace={TRACE}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(manifest.to_json())
    return time.perf_counter() - t_start


def _by_day(folder: Path, block: int, table: pa.Table, ts: np.ndarray | None) -> None:
    from gigi.ingest._lake import ROW_GROUP, day_of

    key = ts if ts is not None else table.column("acquire_ts").to_numpy()
    days = key // DAY_NS
    for d in np.unique(days):
        part = table.filter(pa.array(days == d))
        out = folder / f"day={day_of(int(d) * DAY_NS)}"
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, out / f"part-{block:05d}.parquet", row_group_size=ROW_GROUP)


class TreePeak:
    """The largest summed resident set of this process and its descendants, sampled."""

    def __init__(self) -> None:
        self.peak = 0
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    @staticmethod
    def _tree_rss() -> int:
        me, total = os.getpid(), 0
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        stack = [me]
        while stack:
            pid = stack.pop()
            total += rss.get(pid, 0)
            stack += children.get(pid, [])
        return total

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, self._tree_rss())

    def take(self) -> int:
        """The peak since the last take; the sampling starts over."""
        peak, self.peak = max(self.peak, self._tree_rss()), 0
        return peak


def one(lake: Path, engine: str, memory: str, cores: int, stretched: bool = False) -> None:
    """Diagnose the lake on one engine; print a JSON line of stages and findings.
    ``stretched``: on DuckDB, a stretch of time at a time whatever the trace's size."""
    import gigi.diagnosis._stages as stages_module
    from gigi.lake import diagnose_lake
    from gigi.lake._scope import open_lake
    from gigi.lake._stretches import chunk_count

    sampler = TreePeak()
    stages_module.peak_rss = sampler.take  # per-stage peaks of the whole process tree
    spark = None
    t = time.perf_counter()
    if engine == "spark":
        from gigi.lake._spark import session

        spark = session(f"local[{cores}]", memory)
    setup = time.perf_counter() - t
    setup_rss = sampler.take()
    t = time.perf_counter()
    stretches = None
    if stretched and engine == "duckdb":
        stretches = chunk_count(open_lake(lake).manifest.events)
    d = diagnose_lake(lake, engine=engine, spark=spark, stretches=stretches)
    total = time.perf_counter() - t
    w0 = T0  # the trace's first hour
    t = time.perf_counter()
    hour = diagnose_lake(lake, engine=engine, spark=spark, since=w0, until=w0 + 3600 * 10**9)
    window = time.perf_counter() - t
    print(
        json.dumps(
            {
                "engine": engine,
                "events": d.events,
                "setup_s": setup,
                "setup_rss": setup_rss,
                "diagnose_s": total,
                "stages": d.stages.rows,
                "window_s": window,
                "window_events": hour.events,
                "findings": [(f.failure_mode, f.resource, f.culprit_tasks[:3]) for f in d.findings],
                "json": d.to_json(),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--events", type=int, nargs="+", default=[10_000_000, 30_000_000, 100_000_000, 300_000_000]
    )
    ap.add_argument(
        "--dir", type=Path, default=None, help="where the lakes go (default: a temp dir)"
    )
    ap.add_argument("--engines", nargs="+", default=["duckdb", "spark"])
    ap.add_argument("--spark-memory", default="4g", help="Spark's driver heap cap")
    ap.add_argument("--cores", type=int, default=2, help="Spark local mode cores")
    ap.add_argument("--keep", action="store_true", help="keep the lakes")
    ap.add_argument(
        "--stretched",
        action="store_true",
        help="DuckDB a stretch of time at a time at every size (by default only from 2^24 "
        "events), so that the cost per event compares like with like",
    )
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(Path(args.one[0]), args.one[1], args.spark_memory, args.cores, args.stretched)
        return
    import tempfile

    base = args.dir or Path(tempfile.mkdtemp(prefix="gigi-bench-lake-"))
    gib = 2**30
    per_event: dict[str, list[tuple[int, float]]] = {}
    for n in args.events:
        lake = base / f"lake-{n}"
        if not (lake / "manifests").exists():
            made = make_lake(lake, n)
            size = sum(f.stat().st_size for f in lake.rglob("*.parquet"))
            print(
                f"{n:,} events: lake written in {made:.1f} s, {size / gib:.2f} GiB on disk",
                flush=True,
            )
        results = {}
        for engine in args.engines:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    str(lake),
                    engine,
                    "--spark-memory",
                    args.spark_memory,
                    "--cores",
                    str(args.cores),
                    *(["--stretched"] if args.stretched else []),
                ],
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                print(f"  {engine}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[engine] = r
            per_event.setdefault(engine, []).append((n, r["diagnose_s"] / r["events"]))
            peak = max([rss for _, _, rss in r["stages"]] + [r["setup_rss"]])
            print(
                f"  {engine:6s} diagnose {r['diagnose_s']:8.1f} s "
                f"({r['events'] / r['diagnose_s'] / 1e6:.2f} M events/s, "
                f"{r['diagnose_s'] / r['events'] * 1e9:.0f} ns/event), "
                f"peak RSS {peak / gib:.2f} GiB, "
                f"one-hour window ({r['window_events']:,} events) {r['window_s']:.1f} s; "
                f"findings {r['findings']}",
                flush=True,
            )
        if {"duckdb", "spark"} <= results.keys():
            a, b = results["duckdb"], results["spark"]
            same = a["json"] == b["json"]
            print(f"  findings identical on both engines: {same}")
            head = ("duckdb s", "spark s", "time x", "duckdb GiB", "spark GiB", "mem x")
            print(f"  {'stage':42s} " + " ".join(f"{h:>10s}" for h in head))
            duck = {name: (sec, rss) for name, sec, rss in a["stages"]}
            for name, s2, m2 in b["stages"]:  # Spark fills its views' cache as a stage
                s1, m1 = duck.get(name, (0.0, 0))
                cells = (s1, s2, s2 / max(s1, 1e-3), m1 / gib, m2 / gib, m2 / max(m1, 1))
                print(f"  {name:42s} " + " ".join(f"{c:10.2f}" for c in cells))
            cells = (a["diagnose_s"], b["diagnose_s"], b["diagnose_s"] / a["diagnose_s"])
            print(f"  {'total':42s} " + " ".join(f"{c:10.2f}" for c in cells))
        if not args.keep:
            shutil.rmtree(lake, ignore_errors=True)
    for engine, points in per_event.items():
        base_cost = points[0][1]
        growth = ", ".join(
            f"{n / 1e6:.0f}M: {c * 1e9:.0f} ns/event ({c / base_cost:.2f}x)" for n, c in points
        )
        print(f"{engine}: cost per event {growth}")
    if not args.keep and args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
