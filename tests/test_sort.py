"""The external sort behind ingest: by ts, ties in arrival order, whatever the run sizes."""

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from gigi.ingest._sort import RunWriter, merge_runs, rebatch, reduce_runs

SCHEMA = pa.schema([("ts", pa.int64()), ("arrival", pa.int64())])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 20), max_size=30).map(lambda xs: sorted(xs) if len(xs) % 2 else xs),
        max_size=6,
    ),
    st.integers(1, 40),
    st.integers(1, 9),
    st.integers(1, 12),
    st.integers(2, 4),
)
def test_merge_matches_a_stable_sort(
    tmp_path_factory, batches, run_rows, block_rows, min_run, fan_in
):
    spill = tmp_path_factory.mktemp("spill")
    writer = RunWriter(
        spill, SCHEMA, run_rows=run_rows, block_rows=block_rows, min_sorted_run=min_run
    )
    arrival = 0
    expected = []
    for ts_list in batches:
        if not ts_list:
            continue
        ids = list(range(arrival, arrival + len(ts_list)))
        arrival += len(ts_list)
        expected += list(zip(ts_list, ids, strict=True))
        writer.add(
            pa.record_batch(
                [pa.array(ts_list, pa.int64()), pa.array(ids, pa.int64())], schema=SCHEMA
            )
        )
    out = [
        row
        for b in rebatch(merge_runs(reduce_runs(writer.finish(), SCHEMA, fan_in), SCHEMA), 7)
        for row in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True)
    ]
    assert out == sorted(expected, key=lambda r: r[0])  # sorted() is stable
