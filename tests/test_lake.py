"""Lakes: the layout ingest --lake writes, DuckDB over it in place, the scope's pushdown, the
lake's SQL twins against the kernels, bad input, and the Spark engine in local mode."""

from __future__ import annotations

import contextlib
import gc
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import write_stream

from gigi.cli import main
from gigi.diagnosis import diagnose
from gigi.diagnosis._metrics import _totals, compute
from gigi.ingest import ingest
from gigi.ingest._lake import ingest_lake
from gigi.lake import diagnose_lake, open_lake
from gigi.lake._duckdb import connect_lake
from gigi.lake._stretches import VIEWS, lake_sql
from gigi.metrics.holdtime import hold_time
from gigi.queries import connect
from gigi.scenarios import get

# Scenarios whose traces the lake tests share, one failure mode each.
SCENARIOS = ("pg-wal-buffers", "llama-kv-leak", "mdev-34836", "mdev-34989")
DAY = 86_400 * 10**9
T0 = 1_795_996_800 * 10**9  # 2026-11-30T00:00:00Z


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """A store and a lake holding the scenarios' traces; scenario name -> trace id."""
    base = tmp_path_factory.mktemp("lake")
    ids = {}
    for name in SCENARIOS:
        get(name).run(base / "traces" / name)
        m = ingest(base / "traces" / name, base / "store")
        ingest_lake(base / "store" / m.trace_id, base / "lake")
        ids[name] = m.trace_id
    return base / "store", base / "lake", ids


def _differences(want, got, path: str = "") -> list[str]:
    """Where two diagnoses (or their JSON) differ, as path: want != got, for a failure that
    says what moved (a test's -q output shows only the first level)."""
    if hasattr(want, "to_json"):
        want, got = want.to_json(), got.to_json()
    if isinstance(want, dict) and isinstance(got, dict):
        return [
            d
            for k in sorted(set(want) | set(got), key=str)
            for d in _differences(want.get(k), got.get(k), f"{path}.{k}")
        ]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            d
            for i, (a, b) in enumerate(zip(want, got, strict=True))
            for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if want == got else [f"{path}: {want!r:.300} != {got!r:.300}"]


@pytest.fixture(scope="module")
def days_lake(tmp_path_factory) -> Path:
    """A trace on a wall clock over three days (one ACQUIRE, WAIT and RELEASE an hour), put
    into a lake straight from its trace directory."""
    base = tmp_path_factory.mktemp("days")
    hours = np.arange(72, dtype=np.int64)
    at = T0 + hours * 3_600 * 10**9
    ts = np.concatenate([at, at + 10**9, at + 10 * 10**9])
    kind = np.concatenate([np.full(72, 1), np.full(72, 0), np.full(72, 3)]).astype(np.uint8)
    task = np.concatenate([hours + 1, hours + 1000, hours + 1])
    order = np.argsort(ts, kind="stable")
    (base / "trace").mkdir()
    write_stream(
        base / "trace" / "events.arrows",
        {
            "ts": pa.array(ts[order]),
            "kind": pa.array(kind[order]),
            "resource": ["r"] * 216,
            "task": pa.array(task[order]),
            "thread": pa.array(task[order]),
            "dur": pa.array(np.where(kind[order] == 0, 2 * 10**9, 0)),
        },
    )
    ingest_lake(base / "trace", base / "lake")
    return base / "lake"


def test_layout_is_one_partition_per_trace_and_day(days_lake):
    files = sorted(p.relative_to(days_lake).as_posix() for p in days_lake.rglob("*.parquet"))
    (trace,) = {f.split("/")[1] for f in files}
    assert [f for f in files if f.startswith("events/")] == [
        f"events/{trace}/day=2026-11-{d}/part-00000.parquet" for d in ("30",)
    ] + [f"events/{trace}/day=2026-12-0{d}/part-00000.parquet" for d in (1, 2)]
    assert len([f for f in files if f.startswith("hold_pairs/")]) == 3
    assert {f.split("/")[0] for f in files} == {
        "events",
        "hold_pairs",
        "tasks",
        "resources",
        "sites",
    }
    events = pq.read_table(days_lake / "events" / trace)  # the day partition read back
    assert events.num_rows == 216 and events.column("seq").to_pylist() == list(range(216))
    assert (days_lake / "manifests" / trace / "manifest.json").is_file()


def test_duckdb_over_the_lake_finds_what_the_store_finds(recorded):
    store, lake, ids = recorded
    for name, trace in ids.items():
        want = diagnose(store, trace=trace).to_json()
        got = diagnose_lake(lake, trace=trace).to_json()
        assert got == want, (name, _differences(want, got))
        truth = get(name).truth
        assert (got["findings"][0]["failure_mode"], got["findings"][0]["resource"]) == (
            truth.failure_mode,
            truth.resource,
        )


