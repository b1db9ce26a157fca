"""The SQL sandbox holds for every statement a user can influence: --param names, detector
files, the spill directory, and what table output makes of the data it prints."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from gigi.cli import main
from gigi.errors import DetectorError, QueryError
from gigi.queries import connect
from tests.conftest import events, write_stream

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gigi.cli", *args],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        text=True,
    )


@pytest.fixture
def store(trace_dir, tmp_path):
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[1, 2, 3, 4],
            kind=["ACQUIRE", "USE", "RELEASE", "WAIT"],
            resource=["a.b"] * 4,
            dur=pa.array([0, 0, 0, None], pa.int64()),
        ),
    )
    store = tmp_path / "store"
    assert main(["ingest", str(trace_dir), "--store", str(store)]) == 0
    return store


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("the secret\n")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _refused(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def test_a_param_name_is_a_name_not_sql(store, secret, tmp_path):
    """A --param name is checked as an identifier before anything runs: text pasted after it
    could otherwise read a file or write one before the connection is locked."""
    read = cli(
        "sql",
        str(store),
        "SELECT getvariable('a') AS a",
        "--param",
        f"a TO (SELECT content FROM read_text('{secret}')) ; SET VARIABLE b=1",
    )
    _refused(read, "is not a name")
    assert "the secret" not in read.stdout + read.stderr
    written = tmp_path / "x.csv"
    out = cli(
        "query",
        "wait_summary",
        str(store),
        "--param",
        f"a TO 1; COPY (SELECT 'x') TO '{written}'; SET VARIABLE b=1",
    )
    _refused(out, "is not a name")
    assert not written.exists()


def test_a_param_value_is_bound_as_a_value(store, secret):
    """A value is bound, never pasted: quotes and SQL in it stay text."""
    value = f"'); SELECT content FROM read_text('{secret}'); --"
    out = cli(
        "sql",
        str(store),
        "SELECT getvariable('a') AS a",
        "--param",
        f"a={value}",
        "--format",
        "csv",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1] == '"' + value.replace('"', '""') + '"'
    assert "the secret" not in out.stdout
    with pytest.raises(QueryError, match="is not a name"):
        connect(store, variables={"a; DROP VIEW events": 1})


@pytest.mark.parametrize(
    "statement, kind",
    [
        ("COPY (SELECT 1 AS x) TO '{entry}/events/zz.parquet' (FORMAT parquet)", "COPY"),
        ("ATTACH '{entry}/other.duckdb'", "ATTACH"),
        ("CREATE OR REPLACE VIEW metrics_resources AS SELECT 1", "CREATE"),
        ("SET VARIABLE min_wait = 100", "SET"),
    ],
)
def test_a_detector_is_one_read_only_query(store, tmp_path, statement, kind):
    """A detector file runs on the trace's own connection: anything but one query is refused
    with the file and line, before it runs, and the store is left as it was."""
    entry = next(p for p in store.iterdir() if p.is_dir() and not p.name.startswith("."))
    before = _files(store)
    folder = tmp_path / "dets"
    folder.mkdir()
    (folder / "evil.sql").write_text(
        "-- detector: evil\n-- failure_mode: leak\n-- meaning: none\n"
        "SELECT 1 AS x;\n\n" + statement.format(entry=entry) + ";\n"
    )
    out = cli("diagnose", str(store), "--detectors", str(folder))
    _refused(out, f"evil.sql:6: refused: a {kind} statement")
    assert _files(store) == before
    assert not (entry / "other.duckdb").exists()
    only = tmp_path / "only"
    only.mkdir()
    (only / "evil.sql").write_text(
        "-- detector: evil\n-- failure_mode: leak\n-- meaning: none\n"
        + statement.format(entry=entry)
        + "\n"
    )
    with pytest.raises(DetectorError, match=f"evil.sql:4: refused: a {kind} statement"):
        from gigi.diagnosis import diagnose

        diagnose(store, detectors=[only])
    assert _files(store) == before


def test_two_queries_are_not_a_detector(tmp_path):
    from gigi.detectors import parse

    path = tmp_path / "two.sql"
    path.write_text(
        "-- detector: two\n-- failure_mode: leak\n-- meaning: none\nSELECT 1;\nSELECT 2;\n"
    )
    with pytest.raises(DetectorError, match="two.sql: a detector is one query .* found 2"):
        parse(path, builtin=False)


def test_every_builtin_detector_is_one_query():
    """Diagnose skips the one-query check for the detectors gigi ships; this is where they
    pass it."""
    from gigi.detectors import BUILTIN_DIR, SPARK_SUFFIX, _check_query

    paths = [p for p in sorted(BUILTIN_DIR.glob("*.sql")) if not p.name.endswith(SPARK_SUFFIX)]
    assert len(paths) >= 6
    for path in paths:
        _check_query(path, path.read_text())


def test_the_spill_directory_is_private_and_fresh(store, secret, tmp_path):
    """The spill directory is made new for each connection, mode 0700: a link planted where
    an older gigi put it (TMPDIR/gigi-duckdb-<uid>) opens nothing; it is gone when the
    connection is."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / f"gigi-duckdb-{os.getuid()}").symlink_to("/")
    planted = f"{tmp}/gigi-duckdb-{os.getuid()}{secret}"
    out = cli(
        "sql", str(store), f"SELECT content FROM read_text('{planted}')", env={"TMPDIR": str(tmp)}
    )
    _refused(out, "refused")
    assert "the secret" not in out.stdout

    old = tempfile.tempdir
    tempfile.tempdir = str(tmp)
    try:
        con = connect(store)
        (spill,) = con.execute("SELECT current_setting('temp_directory')").fetchone()
        assert Path(spill).parent == tmp and not Path(spill).is_symlink()
        assert Path(spill).stat().st_mode & 0o777 == 0o700
        con.close()
        del con
        assert not Path(spill).exists()
    finally:
        tempfile.tempdir = old


def test_table_output_shows_the_data_as_it_is(store):
    """Rich markup and emoji codes in the data are printed as they are, not rendered."""
    out = cli("sql", str(store), "SELECT '[red]x[/red] :smile: [bold]' AS \"[blue]s\"")
    assert out.returncode == 0, out.stderr
    assert "[red]x[/red] :smile: [bold]" in out.stdout
    assert "[blue]s" in out.stdout


@pytest.mark.parametrize(
    "sql",
    ["INSERT OVERWRITE DIRECTORY 'out' SELECT 1", "CREATE TABLE t AS SELECT 1", "SET x = 1"],
)
def test_only_a_query_goes_to_spark(sql):
    """A detector's Spark form (``name.spark.sql``) is held to the same rule: one query."""
    from gigi.lake._transpile import to_spark

    with pytest.raises(DetectorError, match=r"mine.spark.sql: refused: a \w+ statement"):
        to_spark(sql, where="mine.spark.sql")
