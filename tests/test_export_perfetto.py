"""Perfetto out: the Chrome JSON trace is checked strictly (every event has its phase's fields,
times in µs from the origin, slices nest per track, counters move forward in time, every track
named) and against the store it came from (a wait slice per WAIT, a hold slice per hold,
counter values equal to the outstanding level recomputed from the events, the acquire rate
adding up to the ACQUIREs, a marked interval per finding over the culprit's holds). The Perfetto
trace processor loads it too when its binary is at hand (the perfetto package downloads it,
which needs a network)."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gigi.diagnosis import diagnose
from gigi.export import PerfettoConfig, export_perfetto
from gigi.ingest import ingest, ingest_otlp
from gigi.queries import run
from tests.conftest import connect_checked, events, write_stream
from tests.otlp_service import service_spans, to_otlp_json

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "M": {"name", "ph", "pid", "args"},
    "b": {"name", "cat", "ph", "ts", "pid", "tid", "id", "args"},
    "e": {"name", "cat", "ph", "ts", "pid", "tid", "id"},
}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def load(path: Path) -> dict:
    """The file, numbers exact (Decimal), after the strict structural checks."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    # no displayTimeUnit: some trace processors take it for the unit of ts
    assert set(doc) == {"traceEvents", "otherData"}
    named_pids, named_threads = set(), set()
    tracks: dict[tuple, list] = defaultdict(list)
    counters: dict[tuple, list] = defaultdict(list)
    asyncs: dict[tuple, list] = defaultdict(list)
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert ph in REQUIRED, ev
        assert REQUIRED[ph] <= set(ev), (ph, ev)
        assert isinstance(ev["name"], str) and ev["name"]
        # the trace processor's tokenizer refuses an event with an array as a direct value
        assert not any(isinstance(v, list) for v in ev.values())
        assert isinstance(ev["pid"], int) and ev["pid"] > 0
        if "tid" in ev:
            assert isinstance(ev["tid"], int) and ev["tid"] > 0
        if ph != "M":
            ts = ev["ts"]
            assert isinstance(ts, int | Decimal) and ts >= 0
            assert (ts * 1000) == int(ts * 1000), "µs with at most ns decimals"
        if ph == "M":
            assert ev["name"] in METADATA
            if ev["name"].startswith("thread"):
                assert isinstance(ev["tid"], int)
            if ev["name"] == "process_name":
                named_pids.add(ev["pid"])
            elif ev["name"] == "thread_name":
                named_threads.add((ev["pid"], ev["tid"]))
            value = ev["args"]["name" if ev["name"].endswith("name") else "sort_index"]
            assert isinstance(value, str if ev["name"].endswith("name") else int)
        elif ph == "X":
            assert isinstance(ev["cat"], str) and ev["dur"] >= 0
            tracks[(ev["pid"], ev["tid"])].append(ev)
        elif ph == "C":
            (key, value), *more = ev["args"].items()
            assert not more and isinstance(value, int | Decimal)
            counters[(ev["pid"], ev["name"], key)].append(ev)
        else:
            asyncs[(ev["cat"], ev["id"])].append(ev)
    # the trace processor keys threads by tid alone, and a tid equal to a pid is that
    # process's main thread: tids are unique, and none is another process's pid
    tids = [tid for _, tid in named_threads]
    assert len(tids) == len(set(tids))
    assert all(tid == pid or tid not in named_pids for pid, tid in named_threads)
    for (pid, tid), slices in tracks.items():
        assert pid in named_pids and (pid, tid) in named_threads
        stack: list[Decimal] = []  # ends of the enclosing slices
        for s in sorted(slices, key=lambda s: (s["ts"], -s["dur"])):
            end = s["ts"] + s["dur"]
            while stack and stack[-1] <= s["ts"]:
                stack.pop()
            assert not stack or end <= stack[-1], f"slices overlap without nesting on {pid}/{tid}"
            stack.append(end)
    for (pid, _, _), samples in counters.items():
        assert pid in named_pids
        times = [c["ts"] for c in samples]
        assert times == sorted(times) and len(set(times)) == len(times), "counter not monotone"
    for pair in asyncs.values():
        assert [e["ph"] for e in pair] == ["b", "e"] and pair[0]["ts"] <= pair[1]["ts"]
        assert pair[0]["pid"] in named_pids
    doc["tracks"], doc["counters"], doc["asyncs"] = tracks, counters, asyncs
    return doc


def ns(doc: dict, us: Decimal) -> int:
    value = doc["otherData"]["origin_ns"] + us * 1000
    assert value == int(value)
    return int(value)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("service")
    svc = service_spans()
    (tmp / "shop.json").write_text(json.dumps(to_otlp_json(svc.spans)[0]))
    manifest, _ = ingest_otlp(tmp / "shop.json", tmp / "store")
    return svc, tmp / "store" / manifest.trace_id


