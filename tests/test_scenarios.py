"""The scenario suite: rank 1 names the right resource, failure mode and culprit on every
faulty workload, also with a fifth of the events dropped at random; healthy ones give nothing."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gigi.diagnosis import diagnose
from gigi.ingest import ingest
from gigi.queries import connect
from gigi.scenarios import all_scenarios
from tests.conftest import write_stream

SCENARIOS = all_scenarios()


def test_the_suite_has_its_shapes():
    faulty = [s for s in SCENARIOS if s.truth]
    assert len(faulty) >= 12 and len(SCENARIOS) - len(faulty) >= 3
    assert {s.truth.failure_mode for s in faulty} >= {
        "contention",
        "under_provisioning",
        "inefficient_policy",
        "leak",
        "unbounded_growth",
        "inconsistent_state",
    }


@pytest.fixture(scope="module", params=SCENARIOS, ids=[s.name for s in SCENARIOS])
def recorded(request, tmp_path_factory):
    scenario = request.param
    d = tmp_path_factory.mktemp(scenario.name)
    scenario.run(d / "trace")
    ingest(d / "trace", d / "store")
    return scenario, d / "store"


def _check(scenario, store_or_trace):
    d = diagnose(store_or_trace)
    if scenario.truth is None:
        assert d.findings == [], [(f.failure_mode, f.resource, f.score) for f in d.findings]
        return
    first = d.findings[0]
    assert (first.resource, first.failure_mode) == (
        scenario.truth.resource,
        scenario.truth.failure_mode,
    )
    if scenario.truth.culprit is None:
        assert first.culprit_tasks == []
    else:
        con = connect(store_or_trace)
        name = con.execute(
            "SELECT name FROM tasks WHERE task = ?", [first.culprit_tasks[0]]
        ).fetchall()[0][0]
        assert name.startswith(scenario.truth.culprit), name


def test_rank_one_is_the_truth(recorded):
    _check(*recorded)


def test_rank_one_survives_a_fifth_of_the_events_dropped(recorded, tmp_path):
    scenario, store = recorded
    entry = next(p for p in store.iterdir() if p.is_dir() and not p.name.startswith("."))
    events = pa.concat_tables(pq.read_table(p) for p in sorted((entry / "events").glob("*")))
    rng = random.Random(7)
    keep = pa.array([rng.random() >= 0.2 for _ in range(events.num_rows)])
    trace = tmp_path / "dropped"
    trace.mkdir()
    write_stream(trace / "events.arrows", events.filter(keep).drop_columns(["seq"]))
    for small in ("tasks", "resources", "sites"):
        write_stream(
            trace / f"{small}.arrows",
            pq.read_table(entry / f"{small}.parquet"),
            metadata={"gigi.table": small},
        )
    _check(scenario, trace)
