"""Diagnosis end to end: the demo's root cause and its consequence, a healthy run, the JSON
contract, user detectors, and the metric kernel against its SQL twin."""

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gigi import demo
from gigi.cli import main
from gigi.detectors import load
from gigi.diagnosis import diagnose
from gigi.errors import DetectorError
from gigi.ingest import ingest
from gigi.metrics.totals import TOTALS, resource_totals
from gigi.queries import connect
from tests.conftest import events, write_stream


def _demo(tmp_path, name, **overrides):
    cfg = demo.DemoConfig(seconds=5.0, long_txn_start=0.5, long_txn_length=1.5)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    demo.run(tmp_path / name, cfg)
    ingest(tmp_path / name, tmp_path / f"{name}-store")
    return tmp_path / f"{name}-store"


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    return _demo(tmp_path_factory.mktemp("demo"), "trace")


def _name(store, task):
    return connect(store).execute("SELECT name FROM tasks WHERE task = ?", [task]).fetchall()[0][0]


def test_demo_root_cause_first_then_its_consequence(demo_store):
    d = diagnose(demo_store)
    first, second = d.findings[0], d.findings[1]
    assert (first.rank, first.failure_mode, first.resource) == (
        1,
        "unbounded_growth",
        "engine.undo_log",
    )
    assert _name(demo_store, first.culprit_tasks[0]).startswith("long txn")
    assert first.caused_by is None
    assert (second.failure_mode, second.resource) == ("contention", "engine.buffer_pool")
    assert _name(demo_store, second.culprit_tasks[0]) == "purge"
    assert second.caused_by == 1
    # The consequence has the larger wait, yet ranks below its root.
    assert second.evidence["blamed_wait_ns"] > 0
    assert second.culprit_tasks[0] not in second.victim_tasks
    assert {s["role"] for s in second.sites} == {"culprit", "victim"}
    assert any(s["file"] == "demo/undo.py" and s["kind"] == "ACQUIRE" for s in first.sites)


def test_a_resource_every_task_goes_through_is_no_cause(tmp_path):
    """A hog's contention on a pool is not the consequence of a table growing, though the
    hog takes a unit of the table too: every task takes one there (a lock table each
    transaction goes through), so the table is not what sets the hog apart. The demo's
    purge, which gives back all of the undo log, is (above)."""
    from gigi.schema import TraceWriter
    from tests.queueing import MS, Request, Simulation

    trace = tmp_path / "t"
    requests = [Request(f"request {i}", 2 * MS + i * 4 * MS, 10 * MS) for i in range(199)]
    requests.append(Request("hog", 0, 500 * MS))
    sim = Simulation("app.pool", 2, "pool", requests)
    sim.write(trace)
    w = TraceWriter(trace, "table-tests")
    w.add("resources", {"resource": "app.table", "unit": "entries", "sharing": "pool"})
    for i, r in enumerate(sim.requests):  # each task takes an entry, none gives one back
        w.add(
            "events",
            {
                "resource": "app.table",
                "task": 1 + i,
                "thread": 100 + i % 8,
                "amount": 1,
                "ts": r.arrival + 1000,
                "kind": 1,
                "object": 0,
            },
        )
    w.flush()
    d = diagnose(trace)
    by = {(f.failure_mode, f.resource): f for f in d.findings}
    grew = [f for (mode, res), f in by.items() if res == "app.table"]
    assert grew and grew[0].failure_mode in ("unbounded_growth", "leak"), d.findings
    hog = by[("contention", "app.pool")]
    assert _name(trace, hog.culprit_tasks[0]) == "hog"
    assert hog.caused_by is None, (hog.rank, hog.caused_by)


