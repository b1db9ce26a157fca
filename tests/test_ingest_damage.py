"""Damaged traces: ingest accepts a trace whose views all compute, or refuses it in one line
that names the damaged file, and the store stays as it was. Never another exception.

The fuzz test damages one segment of a small trace (flipped bytes, a cut, a column twice,
bad schema metadata, a second stream after the first, extreme values) and checks that
promise; the tests above it are the cases issue 18 reported, one by one.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gigi.errors import GigiError, SchemaError
from gigi.ingest import ingest, open_segment
from gigi.queries import connect, named_queries, run_named, self_check, views
from tests.conftest import write_stream

INT64_MAX = 2**63 - 1
ROWS, BATCH_ROWS = 12, 4


def _events(start: int = 0) -> pa.Table:
    """Twelve events in three groups of WAIT, ACQUIRE, USE, RELEASE, on two resources."""
    kinds = ["WAIT", "ACQUIRE", "USE", "RELEASE"] * (ROWS // 4)
    return pa.table(
        {
            "ts": pa.array([start + 1000 * i for i in range(ROWS)], pa.int64()),
            "kind": pa.array(kinds).dictionary_encode(),
            "resource": pa.array(
                ["db.pool" if (i // 4) % 2 == 0 else "db.lock" for i in range(ROWS)]
            ).dictionary_encode(),
            "task": pa.array([1 + (i // 4) % 3 for i in range(ROWS)], pa.int64()),
            "thread": pa.array([10 + (i // 4) % 3 for i in range(ROWS)], pa.int64()),
            "amount": pa.array(
                [1 + i % 3 if k in ("ACQUIRE", "RELEASE") else 1 for i, k in enumerate(kinds)],
                pa.int64(),
            ),
            "dur": pa.array(
                [500 if k == "WAIT" else 0 for k in kinds[:-4]] + [None, 0, 7, 0], pa.int64()
            ),
            "object": pa.array([i // 4 for i in range(ROWS)], pa.int64()),
            "site": pa.array([i % 3 for i in range(ROWS)], pa.int32()),
            "value": pa.array(list(range(ROWS)), pa.int64()),
        }
    )


TASKS = pa.table(
    {
        "task": pa.array([1, 2, 3], pa.int64()),
        "name": ["purge", "GET /a", "GET /b"],
        "kind": ["background", "foreground", "foreground"],
        "parent": pa.array([None, 1, 1], pa.int64()),
        "start": pa.array([0, 100, 200], pa.int64()),
        "end": pa.array([20_000, 30_000, None], pa.int64()),
    }
)
RESOURCES = pa.table(
    {
        "resource": ["db.pool", "db.lock"],
        "capacity": pa.array([2, 1], pa.int64()),
        "unit": ["slots", "locks"],
        "sharing": ["pool", "exclusive"],
        "dropped": pa.array([3, 0], pa.int64()),
        "sample_every": pa.array([1, 2], pa.int64()),
    }
)
SITES = pa.table(
    {
        "site": pa.array([0, 1, 2], pa.int32()),
        "file": ["pool.py", "pool.py", "lock.c"],
        "line": pa.array([10, 20, 7], pa.int32()),
        "function": ["Pool.get", "Pool.put", "lock_wait"],
        "kind": ["ACQUIRE", "RELEASE", "WAIT"],
        "resource": ["db.pool", "db.pool", "db.lock"],
        "origin": ["manual", "manual", "heuristic"],
        "verified": [True, True, False],
    }
)

# The segments of the clean trace: name -> (table, format). One of them is damaged; the
# others stay whole, so the trace always has a readable events segment.
SEGMENTS = {
    "e1.arrows": ("events", "stream"),
    "e2.arrow": ("events", "file"),
    "e3.parquet": ("events", "parquet"),
    "t.arrows": ("tasks", "stream"),
    "r.arrows": ("resources", "stream"),
    "s.arrows": ("sites", "stream"),
}


def _table(name: str) -> pa.Table:
    table, _ = SEGMENTS[name]
    data = {
        "events": _events(100_000 * int(name[1]) if name[0] == "e" else 0),
        "tasks": TASKS,
        "resources": RESOURCES,
        "sites": SITES,
    }[table]
    meta = {b"gigi.version": b"1", b"gigi.table": table.encode(), b"gigi.trace_id": b"damaged"}
    return data.replace_schema_metadata(meta)


def _encode(table: pa.Table, fmt: str) -> tuple[bytes, list[tuple[int, int]]]:
    """The segment's bytes, and for each batch of an Arrow stream or file, where it ends in
    them and its rows (what a cut right after it must recover)."""
    sink = pa.BufferOutputStream()
    ends = []
    if fmt == "parquet":
        pq.write_table(table, sink, row_group_size=BATCH_ROWS)
        return sink.getvalue().to_pybytes(), ends
    new = ipc.new_stream if fmt == "stream" else ipc.new_file
    with new(sink, table.schema) as w:
        for batch in table.to_batches(max_chunksize=BATCH_ROWS):
            w.write_batch(batch)
            ends.append((sink.tell(), batch.num_rows))
    return sink.getvalue().to_pybytes(), ends


@dataclass
class Damage:
    """What was done to segment ``target`` (see ``damages``)."""

    target: str
    how: str
    data: tuple = ()

    def apply(self, trace_dir: Path) -> None:
        for name in SEGMENTS:
            table = _table(name)
            if name == self.target:
                table = self._table(table)
            data, _ = _encode(table, SEGMENTS[name][1])
            if name == self.target:
                data = self._bytes(data)
            (trace_dir / name).write_bytes(data)

    def _table(self, table: pa.Table) -> pa.Table:
        if self.how == "duplicate":
            (column,) = self.data
            column = table.column_names[column % table.num_columns]
            return table.append_column(column, table.column(column))
        if self.how == "metadata":
            key, value = self.data
            return table.replace_schema_metadata({**table.schema.metadata, key: value})
        if self.how == "extreme":
            column, row, value = self.data
            names = [
                n for n in table.column_names if pa.types.is_integer(table.schema.field(n).type)
            ]
            column = names[column % len(names)]
            values = table.column(column).to_pylist()
            values[row % len(values)] = value
            bits = 32 if pa.types.is_int32(table.schema.field(column).type) else 64
            if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                return table  # does not fit the column's type: nothing to write
            i = table.column_names.index(column)
            return table.set_column(i, column, pa.array(values, table.schema.field(column).type))
        return table

    def _bytes(self, data: bytes) -> bytes:
        if self.how == "flip":
            out = bytearray(data)
            for position, mask in self.data:
                out[position % len(out)] ^= mask
            return bytes(out)
        if self.how == "cut":
            (at,) = self.data
            return data[: at % (len(data) + 1)]
        if self.how == "concat":
            (tail,) = self.data
            return data + tail
        return data

    def rows_after_cut(self) -> int | None:
        """Rows the cut segment must still give: those of every batch before the cut; None
        for a cut Parquet file, which has lost its footer and must be refused."""
        _, fmt = SEGMENTS[self.target]
        data, ends = _encode(_table(self.target), fmt)
        at = self.data[0] % (len(data) + 1)
        if at == len(data):
            return ROWS
        if fmt == "parquet":
            return None
        return sum(rows for end, rows in ends if end <= at)


def _stream_bytes(table: pa.Table) -> bytes:
    return _encode(table, "stream")[0]


TARGETS = st.sampled_from(sorted(SEGMENTS))
EXTREMES = st.sampled_from(
    [INT64_MAX, -INT64_MAX, -(2**63), 2**62, -(2**62), 2**62 - 1, 2**61, 2**31, -1, 0]
)
BAD_META_KEYS = st.sampled_from(
    [b"gigi.version", b"gigi.sample_every", b"gigi.table", b"gigi.clock", b"gigi.trace_id"]
)
BAD_META_VALUES = st.sampled_from(
    [b"2", b"0", b"-3", b"x", b"", b"1.5", b" 1", b"\xff\xfe", b"99999999999999999999", b"1", b"4"]
)
TAILS = st.one_of(
    st.just(_stream_bytes(_table("e1.arrows"))),  # a second stream
    st.just(_stream_bytes(_table("t.arrows"))),  # another table's stream
    st.just(_stream_bytes(_table("e1.arrows"))[:200]),  # the start of a second stream
    st.just(b"\xff\xff\xff\xff\x00\x00\x00\x00"),  # a second end-of-stream mark
    st.binary(min_size=1, max_size=64),  # garbage
)

damages = st.one_of(
    st.builds(
        Damage,
        TARGETS,
        st.just("flip"),
        st.lists(
            st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), min_size=1, max_size=4
        ).map(tuple),
    ),
    st.builds(Damage, TARGETS, st.just("cut"), st.tuples(st.integers(0, 1 << 20))),
    st.builds(Damage, TARGETS, st.just("duplicate"), st.tuples(st.integers(0, 20))),
    st.builds(Damage, TARGETS, st.just("metadata"), st.tuples(BAD_META_KEYS, BAD_META_VALUES)),
    st.builds(
        Damage, st.sampled_from(["e1.arrows", "t.arrows"]), st.just("concat"), st.tuples(TAILS)
    ),
    st.builds(
        Damage,
        TARGETS,
        st.just("extreme"),
        st.tuples(st.integers(0, 20), st.integers(0, 20), EXTREMES),
    ),
)


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _everything_computes(entry: Path) -> None:
    """Every view and named query returns its rows, and the trace's invariants hold."""
    con = connect(entry)
    try:
        for name in views():
            con.sql(f"SELECT * FROM {name}").fetchall()
        for name in named_queries():
            run_named(con, name).fetchall()
        assert self_check(con) == []
    finally:
        con.close()


