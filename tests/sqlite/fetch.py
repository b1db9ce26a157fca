"""Fetch SQLite's source tree from Debian's source packages (package ``sqlite3``) into a cache
directory, once (``tests/debian.py``'s ``source_tree``), and prepare it for a scan or a build.
``sqlite_tree`` returns the tree's path, or None when apt cannot fetch it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from debian import source_tree  # noqa: E402


def sqlite_tree(cache: Path | None = None) -> Path | None:
    cache = cache or Path(
        os.environ.get("GIGI_SQLITE_CACHE", Path(tempfile.gettempdir()) / "gigi-sqlite-src")
    )
    return source_tree("sqlite3", "src/pcache1.c", cache)


if __name__ == "__main__":
    print(sqlite_tree() or "cannot fetch SQLite's source")


SUBSET = ("src/pcache.c", "src/pcache1.c", "src/pager.c", "src/wal.c")


def link_files(tree: Path, files: tuple[str, ...], dest: Path) -> Path:
    """DEST holding a link to each of the tree's FILES, by name: a source tree of just those
    files, scanned with the whole tree's compile commands."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        link = dest / Path(f).name
        if not link.exists():
            os.symlink(tree / f, link)
    return dest


def _generated_headers(tree: Path, build: Path) -> Path | None:
    """BUILD holding opcodes.h, parse.h and keywordhash.h as SQLite's build makes them, or None
    (with why on stderr) when it cannot: the opcodes need tclsh."""
    names = ("opcodes.h", "parse.h", "keywordhash.h")
    if all((build / n).is_file() and (build / n).stat().st_size for n in names):
        return build
    if not (shutil.which("tclsh") or shutil.which("tclsh8.6")):
        print("SQLite's generated headers need tclsh (Debian package tcl)", file=sys.stderr)
        return None
    build.mkdir(parents=True, exist_ok=True)
    configure = ["sh", str(tree / "configure"), "--disable-tcl", "--disable-readline"]
    for cmd in (configure, ["make", *names]):
        done = subprocess.run(cmd, cwd=build, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{' '.join(cmd)}: {done.stderr[-500:]}", file=sys.stderr)
            return None
    return build


def prepare(tree: Path, generated: bool = False) -> Path:
    """What a build would generate first and the scan needs: sqlite3.h from sqlite.h.in (the
    version filled in, as tool/mksqlite3h.tcl does) and the generated headers (opcodes.h,
    parse.h, keywordhash.h): empty stand-ins, which the labeled files do not need, or with
    GENERATED the real ones made by SQLite's own build (configure, then make of just those
    three: lemon, mkkeywordhash and tclsh); and compile_commands.json for every file of src/."""
    gen = tree / "gigi-gen"
    gen.mkdir(exist_ok=True)
    version = (tree / "VERSION").read_text().strip()
    major, minor, patch = (int(x) for x in version.split("."))
    header = (tree / "src" / "sqlite.h.in").read_text()
    header = (
        header.replace("--VERS--", version)
        .replace("--VERSION-NUMBER--", str(major * 1_000_000 + minor * 1000 + patch))
        .replace("--SOURCE-ID--", "gigi-scan")
    )
    (gen / "sqlite3.h").write_text(header)
    made = _generated_headers(tree, gen / "build") if generated else None
    for name in ("opcodes.h", "parse.h", "keywordhash.h"):
        if made is not None:
            shutil.copyfile(made / name, gen / name)
        elif not (gen / name).exists():
            (gen / name).touch()
    import json

    flags = ["cc", "-std=gnu11", "-DSQLITE_CORE", f"-I{tree / 'src'}", f"-I{gen}"]
    commands = [
        {"directory": str(tree), "file": str(p), "arguments": [*flags, "-c", str(p)]}
        for p in sorted((tree / "src").glob("*.c"))
    ]
    out = tree / "compile_commands.json"
    out.write_text(json.dumps(commands, indent=1))
    return out