def _held_while_waiting(trace) -> None:
    """A writer holds app.buffers 8 ms of every 10; an inserter every 2 ms takes app.insert
    (one at a time), then waits for a buffer while it holds the insert lock."""
    from gigi.schema import TraceWriter
    from tests.queueing import MS

    w = TraceWriter(trace, "held-tests")
    for name in ("app.insert", "app.buffers"):
        w.add(
            "resources", {"resource": name, "capacity": 1, "unit": "units", "sharing": "exclusive"}
        )
    w.add(
        "tasks",
        {"task": 1000, "name": "writer", "kind": "background", "start": 0, "end": 2100 * MS},
    )
    for k in range(210):
        for kind, at in ((1, 0), (2, 4), (3, 8)):
            w.add(
                "events",
                {
                    "resource": "app.buffers",
                    "task": 1000,
                    "thread": 1,
                    "ts": (10 * k + at) * MS,
                    "kind": kind,
                    "amount": 1,
                },
            )
    free = 0
    for i in range(200):
        arrival, task = i * 2 * MS, 1 + i

        def ev(resource, kind, ts, dur=None, task=task, thread=10 + i % 8):
            w.add(
                "events",
                {
                    "resource": resource,
                    "task": task,
                    "thread": thread,
                    "ts": int(ts),
                    "kind": kind,
                    "amount": 1,
                    "dur": dur,
                },
            )

        start = max(arrival, free)
        if start > arrival:
            ev("app.insert", 0, arrival, start - arrival)
        ev("app.insert", 1, start)
        phase = start % (10 * MS)
        got = start  # a buffer at once in the writer's gap of 8-9.4 ms, else at the next
        if not 8 * MS <= phase < 9.4 * MS:
            got = start - phase + 8 * MS + (10 * MS if phase >= 9.4 * MS else 0)
            ev("app.buffers", 0, start, got - start)
        ev("app.buffers", 1, got)
        ev("app.buffers", 3, got + 6 * MS // 10)
        free = got + 6 * MS // 10 + 1000
        ev("app.insert", 3, free)
        w.add(
            "tasks",
            {
                "task": task,
                "name": f"insert {i}",
                "kind": "foreground",
                "start": arrival,
                "end": free + 1000,
            },
        )
    w.flush()


def test_waits_behind_holders_that_wait_for_another_resource_are_its_consequence(tmp_path):
    """Inserters queue for an insert lock whose holders wait for a buffer a writer keeps:
    the blame for the insert lock's waits reaches the writer through the buffers, so the
    buffers' contention is the root, ranked first by the weight of what it causes, and the
    insert lock's, though it scores higher, is its consequence, saying why."""
    trace = tmp_path / "t"
    _held_while_waiting(trace)
    d = diagnose(trace)
    first, second = d.findings[:2]
    assert (first.failure_mode, first.resource, first.caused_by) == (
        "contention",
        "app.buffers",
        None,
    )
    assert (second.failure_mode, second.resource, second.caused_by) == (
        "contention",
        "app.insert",
        1,
    )
    assert second.score > first.score
    assert "app.buffers" in second.to_json()["caused_because"]
    assert "caused_because" not in first.to_json()


class _Rows:
    """An engine's ``rows`` over a DuckDB connection."""

    def __init__(self, con):
        self.con = con

    def rows(self, sql):
        return self.con.execute(sql).fetchall()


def test_waiting_inside_another_resources_wait_is_measured_per_task():
    """The share of a resource's waiting that lies inside the same task's waits for another
    (a lock function's own wait inside the wait for the lock it takes): another task's wait
    at the same time does not enclose it."""
    import duckdb

    from gigi.diagnosis._diagnose import _waits_inside

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE waits (resource VARCHAR, task BIGINT, ts BIGINT, end_ts BIGINT, dur BIGINT)"
    )
    con.execute("""INSERT INTO waits VALUES
        ('wal', 1, 0, 100, 100), ('lwlock', 1, 10, 90, 80),
        ('wal', 2, 200, 260, 60), ('lwlock', 3, 210, 230, 20)""")
    assert _waits_inside(_Rows(con), "lwlock", ["wal"]) == {"wal": 0.8}
    assert _waits_inside(_Rows(con), "wal", ["lwlock"]) == {"lwlock": 0.0}