def _refused(trace_dir: Path, store: Path, match: str) -> str:
    """Ingest ``trace_dir`` into ``store``, which already holds a trace; it must be refused
    with one line that says ``match``, and the store left as it was."""
    before = trace_dir.parent / "before"
    before.mkdir()
    write_stream(before / "a.arrows", _events(), {b"gigi.trace_id": b"before"})
    ingest(before, store)
    tree = _tree(store)
    with pytest.raises(SchemaError, match=match) as refusal:
        ingest(trace_dir, store)
    assert "\n" not in str(refusal.value)
    assert _tree(store) == tree
    return str(refusal.value)


# The cases issue 18 reported, each failing (an internal error, or accepted) before.


def test_dictionary_index_past_its_dictionary_is_refused(trace_dir, store):
    # what flipped bytes in a dictionary's indices leave (it was an ArrowIndexError)
    table = _table("e1.arrows")
    kind = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 9] + [0] * (ROWS - 3), pa.int8()),
        pa.array(["WAIT", "ACQUIRE"]),
        safe=False,
    )
    write_stream(trace_dir / "e.arrows", table.set_column(1, "kind", kind))
    message = _refused(trace_dir, store, r"e.arrows, batch 0: damaged \(.*out of bounds: 9")
    assert "Dictionary indices" in message


