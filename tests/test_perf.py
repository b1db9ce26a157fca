"""Perf samples: `perf script` text parsed exactly (golden excerpts of real perf output in
tests/perf/), joined to tasks by thread and time, and shown beside a finding as what the culprit
was executing; end to end on a real program recorded by perf when perf can record here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from gigi.cli import main as cli
from gigi.diagnosis import diagnose
from gigi.errors import IngestError
from gigi.ingest import PerfSummary, ingest, ingest_perf, parse_perf_script
from gigi.queries import connect
from tests.conftest import S, events, perf_line, write_stream, write_tasks

PERF = Path(__file__).parent / "perf"
COLUMNS = ("ts", "thread", "pid", "comm", "cpu", "event", "period", "leaf_dso", "stack", "line")
LD = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
KERNEL_STACK = [
    "try_to_unlazy",
    "complete_walk",
    "path_openat",
    "do_filp_open",
    "do_sys_openat2",
    "__x64_sys_openat",
    "do_syscall_64",
    "entry_SYSCALL_64_after_hwframe",
    "__GI___open64_nocancel",
    "_dl_map_object",
    "[unknown]",
    "[unknown]",
]


def parsed(path: Path) -> tuple[list[tuple], PerfSummary]:
    summary = PerfSummary(path.name)
    table = pa.Table.from_batches(list(parse_perf_script(path, summary=summary)))
    return [tuple(r[c] for c in COLUMNS) for r in table.to_pylist()], summary


def test_call_graph_with_header_and_ns_times():
    """`perf record -g -k mono --sample-cpu`, `perf script --header --ns`: comm with a space,
    kernel and user frames, [unknown] frames named by their library, the clock from the header."""
    rows, s = parsed(PERF / "callgraph.txt")
    cxx, worker = (None, "cxx", 1, "cpu-clock", 250000), (None, "flush worker", 1, "cpu-clock")
    main_stack = ["db::Table::compact", "__libc_start_call_main"]
    worker_stack = ["db::Table::compact", "[libstdc++.so.6.0.30]"]
    assert rows == [
        (15305264264929, 27383, *cxx, LD, ["get_common_indices.constprop.0", "[unknown]"], 25),
        (15305264767644, 27383, *cxx, "[kernel.kallsyms]", KERNEL_STACK, 29),
        (15305266263340, 27383, *cxx, "/srv/app/cxx", main_stack, 43),
        (15305266510426, 27383, *cxx, "/srv/app/cxx", main_stack, 47),
        (15305268262492, 27385, *worker, 250000, "/srv/app/cxx", worker_stack, 51),
        (15305268513754, 27385, *worker, 250000, "/srv/app/cxx", worker_stack, 55),
    ]
    assert (s.samples, s.threads, s.events, s.clock, s.skipped) == (
        6,
        2,
        {"cpu-clock": 6},
        "monotonic",
        0,
    )


def test_without_call_graph_one_line_per_sample():
    """`perf record` without -g, `perf script` defaults: comm right-aligned, µs times, the one
    frame on the header line."""
    rows, s = parsed(PERF / "flat.txt")
    cxx = (27508, None, "cxx", None, "cpu-clock", 250000)
    worker = (27510, None, "flush worker", None, "cpu-clock", 250000)
    assert rows == [
        (15322683124000, *cxx, LD, ["handle_amd"], 1),
        (15322683373000, *cxx, "[kernel.kallsyms]", ["do_fault"], 2),
        (15322683620000, *cxx, LD, ["_dl_receive_error"], 3),
        (15322688189000, *worker, "/srv/app/cxx", ["db::Table::compact"], 4),
        (15322688441000, *worker, "/srv/app/cxx", ["db::Table::compact"], 5),
    ]
    assert s.clock == "unknown"  # no header: perf's clock cannot be told


def test_every_field_pid_and_tid():
    """-F comm,pid,tid,cpu,time,period,event,ip,sym,dso,symoff: pid/tid both printed."""
    rows, _ = parsed(PERF / "fields.txt")
    assert [r[:7] for r in rows] == [
        (15305264767000, 27383, 27383, "cxx", 1, "cpu-clock", 250000),
        (15305266263000, 27383, 27383, "cxx", 1, "cpu-clock", 250000),
        (15305268262000, 27385, 27383, "flush worker", 1, "cpu-clock", 250000),
    ]
    assert rows[0][8] == KERNEL_STACK and rows[2][8] == [
        "db::Table::compact",
        "[libstdc++.so.6.0.30]",
    ]


def test_few_fields_and_srcline_lines():
    """-F tid,time,ip,sym,srcline: no comm, event, period or dso; srcline lines skipped."""
    rows, s = parsed(PERF / "srcline.txt")
    assert rows == [
        (15305264767000, 27383, None, None, None, None, None, None, KERNEL_STACK, 1),
        (15305266263000, 27383, *[None] * 6, ["db::Table::compact", "__libc_start_call_main"], 25),
        (15305268262000, 27385, *[None] * 6, ["db::Table::compact", "[unknown]"], 31),
    ]
    assert s.events == {"samples": 3}


def test_side_band_records_are_not_samples():
    """--show-task-events: PERF_RECORD_COMM/FORK/EXIT lines are counted and skipped."""
    rows, s = parsed(PERF / "sideband.txt")
    assert [(r[0], r[1], r[3], r[8]) for r in rows] == [
        (15305264264000, 27383, "cxx", ["get_common_indices.constprop.0", "[unknown]"]),
        (15305264511000, 27383, "cxx", ["init_cpu_features.constprop.0", "[unknown]"]),
        (15305268262000, 27385, "flush worker", ["db::Table::compact", "[unknown]"]),
    ]
    assert s.skipped == 5


def test_folded_stack_and_leaf(tmp_path):
    table = pa.Table.from_batches(list(parse_perf_script(PERF / "callgraph.txt")))
    row = table.slice(2, 1).to_pylist()[0]
    assert row["leaf"] == "db::Table::compact"
    assert row["folded"] == "__libc_start_call_main;db::Table::compact"
    assert table.column("sample").to_pylist() == list(range(6))


@pytest.mark.parametrize(
    ("line_no", "replacement", "message"),
    [
        (29, "cxx 27383 [001] 15305.2647x: cpu-clock:\n", "not a perf script sample line"),
        (30, "\tnot-an-address try_to_unlazy\n", "not a stack frame"),
    ],
)
def test_a_malformed_line_is_one_error_naming_file_and_line(
    tmp_path, line_no, replacement, message
):
    lines = (PERF / "callgraph.txt").read_text().splitlines(keepends=True)
    lines[line_no - 1] = replacement
    bad = tmp_path / "perf.txt"
    bad.write_text("".join(lines))
    with pytest.raises(IngestError) as e:
        list(parse_perf_script(bad))
    assert str(e.value).startswith(f"{bad}:{line_no}: {message}")
    assert "\n" not in str(e.value)


def test_a_frame_before_any_sample_is_refused(tmp_path):
    bad = tmp_path / "perf.txt"
    bad.write_text("\t  1376 db::Table::compact+0x30 (/srv/app/cxx)\n")
    with pytest.raises(IngestError, match=r"perf.txt:1: a stack frame outside any sample"):
        list(parse_perf_script(bad))


# --- joined to tasks, and beside a finding -------------------------------------------------


@pytest.fixture
def nested(trace_dir):
    """Thread 100 runs job 1 (1-9 s) with request 2 inside it (3-4 s); thread 200 runs task 3;
    task 4 has events on threads 100 and 200 (0.5 s and 9.5 s)."""
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[1 * S, 3 * S, 4 * S, 9 * S, 0, 10 * S, S // 2, 19 * S // 2],
            kind=["USE"] * 8,
            task=[1, 2, 2, 1, 3, 3, 4, 4],
            thread=[100, 100, 100, 100, 200, 200, 100, 200],
        ),
    )
    write_tasks(trace_dir / "t.arrows", [(1, "job", S, 9 * S), (2, "request", 3 * S, 4 * S)])
    return trace_dir


def test_samples_join_the_innermost_task_on_their_thread(nested, tmp_path, store):
    perf = tmp_path / "perf.txt"
    samples = [
        (2 * S, 100, "job_work"),  # job only
        (7 * S // 2, 100, "request_work"),  # inside the request inside the job
        (5 * S, 100, "job_after"),  # the request has ended: the job again
        (19 * S // 2, 100, "after_all"),  # no task on thread 100 any more
        (S // 4, 200, "third"),  # task 3
        (S, 300, "stranger"),  # a thread without events
    ]
    perf.write_text("".join(perf_line(*s) for s in samples))
    m = ingest(nested, store, perf=perf)
    assert m.samples == 6 and m.perf["in_trace"] == 6 and m.perf["on_trace_threads"] == 5
    con = connect(store)
    got = con.sql("SELECT leaf, task, name FROM samples_by_task ORDER BY sample").fetchall()
    assert got == [
        ("job_work", 1, "job"),
        ("request_work", 2, "request"),
        ("job_after", 1, "job"),
        ("third", 3, None),
    ]
    spans = con.sql('SELECT task, thread, start, "end" FROM task_threads ORDER BY 1, 2')
    assert spans.fetchall() == [
        (1, 100, S, 9 * S),
        (2, 100, 3 * S, 4 * S),
        (3, 200, 0, 10 * S),
        (4, 100, S // 2, S // 2),  # on two threads: only its own events' times
        (4, 200, 19 * S // 2, 19 * S // 2),
    ]


def test_perf_into_a_stored_trace_with_an_offset(nested, tmp_path, store):
    ingest(nested, store)
    con = connect(store)
    assert con.sql("SELECT count(*) FROM samples").fetchall() == [(0,)]
    perf = tmp_path / "perf.txt"
    perf.write_text(perf_line(1 * S, 100, "early") + perf_line(50 * S, 100, "late"))
    entry, m = ingest_perf(store, perf, perf_offset_ns=-49 * S)
    assert m.samples == 2 and m.perf["offset_ns"] == -49 * S and m.perf["in_trace"] == 1
    con = connect(store)
    got = con.sql("SELECT ts, leaf FROM samples ORDER BY sample").fetchall()
    assert got == [(-48 * S, "early"), (1 * S, "late")]
    # nothing lines up: the manifest says so, and a later good file clears the note
    far = tmp_path / "far.txt"
    far.write_text(perf_line(500 * S, 999, "x"))
    _, m = ingest_perf(store, far)
    assert any("none of the 1 samples falls within" in n for n in m.notes)
    assert any("no sample is on a thread" in n for n in m.notes)
    _, m = ingest_perf(store, perf, perf_offset_ns=-49 * S)
    assert not [n for n in m.notes if "far.txt" in n]


def test_a_store_without_samples_file_has_an_empty_samples_view(nested, store):
    m = ingest(nested, store)
    (store / m.trace_id / "samples.parquet").unlink()  # as ingested before samples existed
    con = connect(store)
    assert con.sql("SELECT count(*) FROM samples_by_task").fetchall() == [(0,)]


def test_diagnose_shows_what_the_culprit_executed(contended, store):
    trace, perf = contended
    ingest(trace, store, perf=perf)
    d = diagnose(store)
    top = d.findings[0]
    assert top.resource == "app.table_lock" and top.culprit_tasks[0] == 1
    ex = top.to_json()["executing"]
    assert ex["basis"] == "victim_waits" and ex["tasks"][0] == 1
    (cpu,) = ex["events"]
    assert (cpu["event"], cpu["samples"], cpu["threads"]) == ("cpu-clock", 100, [10])
    assert [(f["function"], f["share"], f["samples"]) for f in cpu["functions"]] == [
        ("compact_everything", 0.8, 80),
        ("memmove", 0.2, 20),
    ]
    json.dumps(d.to_json())  # the document stays JSON


def test_diagnose_cli_text_and_json_with_and_without_perf(contended, tmp_path, capsys):
    trace, perf = contended
    assert cli(["ingest", str(trace), "--store", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    assert cli(["diagnose", str(tmp_path / "plain"), "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["findings"] and all("executing" not in f for f in plain["findings"])
    assert cli(["ingest", str(trace), "--store", str(tmp_path / "s"), "--perf", str(perf)]) == 0
    out = capsys.readouterr().out
    assert "perf: 500 samples (cpu-clock 500)" in out and "clock unknown" in out
    assert cli(["diagnose", str(tmp_path / "s")]) == 0
    text = capsys.readouterr().out
    assert "executing (perf cpu-clock, 100 samples of 1 culprit thread(s)" in text
    assert " 80.0%  compact_everything" in text and "idle_loop" not in text
    assert cli(["ingest", "--store", str(tmp_path / "plain"), "--perf", str(perf)]) == 0
    assert "perf: 500 samples" in capsys.readouterr().out
    assert cli(["diagnose", str(tmp_path / "plain"), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"][0]["executing"]["events"][0]["functions"][0]["function"] == (
        "compact_everything"
    )


def test_ingest_cli_errors(tmp_path, capsys):
    assert cli(["ingest", "--store", str(tmp_path / "s")]) == 2
    assert "give a trace directory, or --perf FILE" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not perf output\n")
    (tmp_path / "s").mkdir()
    assert cli(["ingest", "--store", str(tmp_path / "s"), "--perf", str(bad)]) == 2
    assert "not a gigi store" in capsys.readouterr().err


# --- end to end: a real program, recorded by perf ---------------------------------------------


def _perf_record(cmd: list[str], data: Path, env: dict) -> str | None:
    """Run ``cmd`` under perf record; return why perf cannot record here, or None."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed"
    probe = subprocess.run(
        [perf, "record", "-q", "-e", "cpu-clock", "-k", "mono", "-o", str(data), "--", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return f"perf record cannot record in this environment: {why}"
    subprocess.run(
        [perf, "record", "-q", "-e", "cpu-clock", "-g", "-k", "mono", "-o", str(data), "--"] + cmd,
        env=env,
        check=True,
        timeout=300,
        capture_output=True,
    )
    return None


def test_end_to_end_perf_names_what_the_culprit_executed(tmp_path, capsys):
    from gigi.probes import native

    binary = tmp_path / "holder"
    subprocess.run(
        [native.compiler(), "-g", "-O1", "-fno-omit-frame-pointer", "-Wall", "-Werror"]
        + native.cflags()
        + [str(PERF / "holder.c")]
        + native.libs(tmp_path / "lib")
        + ["-o", str(binary)],
        check=True,
    )
    trace, data = tmp_path / "trace", tmp_path / "perf.data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    env["GIGI_TRACE"] = str(trace)
    why = _perf_record([str(binary), "150000000"], data, env)
    if why is not None:
        pytest.skip(why)
    text = tmp_path / "perf.txt"
    with text.open("w") as out:
        subprocess.run(
            ["perf", "script", "--header", "-i", str(data)], stdout=out, check=True, timeout=300
        )
    store = tmp_path / "store"
    assert cli(["ingest", str(trace), "--store", str(store), "--perf", str(text)]) == 0
    out = capsys.readouterr().out
    assert "clock monotonic" in out, out
    assert cli(["diagnose", str(store), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    top = doc["findings"][0]
    assert top["resource"] == "app.table_lock" and len(top["victim_tasks"]) == 2
    con = connect(store)
    names = dict(con.sql("SELECT task, name FROM tasks").fetchall())
    assert names[top["culprit_tasks"][0]] == "compaction"
    ex = top["executing"]
    assert ex["basis"] == "victim_waits"
    hot = ex["events"][0]
    assert hot["event"] == "cpu-clock" and hot["samples"] >= 20
    assert hot["functions"][0]["function"] == "compact_everything"
    assert hot["functions"][0]["share"] >= 0.5
    assert cli(["diagnose", str(store)]) == 0
    text_out = capsys.readouterr().out
    assert "executing (perf cpu-clock" in text_out and "compact_everything" in text_out


def test_a_header_without_clock_id_means_perfs_own_clock(nested, tmp_path, store):
    """`perf record` without -k mono: the header names no clock id; ingest warns."""
    text = (PERF / "callgraph.txt").read_text()
    text = "".join(line for line in text.splitlines(True) if not line.startswith("# clockid"))
    perf = tmp_path / "perf.txt"
    perf.write_text(text)
    assert parsed(perf)[1].clock == "perf"
    m = ingest(nested, store, perf=perf)
    assert m.perf["clock"] == "perf"
    assert any("perf's own clock, not CLOCK_MONOTONIC" in n for n in m.notes)


@pytest.mark.parametrize(
    ("header", "want"),
    [  # modeled on perf's layout (tests/perf/fields.txt) for events this machine cannot record
        ("app 1/2 [003] 10.000000001:     100003 cycles:u: ", ("cycles:u", 100003)),
        (
            "app 1/2 [003] 10.000000001:      20011 cpu_core/instructions/: ",
            ("cpu_core/instructions/", 20011),
        ),
        (
            "app 1/2 [003] 10.000000001:          1 sched:sched_switch: prev_comm=app prev_pid=2",
            ("sched:sched_switch", 1),
        ),
    ],
)
def test_event_names_with_modifiers_pmus_and_tracepoints(tmp_path, header, want):
    perf = tmp_path / "perf.txt"
    perf.write_text(header + "\n\t            1376 db::Table::compact+0x30 (/srv/app/cxx)\n\n")
    rows, s = parsed(perf)
    assert [(r[5], r[6], r[1], r[2], r[4], r[0], r[8]) for r in rows] == [
        (*want, 2, 1, 3, 10_000_000_001, ["db::Table::compact"])
    ]


def test_a_lake_keeps_the_samples_and_names_what_the_culprit_executed(contended, store):
    """ingest --lake carries a stored trace's perf samples (by day, like its events): a
    diagnosis of the lake names what the culprit executed, as the store's does; the trace put
    in again without them leaves none behind."""
    from gigi.ingest._lake import ingest_lake
    from gigi.lake import diagnose_lake

    trace, perf = contended
    m = ingest(trace, store, perf=perf)
    lake = store.parent / "lake"
    ingest_lake(store, lake)
    assert list((lake / "samples" / f"trace={m.trace_id}").glob("day=*/*.parquet"))
    want = diagnose(store).to_json()
    got = diagnose_lake(lake).to_json()
    assert got == want
    assert got["findings"][0]["executing"]["events"][0]["functions"][0]["function"] == (
        "compact_everything"
    )
    # a window: only its samples are read
    d = diagnose_lake(lake, since=0, until=S // 2)
    assert d.con.sql("SELECT count(*) FROM samples").fetchall()[0][0] == 2 * 45
    # again, from a store entry without samples: the lake's go
    bare = ingest(trace, store.parent / "bare")
    ingest_lake(store.parent / "bare", lake)
    assert bare.trace_id == m.trace_id
    assert not (lake / "samples" / f"trace={m.trace_id}").exists()
    assert "executing" not in diagnose_lake(lake).to_json()["findings"][0]