def test_contention_waited_inside_another_resources_waits_is_its_consequence():
    """Where no blame passed through another resource, waiting that lies mostly inside the
    same tasks' waits for another resource with a finding links to it, saying so."""
    import duckdb

    from gigi.diagnosis._diagnose import Finding, _link

    con = duckdb.connect()
    con.execute("CREATE TABLE events (resource VARCHAR, kind INT, task BIGINT)")
    con.execute(
        "CREATE TABLE metrics_blame (resource VARCHAR, culprit_resource VARCHAR, blame_ns BIGINT)"
    )
    con.execute("INSERT INTO metrics_blame VALUES ('lwlock', 'lwlock', 80), ('wal', 'wal', 100)")
    con.execute(
        "CREATE TABLE waits (resource VARCHAR, task BIGINT, ts BIGINT, end_ts BIGINT, dur BIGINT)"
    )
    con.execute("""INSERT INTO waits VALUES
        ('wal', 1, 0, 100, 100), ('lwlock', 1, 10, 90, 80), ('lwlock', 2, 200, 220, 20)""")
    wal, lwlock = (
        Finding("contention", r, score, [9], [1], {}, "", "contention")
        for r, score in (("wal", 0.7), ("lwlock", 1.0))
    )
    _link(_Rows(con), [wal, lwlock])
    assert lwlock.cause is wal and wal.cause is None
    assert lwlock.cause_why == "80% of its waiting lies inside waits for wal"


def test_a_link_that_would_close_a_loop_of_causes_is_not_made():
    from gigi.diagnosis._diagnose import Finding, _rank, _set_cause

    def finding(resource, score):
        return Finding("contention", resource, score, [1], [2], {}, "", "contention")

    a, b, c = finding("a", 0.6), finding("b", 1.0), finding("c", 0.9)
    assert _set_cause(b, a, "b behind a")
    assert not _set_cause(a, b, "a behind b")
    assert a.cause is None and b.cause is a
    # a, though it scores under c, weighs as much as b, which it causes
    assert [f.resource for f in _rank([a, b, c])] == ["a", "b", "c"]
    assert b.caused_by == 1


def test_healthy_demo_has_no_finding(tmp_path):
    store = _demo(tmp_path, "healthy", long_txn_length=0.0)
    assert diagnose(store, threshold=0.0).findings == []


def test_root_cause_survives_a_fifth_of_the_events_dropped(demo_store, tmp_path):
    trace = tmp_path / "dropped"
    trace.mkdir()
    entry = next(p for p in demo_store.iterdir() if p.is_dir())
    table = pa.concat_tables(pq.read_table(p) for p in sorted((entry / "events").glob("*.parquet")))
    rng = random.Random(3)
    keep = pa.array([rng.random() >= 0.2 for _ in range(table.num_rows)])
    write_stream(trace / "events.arrows", table.filter(keep).drop_columns(["seq"]))
    for small in ("tasks", "resources", "sites"):
        t = pq.read_table(entry / f"{small}.parquet")
        write_stream(trace / f"{small}.arrows", t, metadata={"gigi.table": small})
    d = diagnose(trace)
    assert (d.findings[0].failure_mode, d.findings[0].resource) == (
        "unbounded_growth",
        "engine.undo_log",
    )


def _log(
    stop_purge_at: float | None,
    drop: float,
    seed: int,
    *,
    resource: str = "log",
    taken: int = 2,
    every: int = 256,
    given: int = 512,
) -> dict:
    """Eight writers append ``taken`` records at a time to a log that a purge task truncates
    by ``given`` records every ``every`` appends (until ``stop_purge_at``, a share of the
    trace, when given); ``drop`` of the events lost at random."""
    rng = np.random.default_rng(seed)
    n = 20_000
    ts = np.arange(n, dtype=np.int64) * 100_000  # 2 s
    purge = np.arange(every - 1, n, every)
    if stop_purge_at is not None:
        purge = purge[purge < stop_purge_at * n]
    at = np.concatenate([ts, ts[purge] + 50_000])
    kind = np.concatenate([np.full(n, 1), np.full(len(purge), 3)]).astype(np.uint8)
    amount = np.concatenate([np.full(n, taken), np.full(len(purge), given)])
    task = np.concatenate([np.arange(n) % 8 + 1, np.full(len(purge), 100)])
    order = np.argsort(at, kind="stable")
    order = order[rng.random(len(order)) >= drop]
    return events(
        ts=at[order],
        kind=pa.array(kind[order], pa.uint8()),
        resource=[resource] * len(order),
        task=task[order],
        thread=task[order],
        amount=pa.array(amount[order], pa.int64()),
    )


