import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from gigi import _cli_reference
from gigi.cli import main
from tests.conftest import events, write_stream

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gigi.cli", *args], capture_output=True, cwd=ROOT)


@pytest.fixture
def ingested(trace_dir, store):
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[1, 2, 3, 4],
            kind=["ACQUIRE", "USE", "RELEASE", "WAIT"],
            resource=["a.b"] * 4,
            dur=pa.array([0, 0, 0, None], pa.int64()),
        ),
    )
    write_stream(
        trace_dir / "r.arrows",
        {"resource": ["a.b"], "dropped": pa.array([7])},
        metadata={"gigi.table": "resources"},
    )
    assert main(["ingest", str(trace_dir), "--store", str(store)]) == 0
    return store


def test_ingest_reports_drops(trace_dir, store):
    write_stream(trace_dir / "e.arrows", events(ts=[1], kind=["ACQUIRE"]))
    write_stream(
        trace_dir / "r.arrows",
        {"resource": ["r"], "dropped": pa.array([7])},
        metadata={"gigi.table": "resources"},
    )
    out = cli("ingest", str(trace_dir), "--store", str(store))
    assert out.returncode == 0, out.stderr
    assert b"ingested 1 events" in out.stdout
    assert b"dropped: 7 events (r 7); bytes lost: 0" in out.stdout
    info = cli("info", str(store))
    assert b"dropped: 7 events (r 7)" in info.stdout
    out = cli("sql", str(store), "SELECT count(*) AS n FROM events", "--format", "csv")
    assert out.stdout.decode().splitlines() == ['"n"', "1"]
    assert "note: trace" in out.stderr.decode() and "is incomplete: dropped: 7 events" in (
        out.stderr.decode()
    )


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "arrow"])
def test_sql_formats(ingested, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    assert (
        main(
            [
                "sql",
                str(ingested),
                "SELECT kind, resource FROM events ORDER BY seq",
                "--format",
                fmt,
                "--output",
                str(out),
            ]
        )
        == 0
    )
    if fmt == "csv":
        assert out.read_text().splitlines()[:2] == ['"kind","resource"', '1,"a.b"']
    elif fmt == "json":
        assert json.loads(out.read_text())[0] == {"kind": 1, "resource": "a.b"}
    elif fmt == "parquet":
        assert pq.read_table(out).num_rows == 4
    else:
        assert ipc.open_stream(out).read_all().column("kind").to_pylist() == [1, 2, 3, 0]


def test_csv_to_stdout_and_named_query(ingested):
    out = cli("query", "events_by_kind", str(ingested), "--format", "csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines() == [
        '"resource","waits","acquires","uses","releases","tasks","dropped"',
        '"a.b",1,1,1,1,1,7',
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "no/such/dir"], "gigi-query: error: no/such/dir: no such trace directory"),
        (["sql", "{store}", "DELETE FROM events"], "refused: DELETE statements are not allowed"),
        (["sql", "{store}", "SELECT nope FROM events"], 'Referenced column "nope" not found'),
        (["query", "wait_sumary", "{store}"], "did you mean 'wait_summary'"),
        (["sql", "{store}", "SELECT 1", "--format", "xml"], "unknown format 'xml'"),
        (["info", "{store}", "--trace", "zzz"], "no trace 'zzz' in this store"),
        (["sql", "{store}", "SELECT 1", "--param", "oops"], "--param 'oops': expected NAME=VALUE"),
        # raised by DuckDB while the rows are fetched, not when the query is prepared
        (["sql", "{store}", "SELECT error('boom')"], "error: Invalid Input Error: boom"),
        (
            ["sql", "{store}", "SELECT * FROM sniff_csv('{store}/../trace/e.arrows')"],
            "gigi-query: error: refused: queries may read only the trace's own tables",
        ),
        (["sql", "{store}", "SELECT CAST('x' AS INT)"], "error: Conversion Error: Could not"),
        (["sql", "{store}", "SELECT max(ts) + 9223372036854775807 FROM events"], "Out of Range"),
    ],
)
def test_errors_are_one_line_without_traceback(ingested, args, message):
    out = cli(*(a.replace("{store}", str(ingested)) for a in args))
    err = out.stderr.decode()
    assert out.returncode == 2, err
    assert message in err
    assert "Traceback" not in err
    # One line for the error (beside the note that this trace lost events).
    lines = [line for line in err.strip().splitlines() if not line.startswith("gigi-query: note")]
    assert len(lines) == 1


def test_csv_writes_lists_structs_and_maps_as_json_text(ingested):
    out = cli(
        "sql",
        str(ingested),
        "SELECT [1, 2] AS l, {'a': [NULL, 'x']} AS s, NULL::INT[] AS n, 3 AS i",
        "--format",
        "csv",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines() == [
        '"l","s","n","i"',
        '"[1, 2]","{""a"": [null, ""x""]}",,3',
    ]


def test_bad_segment_error_names_the_file(trace_dir, store):
    (trace_dir / "x.arrows").write_bytes(b"\x00garbage" * 20)
    out = cli("ingest", str(trace_dir), "--store", str(store))
    err = out.stderr.decode()
    assert out.returncode == 2 and "x.arrows: not an Arrow IPC stream" in err
    assert len(err.strip().splitlines()) == 1


def test_every_command_has_help_with_an_example():
    for name in _cli_reference.commands():
        text = _cli_reference.help_text(name.split())
        assert "Example: gigi-query " + name in text, name


def test_readme_cli_reference_is_current():
    readme = (ROOT / "README.md").read_text()
    assert _cli_reference.reference() in readme, (
        "README.md is out of date: run python -m gigi._cli_reference --write"
    )


def test_probes_help_names_every_variable_the_runtime_reads():
    """A program built with the native runtime is set up by its environment alone: every
    variable the runtime reads is said, with what it does, in ``gigi-query probes --help``."""
    import re

    source = (ROOT / "gigi" / "probes" / "native" / "gigi_probe.c").read_text()
    read = set(re.findall(r'getenv\("(GIGI_\w+)"\)', source))
    assert {"GIGI_TRACE", "GIGI_SAMPLE"} <= read
    text = _cli_reference.help_text(["probes"])
    assert not {v for v in read if v + "=" not in text}, text
