"""Build SQLite (from the Debian source tree that fetch.py brings) as an amalgamation, as is or
with gigi's probes inserted by `gigi-query instrument`, and link tests/sqlite/workload.c
against it and the native runtime. Its own build system does the work: configure, then
`make sqlite3.c` (tclsh assembles the amalgamation)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from fetch import SUBSET, link_files, prepare

from gigi.probes import native
from gigi.scan import scan, write
from gigi.scan._instrument import instrument
from gigi.scan._validate import read_sites, validate
from gigi.scan._validate import write as write_validated

HERE = Path(__file__).resolve().parent


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed in {cwd}:\n{done.stderr[-2000:]}")


# the files scanned end to end: the labeled page cache, pager and WAL, and the b-tree, whose
# sqlite3BtreeBeginTrans retries the pager's locks under the busy handler
END_TO_END = (*SUBSET, "src/btree.c")


def scan_and_instrument(tree: Path, work: Path) -> tuple[Path, Path]:
    """Scan END_TO_END offline; write the sites to WORK/sites and the instrumented files to
    WORK/probed. Returns both folders."""
    sub = link_files(tree, END_TO_END, work / "src")
    write(scan(sub, compile_commands=prepare(tree)), work / "sites")
    return _instrument(tree, work)


def instrument_validated(tree: Path, sites: Path, trace: Path, work: Path) -> tuple[Path, Path]:
    """Validate SITES by TRACE (a run of the scanned build) and instrument the same files again
    with the sites that passed: WORK/sites and WORK/probed."""
    calls = sites / "hierarchy" / "calls.parquet"
    write_validated(validate(trace, read_sites(sites), calls=calls), work / "sites", sites)
    return _instrument(tree, work)


def _instrument(tree: Path, work: Path) -> tuple[Path, Path]:
    """END_TO_END instrumented with the sites in WORK/sites into WORK/probed."""
    sub = link_files(tree, END_TO_END, work / "src")
    instrument(sub, work / "sites", work / "probed", compile_commands=prepare(tree))
    return work / "sites", work / "probed"


def _tclsh() -> None:
    """SQLite's build assembles the amalgamation with tclsh: install Debian's tcl if missing."""
    if shutil.which("tclsh") or shutil.which("tclsh8.6"):
        return
    subprocess.run(["apt-get", "install", "-y", "-qq", "tcl"], capture_output=True)
    if not (shutil.which("tclsh") or shutil.which("tclsh8.6")):
        raise RuntimeError("SQLite's build needs tclsh (Debian package tcl)")


def amalgamation(tree: Path, work: Path, replace: Path | None = None) -> Path:
    """sqlite3.c (and sqlite3.h beside it) built from a copy of the tree, with the .c files of
    REPLACE put in src/ first."""
    _tclsh()
    copy = work / "tree"
    shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns("gigi-gen"))
    if replace is not None:
        for f in replace.glob("*.c"):
            if f.is_file() and not f.is_symlink():
                shutil.copyfile(f, copy / "src" / f.name)
    build = copy / "bld"
    build.mkdir()
    _run(["sh", "../configure", "--disable-tcl", "--disable-readline"], build)
    _run(["make", "sqlite3.c"], build)
    return build / "sqlite3.c"


def shared_library(sqlite3_c: Path, out: Path) -> Path:
    """The amalgamation as a shared library bound to itself (-Bsymbolic), so that two builds
    load side by side in one process (bench/native/sqlite_ab.c)."""
    _run(
        [
            native.compiler(),
            "-O2",
            "-fPIC",
            "-shared",
            "-DSQLITE_THREADSAFE=1",
            *native.cflags(),
            str(sqlite3_c),
            "-o",
            str(out),
            "-Wl,-Bsymbolic",
            "-lm",
        ],
        sqlite3_c.parent,
    )
    return out


def workload(sqlite3_c: Path, out: Path, lib_dir: Path) -> Path:
    """tests/sqlite/workload.c linked with the amalgamation and the native runtime."""
    cc = native.compiler()
    obj = sqlite3_c.with_suffix(".o")
    _run(
        [
            cc,
            "-O2",
            "-DSQLITE_THREADSAFE=1",
            *native.cflags(),
            "-c",
            str(sqlite3_c),
            "-o",
            str(obj),
        ],
        sqlite3_c.parent,
    )
    _run(
        [
            cc,
            "-O2",
            *native.cflags(),
            f"-I{sqlite3_c.parent}",
            str(HERE / "workload.c"),
            str(obj),
            *native.libs(lib_dir),
            "-ldl",
            "-lm",
            "-o",
            str(out),
        ],
        sqlite3_c.parent,
    )
    return out
