import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from gigi.ingest import ingest
from gigi.metrics import HoldPairer, pair_holds_reference
from gigi.queries import run
from tests.conftest import connect_checked, events, write_stream

A, R = "ACQUIRE", "RELEASE"


def holds_of(trace_dir, store, rows, tasks=None):
    """rows: (ts, kind, task, object, amount). Returns holds as comparable tuples."""
    ts, kind, task, obj, amount = zip(*rows, strict=True)
    write_stream(
        trace_dir / "e.arrows",
        events(
            ts=list(ts),
            kind=list(kind),
            task=list(task),
            object=pa.array(obj, pa.int64()),
            amount=pa.array(amount, pa.int64()),
        ),
    )
    if tasks:
        write_stream(trace_dir / "t.arrows", tasks, metadata={"gigi.table": "tasks"})
    ingest(trace_dir, store)
    return run(
        connect_checked(store),
        """
        SELECT task, release_task, acquire_ts, release_ts, hold_ns, amount, open,
               began_before_trace, outlived_task
        FROM holds ORDER BY acquire_ts, coalesce(release_ts, 1e18)""",
    ).fetchall()


def test_same_task_release(trace_dir, store):
    assert holds_of(trace_dir, store, [(10, A, 1, 5, 1), (30, R, 1, 5, 1)]) == [
        (1, 1, 10, 30, 20, 1, False, False, False)
    ]


def test_release_by_another_task_ends_the_oldest_open_hold(trace_dir, store):
    rows = [(10, A, 1, 5, 1), (20, A, 2, 5, 1), (30, R, 9, 5, 1), (40, R, 9, 5, 1)]
    assert holds_of(trace_dir, store, rows) == [
        (1, 9, 10, 30, 20, 1, False, False, False),
        (2, 9, 20, 40, 20, 1, False, False, False),
    ]


def test_own_hold_first_even_when_another_is_older(trace_dir, store):
    rows = [(10, A, 1, 5, 1), (20, A, 2, 5, 1), (30, R, 2, 5, 1)]
    assert holds_of(trace_dir, store, rows) == [
        (1, None, 10, None, 20, 1, True, False, False),
        (2, 2, 20, 30, 10, 1, False, False, False),
    ]


def test_object_zero_pairs_amounts_first_in_first_out(trace_dir, store):
    rows = [(10, A, 1, 0, 3), (20, A, 2, 0, 2), (30, R, 7, 0, 4), (50, A, 3, 0, 1)]
    assert holds_of(trace_dir, store, rows) == [
        (1, 7, 10, 30, 20, 3, False, False, False),
        (2, 7, 20, 30, 10, 1, False, False, False),
        (2, None, 20, None, 30, 1, True, False, False),
        (3, None, 50, None, 0, 1, True, False, False),
    ]


def test_open_at_trace_end_and_at_task_end(trace_dir, store):
    rows = [(10, A, 1, 4, 1), (20, A, 2, 4, 1), (100, R, 2, 4, 1)]
    tasks = {"task": pa.array([1, 2], pa.int64()), "end": pa.array([15, 200], pa.int64())}
    assert holds_of(trace_dir, store, rows, tasks) == [
        (1, None, 10, None, 90, 1, True, False, True),
        (2, 2, 20, 100, 80, 1, False, False, False),
    ]


def test_release_of_a_hold_from_before_the_trace(trace_dir, store):
    rows = [(10, A, 1, 4, 1), (20, R, 1, 4, 1), (30, R, 1, 6, 2)]
    assert holds_of(trace_dir, store, rows)[1] == (None, 1, 10, 30, 20, 2, False, True, False)


_event = st.tuples(
    st.sampled_from([0, 1, 1, 2, 3, 3]),
    st.integers(0, 1),
    st.integers(0, 2),
    st.integers(0, 3),
    st.integers(0, 4),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=80), st.integers(0, 80))
def test_streaming_kernel_matches_the_plain_twin(evs, cut):
    if not evs:
        return
    kind, res, obj, task, amount = (np.array(c, dtype=np.int64) for c in zip(*evs, strict=True))
    seq = np.arange(len(evs), dtype=np.int64)
    expected = pair_holds_reference(kind, res, obj, task, amount, seq)
    pairer = HoldPairer(capacity=1)
    got = []
    for part in (slice(0, cut), slice(cut, None)):
        got += list(
            zip(
                *(
                    a.tolist()
                    for a in pairer.feed(
                        kind[part], res[part], obj[part], task[part], amount[part], seq[part]
                    )
                ),
                strict=True,
            )
        )
    got += list(zip(*(a.tolist() for a in pairer.finish()), strict=True))
    assert got == expected
    # Invariant: every ACQUIRE's units are accounted for exactly once.
    acquired = {
        int(s): int(a) for s, k, a in zip(seq, kind, amount, strict=True) if k == 1 and a > 0
    }
    paired: dict[int, int] = {}
    for a, _r, n in got:
        if a >= 0:
            paired[a] = paired.get(a, 0) + n
    assert paired == acquired
