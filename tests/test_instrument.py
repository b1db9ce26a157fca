"""The instrumenter: probes at every verified site of the corpus, code that compiles, the
original recovered byte for byte, and a scanned, instrumented C program diagnosed end to end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gigi.cli import main as cli
from gigi.probes import native
from gigi.scan._instrument import strip

HERE = Path(__file__).parent
CORPUS = HERE / "scan_corpus"


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("instrument")
    assert cli(["scan", str(CORPUS), "--out", str(work / "sites")]) == 0
    assert (
        cli(["instrument", str(CORPUS), "--sites", str(work / "sites"), "--out", str(work / "src")])
        == 0
    )
    return work / "sites", work / "src"


def test_every_site_is_placed_and_the_rest_is_byte_identical(probed):
    sites, src = probed
    report = json.loads((src / "gigi-instrument.json").read_text())
    table = pq.read_table(sites / "sites.parquet")
    assert report["placed"] == report["sites"] == table.num_rows > 0 and not report["skipped"]
    assert {p["kind"] for p in report["placements"]} == {"WAIT", "ACQUIRE", "USE", "RELEASE"}
    for original in CORPUS.iterdir():
        copy = src / original.name
        if original.name in report["files"]:
            assert copy.read_text() != original.read_text()
            assert strip(copy.read_text()) == original.read_text()
        else:
            assert copy.read_bytes() == original.read_bytes()


def test_the_instrumented_corpus_compiles_for_every_site_kind(probed, tmp_path):
    _, src = probed
    for f in sorted(src.iterdir()):
        if f.suffix not in (".c", ".cc"):
            continue
        cc = native.compiler() if f.suffix == ".c" else "c++"
        std = "-std=c11" if f.suffix == ".c" else "-std=c++17"
        out = subprocess.run(
            [cc, std, "-Wall", *native.cflags(), "-c", str(f), "-o", str(tmp_path / "x.o")],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, f"{f.name}: {out.stderr}"
        assert "gigi" not in out.stderr, out.stderr  # no warning of our making


def test_a_scanned_instrumented_program_is_diagnosed_with_its_source_lines(probed, tmp_path):
    sites, src = probed
    binary = tmp_path / "conn"
    subprocess.run(
        [
            native.compiler(),
            "-O2",
            *native.cflags(),
            str(src / "conn_pool.c"),
            str(HERE / "native" / "conn_driver.c"),
            *native.libs(tmp_path / "lib"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    trace = tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    subprocess.run([str(binary), "8", "200"], env={**env, "GIGI_TRACE": str(trace)}, check=True)
    out = tmp_path / "diagnosis.json"
    assert cli(["diagnose", str(trace), "--format", "json", "--output", str(out)]) == 0
    d = json.loads(out.read_text())
    top = d["findings"][0]
    assert (top["rank"], top["resource"], top["failure_mode"]) == (
        1,
        "conn_pool",
        "under_provisioning",
    )
    assert {
        "file": "conn_pool.c",
        "line": 27,
        "function": "pool_checkout",
        "kind": "WAIT",
        "role": "victim",
    } in top["sites"]
    # the run speaks for every conn_pool site it reached
    valid = tmp_path / "valid"
    assert cli(["validate", str(trace), "--sites", str(sites), "--out", str(valid)]) == 0
    report = json.loads((valid / "validation.json").read_text())
    assert report["removed"] == []
    assert report["by_kind"]["WAIT"]["exercised"] == 1
    assert {k: v["exercised"] for k, v in report["by_kind"].items()} == {
        "WAIT": 1,
        "ACQUIRE": 1,
        "USE": 1,
        "RELEASE": 1,
    }


def test_instrument_refuses_a_folder_that_holds_files(probed, tmp_path, capsys):
    sites, _ = probed
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.c").write_text("int x;\n")
    code = cli(["instrument", str(CORPUS), "--sites", str(sites), "--out", str(busy)])
    assert code == 2 and "already holds files" in capsys.readouterr().err
    assert (busy / "mine.c").read_text() == "int x;\n"
