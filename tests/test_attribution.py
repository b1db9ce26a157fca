"""Attribution: the spec'd cases by hand, and the numba sweep against its plain twin."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gigi.metrics import _attribution_kernel as kernel
from gigi.metrics.attribution import (
    MAX_DEPTH,
    MIN_PASSED,
    Intervals,
    attribute,
    attribute_fast,
    read_every,
)


def iv(rows, waits=False, objects=None):
    r, t, s, e, w = (
        (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        if rows
        else [np.zeros(0, np.int64)] * 5
    )
    seq = np.arange(len(s), dtype=np.int64) if waits else np.zeros(len(s), np.int64)
    obj = None if objects is None else np.array(objects, dtype=np.int64)
    return Intervals(r, t, s, e, w, seq, obj)


def fast_rows(waits, holders):
    return attribute_fast(waits, holders).rows()


def totals(rows):
    out = {}
    for _seq, _res, victim, culprit, culprit_res, depth, ns in rows:
        key = (victim, culprit, culprit_res, depth)
        out[key] = out.get(key, 0) + ns
    return {k: round(v, 6) for k, v in out.items()}


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_blame_is_split_by_overlap_and_units(fn):
    # Task 1 waits for resource 0 over [0, 100); task 2 holds 1 unit over [0, 50), task 3 holds
    # 3 units over [25, 100).
    waits = iv([(0, 1, 0, 100, 1)], waits=True)
    holders = iv([(0, 2, 0, 50, 1), (0, 3, 25, 100, 3)])
    assert totals(fn(waits, holders)) == {(1, 2, 0, 0): 25 + 6.25, (1, 3, 0, 0): 18.75 + 50}


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_blame_passes_down_a_chain_and_adds_up(fn):
    # C waits for resource 0 held by B; B waits for resource 1 held by A over part of it.
    waits = iv([(0, 30, 0, 100, 1), (1, 20, 40, 100, 1)], waits=True)
    holders = iv([(0, 20, 0, 100, 1), (1, 10, 0, 100, 1)])
    got = totals(fn(waits, holders))
    assert got == {(30, 20, 0, 0): 40, (30, 10, 1, 1): 60, (20, 10, 1, 0): 60}
    assert sum(v for (victim, *_), v in got.items() if victim == 30) == 100  # the raw wait


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_holders_waiting_for_one_thing_pass_their_shares_on_together(fn):
    # 40 readers hold resource 0 while each waits for resource 1, which task 900 holds: the
    # wait of task 1000 for resource 0 is task 900's doing, though each reader has 1/40 of it.
    readers = range(1, 41)
    waits = iv([(0, 1000, 0, 100, 1)] + [(1, r, 0, 100, 1) for r in readers], waits=True)
    holders = iv([(0, r, 0, 100, 1) for r in readers] + [(1, 900, 0, 100, 1)])
    got = totals(fn(waits, holders))
    assert got[(1000, 900, 1, 1)] == 100
    assert not any(victim == 1000 and culprit != 900 for victim, culprit, *_ in got)


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_a_share_too_small_to_follow_stays_with_its_holder(fn):
    # The same readers each wait for a resource of their own, held by a task of its own: each
    # passes on 1/40 of the wait, under MIN_PASSED, so each keeps its share.
    readers = range(1, 41)
    waits = iv([(0, 1000, 0, 100, 1)] + [(r, r, 0, 100, 1) for r in readers], waits=True)
    holders = iv([(0, r, 0, 100, 1) for r in readers] + [(r, 500 + r, 0, 100, 1) for r in readers])
    got = totals(fn(waits, holders))
    assert {k: v for k, v in got.items() if k[0] == 1000} == {(1000, r, 0, 0): 2.5 for r in readers}
    assert 1 / 40 < MIN_PASSED


def test_the_kernel_follows_chains_as_far_as_its_twin():
    # numba's cache of the kernel is keyed on its own file, so it keeps its own copies
    assert (kernel.MAX_DEPTH, kernel.MIN_PASSED) == (MAX_DEPTH, MIN_PASSED)


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_nobody_holding_means_unattributed_and_own_holds_do_not_count(fn):
    waits = iv([(0, 1, 0, 10, 1), (1, 2, 0, 10, 1)], waits=True)
    holders = iv([(1, 2, 0, 10, 5)])  # task 2 holds what it waits for: not its own culprit
    assert fn(waits, holders) == []


@pytest.mark.parametrize("fn", [attribute, fast_rows])
def test_a_wait_for_one_object_blames_its_holders_and_chains_through_objects(fn):
    # Row locks (resource 0): A holds row 1; B holds row 2 and waits for row 1; C waits for
    # row 2. C's wait goes through B to A, the root blocker; D holds row 3, blamed for nothing.
    waits = iv([(0, 2, 10, 100, 1), (0, 3, 20, 100, 1)], waits=True, objects=[1, 2])
    holders = iv([(0, 1, 0, 100, 1), (0, 2, 0, 100, 1), (0, 4, 0, 100, 1)], objects=[1, 2, 3])
    got = totals(fn(waits, holders))
    assert got == {(2, 1, 0, 0): 90, (3, 1, 0, 1): 80}


@pytest.mark.parametrize("fast", [False, True])
def test_a_large_trace_reads_the_holders_once_a_cell(fast):
    # Task 9 waits [0, 100); A (1) holds [0, 10), then B (2) [10, 100). Read at every instant,
    # A takes 10 and B 90. Read once a cell of 50 ns, the change at 10 is read at 50: A takes
    # 50 and B 50, and the wait's blame still adds up to it.
    waits = iv([(0, 9, 0, 100, 1)], waits=True)
    holders = iv([(0, 1, 0, 10, 1), (0, 2, 10, 100, 1)])
    fn = (lambda w, h, e: attribute_fast(w, h, e).rows()) if fast else attribute
    assert totals(fn(waits, holders, 0)) == {(9, 1, 0, 0): 10, (9, 2, 0, 0): 90}
    assert totals(fn(waits, holders, 50)) == {(9, 1, 0, 0): 50, (9, 2, 0, 0): 50}
    # a wait begun in a cell is read at its start, whatever the cell
    late = iv([(0, 9, 30, 100, 1)], waits=True)
    assert totals(fn(late, holders, 50)) == {(9, 2, 0, 0): 70}


def test_only_a_large_trace_is_read_a_cell_at_a_time():
    assert read_every(1_000_000, 10**10) == 0
    assert read_every(40_000_000, 10**10) == 10**10 // (1 << 20)
    assert read_every(40_000_000, 10) == 1


_ivs = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(1, 4),
        st.integers(0, 30),
        st.integers(1, 20),
        st.integers(1, 3),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(
    _ivs,
    _ivs,
    st.lists(st.integers(0, 2), min_size=24, max_size=24),
    st.sampled_from([0, 1, 4, 7, 16]),
)
def test_numba_sweep_matches_the_plain_twin(w_rows, h_rows, objects, every):
    waits = iv(
        [(r, t, s, s + d, 1) for r, t, s, d, _ in w_rows],
        waits=True,
        objects=objects[: len(w_rows)],
    )
    holders = iv(
        [(r, t, s, s + d, u) for r, t, s, d, u in h_rows], objects=objects[12 : 12 + len(h_rows)]
    )
    slow, fast = attribute(waits, holders, every), attribute_fast(waits, holders, every).rows()
    key = lambda row: row[:6]  # noqa: E731
    assert sorted(map(key, slow)) == sorted(map(key, fast))
    fast_by = {key(r): r[6] for r in fast}
    for row in slow:
        assert fast_by[key(row)] == pytest.approx(row[6])
    # Blame per wait never exceeds the wait.
    for seq in set(r[0] for r in slow):
        dur = waits.end[seq] - waits.start[seq]
        assert sum(r[6] for r in slow if r[0] == seq) <= dur + 1e-6