def test_lost_events_of_a_log_truncated_in_big_steps_are_not_growth(tmp_path):
    """A lost RELEASE of 512 records moves the running sum 256 times as far as a lost append:
    the noise the growth test allows for counts both kinds (20% of the events of a steady
    log dropped, under ten seeds: counting appends alone, six of them were growth); a log
    whose purge stops still grows, drops or not."""
    for seed in range(10):
        trace = tmp_path / f"steady{seed}"
        trace.mkdir()
        write_stream(trace / "events.arrows", _log(None, 0.2, seed))
        found = [(f.failure_mode, f.resource) for f in diagnose(trace).findings]
        assert ("unbounded_growth", "log") not in found, (seed, found)
    for drop in (0.0, 0.2):
        trace = tmp_path / f"growing{drop}"
        trace.mkdir()
        write_stream(trace / "events.arrows", _log(0.3, drop, 1))
        top = diagnose(trace).findings[0]
        assert (top.failure_mode, top.resource) == ("unbounded_growth", "log")


def test_a_log_read_by_polling_that_purges_behind_is_growth(tmp_path):
    """What a poller of a server's counters sees when a long transaction holds back the
    purge: each 100 ms a rise of a few hundred, every two seconds a purge of what little it
    may remove. Few, large RELEASEs make a wide noise, yet the rise of 45,000 is far more than
    losing any share of them could explain (CI once missed this shape: rise 3.96 times a
    noise that assumed more than every event lost)."""
    appends, every = 170, 20
    ts = np.arange(appends, dtype=np.int64) * 100_000_000
    purges = ts[every - 1 :: every] + 50_000_000
    at = np.concatenate([ts, purges])
    order = np.argsort(at, kind="stable")
    kind = np.concatenate([np.full(appends, 1), np.full(len(purges), 3)]).astype(np.uint8)
    amount = np.concatenate([np.full(appends, 400), np.full(len(purges), 2_800)])
    task = np.concatenate([np.full(appends, 1), np.full(len(purges), 2)])
    trace = tmp_path / "polled"
    trace.mkdir()
    write_stream(
        trace / "events.arrows",
        events(
            ts=at[order],
            kind=pa.array(kind[order], pa.uint8()),
            resource=["dead_rows"] * len(order),
            task=task[order],
            thread=task[order],
            amount=pa.array(amount[order], pa.int64()),
        ),
    )
    top = diagnose(trace).findings[0]
    assert (top.failure_mode, top.resource, top.culprit_tasks[0]) == (
        "unbounded_growth",
        "dead_rows",
        1,
    )


def _written_out(given: int) -> dict:
    """Eight writers each take 2,000 bytes of a log per append; a writer task writes it out
    after every 64 appends, with a RELEASE of ``given``."""
    return _log(None, 0.0, 0, resource="wal", taken=2_000, every=64, given=given)


def test_releases_of_one_unit_against_acquires_of_bytes_are_not_growth(tmp_path):
    """A write-out probed without its amount gives back 1 (the default) for 128,000 bytes
    taken: the running sum rises without end, yet nothing grew; the verdict says why. Given
    back in full, or in part, it is judged by its units as before."""
    trace = tmp_path / "unit"
    trace.mkdir()
    write_stream(trace / "events.arrows", _written_out(1))
    d = diagnose(trace)
    assert [(f.failure_mode, f.resource) for f in d.findings] == []
    (why,) = [v.why_not for v in d.verdicts if v.failure_mode == "unbounded_growth"]
    assert "312 RELEASEs each gave back 1 unit" in why and "2000 on average" in why, why
    for given_back, growth in ((128_000, False), (32_000, True)):
        trace = tmp_path / f"given{given_back}"
        trace.mkdir()
        write_stream(trace / "events.arrows", _written_out(given_back))
        found = [(f.failure_mode, f.resource) for f in diagnose(trace).findings]
        assert (("unbounded_growth", "wal") in found) is growth, (given_back, found)


