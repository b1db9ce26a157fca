"""The independent trace generator of bench/independent writes valid traces of its shapes.

Only validity is checked here: that each shape's trace ingests, holds the events the shape
is made of and names its ground truth's resource and culprit. How well the diagnosis does on
them, with events lost, is bench/lost_events.py's to print.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from gigi.ingest import ingest
from tests.conftest import connect_checked

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from independent import SHAPES, simulate, write_trace  # noqa: E402

WAIT, ACQUIRE, USE, RELEASE = range(4)

# kinds each shape must record (healthy_pool may never wait; the logs and the cache never do)
KINDS = {
    "mdl_pileup": {WAIT, ACQUIRE, USE, RELEASE},
    "pool_hog": {WAIT, ACQUIRE, USE, RELEASE},
    "hot_row": {WAIT, ACQUIRE, USE, RELEASE},
    "kv_leak": {WAIT, ACQUIRE, USE, RELEASE},
    "conn_leak": {WAIT, ACQUIRE, USE, RELEASE},
    "undo_growth": {ACQUIRE, USE, RELEASE},
    "underprovisioned": {WAIT, ACQUIRE, USE, RELEASE},
    "idle_lock": {WAIT, ACQUIRE, USE, RELEASE},
    "idle_slots": {WAIT, ACQUIRE, USE, RELEASE},
    "use_after_release": {ACQUIRE, USE, RELEASE},
    "healthy_oltp": {WAIT, ACQUIRE, USE, RELEASE},
    "cache_warmup": {ACQUIRE, USE, RELEASE},
    "healthy_pool": {ACQUIRE, USE, RELEASE},
}


def test_every_shape_is_covered():
    assert set(KINDS) == set(SHAPES)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_writes_a_valid_trace(shape, tmp_path):
    tables = simulate(shape, seed=0)
    events = tables["events"]
    n = write_trace(tables, tmp_path / "trace", segment_events=2000)
    assert n == len(events) > 500
    manifest = ingest(tmp_path / "trace", tmp_path / "store")
    con = connect_checked(tmp_path / "store" / manifest.trace_id)
    assert con.execute("SELECT count(*), sum(dropped) FROM drops").fetchone()[1] == 0
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == n
    kinds = Counter(k for (k,) in con.execute("SELECT kind FROM events").fetchall())
    assert KINDS[shape] <= set(kinds), kinds
    # every event's task is in tasks; no WAIT ends before it began
    assert (
        con.execute(
            "SELECT count(*) FROM events WHERE task NOT IN (SELECT task FROM tasks)"
        ).fetchone()[0]
        == 0
    )
    assert con.execute("SELECT count(*) FROM events WHERE kind = 0 AND dur < 0").fetchone()[0] == 0
    truth = SHAPES[shape].truth
    if truth is None:
        return
    declared = dict(con.execute("SELECT resource, sharing FROM resources").fetchall())
    assert truth.resource in declared
    assert (
        con.execute("SELECT count(*) FROM events WHERE resource = ?", [truth.resource]).fetchone()[
            0
        ]
        > 0
    )
    if truth.culprit is not None:
        culprits = con.execute(
            "SELECT count(*) FROM tasks WHERE starts_with(name, ?)", [truth.culprit]
        ).fetchone()[0]
        assert culprits > 0


def test_the_faults_are_in_the_events():
    """What makes each faulty shape faulty is there to be found, in the events themselves."""
    # the hog holds its connection for much of the run
    ev = simulate("pool_hog", 1)
    hog = next(t for t in ev["tasks"] if t["name"].startswith("report export"))
    assert (hog["end"] - hog["start"]) > 0.4 * (ev["events"][-1]["ts"] - ev["events"][0]["ts"])
    # leaks: acquires never released, by tasks that ended; later waits are for object 0
    for shape in ("kv_leak", "conn_leak"):
        ev = simulate(shape, 1)
        units = Counter()
        for e in ev["events"]:
            if e["kind"] in (ACQUIRE, RELEASE):
                units[e["task"]] += e["amount"] if e["kind"] == ACQUIRE else -e["amount"]
        tasks = {t["task"]: t for t in ev["tasks"]}
        leakers = [t for t, u in units.items() if u > 0 and tasks[t]["end"] is not None]
        assert leakers
        assert all(tasks[t]["name"].startswith(SHAPES[shape].truth.culprit) for t in leakers)
        last_leak = max(tasks[t]["end"] for t in leakers)
        assert any(e["kind"] == WAIT and e["object"] == 0 for e in ev["events"])
        assert any(e["kind"] == WAIT and e["ts"] > last_leak for e in ev["events"])
    # use after release: the faulty filter USEs after its own RELEASE
    ev = simulate("use_after_release", 0)
    tasks = {t["task"]: t["name"] for t in ev["tasks"]}
    late = set()
    released = set()
    for e in ev["events"]:
        if e["kind"] == RELEASE:
            released.add(e["task"])
        elif e["kind"] == USE and e["task"] in released:
            late.add(tasks[e["task"]])
    assert late and all(name.startswith("gzip filter") for name in late)


def test_loss_is_uncounted_and_seeded(tmp_path):
    tables = simulate("hot_row", seed=2)
    assert simulate("hot_row", seed=2)["events"] == tables["events"]  # a seed, one trace
    assert simulate("hot_row", seed=3)["events"] != tables["events"]
    n = write_trace(tables, tmp_path / "trace", lose=0.3, lose_seed=7)
    assert n == len(tables["events"]) - round(0.3 * len(tables["events"]))
    manifest = ingest(tmp_path / "trace", tmp_path / "store")
    con = connect_checked(tmp_path / "store" / manifest.trace_id)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == n
    assert con.execute("SELECT sum(dropped) FROM resources").fetchone()[0] == 0
