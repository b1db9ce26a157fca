"""The inconsistent_state detector: USE after RELEASE, repeated RELEASE, counts over capacity."""

import pyarrow as pa

from gigi.diagnosis import diagnose
from tests.conftest import events, write_stream


def _trace(d, rows, capacity=None):
    """rows: (kind, task, object, amount); one event per 10 ns on resource 'buf'."""
    kind, task, obj, amount = zip(*rows, strict=True)
    write_stream(
        d / "e.arrows",
        events(
            ts=[10 * i for i in range(len(rows))],
            kind=list(kind),
            resource=["buf"] * len(rows),
            task=list(task),
            object=pa.array(obj, pa.int64()),
            amount=pa.array(amount, pa.int64()),
        ),
    )
    if capacity is not None:
        write_stream(
            d / "r.arrows",
            {"resource": ["buf"], "capacity": pa.array([capacity])},
            metadata={"gigi.table": "resources"},
        )
    return d


def _lifecycle(task, obj, late_use=False, release_twice=False):
    rows = [("ACQUIRE", task, obj, 1), ("USE", task, obj, 1), ("RELEASE", task, obj, 1)]
    if late_use:
        rows.append(("USE", task, obj, 1))
    if release_twice:
        rows.append(("RELEASE", task, obj, 1))
    return rows


def _only(d):
    found = diagnose(d).findings
    assert [f.failure_mode for f in found] == ["inconsistent_state"], found
    return found[0]


def test_use_after_release_names_the_task_that_did_it(tmp_path):
    rows = []
    for i in range(30):
        rows += _lifecycle(task=1 + i % 3, obj=1 + i % 5, late_use=(i % 3 == 0))
    f = _only(_trace(tmp_path, rows))
    assert f.evidence["uses_after_release"] == 10
    assert f.evidence["double_releases"] == 0
    assert f.culprit_tasks == [1]


def test_a_second_release_with_no_acquire_between_is_inconsistent(tmp_path):
    rows = []
    for i in range(30):
        rows += _lifecycle(task=1 + i % 3, obj=1 + i % 5, release_twice=(i % 3 == 1))
    f = _only(_trace(tmp_path, rows))
    assert (f.evidence["uses_after_release"], f.evidence["double_releases"]) == (0, 10)
    assert f.culprit_tasks == [2]


def test_re_acquired_objects_and_handed_over_locks_are_consistent(tmp_path):
    rows = []
    for i in range(30):  # the same task takes the same object again and again
        rows += _lifecycle(task=1, obj=1 + i % 2)
    # a lock handed over: task 2 acquires, task 3 releases it (the pairing allows this)
    rows += [("ACQUIRE", 2, 9, 1), ("RELEASE", 3, 9, 1), ("ACQUIRE", 3, 9, 1), ("USE", 3, 9, 1)]
    rows += [("RELEASE", 3, 9, 1)]
    assert diagnose(_trace(tmp_path, rows)).findings == []


def test_more_outstanding_than_the_capacity_allows(tmp_path):
    rows = [("ACQUIRE", 1 + i % 4, 0, 1) for i in range(60)]  # 60 units of a 4-unit pool
    f = _only(_trace(tmp_path, rows, capacity=4))
    assert f.evidence["peak_outstanding"] == 60 and f.culprit_tasks == []
    assert "60 unit(s) of buf outstanding at once against a capacity of 4" in f.summary


def test_only_suspect_objects_go_through_the_windows_and_that_changes_nothing(tmp_path):
    """The detector sorts only the events of objects on which a task used or released again
    after a RELEASE of its own. On random traces (lost events, handovers, re-acquires, late
    USEs and second RELEASEs) it finds exactly what the same detector over every object's
    events finds."""
    import re

    import numpy as np

    from gigi.diagnosis._diagnose import load_detectors
    from gigi.ingest import ingest
    from gigi.queries import connect

    (det,) = [d for d in load_detectors(None, None) if d.name == "inconsistent_state"]
    broken = det.sql[: det.sql.index("), per_resource")] + ") SELECT * FROM broken ORDER BY ALL"
    every = re.sub(r"WITH suspects AS \(.*?\), ordered AS", "WITH ordered AS", broken, flags=re.S)
    every = every.replace(
        "SEMI JOIN suspects AS s ON s.resource = e.resource AND s.object = e.object", ""
    )
    assert "suspects" not in every and every != broken
    rng = np.random.default_rng(7)
    found = 0
    for trial in range(12):
        rows = []
        for _ in range(200):
            task, obj = int(rng.integers(1, 6)), int(rng.integers(1, 8))
            rows += _lifecycle(
                task, obj, late_use=rng.random() < 0.05, release_twice=rng.random() < 0.05
            )
            if rng.random() < 0.03:  # handed over: another task releases it
                rows += [("ACQUIRE", task, obj, 1), ("RELEASE", task % 5 + 1, obj, 1)]
        keep = rng.random(len(rows)) > 0.05  # lost events
        (tmp_path / str(trial)).mkdir()
        d = _trace(tmp_path / str(trial), [r for r, k in zip(rows, keep, strict=True) if k])
        ingest(d, tmp_path / f"store{trial}")
        con = connect(tmp_path / f"store{trial}")
        got, want = con.sql(broken).fetchall(), con.sql(every).fetchall()
        assert got == want, trial
        found += len(got)
    assert found > 0  # the traces did break the rules


def test_a_rule_most_releases_break_is_the_events_not_pairing_and_is_said_so(tmp_path):
    """Sites that name a different object on their ACQUIRE than on their RELEASE (a lock's
    own address against the table slot it sits in) leave each task releasing, again and
    again, an object it acquired once: most RELEASEs then break the rule. That is no slip of
    the program; the verdict says the events do not pair, and no finding stands on them."""
    rows = []
    for task in range(1, 5):
        rows += [("ACQUIRE", task, task, 1), ("RELEASE", task, task, 1)]
        rows += [("RELEASE", task, task, 1) for _ in range(20)]
    d = diagnose(_trace(tmp_path, rows))
    assert "inconsistent_state" not in [f.failure_mode for f in d.findings], d.findings
    (why,) = [v.why_not for v in d.verdicts if v.failure_mode == "inconsistent_state"]
    assert "80 of its 84 RELEASEs repeat one" in why and "not a slip but the norm" in why, why


def test_rules_by_object_are_not_judged_where_acquires_name_none(tmp_path):
    """An ACQUIRE site that records no object beside a RELEASE site that records one (a
    buffer pinned through a macro that hides which, unpinned by its number): most ACQUIREs
    name none, every RELEASE names one, and the few repeated RELEASEs among the ACQUIREs
    that did name theirs are the pairing's, not the program's."""
    rows = []
    for i in range(100):
        task, obj = 1 + i % 4, 1 + i % 5
        named = i % 5 == 0
        rows += [("ACQUIRE", task, obj if named else 0, 1), ("RELEASE", task, obj, 1)]
        if named:
            rows.append(("RELEASE", task, obj, 1))
    d = diagnose(_trace(tmp_path, rows))
    assert "inconsistent_state" not in [f.failure_mode for f in d.findings], d.findings
    (why,) = [v.why_not for v in d.verdicts if v.failure_mode == "inconsistent_state"]
    assert "80 of its 100 ACQUIREs name no object while 120 of its 120 RELEASEs do" in why, why