def _waited_for_room(wait_ns: int, every: int = 1) -> dict:
    """Eight writers each take 2,000 bytes of a log per append, each ``every``-th append
    after a WAIT of ``wait_ns`` for room; a writer task writes it out after every 64 appends,
    probed without its amount (a RELEASE of 1): the log's level cannot be measured."""
    n = 20_000
    ts = np.arange(n, dtype=np.int64) * 100_000  # 2 s
    writer = np.arange(n) % 8 + 1
    flush = np.arange(63, n, 64)
    waited = np.arange(0, n, every)
    at = np.concatenate([ts, ts[flush] + 50_000, ts[waited] - wait_ns])
    kind = np.concatenate([np.full(n, 1), np.full(len(flush), 3), np.full(len(waited), 0)])
    amount = np.concatenate(
        [np.full(n, 2_000), np.full(len(flush), 1), np.zeros(len(waited), np.int64)]
    )
    task = np.concatenate([writer, np.full(len(flush), 100), writer[waited]])
    dur = np.concatenate([np.zeros(n + len(flush), np.int64), np.full(len(waited), wait_ns)])
    order = np.argsort(at, kind="stable")
    return events(
        ts=at[order],
        kind=pa.array(kind[order].astype(np.uint8), pa.uint8()),
        resource=["wal"] * len(order),
        task=task[order],
        thread=task[order],
        amount=pa.array(amount[order], pa.int64()),
        dur=pa.array(dur[order], pa.int64()),
    )


def test_spread_waits_on_a_resource_whose_level_cannot_be_measured_are_a_finding(tmp_path):
    """Tasks that wait four times the trace's length for a log, the blame spread over all its
    holders, are told: under-provisioning says so though its level cannot be measured (its
    RELEASEs give back 1 unit against ACQUIREs of 2,000 bytes), instead of contention handing
    the spread blame to under-provisioning and under-provisioning refusing a log it cannot
    measure. Waits of a twentieth of the trace are not significant."""
    trace = tmp_path / "room"
    trace.mkdir()
    write_stream(trace / "events.arrows", _waited_for_room(400_000))
    (up,) = [f for f in diagnose(trace).findings if f.failure_mode == "under_provisioning"]
    assert up.resource == "wal" and 0.5 <= up.score < 1.0, up
    assert "how full it was cannot be measured" in up.summary, up.summary
    assert "2000 on average" in up.evidence["level_unknown"], up.evidence
    trace = tmp_path / "brief"
    trace.mkdir()
    write_stream(trace / "events.arrows", _waited_for_room(5_000))
    d = diagnose(trace)
    assert d.findings == []
    (why,) = [v.why_not for v in d.verdicts if v.failure_mode == "under_provisioning"]
    assert "significant from 0.200 (min_wait)" in why, why


def test_a_few_long_waits_on_a_resource_whose_level_cannot_be_measured_are_no_shortage(
    tmp_path,
):
    """The same log and the same wait in all (four times the trace's length), but in twenty
    waits of 400 ms among 20,000 appends that got in at once: a log too small turns requests
    away again and again, and a few long waits are stalls of its write-out, so
    under-provisioning says why it does not find the log too small, with the share."""
    trace = tmp_path / "stalls"
    trace.mkdir()
    write_stream(trace / "events.arrows", _waited_for_room(400_000_000, every=1_000))
    d = diagnose(trace)
    assert "under_provisioning" not in [f.failure_mode for f in d.findings], d.findings
    (why,) = [v.why_not for v in d.verdicts if v.failure_mode == "under_provisioning"]
    assert "20 of its 20000 ACQUIREs waited (0.10%)" in why, why
    assert "from 1% (underprov_waited_share)" in why, why


