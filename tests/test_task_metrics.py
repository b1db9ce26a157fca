"""metrics_tasks and metrics_waits: per task shares of holds and USEs while others waited,
wait quantiles; each kernel against its SQL twin on random traces."""

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from gigi.diagnosis._metrics import compute
from gigi.metrics import sql_twin
from gigi.queries import connect
from tests.conftest import events, write_stream


def _trace(d, rows):
    """rows: (ts, kind, resource, task, amount, dur) in any order."""
    rows = sorted(rows, key=lambda r: r[0])
    ts, kind, res, task, amount, dur = zip(*rows, strict=True)
    write_stream(
        d / "e.arrows",
        events(
            ts=list(ts),
            kind=list(kind),
            resource=list(res),
            task=list(task),
            amount=pa.array(amount, pa.int64()),
            dur=pa.array(dur, pa.int64()),
        ),
    )
    con = connect(d)
    compute(con)
    return con


def test_shares_count_only_what_overlaps_other_tasks_waits(tmp_path):
    con = _trace(
        tmp_path,
        [
            (0, "ACQUIRE", "r", 1, 2, 0),  # task 1 holds 2 units over [0, 100)
            (100, "RELEASE", "r", 1, 2, 0),
            (20, "WAIT", "r", 2, 1, 30),  # task 2 waits [20, 50): 30 ns x 2 units
            (60, "WAIT", "r", 1, 1, 20),  # task 1 waits alone [60, 80): not others'
            (30, "USE", "r", 1, 5, 0),  # during task 2's wait
            (70, "USE", "r", 1, 7, 0),  # during its own wait only
            (50, "USE", "r", 1, 9, 0),  # at the instant task 2's wait ended
            (110, "ACQUIRE", "r", 2, 1, 0),
            (120, "USE", "r", 2, 1, 0),
        ],
    )
    rows = con.sql(
        "SELECT task, waits, wait_ns, acquired, used, utilization, held_while_others_waited,"
        " hold_share, used_while_others_waited, use_share FROM metrics_tasks ORDER BY task"
    ).fetchall()
    assert rows == [
        (1, 1, 20, 2, 21, 10.5, 60, 1.0, 5, 1.0),
        (2, 1, 30, 1, 1, 1.0, 0, 0.0, 0, 0.0),
    ]
    waits = con.sql("SELECT waits, p50_ns, max_ns FROM metrics_waits").fetchall()
    assert waits == [(2, 20, 30)]


_row = st.tuples(
    st.integers(0, 60),  # ts
    st.sampled_from(["WAIT", "ACQUIRE", "USE", "RELEASE"]),
    st.sampled_from(["a", "b"]),
    st.integers(1, 3),  # task
    st.integers(0, 4),  # amount
    st.integers(0, 25),  # dur of a wait
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_row, min_size=1, max_size=30))
def test_task_share_kernel_matches_its_sql_twin(tmp_path_factory, rows):
    rows = [r if r[1] == "WAIT" else (*r[:5], 0) for r in rows]
    con = _trace(tmp_path_factory.mktemp("shares"), rows)
    got = con.sql(
        "SELECT resource, task, held_while_others_waited, used_while_others_waited"
        " FROM metrics_tasks ORDER BY resource, task"
    ).fetchall()
    assert got == con.sql(sql_twin("task_shares")).fetchall()
    waits = con.sql("SELECT * FROM metrics_waits ORDER BY resource").fetchall()
    assert waits == con.sql(sql_twin("wait_time")).fetchall()


def test_shares_over_a_span_too_wide_to_pack_use_time_ranks():
    import numpy as np

    from gigi.metrics.tasks import task_shares

    def shares(far):
        # pair 0 holds 2 units over [0, 100) while pair 1 waits [20, 50); pair 2 holds at `far`
        a = lambda *x: np.array(x, np.int64)  # noqa: E731
        return task_shares(
            {"pair": a(1), "start": a(20), "end": a(50)},
            {"pair": a(0, 2), "start": a(0, far), "end": a(100, far + 5), "amount": a(2, 1)},
            {"pair": a(0), "ts": a(30), "amount": a(4)},
            a(0, 0, 0),
            1,
        )

    packed, ranked = shares(1000), shares(2**62)
    assert [x.tolist() for x in packed] == [x.tolist() for x in ranked] == [[60, 0, 0], [4, 0, 0]]
