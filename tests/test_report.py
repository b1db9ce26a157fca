"""The HTML report without a browser: its SQL on tiny traces, the source excerpts' root, the
page's escaping and its errors. tests/test_report_browser.py renders pages in Chromium."""

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from gigi.diagnosis import diagnose
from gigi.queries._docs import parse
from gigi.report import ReportConfig, render
from gigi.report._data import HERE, culprit_holds, timelines
from gigi.report._source import SourceTree
from tests.conftest import connect_checked, events, write_stream

ROOT = Path(__file__).resolve().parents[1]


def _ingest(trace_dir: Path, store: Path, **cols) -> Path:
    from gigi.ingest import ingest

    write_stream(trace_dir / "e.arrows", events(**cols))
    return store / ingest(trace_dir, store).trace_id


@pytest.fixture
def two_holds(trace_dir, store):
    """Task 1 holds 2 units over [0, 50); task 2 waits over [10, 50), then holds 1 unit over
    [50, 100)."""
    return _ingest(
        trace_dir,
        store,
        ts=[0, 10, 50, 50, 100],
        kind=["ACQUIRE", "WAIT", "RELEASE", "ACQUIRE", "RELEASE"],
        task=[1, 2, 1, 2, 2],
        amount=pa.array([2, 1, 2, 1, 1], pa.int64()),
        dur=pa.array([0, 40, 0, 0, 0], pa.int64()),
    )


def test_timeline_is_time_weighted_per_window(two_holds):
    con = connect_checked(two_holds)
    t = timelines(con, 2)["r"]
    assert t.edges == [0, 50, 100]
    assert t.values == {
        "outstanding": [2.0, 1.0],
        "waiting": [40 / 50, 0.0],
        "acquire_rate_per_s": [1e9 / 50, 1e9 / 50],
    }
    # finer windows split the same time: the means over them average back to the coarse ones
    fine = timelines(con, 10)["r"].values
    for name, coarse in t.values.items():
        assert [sum(fine[name][:5]) / 5, sum(fine[name][5:]) / 5] == pytest.approx(coarse)


def test_culprit_holds_merge_within_the_gap(trace_dir, store):
    entry = _ingest(
        trace_dir,
        store,
        ts=[0, 10, 12, 20, 50, 60, 5, 30],
        kind=["ACQUIRE", "RELEASE"] * 4,
        task=[1, 1, 1, 1, 1, 1, 3, 3],
        object=pa.array([1, 1, 1, 1, 1, 1, 2, 2], pa.int64()),
    )
    con = connect_checked(entry)
    assert culprit_holds(con, "r", [1], gap_ns=5) == [(1, 0, 20, 2), (1, 50, 60, 1)]
    assert culprit_holds(con, "r", [1], gap_ns=0) == [(1, 0, 10, 1), (1, 12, 20, 1), (1, 50, 60, 1)]
    assert culprit_holds(con, "r", [1, 3], gap_ns=100) == [(1, 0, 60, 3), (3, 5, 30, 1)]
    assert culprit_holds(con, "other", [1], gap_ns=5) == []


def test_report_sql_columns_are_documented(two_holds):
    con = connect_checked(two_holds)
    params = {
        "timeline": {"windows": 4},
        "culprit_holds": {"resource": "r", "tasks": [1], "gap_ns": 0},
    }
    assert sorted(p.stem for p in HERE.glob("*.sql")) == sorted(params)
    for name, values in params.items():
        doc = parse(HERE / f"{name}.sql")
        assert doc.summary, name
        assert set(doc.params) == set(values), name
        cols = [d[0] for d in con.execute(doc.text, values).description]
        assert cols and all(c in doc.columns for c in cols), (name, cols, doc.columns)


def test_source_excerpts_stay_under_the_root(tmp_path):
    root = tmp_path / "src"
    (root / "app").mkdir(parents=True)
    (root / "app" / "db.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    (tmp_path / "secret.py").write_text("password = 1\n")
    (root / "app" / "link.py").symlink_to(tmp_path / "secret.py")
    tree = SourceTree(root, context=2)
    ex = tree.excerpt("app/db.py", 10)
    assert ex.missing is None and ex.line == 10
    assert ex.lines == [(n, f"line {n}") for n in range(8, 13)]
    assert tree.excerpt("app/db.py", 1).lines[0] == (1, "line 1")
    assert "has no line 99" in tree.excerpt("app/db.py", 99).missing
    for outside in ("../secret.py", str(tmp_path / "secret.py"), "app/link.py"):
        ex = tree.excerpt(outside, 1)
        assert ex.lines == [] and "outside the source root" in ex.missing, outside
    assert "no app/gone.py" in tree.excerpt("app/gone.py", 1).missing
    assert SourceTree(None).excerpt("app/db.py", 10).missing.startswith("source not available")


def test_trace_text_is_escaped_and_the_page_fetches_nothing(trace_dir, store):
    """A resource name with markup (any writer may name one so) and the healthy page."""
    name = 'x"><img src=http://example.invalid/a onerror=alert(1)>'
    entry = _ingest(trace_dir, store, ts=[0, 10], kind=["ACQUIRE", "RELEASE"], resource=[name] * 2)
    page = render(diagnose(entry))
    assert name not in page
    assert "&lt;img src=http://example.invalid/a onerror=alert(1)&gt;" in page
    assert "No findings" in page and page.count('<svg class="plot"') == 1
    assert "<script" not in page and "http://example" not in page.replace("&lt;img src=http", "")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gigi.cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_report_cli_writes_the_page_and_says_so(two_holds, tmp_path):
    out = _cli("report", str(two_holds), "--html", str(tmp_path / "r.html"))
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r.html").read_text()
    found = len(diagnose(two_holds).findings)
    assert f"wrote {tmp_path / 'r.html'} ({len(page.encode()):,} bytes); findings: {found}" in (
        out.stdout
    )
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('<section class="finding"') == found


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no/such/store"], "no/such/store: no such store or trace directory"),
        (["{file}"], "neither a gigi store nor a trace directory"),
        (["{store}", "--source", "no/such/src"], "--source no/such/src: no such directory"),
    ],
)
def test_report_bad_input_is_one_line(two_holds, tmp_path, args, message):
    (tmp_path / "plain.txt").write_text("not a trace\n")
    args = [a.replace("{store}", str(two_holds)) for a in args]
    args = [a.replace("{file}", str(tmp_path / "plain.txt")) for a in args]
    out = _cli("report", *args, "--html", str(tmp_path / "r.html"))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gigi-query: error: "), out.stderr
    assert message in lines[0]
    assert not (tmp_path / "r.html").exists()


def test_config_windows_shape_the_plot(two_holds):
    page = render(diagnose(two_holds), ReportConfig(windows=7))
    assert "over 7 windows" in page
    paths = re.findall(r'<path d="([^"]*)"', page)
    assert len(paths) == 3 and all(d.count("H") == 7 for d in paths)