def test_service_export_matches_the_store(service, tmp_path):
    svc, entry = service
    out = tmp_path / "shop.perfetto.json"
    summary = export_perfetto(entry, out)
    doc = load(out)
    assert summary.trace_events == len(doc["traceEvents"]) and summary.bytes == out.stat().st_size
    con = connect_checked(entry)
    slices = [s for track in doc["tracks"].values() for s in track]

    # a wait slice per WAIT, a hold slice per hold, at their times and on their tasks' tracks
    def as_rows(what):
        return Counter(
            (int(s["args"]["task"]), ns(doc, s["ts"]), int(s["dur"] * 1000))
            for s in slices
            if s["cat"] == what
        )

    waits = run(con, "SELECT task, ts, dur FROM waits").fetchall()
    assert len(waits) == run(con, "SELECT count(*) FROM events WHERE kind = 0").fetchall()[0][0]
    assert as_rows("wait") == Counter(waits) and summary.wait_slices == len(waits)
    holds = run(con, "SELECT task, acquire_ts, hold_ns FROM holds").fetchall()
    assert as_rows("hold") == Counter(holds) and summary.hold_slices == len(holds)
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["name"] == "thread_name"
    }
    names = dict(run(con, "SELECT task, name FROM tasks").fetchall())
    for (pid, tid), track in doc["tracks"].items():
        task = int(track[0]["args"]["task"])
        assert all(int(s["args"]["task"]) == task for s in track)
        assert threads[(pid, tid)].startswith(f"{names[task]} [task {task}]")

    # outstanding, recomputed from the events: the level after every event at a sample's time
    table = pq.read_table(entry / "events", columns=["ts", "kind", "resource", "amount"])
    level, expected = 0, {}
    for ts, kind, amount in sorted(
        (r["ts"], r["kind"], r["amount"]) for r in table.to_pylist() if r["kind"] in (1, 3)
    ):
        level += amount if kind == 1 else -amount
        expected[ts] = level
    samples = doc["counters"][(1, "db.pool", "outstanding")]
    assert {ns(doc, c["ts"]): c["args"]["outstanding"] for c in samples} == expected
    assert max(expected.values()) == 2  # both connections out while the report runs

    # acquires/s over the windows adds up to the ACQUIREs, and the windows cover the trace
    rate = doc["counters"][(1, "db.pool", "acquires/s")]
    window = doc["otherData"]["rate_window_ns"]
    assert sum(c["args"]["acquires/s"] * window / Decimal(10**9) for c in rate) == sum(
        1 for r in table.to_pylist() if r["kind"] == 1
    )
    starts = [ns(doc, c["ts"]) for c in rate]
    assert all(b - a == window for a, b in zip(starts, starts[1:], strict=False))
    m_start, m_end = run(con, "SELECT min(ts), max(ts + coalesce(dur, 0)) FROM events").fetchall()[
        0
    ]
    assert starts[0] == m_start and starts[-1] <= m_end < starts[-1] + window

    # a marked interval per finding, the diagnosis's own, over the report's holds
    findings = diagnose(entry).to_json()["findings"]
    assert findings and summary.findings == len(findings)
    marked = {b["args"]["rank"]: (b, e) for (_, _), (b, e) in doc["asyncs"].items()}
    for f in findings:
        b, e = marked[f["rank"]]
        assert b["name"] == f"#{f['rank']} {f['failure_mode']} on {f['resource']}"
        assert b["args"]["summary"] == f["summary"]
        assert b["args"]["culprit_tasks"] == [str(t) for t in f["culprit_tasks"]]
    report = int.from_bytes(svc.report_span_id, "big") & ((1 << 63) - 1)
    assert findings[0]["culprit_tasks"][0] == report
    b, e = marked[1]
    first, last = run(
        con, f"SELECT min(acquire_ts), max(release_ts) FROM holds WHERE task = {report}"
    ).fetchall()[0]
    assert (ns(doc, b["ts"]), ns(doc, e["ts"])) == (first, last)
    assert b["args"]["culprits"] == ["GET /reports/quarterly"]