def test_a_column_twice_is_refused(trace_dir, store):
    table = _table("e1.arrows")
    write_stream(trace_dir / "e.arrows", table.append_column("ts", table.column("ts")))
    _refused(trace_dir, store, r"e.arrows, column 'ts': appears 2 times, expected once")


@pytest.mark.parametrize("value", ["x", "0", "-3", "1.5", ""])
def test_sample_every_that_is_not_a_whole_number_from_one_is_refused(trace_dir, store, value):
    write_stream(trace_dir / "e.arrows", _events(), {b"gigi.sample_every": value.encode()})
    _refused(
        trace_dir,
        store,
        rf"e.arrows: schema metadata gigi.sample_every is '{value}', expected a whole number",
    )


def test_a_parquet_column_name_that_is_not_utf8_is_refused(trace_dir, store):
    # what a flipped byte in a Parquet footer's schema left (it was a UnicodeDecodeError)
    path = trace_dir / "e.parquet"
    pq.write_table(_events(), path, store_schema=False)
    path.write_bytes(path.read_bytes().replace(b"resource", b"\xebesource"))
    _refused(trace_dir, store, r"e.parquet: not a Parquet file \(.*utf-8")


def test_unknown_format_version_is_refused(trace_dir, store):
    write_stream(trace_dir / "e.arrows", _events(), {b"gigi.version": b"2"})
    _refused(trace_dir, store, r"e.arrows: schema metadata gigi.version is '2', expected '1'")


def test_two_streams_in_one_file_are_refused(trace_dir, store):
    one = _stream_bytes(_table("e1.arrows"))
    (trace_dir / "e.arrows").write_bytes(one + one)
    _refused(trace_dir, store, rf"e.arrows: {len(one)} bytes after the end of the stream at byte ")


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("ts", INT64_MAX, r"row 0: ts 9223372036854775807 is out of range, expected ns strictly"),
        ("ts", -INT64_MAX, r"row 0: ts -9223372036854775807 is out of range"),
        ("dur", INT64_MAX, r"column 'dur', batch 0, row 0: ts \+ dur = 9223372036854776807 is"),
        ("dur", -INT64_MAX, r"column 'dur', batch 0, row 0: duration -9223372036854775807 is"),
        ("amount", INT64_MAX, r"column 'amount', batch 0: the trace's amounts add up to"),
        ("amount", -INT64_MAX, r"column 'amount', batch 0, row 0: amount -9223372036854775807"),
    ],
)
def test_values_the_views_cannot_compute_with_are_refused(trace_dir, store, column, value, message):
    table = _events(1000)
    values = table.column(column).to_pylist()
    values[0] = value
    table = table.set_column(table.column_names.index(column), column, pa.array(values, pa.int64()))
    write_stream(trace_dir / "e.arrows", table)
    _refused(trace_dir, store, message)


