import pyarrow as pa
import pytest

from gigi.errors import SchemaError
from gigi.schema import EVENTS, RESOURCES, SITES, TASKS, Kind, normalize_batch


def batch(**cols):
    n = len(cols["ts"])
    cols.setdefault("resource", ["r"] * n)
    cols.setdefault("task", [1] * n)
    cols.setdefault("thread", [1] * n)
    return pa.record_batch({k: v for k, v in cols.items()})


def test_names_and_codes_normalize_to_codes():
    b = batch(ts=[1, 2, 3, 4], kind=["WAIT", "ACQUIRE", "use", "Release"])
    assert normalize_batch(b, EVENTS).column("kind").to_pylist() == [0, 1, 2, 3]
    b = batch(ts=[1, 2], kind=pa.array([3, 1], pa.int8()))
    out = normalize_batch(b, EVENTS)
    assert out.column("kind").type == pa.uint8()
    assert out.column("kind").to_pylist() == [Kind.RELEASE, Kind.ACQUIRE]


def test_dictionary_strings_become_plain_and_defaults_fill_in():
    kinds = pa.array(["ACQUIRE", "RELEASE"]).dictionary_encode()
    res = pa.array(["a.b", "a.b"]).dictionary_encode()
    out = normalize_batch(batch(ts=[1, 2], kind=kinds, resource=res), EVENTS)
    assert out.schema == EVENTS.arrow_schema
    row = out.to_pylist()[1]
    assert row == {
        "ts": 2,
        "kind": 3,
        "resource": "a.b",
        "task": 1,
        "thread": 1,
        "amount": 1,
        "dur": 0,
        "object": 0,
        "site": None,
        "value": None,
    }


def test_null_dur_kept_for_waits_only():
    b = batch(ts=[1, 2], kind=["WAIT", "USE"], dur=pa.array([None, None], pa.int64()))
    assert normalize_batch(b, EVENTS).column("dur").to_pylist() == [None, 0]


def test_unknown_columns_are_ignored():
    b = batch(ts=[1], kind=[1], my_own=["x"])
    assert "my_own" not in normalize_batch(b, EVENTS).schema.names


@pytest.mark.parametrize(
    ("cols", "message"),
    [
        (dict(ts=["a"], kind=[1]), "seg.arrows, column 'ts': has type string, expected an integer"),
        (
            dict(ts=[1, 2, 3], kind=[1, 7, 1]),
            "seg.arrows, column 'kind', batch 4, row 1: kind 7 is not a kind code",
        ),
        (
            dict(ts=[1, 2], kind=["ACQUIRE", "AQUIRE"]),
            "column 'kind', batch 4, row 1: kind 'AQUIRE' is not a kind name, expected one of "
            "WAIT, ACQUIRE, USE, RELEASE (did you mean 'ACQUIRE'?)",
        ),
        (
            dict(ts=pa.array([1, None], pa.int64()), kind=[1, 1]),
            "column 'ts', batch 4, row 1: is null, expected a value in every row",
        ),
        (dict(ts=[1], kind=[0], dur=[-5]), "column 'dur', batch 4, row 0: duration -5 is negative"),
        (dict(ts=pa.array([2**63], pa.uint64()), kind=[1]), "does not fit int64"),
    ],
)
def test_bad_values_name_file_column_batch_row(cols, message):
    with pytest.raises(SchemaError) as e:
        normalize_batch(batch(**cols), EVENTS, path="seg.arrows", batch_index=4)
    assert message in str(e.value)
    assert isinstance(e.value, ValueError)


def test_missing_required_column_suggests_the_misspelled_one():
    b = pa.record_batch({"ts": [1], "kind": [1], "resourse": ["r"], "task": [1], "thread": [1]})
    with pytest.raises(
        SchemaError,
        match=r"column 'resource': required column of table "
        r"'events' is missing \(did you mean 'resourse'\?\)",
    ):
        normalize_batch(b, EVENTS, path="x")


def test_small_tables_normalize():
    t = normalize_batch(pa.record_batch({"task": [1], "kind": ["background"]}), TASKS)
    assert t.to_pylist() == [
        {"task": 1, "name": None, "kind": "background", "parent": None, "start": None, "end": None}
    ]
    with pytest.raises(SchemaError, match="'sharing'.*'pooled' is not one of"):
        normalize_batch(pa.record_batch({"resource": ["r"], "sharing": ["pooled"]}), RESOURCES)
    s = normalize_batch(pa.record_batch({"site": [3], "kind": ["WAIT"]}), SITES)
    assert s.column("kind").to_pylist() == [0]