def test_holds_that_cover_a_stretch_whole_are_one_row_there():
    """The blame's rows cut into stretches: a hold goes to the stretches it begins and ends
    in, and in those it covers whole the holds of one (resource, object, task) are one row,
    their units added. Each task holds as many units for as long in every stretch as when
    every hold goes to every stretch it overlaps, in a fraction of the rows (a hold open to
    the trace's end was a row in each stretch after it)."""
    import duckdb

    from gigi.lake._stretches import bounds, chunked, chunked_holders_merged

    union = """SELECT * FROM (VALUES
        (1, 'r', 0, 1, 0, 1000, 2, 0), (1, 'r', 0, 1, 50, 990, 1, 0),
        (1, 'r', 0, 2, 0, 1000, 1, 0), (1, 'r', 7, 2, 120, 130, 1, 0),
        (0, 'r', 0, 3, 100, 900, 1, 42))
        AS u(src, resource, object, task, s, e, weight, seq)"""
    start, span, chunks = 0, 1000, 10

    def held(sql: str) -> tuple[int, dict]:
        rows = duckdb.sql(sql).fetchall()
        out: dict = {}
        for src, res, obj, task, s, e, weight, seq, chunk in rows:
            lo, hi = bounds(chunk, start, span, chunks)
            key = (chunk, src, res, obj, task, seq)
            out[key] = out.get(key, 0) + weight * (min(e, hi) - max(s, lo))
        return len(rows), out

    n_all, want = held(chunked(union, start, span, chunks))
    n_merged, got = held(chunked_holders_merged(union, start, span, chunks))
    assert got == want
    assert (n_all, n_merged) == (39, 31)  # 8 stretches covered by 2 tasks: 16 rows, not 24


def test_duckdb_a_stretch_at_a_time_computes_what_it_computes_in_memory(recorded, monkeypatch):
    """The at-scale path (the sweeps a stretch of time at a time, the partial rows adding up in
    DuckDB's tables, the per-task figures in SQL a part of the tasks at a time) gives the
    metrics and the findings of the in-memory kernels, however many stretches the trace is cut
    into."""
    from gigi.lake import _duckdb_metrics

    store, lake, ids = recorded
    monkeypatch.setattr(_duckdb_metrics, "TASK_PART_EVENTS", 500)  # several parts of tasks
    monkeypatch.setattr(_duckdb_metrics, "SEQ_STEP", 97)  # the totals' sort, several ranges
    marked = _duckdb_metrics._marking_cut
    cuts = []  # per stretch swept: its blame rows of waits cut by it, and of the others

    def counting(*args):
        sweep = marked(*args)

        def counted(rows):
            out = sweep(rows)
            cut = sum(out.column("cut").to_pylist())
            cuts.append((cut, out.num_rows - cut))
            return out

        return counted

    monkeypatch.setattr(_duckdb_metrics, "_marking_cut", counting)
    before = _copies()
    keyed = {
        "metrics_blame": ("wait_seq", "culprit", "culprit_resource", "depth"),
        "metrics_tasks": ("resource", "task"),
        "metrics_holds": ("resource",),
        "metrics_waits": ("resource",),
        "metrics_resources": ("resource",),
    }

    def metrics(d) -> dict[str, list[dict]]:
        return {
            name: sorted(
                d.con.sql(f"SELECT * FROM {name}").to_arrow_table().to_pylist(),
                key=lambda r, k=k: tuple(str(r[c]) for c in k),
            )
            for name, k in keyed.items()
        }

    for name in ("mdev-34989", "llama-kv-leak"):
        want = diagnose_lake(lake, trace=ids[name])
        assert len(want.con.sql("SELECT * FROM metrics_blame").fetchall()) > 0
        for stretches in (1, 7, 64):
            got = diagnose_lake(lake, trace=ids[name], stretches=stretches)
            assert got.to_json() == want.to_json(), (name, stretches, _differences(want, got))
            a, b = metrics(got), metrics(want)
            for table in keyed:
                if table != "metrics_blame":
                    assert a[table] == b[table], (name, stretches, table)
            # blame, a float summed over the stretches, to within a ns a row
            assert [{**r, "blame_ns": 0} for r in a["metrics_blame"]] == [
                {**r, "blame_ns": 0} for r in b["metrics_blame"]
            ]
            assert all(
                abs(x["blame_ns"] - y["blame_ns"]) <= 1
                for x, y in zip(a["metrics_blame"], b["metrics_blame"], strict=True)
            )
    # both kinds of blame rows were there: of waits within a stretch, and of waits cut
    assert sum(c for c, _ in cuts) > 0 and sum(w for _, w in cuts) > 0
    _assert_holds_are_the_lakes(got.con, before)
    # a window of the trace: its seq starts past 0
    con = connect_lake(open_lake(lake, ids["mdev-34989"]))
    third_two = con.sql("SELECT quantile_disc(ts, 0.3), quantile_disc(ts, 0.6) FROM events")
    third, two = third_two.fetchall()[0]
    scope = {"trace": ids["mdev-34989"], "since": third, "until": two}
    want = diagnose_lake(lake, **scope)
    got = diagnose_lake(lake, stretches=7, **scope)
    assert metrics(got)["metrics_resources"] == metrics(want)["metrics_resources"]
    assert got.to_json() == want.to_json() and 0 < got.events < want.manifest.events