def test_json_follows_the_contract(demo_store, tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["diagnose", str(demo_store), "--format", "json", "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["version"] == 1 and doc["events"] > 0 and doc["dropped"] == 0
    for i, f in enumerate(doc["findings"], 1):
        assert f["rank"] == i
        assert set(f) >= {
            "rank",
            "failure_mode",
            "resource",
            "score",
            "culprit_tasks",
            "victim_tasks",
            "caused_by",
            "sites",
            "evidence",
            "summary",
        }
        assert 0.5 <= f["score"] <= 1
        assert f["caused_by"] is None or f["caused_by"] < f["rank"]
        assert all(set(s) == {"file", "line", "function", "kind", "role"} for s in f["sites"])


def test_user_detectors_plug_in_and_are_listed(demo_store, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "busy.sql").write_text(
        "-- detector: busy_pool\n-- failure_mode: under_provisioning\n"
        "-- meaning: any resource with more than a param of waits\n"
        "-- param busy_min_waits: waits before it counts (default 10)\n"
        "SELECT resource, 0.9 AS score, []::BIGINT[] AS culprit_tasks,"
        " []::BIGINT[] AS victim_tasks, '{}' AS evidence, 'busy' AS summary FROM metrics_resources"
        " WHERE waits > getvariable('busy_min_waits') AND resource = 'engine.purge_queue'\n"
    )
    d = diagnose(demo_store, detectors=[mine])
    assert any(f.failure_mode == "under_provisioning" and f.summary == "busy" for f in d.findings)
    assert (
        diagnose(demo_store, detectors=[mine], params={"busy_min_waits": 1e9}).findings[-1].summary
        != "busy"
    )
    assert main(["detectors", "list", "--detectors", str(mine)]) == 0
    listed = capsys.readouterr().out
    assert "busy_pool (under_provisioning;" in listed and "param busy_min_waits = 10" in listed
    assert {d.name for d in load()} >= {
        "contention",
        "under_provisioning",
        "inefficient_policy",
        "leak",
        "unbounded_growth",
    }


def test_bad_detectors_get_a_clear_error(tmp_path, demo_store):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.sql").write_text("-- detector: x\n-- failure_mode: slowness\n-- meaning: m\nSELECT 1")
    with pytest.raises(DetectorError, match="failure_mode 'slowness' is not one of"):
        load([bad])
    (bad / "x.sql").write_text(
        "-- detector: x\n-- failure_mode: leak\n-- meaning: m\nSELECT 1 AS a"
    )
    with pytest.raises(DetectorError, match=r"x.sql: the query returns no column\(s\) resource"):
        diagnose(demo_store, detectors=[bad])
    with pytest.raises(DetectorError, match="no detector parameter 'contention_min_wiat'"):
        diagnose(demo_store, params={"contention_min_wiat": 1})


_ev = st.tuples(
    st.sampled_from([0, 1, 2, 3]),
    st.integers(0, 2),
    st.integers(0, 5),
    st.integers(0, 50),
    st.one_of(st.none(), st.integers(0, 30)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_ev, min_size=1, max_size=40))
def test_totals_kernel_matches_its_sql_twin(tmp_path_factory, evs):
    d = tmp_path_factory.mktemp("twin")
    kinds, res, amount, ts, dur = zip(*evs, strict=True)
    ts = np.cumsum(ts).tolist()
    durs = [x if k == 0 else 0 for k, x in zip(kinds, dur, strict=True)]
    write_stream(
        d / "e.arrows",
        events(
            ts=ts,
            kind=pa.array(kinds, pa.uint8()),
            resource=[f"r{x}" for x in res],
            amount=pa.array(amount, pa.int64()),
            dur=pa.array(durs, pa.int64()),
        ),
    )
    con = connect(d)
    names = [r for (r,) in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
    start, end = con.sql('SELECT start, "end" FROM trace_info').fetchall()[0]
    cols = con.sql(
        "SELECT kind, resource, amount, ts, coalesce(dur, -1) FROM events ORDER BY seq"
    ).fetchall()
    k, r, a, t, du = zip(*cols, strict=True)
    got, _, _ = resource_totals(k, [names.index(x) for x in r], a, t, du, len(names), start, end)
    from gigi.metrics import sql_twin

    twin = con.sql(sql_twin("resource_totals")).fetchall()
    assert [tuple(row) for row in got.tolist()] == [tuple(row[1:]) for row in twin]
    assert len(TOTALS) == got.shape[1]


def test_metrics_tables_are_documented_column_by_column(demo_store):
    from gigi.diagnosis._metrics import METRICS_DOC, compute

    tables = compute(connect(demo_store))
    for name, table in tables.items():
        assert table.column_names == list(METRICS_DOC[name]), name


@pytest.mark.parametrize("n_groups", [3, 100_000])  # counting bins, or one sort
@pytest.mark.parametrize("scale", [4, 3000, 10**9])
def test_distribution_by_definition(n_groups, scale):
    from gigi.metrics.holdtime import PERCENTS, hold_time

    rng = np.random.default_rng(scale)
    group = rng.integers(0, 3, 20_000) * (n_groups // 3)
    ns = rng.integers(0, scale, 20_000) ** 2 // scale  # skewed, with runs of equal values
    counts, quant, hist = hold_time(group, ns, n_groups)
    for g in np.unique(group):
        mine = np.sort(ns[group == g])
        assert counts[g] == len(mine)
        ranks = [max(-(-p * len(mine) // 100), 1) - 1 for p in PERCENTS]
        assert quant[g].tolist() == [*mine[ranks].tolist(), int(mine[-1])]
        buckets = np.array([int(x).bit_length() for x in mine])
        assert hist[g].tolist() == np.bincount(buckets, minlength=64).tolist()
    assert counts.sum() == len(ns) and hist.sum() == len(ns)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(1, 3),
            st.one_of(st.integers(0, 5000), st.integers(0, 10**12)),  # exact bins, or wide ones
        ),
        min_size=1,
        max_size=30,
    )
)
def test_hold_time_kernel_matches_its_sql_twin(tmp_path_factory, holds):
    from gigi.metrics import sql_twin
    from gigi.metrics.holdtime import hold_time

    d = tmp_path_factory.mktemp("holds")
    ts, kinds, res, objs = [], [], [], []
    t = 0
    for r, obj, length in holds:  # ACQUIRE then RELEASE, some overlapping
        ts += [t, t + length]
        kinds += ["ACQUIRE", "RELEASE"]
        res += [f"r{r}"] * 2
        objs += [obj, obj]
        t += 7
    order = sorted(range(len(ts)), key=lambda i: ts[i])
    write_stream(
        d / "e.arrows",
        events(
            ts=[ts[i] for i in order],
            kind=[kinds[i] for i in order],
            resource=[res[i] for i in order],
            object=pa.array([objs[i] for i in order], pa.int64()),
        ),
    )
    con = connect(d)
    names = [r for (r,) in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
    h = con.sql("SELECT resource, hold_ns FROM holds").fetchall()
    counts, quant, hist = hold_time([names.index(r) for r, _ in h], [x for _, x in h], len(names))
    twin = con.sql(sql_twin("hold_time")).fetchall()
    got = [
        (names[i], int(counts[i]), *map(int, quant[i]), hist[i].tolist()) for i in range(len(names))
    ]
    assert got == [tuple(row[:6]) + (list(row[6]),) for row in twin]


def test_victims_sites_are_where_they_waited_longest_first(tmp_path):
    """Seventeen victims gave up after a microsecond at one site, three waited half a second
    at another: the second is where the time went, and comes first."""
    from gigi.schema import TraceWriter

    ms = 1_000_000
    w = TraceWriter(tmp_path / "t", "gigi-tests sites")
    w.add(
        "resources",
        {"resource": "app.lock", "capacity": 1, "unit": "locks", "sharing": "exclusive"},
    )
    for site, function in ((1, "lock_try"), (2, "lock_wait"), (3, "lock_take")):
        w.add(
            "sites",
            {
                "site": site,
                "file": "app.c",
                "line": 10 * site,
                "function": function,
                "kind": 1 if site == 3 else 0,
                "resource": "app.lock",
            },
        )
    one = {"resource": "app.lock", "amount": 1, "thread": 1}

    def begun(n: int, name: str, start: int) -> int:
        w.add(
            "tasks",
            {"task": n, "name": name, "kind": "foreground", "start": start, "end": 900 * ms},
        )
        return n

    hog = begun(1, "hog", 0)
    w.add("events", {**one, "task": hog, "ts": 0, "kind": 1, "site": 3})
    w.add("events", {**one, "task": hog, "ts": 500 * ms, "kind": 3})

    for k in range(3):
        task = begun(2 + k, f"slow {k}", 10 * ms)
        w.add(
            "events",
            {**one, "task": task, "ts": 10 * ms, "kind": 0, "dur": 490 * ms + k, "site": 2},
        )
        w.add("events", {**one, "task": task, "ts": 500 * ms + k * ms, "kind": 1, "site": 3})
        w.add("events", {**one, "task": task, "ts": 500 * ms + k * ms + ms // 2, "kind": 3})
    for k in range(40):
        task = begun(10 + k, f"quick {k}", 100 * ms)
        w.add(
            "events",
            {**one, "task": task, "ts": 100 * ms + k * ms, "kind": 0, "dur": 1000, "site": 1},
        )
    w.flush()
    d = diagnose(tmp_path / "t")
    f = next(f for f in d.findings if f.resource == "app.lock")
    waits = [s["function"] for s in f.sites if s["role"] == "victim"]
    assert waits == ["lock_wait", "lock_try"], f.sites
