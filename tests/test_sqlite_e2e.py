"""SQLite, which no one here wrote, through the whole loop: scanned offline, instrumented,
built with its own build system plus the runtime's flags, run, ingested, validated,
instrumented again with the sites that passed (as a user deploys it) and diagnosed, with its
own file:line sites in the results, and nothing found on a healthy run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gigi.cli import main as cli
from gigi.ingest import ingest
from gigi.queries import connect

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "sqlite"))
from build import amalgamation, instrument_validated, scan_and_instrument, workload  # noqa: E402
from fetch import sqlite_tree  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tree = sqlite_tree()
    if tree is None:
        pytest.skip("SQLite's source cannot be fetched here (apt with Debian's source packages)")
    work = tmp_path_factory.mktemp("sqlite-e2e")
    sites, probed = scan_and_instrument(tree, work / "scan")
    binary = workload(amalgamation(tree, work / "build", probed), work / "workload", work / "lib")
    return sites, probed, binary, work


def record(
    binary: Path, work: Path, mode: str, seconds: str, extra: tuple = (), lossless: bool = True
) -> Path:
    """Run the workload traced. Its readers make millions of events a second, more than the
    writer can write while they hold both cores, so the runs diagnosed are lossless (GIGI_BLOCK_MS:
    a full ring waits for the writer): the diagnosis of a run is what these tests are about,
    and drops are tested where they are counted (tests/test_native.py, and the first run)."""
    trace, db = work / f"trace-{mode}", work / f"{mode}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    env |= {"GIGI_TRACE": str(trace), "GIGI_RING_RECORDS": "131072"}  # 8 MiB a thread
    if lossless:
        env["GIGI_BLOCK_MS"] = "-1"
    subprocess.run(
        [str(binary), str(db), mode, seconds, *extra],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return trace


def _gone(*paths: Path) -> None:
    """A module's fixtures keep their directories to the end of the session: the traces they
    are done with go at once (hundreds of MB each, lossless)."""
    for path in paths:
        shutil.rmtree(path)


def test_every_verified_site_is_placed_in_sqlite(built):
    sites, probed, _, _ = built
    report = json.loads((probed / "gigi-instrument.json").read_text())
    assert report["sites"] == pq.read_table(sites / "sites.parquet").num_rows
    assert set(report["files"]) == {"pager.c", "pcache.c", "pcache1.c", "wal.c", "btree.c"}
    # the pager's lock is a level (Pager.eLock): its ACQUIREs and RELEASEs are the changes of
    # that level where it is set; the wrappers that do not set it get no probe of their own
    levels = [p for p in report["placements"] if "changes of Pager.eLock" in p["how"]]
    assert {p["function"] for p in levels} >= {"pagerLockDb", "pagerUnlockDb"}
    for p in report["skipped"]:
        assert "its changes are recorded where it is" in p["how"], p
    assert report["placed"] + len(report["skipped"]) == report["sites"]


def test_an_instrumented_sqlite_records_its_own_sites(built):
    sites, _, binary, work = built
    trace = record(binary, work, "normal", "1", lossless=False)
    manifest = ingest(trace, work / "store")
    assert manifest.events > 10_000
    assert manifest.dropped <= 0.05 * (manifest.events + manifest.dropped)
    con = connect(work / "store" / manifest.trace_id)
    # every event names a site, and every site is SQLite's code, by file and line
    assert con.execute("SELECT count(*) FROM events WHERE site IS NULL").fetchone() == (0,)
    unknown = con.execute(
        "SELECT count(*) FROM events e LEFT JOIN sites s USING (site) WHERE s.file IS NULL"
    ).fetchone()
    assert unknown == (0,)
    fired = dict(
        con.execute(
            "SELECT s.function || '/' || s.kind, count(*) FROM events e JOIN sites s USING (site) "
            "GROUP BY ALL"
        ).fetchall()
    )
    assert fired.get("sqlite3PcacheFetchFinish/1", 0) > 1000  # pages fetched: ACQUIRE
    assert fired.get("sqlite3PcacheRelease/3", 0) > 1000  # and released
    assert fired.get("pagerLockDb/1", 0) > 100  # database-file locks taken
    tasks = con.execute("SELECT count(*) FROM tasks WHERE name = 'client: UPDATE t'").fetchone()[0]
    assert tasks > 100
    # the run validates the sites it reached and keeps the page cache's lifecycle
    out = work / "valid"
    assert cli(["validate", str(trace), "--sites", str(sites), "--out", str(out)]) == 0
    kept = pq.read_table(out / "sites.parquet").to_pylist()
    kept = {(s["function"], s["kind"]) for s in kept}
    assert {("sqlite3PcacheFetchFinish", 1), ("sqlite3PcacheRelease", 3)} <= kept
    _gone(trace, work / "store")


@pytest.fixture(scope="module")
def validated(built, tmp_path_factory):
    """The build a user deploys: the sites a normal run validated, instrumented again."""
    sites, _, binary, work = built
    again = tmp_path_factory.mktemp("sqlite-validated")
    trace = record(binary, again, "normal", "1")  # the validation run
    tree = sqlite_tree()
    _, probed = instrument_validated(tree, sites, trace, again)
    deployed = workload(
        amalgamation(tree, again / "build", probed), again / "workload", work / "lib"
    )
    _gone(trace)
    return deployed, again


def test_a_healthy_run_of_the_deployed_build_has_no_findings(validated, tmp_path):
    binary, _ = validated
    trace = record(binary, tmp_path, "normal", "2")
    out = tmp_path / "d.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    d = json.loads(out.read_text())
    found = [(f["resource"], f["failure_mode"], f["summary"]) for f in d["findings"]]
    assert found == []


@pytest.fixture(scope="module")
def writers(validated, tmp_path_factory):
    binary, work = validated
    trace = record(binary, work, "writers", "3")
    out = tmp_path_factory.mktemp("writers") / "d.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    names = dict(connect(trace).execute("SELECT task, name FROM tasks").fetchall())
    _gone(trace)
    return json.loads(out.read_text()), names


def test_writers_behind_a_long_write_transaction_are_contention_on_the_pager(writers):
    d, names = writers
    top = d["findings"][0]
    assert (top["rank"], top["resource"], top["failure_mode"]) == (1, "Pager", "contention")
    assert {
        "file": "pager.c",
        "line": 3895,
        "function": "pager_wait_on_lock",
        "kind": "WAIT",
        "role": "victim",
    } in top["sites"]
    # the batch job's exclusive lock is what they waited for; clients then queue behind each
    # other's locks too (SQLite's busy handler sleeps), so it is among the first two to blame
    culprits = [names[t] for t in top["culprit_tasks"][:2]]
    assert "batch: UPDATE t SET n = 0" in culprits, culprits
    clients = {names[t].split(":")[0] for t in top["victim_tasks"]}
    assert len(clients & {f"client {i}" for i in range(4)}) >= 2, clients


@pytest.fixture(scope="module")
def small_cache(built, tmp_path_factory):
    """Four readers with a page cache of 10 pages each join a table of about 450 pages with
    itself at random. The build deployed by a user whose page cache turns out too small:
    validated by a healthy run of the readers, with SQLite's default cache, which holds the
    table (a single client's run cannot validate a miss: no other task holds the cache's
    pages while it waits), then run with a cache of 10 pages and diagnosed, with a normal
    run beside it."""
    sites, _, binary, work = built
    again = tmp_path_factory.mktemp("sqlite-smallcache")
    # the validation run
    trace = record(binary, again, "smallcache", "0.3", ("-2000",))
    tree = sqlite_tree()
    _, probed = instrument_validated(tree, sites, trace, again)
    deployed = workload(
        amalgamation(tree, again / "build", probed), again / "workload", work / "lib"
    )
    _gone(trace)
    runs = tmp_path_factory.mktemp("smallcache-runs")
    out = {}
    for mode, seconds in (("smallcache", "3"), ("normal", "2")):
        trace = record(deployed, runs, mode, seconds)
        d = runs / f"{mode}.json"
        assert cli(["diagnose", str(trace), "--format", "json", "--output", str(d)]) == 0
        names = dict(connect(trace).execute("SELECT task, name FROM tasks").fetchall())
        out[mode] = json.loads(d.read_text()), names
        _gone(trace)
    return out


def test_a_page_cache_far_smaller_than_the_reads_is_under_provisioned(small_cache):
    d, names = small_cache["smallcache"]
    top = d["findings"][0]
    assert (top["rank"], top["resource"], top["failure_mode"]) == (
        1,
        "PCache",
        "under_provisioning",
    )
    # the readers waited in the miss: the branch of getPageNormal that reads the page the
    # cache had no data for (readDbPage)
    assert {
        "file": "pager.c",
        "line": 5522,
        "function": "getPageNormal",
        "kind": "WAIT",
        "role": "victim",
    } in top["sites"]
    # every reader waited, and no one is to blame: the cache is too small for all of them
    readers = {names[t].split(":")[0] for t in top["victim_tasks"]}
    assert readers == {f"reader {i}" for i in range(4)}, readers
    assert top["culprit_tasks"] == []
    evidence = top["evidence"]
    assert evidence["capacity_inferred"] and evidence["share_of_time_near_capacity"] >= 0.3
    assert d["dropped"] == 0


def test_the_same_build_finds_nothing_on_a_healthy_run(small_cache):
    d, _ = small_cache["normal"]
    assert [(f["resource"], f["failure_mode"], f["summary"]) for f in d["findings"]] == []


def diagnose_json(trace: Path, out: Path) -> dict:
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    return json.loads(out.read_text())


def test_a_reader_left_open_grows_the_wal_without_bound(validated, tmp_path):
    binary, _ = validated
    trace = record(binary, tmp_path, "wal", "3", extra=("reader",))
    d = diagnose_json(trace, tmp_path / "d.json")
    names = dict(connect(trace).execute("SELECT task, name FROM tasks").fetchall())
    top = d["findings"][0]
    # the WAL's frames, a log the scan found by its end position (WalIndexHdr.mxFrame)
    assert (top["rank"], top["resource"], top["failure_mode"]) == (
        1,
        "Wal.frames",
        "unbounded_growth",
    )
    assert top["evidence"]["growth_rise"] > 1000
    # the reader's snapshot kept every checkpoint from restarting the log: it is to blame,
    # not the client that appended the frames
    assert names[top["culprit_tasks"][0]].startswith("reader:"), top["culprit_tasks"]
    assert {
        "file": "wal.c",
        "line": 2868,
        "function": "walTryBeginRead",
        "kind": "ACQUIRE",
        "role": "culprit",
    } in top["sites"]


def test_without_the_reader_checkpoints_restart_the_wal_and_nothing_is_found(validated, tmp_path):
    binary, _ = validated
    trace = record(binary, tmp_path, "wal", "3")
    d = diagnose_json(trace, tmp_path / "d.json")
    assert [(f["resource"], f["failure_mode"]) for f in d["findings"]] == []
    # the log did grow and restart, again and again: appends and restarts were recorded
    moved = dict(
        connect(trace)
        .execute(
            "SELECT s.function, sum(e.amount) FROM events e JOIN sites s USING (site) "
            "WHERE e.resource = 'Wal.frames' GROUP BY ALL"
        )
        .fetchall()
    )
    assert moved.get("sqlite3WalFrames", 0) > 2000
    assert moved.get("walRestartHdr", 0) >= 0.9 * moved["sqlite3WalFrames"] - 1000
