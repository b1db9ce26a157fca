from gigi import demo
from gigi.ingest import ingest
from gigi.queries import run
from tests.conftest import connect_checked


def test_demo_shows_undo_growth_then_throughput_collapse(tmp_path):
    cfg = demo.DemoConfig(seconds=5.0, long_txn_start=0.5, long_txn_length=1.5)
    done = demo.run(tmp_path / "trace", cfg)
    assert len(done) > 1000
    m = ingest(tmp_path / "trace", tmp_path / "store")
    assert m.dropped == 0
    con = connect_checked(tmp_path / "store")
    # The long transaction's commit: its end, on the trace clock.
    commit = run(con, "SELECT \"end\" FROM tasks WHERE name LIKE 'long txn%'").fetchall()[0][0]
    start = run(con, "SELECT start FROM trace_info").fetchall()[0][0]
    (peak,) = run(
        con, "SELECT max(outstanding) FROM outstanding WHERE resource = 'engine.undo_log'"
    ).fetchall()[0]
    assert peak > 5000  # purge held back: the undo log grew while the long txn was open

    def rate(lo, hi):
        ((n,),) = run(
            con,
            f"""SELECT count(*) FROM tasks WHERE kind = 'foreground'
            AND name LIKE 'client-%' AND "end" BETWEEN {lo} AND {hi}""",
        ).fetchall()
        return n / ((hi - lo) / 1e9)

    second = 1_000_000_000
    before = rate(start + second // 4, commit)
    after = rate(commit, commit + second // 2)
    assert after < 0.6 * before, (before, after)
    # Purge released undo records that client transactions acquired.
    ((other,),) = run(
        con,
        "SELECT count(*) FROM holds WHERE resource = 'engine.undo_log' "
        "AND NOT open AND release_task <> task",
    ).fetchall()
    assert other > 100