def test_overlapping_holds_get_tracks_that_nest(tmp_path, trace_dir, store):
    """Hand-over-hand locking: task 1 holds a, takes b, gives a back, so its holds overlap
    without nesting; its child task 2 waits (still waiting at the end) and holds b open."""
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[0, 2, 5, 10, 15, 16, 17, 30],
            kind=["ACQUIRE", "WAIT", "ACQUIRE", "RELEASE", "RELEASE", "ACQUIRE", "WAIT", "USE"],
            resource=["lock.a", "lock.b", "lock.b", "lock.a", "lock.b", "lock.b", "lock.a", "x"],
            task=[1, 1, 1, 1, 1, 2, 2, 3],
            amount=pa.array([1, 1, 1, 1, 1, 3, 1, 1], pa.int64()),
            dur=pa.array([0, 3, 0, 0, 0, 0, None, 0], pa.int64()),
        ),
    )
    write_stream(
        trace_dir / "t.arrows",
        {
            "task": pa.array([1, 2], pa.int64()),
            "name": ["handover", "child"],
            "parent": pa.array([None, 1], pa.int64()),
        },
        metadata={"gigi.table": "tasks"},
    )
    m = ingest(trace_dir, store)
    out = tmp_path / "locks.json"
    summary = export_perfetto(store / m.trace_id, out, PerfettoConfig(rate_window_ns=10))
    doc = load(out)
    by_name = {
        e["args"]["name"]: (e["pid"], e["tid"])
        for e in doc["traceEvents"]
        if e["name"] == "thread_name"
    }
    spans = {
        name: sorted((s["name"], ns(doc, s["ts"]), ns(doc, s["ts"] + s["dur"])) for s in track)
        for name, track in ((n, doc["tracks"][t]) for n, t in by_name.items() if t[0] > 2)
    }
    assert spans == {
        "handover [task 1]": [("hold lock.a", 0, 10), ("wait lock.b", 2, 5)],
        "handover [task 1] (2)": [("hold lock.b", 5, 15)],
        "child [task 2]": [("hold lock.b", 16, 30), ("wait lock.a", 17, 30)],
    }
    assert summary.task_tracks == 3 and summary.processes == 1
    process = {
        e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"
    }
    assert process[by_name["child [task 2]"][0]] == "handover [task 1]"  # the tree's root
    opened = [s for t in doc["tracks"].values() for s in t if s["args"]["open"]]
    assert sorted(s["name"] for s in opened) == ["hold lock.b", "wait lock.a"]
    outstanding = {
        key[1]: [(ns(doc, c["ts"]), c["args"]["outstanding"]) for c in samples]
        for key, samples in doc["counters"].items()
        if key[2] == "outstanding"
    }
    assert outstanding == {"lock.a": [(0, 1), (10, 0)], "lock.b": [(5, 1), (15, 0), (16, 3)]}
    rates = {
        key[1]: [c["args"]["acquires/s"] for c in samples]
        for key, samples in doc["counters"].items()
        if key[2] == "acquires/s"
    }
    assert rates == {"lock.a": [10**8, 0, 0, 0], "lock.b": [10**8, 10**8, 0, 0]}


def test_cli_export(service, tmp_path, capsys):
    from gigi.cli import main

    _, entry = service
    out = tmp_path / "cli.json"
    assert main(["export", "--perfetto", str(out), str(entry)]) == 0
    doc = load(out)
    assert f"({out.stat().st_size:,} bytes, {len(doc['traceEvents']):,} trace events)" in (
        capsys.readouterr().out
    )
    for args, message in (
        ([str(tmp_path / "nothing")], "no such store or trace directory"),
        ([str(entry), "--rate-window", "soon"], "--rate-window 'soon'"),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "gigi.cli", "export", "--perfetto", str(out), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert bad.returncode == 2 and message in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def _trace_processor() -> str | None:
    found = os.environ.get("GIGI_TRACE_PROCESSOR") or shutil.which("trace_processor_shell")
    return found if found and Path(found).is_file() else None


@pytest.mark.skipif(
    _trace_processor() is None,
    reason="no trace_processor_shell (the perfetto package downloads it, which needs a "
    "network; set GIGI_TRACE_PROCESSOR to a binary)",
)
def test_perfetto_trace_processor_loads_it(service, tmp_path):
    tp_api = pytest.importorskip("perfetto.trace_processor")
    _, entry = service
    out = tmp_path / "tp.json"
    s = export_perfetto(entry, out)
    config = tp_api.TraceProcessorConfig(bin_path=_trace_processor())
    with tp_api.TraceProcessor(trace=str(out), config=config) as tp:

        def rows(q):
            return [tuple(r.__dict__.values()) for r in tp.query(q)]

        by_cat = dict(rows("SELECT category, count(*) FROM slice GROUP BY 1"))
        assert by_cat["wait"] == s.wait_slices and by_cat["hold"] == s.hold_slices
        assert by_cat["finding"] == s.findings
        counts = dict(
            rows(
                "SELECT t.name, count(*) FROM counter c JOIN counter_track t "
                "ON c.track_id = t.id GROUP BY 1"
            )
        )
        assert counts["db.pool outstanding"] == s.outstanding_samples
        assert counts["db.pool acquires/s"] == s.rate_samples
