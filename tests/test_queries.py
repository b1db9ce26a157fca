import pyarrow as pa
import pytest

from gigi.errors import QueryError
from gigi.queries import named_queries, run, run_named, views
from tests.conftest import connect_checked, events, write_stream


@pytest.fixture
def tiny(trace_dir):
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=[0, 10, 20, 25, 30, 40, 50],
            kind=["WAIT", "ACQUIRE", "ACQUIRE", "USE", "RELEASE", "WAIT", "RELEASE"],
            task=[2, 1, 2, 1, 1, 3, 2],
            amount=pa.array([1, 3, 2, 1, 3, 1, 1], pa.int64()),
            dur=pa.array([20, 0, 0, 5, 0, None, 0], pa.int64()),
            resource=["pool"] * 7,
        ),
    )
    write_stream(
        trace_dir / "r.arrows",
        {"resource": ["pool"], "capacity": pa.array([4])},
        metadata={"gigi.table": "resources"},
    )
    write_stream(
        trace_dir / "t.arrows",
        {
            "task": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", "c"],
            "kind": ["foreground"] * 3,
            "start": pa.array([0, 0, 0]),
            "end": pa.array([35, 55, None]),
        },
        metadata={"gigi.table": "tasks"},
    )
    return trace_dir


def test_waits_golden(tiny):
    rows = run(connect_checked(tiny), "SELECT task, ts, end_ts, dur, open FROM waits ORDER BY ts")
    # The open wait runs to the trace end: the latest ts + dur (50).
    assert rows.fetchall() == [(2, 0, 20, 20, False), (3, 40, 50, 10, True)]


def test_outstanding_golden(tiny):
    rows = run(connect_checked(tiny), "SELECT ts, delta, outstanding, capacity FROM outstanding")
    assert rows.fetchall() == [(10, 3, 3, 4), (20, 2, 5, 4), (30, -3, 2, 4), (50, -1, 1, 4)]


def test_holds_golden(tiny):
    rows = run(
        connect_checked(tiny),
        "SELECT task, release_task, hold_ns, amount, open FROM holds ORDER BY acquire_ts, open",
    )
    assert rows.fetchall() == [(1, 1, 20, 3, False), (2, 2, 30, 1, False), (2, None, 30, 1, True)]


def test_named_queries_all_run(tiny):
    con = connect_checked(tiny)
    for name in named_queries():
        run_named(con, name).fetchall()
    # 2 waits, 1 open, 2 tasks; 30 ns in all
    assert run_named(con, "wait_summary").fetchall()[0][:5] == ("pool", 2, 1, 2, 0.0)
    # Tasks a and b end in the first 100 ms window; c never ends.
    assert run_named(con, "throughput").fetchall() == [(0, 2, 20.0, 0.0)]
    con = connect_checked(tiny, variables={"window_ms": "250"})
    assert run_named(con, "throughput").fetchall() == [(0, 2, 8.0, 0.0)]
    assert run_named(con, "outstanding_summary").fetchall() == [("pool", 4, 5, 1, 1.25, 4)]


def test_unknown_named_query_suggests(tiny):
    with pytest.raises(
        QueryError, match="no named query 'wait_sumary'.*did you mean 'wait_summary'"
    ):
        run_named(connect_checked(tiny), "wait_sumary")


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO events SELECT * FROM events",
        "COPY events TO 'out.csv'",
        "ATTACH 'other.duckdb'",
        "SET enable_external_access = true",
        "SELECT 1; DROP VIEW events",
        "INSTALL httpfs",
    ],
)
def test_writes_and_settings_are_refused(tiny, sql):
    with pytest.raises(QueryError, match="refused: .* statements are not allowed"):
        run(connect_checked(tiny), sql)


def test_reading_other_files_is_refused(tiny, tmp_path):
    other = tmp_path / "secret.csv"
    other.write_text("a\n1\n")
    with pytest.raises(QueryError, match="refused: queries may read only the trace's own tables"):
        run(connect_checked(tiny), f"SELECT * FROM read_csv('{other}')")


def test_every_public_column_is_documented(tiny):
    con = connect_checked(tiny)
    for doc in list(views().values()) + list(named_queries().values()):
        assert doc.summary, f"{doc.path.name}: no header comment"
        sql = doc.name if doc.name in views() else f"({doc.text.rstrip().rstrip(';')})"
        cols = [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {sql}").fetchall()]
        missing = [c for c in cols if c not in doc.columns]
        assert not missing, f"{doc.path.name}: columns without a comment: {missing}"


def test_self_check_catches_a_broken_store(tiny, store):
    import pyarrow.parquet as pq

    from gigi.ingest import ingest
    from gigi.queries import connect, self_check

    m = ingest(tiny, store)
    assert self_check(connect(store)) == []
    pairs = store / m.trace_id / "hold_pairs" / "part-000000.parquet"
    table = pq.read_table(pairs)
    pq.write_table(table.set_column(2, "amount", pa.array([9] * table.num_rows)), pairs)
    assert self_check(connect(store)) == [
        "every ACQUIRE's units are paired exactly once",
        "every RELEASE's units are paired exactly once",
    ]