SCRATCH = ("holds", "stretches", "shares", "tasks")  # gone when a diagnosis is over


def _copies() -> set[Path]:
    """The copies of holds, and the stretches and parts of tasks written out, in DuckDB's temp
    directory (see ``_assert_holds_are_the_lakes``)."""
    return {p for kind in SCRATCH for p in _spilled(f"{kind}-*")}


def _metrics_files() -> set[Path]:
    """The folders of the files behind a stretched diagnosis's metrics_blame and metrics_tasks
    in DuckDB's temp directory: each there while its connection is."""
    return _spilled("metrics-*")


def _spilled(pattern: str) -> set[Path]:
    """What matches ``pattern`` in the temp directories of every connection (each has its own
    ``gigi-duckdb-*`` in the system's temp dir)."""
    import tempfile

    return set(Path(tempfile.gettempdir()).glob(f"gigi-duckdb-*/{pattern}"))


def _assert_holds_are_the_lakes(con, before: set[Path]) -> None:
    """The holds a stretched diagnosis read from its copy on disk: the trace's own view again
    after it, and the copy gone (``before``: the copies there were, another process's)."""
    views = dict(con.sql("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    assert "gigi_lake_holds" not in views and "read_parquet" not in views["holds"]
    assert "hold_pairs" in views["holds"]
    assert _copies() <= before


def test_a_copy_of_holds_that_fails_leaves_the_lakes_view(recorded, tmp_path, monkeypatch):
    """The copy cannot be written (here: a folder DuckDB may not write to): the error is the
    diagnosis's, and holds is still the lake's view, with nothing left on disk."""
    import duckdb

    from gigi.lake import _duckdb_metrics

    _, lake, ids = recorded
    con = connect_lake(open_lake(lake, ids["mdev-34989"]))
    outside = tmp_path / "outside"
    monkeypatch.setattr(_duckdb_metrics.tempfile, "mkdtemp", lambda **_: str(outside))
    outside.mkdir()
    eng = _duckdb_metrics.StretchedEngine(con)
    with pytest.raises(duckdb.Error):
        eng.compute_metrics(lambda name: contextlib.nullcontext())
    eng.finish()
    assert not outside.exists()
    assert con.sql("SELECT count(*) FROM holds").fetchall()[0][0] > 0
    _assert_holds_are_the_lakes(con, _copies())


@pytest.mark.slow
def test_a_diagnosis_at_scale_stopped_by_sigterm_leaves_no_scratch_files(recorded, tmp_path):
    """SIGTERM in the middle of a diagnosis at scale (a CI runner's timeout, ``kill``): exit
    143, no traceback, and the scratch files it wrote in DuckDB's temp directory (copies of
    holds, the metrics' files, stretches) are gone, as after Ctrl-C."""
    import os
    import signal
    import subprocess
    import sys
    import time

    store, lake, ids = recorded
    marker, tmp = tmp_path / "swept", tmp_path / "tmp"
    tmp.mkdir()
    code = f"""
import sys, time
from pathlib import Path
from gigi.lake import _duckdb_metrics as m
from gigi.cli import main
m.AT_SCALE = 1  # this small trace takes the path of a large one
sweep = m._by_stretch
def stalled(*args, **kw):
    sweep(*args, **kw)
    Path({str(marker)!r}).touch()
    time.sleep(120)
m._by_stretch = stalled
sys.exit(main(["diagnose", "--lake", {str(lake)!r}, "--trace", {ids["mdev-34989"]!r}]))
"""
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the diagnosis never reached its first sweep"
        time.sleep(0.05)

    def scratch() -> set[str]:
        return {q.name.split("-")[0] for q in tmp.glob("gigi-duckdb-*/*")} & {
            *SCRATCH,
            "metrics",
        }

    assert scratch() >= {"holds", "metrics"}
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    assert "Traceback" not in err, err
    assert scratch() == set()


def test_a_trace_with_no_waits_takes_the_stretched_path_too(trace_dir, store, monkeypatch):
    """Views with no rows write no files for the per-task parts: the stretched path still
    gives the in-memory path's figures."""
    from gigi.lake import _duckdb_metrics

    write_stream(
        trace_dir / "e.arrows",
        {
            "ts": pa.array([0, 10, 20, 30, 40, 50], pa.int64()),
            "kind": ["ACQUIRE", "USE", "RELEASE", "ACQUIRE", "USE", "RELEASE"],
            "resource": ["pool"] * 6,
            "task": pa.array([1, 1, 1, 2, 2, 2], pa.int64()),
            "thread": pa.array([1, 1, 1, 2, 2, 2], pa.int64()),
        },
    )
    ingest(trace_dir, store)
    ingest_lake(store, store.parent / "lake")
    want = diagnose_lake(store.parent / "lake")
    monkeypatch.setattr(_duckdb_metrics, "TASK_PART_EVENTS", 2)
    monkeypatch.setattr(_duckdb_metrics, "SEQ_STEP", 4)
    got = diagnose_lake(store.parent / "lake", stretches=3)
    rows = lambda d: sorted(  # noqa: E731
        d.con.sql("SELECT * FROM metrics_tasks").fetchall(), key=lambda r: (r[0], r[1])
    )
    assert rows(got) == rows(want) and len(rows(want)) == 2
    assert got.to_json() == want.to_json()


def test_a_trace_with_no_holds_takes_the_stretched_path_too(trace_dir, store):
    """No hold pairs at all: the copy of holds is a file with none, and the figures are the
    in-memory path's."""
    write_stream(
        trace_dir / "e.arrows",
        {
            "ts": pa.array([0, 10, 20, 30], pa.int64()),
            "kind": ["USE"] * 4,
            "resource": ["cache"] * 4,
            "task": pa.array([1, 2, 1, 2], pa.int64()),
            "thread": pa.array([1, 2, 1, 2], pa.int64()),
        },
    )
    ingest(trace_dir, store)
    ingest_lake(store, store.parent / "lake")
    want = diagnose_lake(store.parent / "lake")
    before = _copies()
    got = diagnose_lake(store.parent / "lake", stretches=3)
    metrics = lambda d: d.con.sql("SELECT * FROM metrics_resources").fetchall()  # noqa: E731
    assert metrics(got) == metrics(want) and got.to_json() == want.to_json()
    _assert_holds_are_the_lakes(got.con, before)


def _explain(con, table: str) -> str:
    return con.sql(f"EXPLAIN ANALYZE SELECT * FROM {table}").fetchall()[0][1]


def test_a_window_reads_only_its_day(days_lake):
    since = T0 + DAY + 5 * 3_600 * 10**9  # 05:00 to 07:00 of the second day
    scope = open_lake(days_lake, since=since, until=since + 2 * 3_600 * 10**9)
    con = connect_lake(scope)
    plan = _explain(con, "events")
    assert "Scanning Files: 1/3" in plan and "Total Files Read: 1" in plan, plan
    assert "day=2026-12-01" in plan
    assert "(ts >= " in plan  # the window goes into the scan too
    assert "Scanning Files: 1/3" in _explain(con, "hold_pairs")
    assert con.sql("SELECT count(*), min(ts) FROM events").fetchall() == [(6, since)]
    # the window is a trace of its own: 2 holds, their waits, no hold from outside it
    assert con.sql("SELECT count(*), count(*) FILTER (WHERE open) FROM holds").fetchall() == [
        (2, 0)
    ]
    whole = connect_lake(open_lake(days_lake))
    assert "Total Files Read: 3" in _explain(whole, "events")


def test_a_window_cut_through_holds_keeps_them(days_lake):
    at = T0 + 30 * 3_600 * 10**9  # hour 30: ACQUIRE at +0 s, WAIT at +1 s, RELEASE at +10 s
    con = connect_lake(open_lake(days_lake, since=at + 5 * 10**9, until=at + 3_600 * 10**9))
    # a RELEASE whose ACQUIRE came before the window: a hold begun before it
    assert con.sql("SELECT began_before_trace, open, hold_ns FROM holds").fetchall() == [
        (True, False, 5 * 10**9)
    ]
    con = connect_lake(open_lake(days_lake, since=at, until=at + 5 * 10**9))
    assert con.sql("SELECT began_before_trace, open, hold_ns FROM holds").fetchall() == [
        (False, True, 5 * 10**9)
    ]
    assert con.sql('SELECT start, "end" FROM trace_info').fetchall() == [(at, at + 5 * 10**9)]


def test_resource_goes_into_the_scan(recorded):
    _, lake, ids = recorded
    trace = ids["mdev-34989"]
    scope = open_lake(lake, trace, resources=["mdl.table"])
    con = connect_lake(scope)
    assert "resource='mdl.table'" in _explain(con, "events").replace(" ", "")
    assert con.sql("SELECT DISTINCT resource FROM events").fetchall() == [("mdl.table",)]
    d = diagnose_lake(lake, trace=trace, resources=["mdl.table"])
    assert d.findings[0].resource == "mdl.table"
    assert d.events == con.sql("SELECT count(*) FROM events").fetchall()[0][0] > 0


def _documented(con, name: str, sql: str) -> None:
    from gigi.lake._scope import SQL_DIR
    from gigi.queries._docs import parse

    doc = parse(SQL_DIR / f"{name}.sql")
    columns = con.sql(sql).columns
    assert doc.summary and not [c for c in columns if c not in doc.columns], name


def test_lake_sql_twins_match_the_kernels(recorded):
    """totals_by_window, peak_by_block, distribution(_buckets) and task_metrics, run on
    DuckDB, give what the numba kernels give."""
    store, _, ids = recorded
    con = connect(store, trace=ids["mdev-34989"])
    tables = compute(con)
    start, end = con.sql('SELECT start, "end" FROM trace_info').fetchall()[0]
    span = max(end - start, 1)
    windows = con.sql(
        lake_sql("totals_by_window", start=start, end=end, span=span, windows=50)
    ).to_arrow_table()
    m = tables["metrics_resources"].to_pylist()
    for row in m:
        mine = windows.filter(pc.equal(windows.column("resource"), row["resource"]))
        for key in ("waits", "wait_ns", "acquires", "acquired", "uses", "used", "releases"):
            assert (pc.sum(mine.column(key)).as_py() or 0) == row[key], key
    # a block of 7 events cuts the running sum many times over
    peaks = dict(con.sql(lake_sql("peak_by_block", block=7)).fetchall())
    durations = "(SELECT resource, hold_ns AS ns FROM holds)"
    for name, values in {
        "totals_by_window": {"start": start, "end": end, "span": span, "windows": 50},
        "peak_by_block": {"block": 7},
        "distribution": {"durations": durations},
        "distribution_buckets": {"durations": durations},
    }.items():
        _documented(con, name, lake_sql(name, **values))
    assert {r["resource"]: r["peak"] for r in m if r["acquires"]} == peaks
    outstanding = tables["metrics_outstanding"]
    for row in m:  # outstanding at a window's end: the changes summed up to it
        mine = windows.filter(pc.equal(windows.column("resource"), row["resource"]))
        change = dict(
            zip(
                mine.column("window_index").to_pylist(),
                (
                    a - r
                    for a, r in zip(
                        mine["acquired"].to_pylist(), mine["released"].to_pylist(), strict=True
                    )
                ),
                strict=True,
            )
        )
        level = np.cumsum([change.get(w, 0) for w in range(50)])
        got = outstanding.filter(pc.equal(outstanding.column("resource"), row["resource"]))
        assert got.column("outstanding").to_pylist() == level.tolist()
    # the squared units of ACQUIREs and RELEASEs per window, the growth noise's input
    *_, square = _totals(con, [r["resource"] for r in m], start, end)
    for i, row in enumerate(m):
        mine = windows.filter(pc.equal(windows.column("resource"), row["resource"]))
        sq = dict(zip(mine["window_index"].to_pylist(), mine["squares"].to_pylist(), strict=True))
        assert [sq.get(w, 0.0) for w in range(50)] == square[i].tolist(), row["resource"]
    assert square.sum() > 0
    holds = con.sql("SELECT resource, hold_ns FROM holds").to_arrow_table()
    names = sorted(set(holds.column("resource").to_pylist()))
    codes = np.array([names.index(r) for r in holds.column("resource").to_pylist()])
    counts, quant, hist = hold_time(codes, holds.column("hold_ns").to_numpy(), len(names))
    durations = "(SELECT resource, hold_ns AS ns FROM holds)"
    got = {r[0]: r[1:] for r in con.sql(lake_sql("distribution", durations=durations)).fetchall()}
    for i, name in enumerate(names):
        assert got[name] == (counts[i], *quant[i, :3], quant[i, 3])
    buckets = con.sql(lake_sql("distribution_buckets", durations=durations)).fetchall()
    for name, bucket, n in buckets:
        assert hist[names.index(name), bucket] == n
    assert sum(n for _, _, n in buckets) == counts.sum()


def test_task_metrics_sql_matches_the_kernel(recorded):
    from gigi.diagnosis._metrics import task_inputs
    from gigi.metrics.tasks import task_shares

    store, _, ids = recorded
    con = connect(store, trace=ids["mdev-34836"])
    want = compute(con)["metrics_tasks"]
    w, h, e = task_inputs(con)
    # the shares kernel per (resource, task) pair, as the Spark engine feeds it
    pairs = sorted(
        {
            (r, t)
            for tab in (w, h, e)
            for r, t in zip(tab["resource"].to_pylist(), tab["task"].to_pylist(), strict=True)
        }
    )
    index = {p: i for i, p in enumerate(pairs)}
    names = sorted({r for r, _ in pairs})

    def pair(tab):
        return np.array(
            [
                index[p]
                for p in zip(tab["resource"].to_pylist(), tab["task"].to_pylist(), strict=True)
            ],
            np.int64,
        )

    use = e["kind"].to_numpy() == 2
    held, used = task_shares(
        {"pair": pair(w), "start": w["ts"].to_numpy(), "end": w["end_ts"].to_numpy()},
        {
            "pair": pair(h),
            "start": h["acquire_ts"].to_numpy(),
            "end": h["end_ts"].to_numpy(),
            "amount": h["amount"].to_numpy(),
        },
        {
            "pair": pair(e)[use],
            "ts": e["ts"].to_numpy()[use],
            "amount": e["amount"].to_numpy()[use],
        },
        np.array([names.index(r) for r, _ in pairs], np.int64),
        len(names),
    )
    con.register(
        "shares",
        pa.table(
            {
                "resource": [r for r, _ in pairs],
                "task": [t for _, t in pairs],
                "held": held,
                "used": used,
            }
        ),
    )
    got = con.sql(
        lake_sql("task_metrics", shares="shares", all_shares="shares", tasks="TRUE", **VIEWS)
        + " ORDER BY resource, task"
    ).to_arrow_table()
    want = want.sort_by([("resource", "ascending"), ("task", "ascending")])
    assert got.column_names == want.column_names
    for column in want.column_names:
        assert got.column(column).to_pylist() == want.column(column).to_pylist(), column


def test_cli_ingest_lake_and_diagnose_json(recorded, days_lake, tmp_path, capsys):
    store, lake, ids = recorded
    trace = ids["llama-kv-leak"]
    assert main(["ingest", str(store / trace), "--lake", str(tmp_path / "lake")]) == 0
    assert f"as trace={trace}" in capsys.readouterr().out
    assert main(["diagnose", "--lake", str(tmp_path / "lake"), "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["diagnose", str(store), "--trace", trace, "--format", "json"]) == 0
    assert got == json.loads(capsys.readouterr().out)
    assert got["findings"][0]["failure_mode"] == "leak"
    window = ["--since", "2026-12-01T05:00", "--until", "2026-12-01T07:00"]
    assert main(["diagnose", "--lake", str(days_lake), *window, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] == 6


def test_report_of_a_lake_is_the_report_of_the_store(recorded, tmp_path, capsys):
    """report --lake: the same page as of the store, but for where it was read from."""
    store, lake, ids = recorded
    trace = ids["mdev-34989"]
    assert (
        main(["report", "--lake", str(lake), "--trace", trace, "--html", str(tmp_path / "l")]) == 0
    )
    assert main(["report", str(store), "--trace", trace, "--html", str(tmp_path / "s")]) == 0
    from_lake, from_store = (tmp_path / "l").read_text(), (tmp_path / "s").read_text()
    assert from_lake == from_store
    assert from_lake.count('<svg class="plot"') >= 1 and "mdl.table" in from_lake
    capsys.readouterr()
    # a window is the lake's alone
    assert main(["report", str(store), "--since", "5", "--html", str(tmp_path / "w")]) == 2
    assert "report: --since need(s) --lake" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--lake", "{missing}"], r"no such lake"),
        (["--lake", "{lake}"], r"lake holds 4 traces, pick one with --trace"),
        (["--lake", "{lake}", "--trace", "nope"], r"no trace 'nope' in this lake"),
        (
            ["--lake", "{lake}", "--trace", "{trace}", "--since", "noon"],
            r"--since 'noon': expected",
        ),
        (
            ["--lake", "{lake}", "--trace", "{trace}", "--since", "9", "--until", "9"],
            r"window is empty",
        ),
        (
            ["--lake", "{lake}", "--trace", "{trace}", "--resource", "pg.wal_bufers"],
            r"did you mean 'pg.wal_buffers'",
        ),
        (
            ["--lake", "{lake}", "--trace", "{trace}", "--engine", "sparc"],
            r"unknown engine 'sparc'",
        ),
        (["{store}", "--since", "5"], r"--since need\(s\) --lake"),
        (["--lake", "{store}"], r"not a gigi lake"),
    ],
)
def test_bad_input_is_one_line(recorded, tmp_path, capsys, args, message):
    store, lake, ids = recorded
    values = {"missing": tmp_path / "none", "lake": lake, "store": store}
    values["trace"] = ids["pg-wal-buffers"]
    argv = ["diagnose", *(a.format(**values) for a in args)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err


def test_spark_engine_without_pyspark_says_how_to_install(recorded, monkeypatch, capsys):
    import sys

    _, lake, ids = recorded
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    argv = ["diagnose", "--lake", str(lake), "--trace", ids["pg-wal-buffers"], "--engine", "spark"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install 'gigi[spark]'" in err, err


# -- Spark: one local session for the module, two cores, 2 GiB


@pytest.fixture(scope="module")
def spark():
    from gigi.lake._spark import session

    s = session("local[2]", "2g")
    s.conf.set("spark.sql.shuffle.partitions", "2")
    yield s
    s.stop()


@pytest.mark.slow
def test_spark_finds_what_duckdb_finds(recorded, spark):
    store, lake, ids = recorded
    # pg-wal-buffers runs under_provisioning's Spark form; mdev-34989 a blame chain
    for name in ("pg-wal-buffers", "mdev-34989"):
        want = diagnose(store, trace=ids[name]).to_json()
        got = diagnose_lake(lake, trace=ids[name], engine="spark", spark=spark).to_json()
        assert got == want, (name, _differences(want, got))
        assert got["findings"][0]["failure_mode"] == get(name).truth.failure_mode
    # a window and a resource: the same narrowed trace on both engines
    m = open_lake(lake, ids["mdev-34989"]).manifest
    con = connect(store, trace=ids["mdev-34989"])
    quarter, three = con.sql(
        "SELECT quantile_disc(ts, 0.25), quantile_disc(ts, 0.75) FROM events"
    ).fetchall()[0]
    scope = {
        "trace": ids["mdev-34989"],
        "since": quarter,
        "until": three,
        "resources": ["mdl.table"],
    }
    want = diagnose_lake(lake, **scope).to_json()
    got = diagnose_lake(lake, engine="spark", spark=spark, **scope).to_json()
    assert got == want and 0 < got["events"] < m.events


@pytest.mark.slow
def test_spark_finds_the_broken_rules_duckdb_finds(tmp_path, spark):
    """inconsistent_state on Spark: a USE after RELEASE and a second RELEASE, by the tasks
    that did them, as on DuckDB."""
    from conftest import events

    kinds, tasks, objects = [], [], []
    for i in range(40):
        steps = [1, 2, 3] + ([2] if i % 4 == 0 else []) + ([3] if i % 4 == 1 else [])
        kinds += steps
        tasks += [1 + i % 4] * len(steps)
        objects += [1 + i % 3] * len(steps)
    (tmp_path / "trace").mkdir()
    write_stream(
        tmp_path / "trace" / "e.arrows",
        events(
            ts=[10 * i for i in range(len(kinds))],
            kind=kinds,
            resource=["buf"] * len(kinds),
            task=tasks,
            object=pa.array(objects, pa.int64()),
        ),
    )
    m = ingest(tmp_path / "trace", tmp_path / "store")
    ingest_lake(tmp_path / "store" / m.trace_id, tmp_path / "lake")
    want = diagnose(tmp_path / "store").to_json()
    assert [f["failure_mode"] for f in want["findings"]] == ["inconsistent_state"]
    assert want["findings"][0]["culprit_tasks"] == [1, 2]
    got = diagnose_lake(tmp_path / "lake", engine="spark", spark=spark).to_json()
    assert got == want, _differences(want, got)


def test_spark_links_causes_as_duckdb_does(tmp_path, spark, monkeypatch):
    """The links between findings on Spark and on the stretched path: blame that reached
    another resource's holders, and waits inside other waits, measured as in memory."""
    from test_diagnosis import _held_while_waiting

    from gigi.lake import _duckdb_metrics

    _held_while_waiting(tmp_path / "trace")
    m = ingest(tmp_path / "trace", tmp_path / "store")
    ingest_lake(tmp_path / "store" / m.trace_id, tmp_path / "lake")
    want = diagnose(tmp_path / "store").to_json()
    assert [f["caused_by"] for f in want["findings"][:2]] == [None, 1]
    got = diagnose_lake(tmp_path / "lake", engine="spark", spark=spark).to_json()
    assert got == want, _differences(want, got)
    monkeypatch.setattr(_duckdb_metrics, "AT_SCALE", 1)
    got = diagnose(tmp_path / "store").to_json()
    assert got == want, _differences(want, got)


@pytest.mark.slow
def test_spark_cuts_a_large_trace_into_many_partitions(recorded, spark, monkeypatch):
    """Spark keeps a materialized partition as one block and reads it back whole (a 300M-event
    trace in 4 partitions ran out of heap): a large trace gets a shuffle partition per
    PARTITION_EVENTS events, with the same findings."""
    from gigi.lake import _spark

    store, lake, ids = recorded
    monkeypatch.setattr(_spark, "PARTITION_EVENTS", 16)
    eng = _spark.SparkEngine(open_lake(lake, ids["mdev-34989"]), spark=spark)
    want = diagnose(store, trace=ids["mdev-34989"]).to_json()
    assert int(eng.spark.conf.get("spark.sql.shuffle.partitions")) == want["events"] // 16 > 2
    got = diagnose_lake(lake, trace=ids["mdev-34989"], engine="spark", spark=spark).to_json()
    assert got == want, _differences(want, got)


@pytest.mark.slow
def test_spark_leaves_the_given_session_as_it_was(recorded, spark):
    """A diagnosis on a person's session neither replaces their views nor changes their
    settings; the settings they changed at run time do reach the diagnosis."""
    from gigi.lake._spark import SparkEngine

    _, lake, ids = recorded
    spark.range(3).createOrReplaceTempView("events")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "64m")
    try:
        eng = SparkEngine(open_lake(lake, ids["mdev-34989"]), spark=spark)
        events = open_lake(lake, ids["mdev-34989"]).manifest.events
        assert eng.spark.table("events").count() == events
        assert eng.spark.conf.get("spark.sql.ansi.enabled") == "false"
        assert eng.spark.conf.get("spark.sql.files.maxPartitionBytes") == "64m"
        assert eng.spark.conf.get("spark.sql.shuffle.partitions") == "2"  # the fixture's
        assert spark.table("events").count() == 3
        assert spark.conf.get("spark.sql.ansi.enabled") == "true"
        assert not spark.catalog.tableExists("holds")
    finally:
        spark.catalog.dropTempView("events")
        spark.conf.set("spark.sql.ansi.enabled", "false")
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


@pytest.mark.slow
def test_a_report_of_a_lake_on_spark_shows_spark_findings(recorded, spark):
    """The findings from Spark, the plots from DuckDB over the same lake: the same page."""
    from gigi.report import render

    store, lake, ids = recorded
    got = render(diagnose_lake(lake, trace=ids["mdev-34989"], engine="spark", spark=spark))
    assert got == render(diagnose(store, trace=ids["mdev-34989"]))


@pytest.mark.slow
def test_spark_prunes_days_and_pushes_the_window_down(days_lake, spark):
    from gigi.lake._spark import SparkEngine

    since = T0 + DAY + 5 * 3_600 * 10**9
    eng = SparkEngine(open_lake(days_lake, since=since, until=since + 7_200 * 10**9), spark=spark)
    eng.spark.conf.set("spark.sql.adaptive.enabled", "false")  # the scan stays in the plan
    df = eng.spark.table("lake_events")
    assert len(df.collect()) == 6
    executed = df._jdf.queryExecution().executedPlan()
    plan = executed.toString()
    partition_filters = re.search(r"PartitionFilters: \[([^\]]*)\]", plan).group(1)
    assert "isnotnull(day" in partition_filters and "(day#" in partition_filters, plan
    pushed = re.search(r"PushedFilters: \[([^\]]*)\]", plan).group(1)
    assert f"GreaterThanOrEqual(ts,{since})" in pushed, plan
    # what the scan read: one day's file of three
    leaves = executed.collectLeaves()
    scans = [leaves.apply(i) for i in range(leaves.size())]
    assert [n.getClass().getSimpleName() for n in scans] == ["FileSourceScanExec"]
    assert scans[0].metrics().apply("numFiles").value() == 1
    assert len(df.inputFiles()) == 3  # what the folder holds


@pytest.mark.slow
def test_transpiled_sql_means_on_spark_what_it_means_on_duckdb(spark):
    import duckdb
    from pyspark.sql.types import StringType

    from gigi.lake._transpile import gigi_printf, to_spark

    spark.udf.register("gigi_printf", gigi_printf, StringType())  # as the engine does
    queries = [
        # ordered lists (DESC keys, ties), slices, 1-based indexes
        "SELECT g, list(x ORDER BY y DESC, x)[:3] AS l, list(DISTINCT y ORDER BY y) AS d, "
        "(['a', 'b', 'c'])[g + 1] AS pick FROM (VALUES (0, 5, 1), (0, 3, 2), (0, 4, 2), "
        "(0, 9, 0), (1, 1, 7)) AS t(g, x, y) GROUP BY g ORDER BY g",
        # the first n of an ordered list (ties across the cut), other slices, the whole list
        "SELECT g, list(x ORDER BY y DESC, x)[:2] AS top, list(x ORDER BY y, x)[1:3] AS low, "
        "list(x ORDER BY y, x)[2:3] AS mid, list(x ORDER BY y DESC, x) AS every "
        "FROM (VALUES (0, 5, 1.5), (0, 3, 2.0), (0, 4, 2.0), (0, 9, 0.5), (0, 2, 2.0), "
        "(1, 1, 7.0)) AS t(g, x, y) GROUP BY g ORDER BY g",
        # the first n by a key, kept with their count (a heap of n a group on both)
        "SELECT g, min_by(x, {'y': -y, 'x': x}, 2) AS top, max_by(x, y, 1) AS one "
        "FROM (VALUES (0, 5, 1.5), (0, 3, 2.0), (0, 4, 2.0), (0, 9, 0.5), (1, 1, 7.0)) "
        "AS t(g, x, y) GROUP BY g ORDER BY g",
        # division in DOUBLE, and printf's rounding (C's, not Java's)
        "SELECT 7 / (10 * 0.1 * 4.0) AS q, printf('%d of %.1f: %.0f%%', 3, 0.25, 12.5) AS s",
    ]
    con = duckdb.connect()
    for q in queries:
        assert [tuple(r) for r in spark.sql(to_spark(q)).collect()] == con.sql(q).fetchall(), q
    # the first n of a group are kept in a heap of n, not picked from the whole group's list
    first = to_spark("SELECT list(x ORDER BY y DESC)[:100] FROM t GROUP BY g").upper()
    assert "MIN_BY(" in first and "COLLECT_LIST" not in first, first


@pytest.mark.slow
def test_spark_names_what_the_culprit_executed_from_the_lakes_samples(contended, store, spark):
    trace, perf = contended
    ingest(trace, store, perf=perf)
    ingest_lake(store, store.parent / "lake")
    want = diagnose(store).to_json()
    got = diagnose_lake(store.parent / "lake", engine="spark", spark=spark).to_json()
    assert got == want and "executing" in got["findings"][0]


def test_a_store_trace_at_scale_is_diagnosed_a_stretch_at_a_time(recorded, monkeypatch):
    """A store's trace of AT_SCALE events or more takes the stretched path too, with the same
    findings."""
    from gigi.lake import _duckdb_metrics

    store, _, ids = recorded
    want = diagnose(store, trace=ids["mdev-34989"]).to_json()
    monkeypatch.setattr(_duckdb_metrics, "AT_SCALE", 1)
    before, metrics_before = _copies(), _metrics_files()
    d = diagnose(store, trace=ids["mdev-34989"])
    views = dict(d.con.sql("SELECT view_name, sql FROM duckdb_views()").fetchall())
    # made by the stretched path: views of files that last as long as the connection
    assert all("read_parquet" in views[name] for name in ("metrics_blame", "metrics_tasks"))
    assert d.to_json() == want
    _assert_holds_are_the_lakes(d.con, before)
    made = _metrics_files() - metrics_before
    assert len(made) == 1 and d.con.sql("SELECT count(*) FROM metrics_tasks").fetchall()[0][0]
    del d
    gc.collect()
    assert not any(p.exists() for p in made)