def test_amounts_are_refused_once_their_sum_reaches_2_62(trace_dir, store):
    # each fits int64, and so does the sum of the first segment's
    for name, amount in (("a.arrows", 2**61), ("b.arrows", 2**61)):
        table = _events()
        table = table.set_column(5, "amount", pa.array([amount // ROWS + 1] * ROWS, pa.int64()))
        write_stream(trace_dir / name, table)
    _refused(trace_dir, store, r"b.arrows, column 'amount', batch 0: the trace's amounts add up to")


def test_dropped_events_beyond_2_62_are_refused(trace_dir, store):
    write_stream(trace_dir / "e.arrows", _events())
    resources = RESOURCES.set_column(4, "dropped", pa.array([2**61, 2**61], pa.int64()))
    write_stream(trace_dir / "r.arrows", resources, {b"gigi.table": b"resources"})
    _refused(trace_dir, store, r"r.arrows, column 'dropped', batch 0: the trace's dropped events")


def test_the_largest_values_allowed_still_compute_in_every_view(trace_dir, store):
    """The bounds are enough: with instants at +-(2^62 - 1), a wait as long as that, amounts
    adding up to 2^62 - 2, every view and named query computes."""
    top = 2**62 - 1
    table = pa.table(
        {
            "ts": pa.array([-top, -top, 0, top - 5, top], pa.int64()),
            "kind": ["ACQUIRE", "WAIT", "USE", "WAIT", "RELEASE"],
            "resource": ["r"] * 5,
            "task": pa.array([1, 2, 1, 2, 3], pa.int64()),
            "thread": pa.array([1, 2, 1, 2, 3], pa.int64()),
            "amount": pa.array([top // 2, 1, 0, 1, top // 2 - 1], pa.int64()),
            "dur": pa.array([0, top, 0, 5, 0], pa.int64()),
        }
    )
    write_stream(trace_dir / "e.arrows", table)
    tasks = TASKS.set_column(4, "start", pa.array([-top, -top, 0], pa.int64()))
    tasks = tasks.set_column(5, "end", pa.array([top, top, None], pa.int64()))
    write_stream(trace_dir / "t.arrows", tasks, {b"gigi.table": b"tasks"})
    manifest = ingest(trace_dir, store)
    assert (manifest.start, manifest.end) == (-top, top)
    _everything_computes(store / manifest.trace_id)


@pytest.mark.parametrize("name", ["e1.arrows", "e2.arrow"])
def test_a_cut_anywhere_keeps_exactly_the_batches_before_it(tmp_path, name):
    data, ends = _encode(_table(name), SEGMENTS[name][1])
    path = tmp_path / name
    # every byte near the start, the end and each batch's end, and every 29th between
    near = [0, len(data)] + [end for end, _ in ends]
    cuts = {at + d for at in near for d in range(-12, 13)} | set(range(0, len(data), 29))
    for at in sorted(c for c in cuts if 0 <= c <= len(data)):
        path.write_bytes(data[:at])
        segment = open_segment(path)
        rows = sum(b.num_rows for b in segment.batches_iter())
        whole = at == len(data) and name.endswith(".arrow")  # read through its footer
        assert rows == (ROWS if whole else sum(n for end, n in ends if end <= at)), at


# The fuzz test.


@pytest.fixture(scope="module")
def template_store(tmp_path_factory) -> Path:
    """A store that already holds a trace: a refusal must leave it exactly as it was."""
    root = tmp_path_factory.mktemp("template")
    (root / "trace").mkdir()
    write_stream(root / "trace" / "a.arrows", _events(), metadata={b"gigi.trace_id": b"before"})
    ingest(root / "trace", root / "store")
    return root / "store"


def _ingest_damaged(damage: Damage, template_store: Path) -> str:
    """Ingest the damaged trace and check the promise; return what happened."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir, store = Path(tmp) / "trace", Path(tmp) / "store"
        trace_dir.mkdir()
        shutil.copytree(template_store, store)
        damage.apply(trace_dir)
        before = _tree(store)
        try:
            manifest = ingest(trace_dir, store)
        except GigiError as e:
            assert isinstance(e, ValueError), type(e)
            message = str(e)
            assert "\n" not in message and message, message
            assert damage.target in message, message
            assert _tree(store) == before
            return "refused"
        _everything_computes(store / manifest.trace_id)
        assert damage.how != "concat", "a second stream after the first was accepted"
        if damage.how == "cut" and SEGMENTS[damage.target][0] == "events":
            kept = damage.rows_after_cut()
            assert kept is not None, "a cut Parquet file was accepted"
            assert manifest.events == 2 * ROWS + kept  # every batch before the cut, none after
        return "recovered" if manifest.bytes_lost or manifest.notes else "accepted"


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(damage=damages)
def test_damaged_segment_is_accepted_whole_or_refused_in_one_line(damage, template_store):
    outcome = _ingest_damaged(damage, template_store)
    event(f"{damage.how}: {outcome}")
