"""The offline scanner's scale on a real large backend: PostgreSQL 15's src/backend, scanned
with the compile commands its own build implies.

    python bench/scan_scale.py [--work DIR] [--all] [--only DIRS] [--jobs 2]

PostgreSQL's tree comes from Debian's source package (tests/debian.py; $GIGI_SRC_CACHE is
honoured) and is left as it is: it is copied into --work (default a new temp dir) and the
copy is configured (a separate build folder would not do: bench/scan_eval.py configures the
cached tree in place, and PostgreSQL's configure refuses a build folder for such a tree), then
make makes the headers the backend needs and the release tarball lacks (`make -C
src/backend generated-headers`: the catalog's, fmgroids.h, lwlocknames.h...), nothing else.
PostgreSQL 15 builds with autoconf and make, which write no compile_commands.json: it is
derived from `make -n -w -k -C src` (every command make would run, the folder it runs in from
make's "Entering directory" lines), keeping the compiler's ``-c`` lines of the .c files of
src/backend made in src/backend (the server and the modules beside it: snowball, the encoding
conversions, libpqwalreceiver, pgoutput), and written to --work/compile_commands.json. A rerun
with the same --work reuses the copy, configured. What libclang prints while scanning (its
driver's word on the compiler's flags) goes to --work/scan-stderr.log.

The scan's root is the copy's root, so that src/include's headers are the tree's own (their
records and functions taken in each file's context, their lines counted) and ``only`` names
what is scanned: by default a subset of about 100k lines (src/backend/storage);
--only names other folders of the tree (comma-separated), --all the whole of src/backend,
every file its build compiles (.c files it never compiles on its own, such as the regex
library's regc_*.c that regcomp.c includes or another platform's ports, are left out).

Prints, per scan: files, lines (the scanner's count: the files scanned and the tree's headers
they include), functions, records, diagnostics (errors apart from warnings, and the commonest
messages), wall time and lines per second, each stage's seconds and share of the wall time,
resources and verified sites, the peak RSS of this process and of its largest worker, and
the goal: 100k lines in under 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

from debian import source_tree  # noqa: E402

from gigi.scan._scan import scan  # noqa: E402

PACKAGE = "postgresql-15"
MARKER = "src/backend/storage/buffer/freelist.c"
# the least that configures on a machine with a C compiler and nothing else
CONFIGURE = ["--without-icu", "--without-readline", "--without-zlib", "--without-openssl"]
# about 100k lines as the scanner counts them: half its own .c files, half the headers they
# include
SUBSET = ["src/backend/storage"]
GOAL_LINES, GOAL_S = 100_000, 120.0


def run(cmd: list[str], cwd: Path, log: Path) -> None:
    """Run CMD in CWD, its output into LOG; exit with the log's tail when it fails."""
    with log.open("w") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        sys.exit(f"{shlex.join(cmd)} failed (in {cwd}; log {log}):\n" + "\n".join(tail))


def build(tree: Path, work: Path, jobs: int) -> Path:
    """A copy of TREE in WORK, configured (once) and with the backend's generated headers
    made: the tree the scan reads."""
    copy, stamp = work / tree.name, work / "configured"
    said = f"{tree}\n{shlex.join(CONFIGURE)}\n"
    if not (copy.is_dir() and stamp.exists() and stamp.read_text() == said):
        t = time.perf_counter()
        stamp.unlink(missing_ok=True)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy, symlinks=True)
        run(["./configure", *CONFIGURE], copy, work / "configure.log")
        stamp.write_text(said)
        print(f"copied and configured in {time.perf_counter() - t:.0f} s: {copy}")
    t = time.perf_counter()
    run(
        ["make", f"-j{jobs}", "-C", "src/backend", "generated-headers"],
        copy,
        work / "generated-headers.log",
    )
    print(f"generated headers made in {time.perf_counter() - t:.1f} s")
    return copy


def compile_commands(tree: Path, work: Path) -> Path:
    """WORK/compile_commands.json for the .c files of TREE's src/backend that its build
    compiles there, from what `make -n` would run."""
    done = subprocess.run(
        ["make", "-n", "-w", "-k", "-C", "src"], cwd=tree, capture_output=True, text=True
    )
    (work / "make-n.log").write_text(done.stdout + done.stderr)
    backend = tree / "src" / "backend"
    here: list[Path] = [tree]
    entries: dict[Path, dict] = {}
    for line in done.stdout.splitlines():
        if "Entering directory '" in line:
            here.append(Path(line.split("'")[1]))
            continue
        if "Leaving directory '" in line:
            here = here[:-1] or [tree]
            continue
        if " -c " not in line or ".c" not in line:
            continue
        try:
            args = shlex.split(line)
        except ValueError:
            continue
        if args[0].startswith("-") or "-c" not in args:
            continue
        named = [i for i, a in enumerate(args) if a.endswith(".c") and args[i - 1] != "-o"]
        if len(named) != 1:
            continue
        folder = here[-1]
        file = (folder / args[named[0]]).resolve()
        if not folder.is_relative_to(backend) or not file.is_relative_to(backend):
            continue  # a backend file another program compiles (pg_waldump's rmgrdesc)
        # the file by its real path: the scanner leaves a file out of its own arguments by the
        # real path's name, so a configure-made link named as make names it (port/pg_sema.c,
        # which is posix_sema.c) would stay in them, a second input that fails the parse
        args[named[0]] = str(file)
        entries.setdefault(file, {"directory": str(folder), "arguments": args, "file": str(file)})
    if not entries:
        sys.exit(f"`make -n` in {tree} gave no compile commands for src/backend")
    path = work / "compile_commands.json"
    path.write_text(json.dumps(list(entries.values()), indent=1) + "\n")
    return path


def show_entry(path: Path, tree: Path) -> None:
    """One entry of the compile commands, its -I and -D flags: what a scan is handed."""
    entries = json.loads(path.read_text())
    e = next((e for e in entries if e["file"].endswith(MARKER)), entries[0])
    flags = [a for a in e["arguments"] if a.startswith(("-I", "-D"))]
    print(
        f"{len(entries)} compile commands ({path}); "
        f"{Path(e['file']).relative_to(tree)}: {' '.join(flags)}"
    )


def report(name: str, r, wall: float) -> None:
    st = r.stats
    diags = [d for u in r.units for d in u.diagnostics]
    severities = Counter(d.severity for d in diags)
    per_100k = wall * GOAL_LINES / max(st["lines"], 1)
    print(f"\n== {name}")
    print(
        f"{st['files']} files, {st['lines']:,} lines, {st['functions']:,} functions, "
        f"{st['records']:,} records"
    )
    print(
        f"diagnostics: {st['diagnostics']} "
        f"({', '.join(f'{n} {s}' for s, n in severities.most_common()) or 'none'})"
    )
    for (severity, message), n in Counter((d.severity, d.message) for d in diags).most_common(5):
        print(f"  {n:5d} {severity}: {message[:120]}")
    errs = Counter(d.file for d in diags if d.severity in ("error", "fatal"))
    if errs:
        most = ", ".join(f for f, _ in errs.most_common(3))
        print(f"  errors in {len(errs)} files, most in: {most}")
    print(f"wall {wall:.1f} s, {st['lines'] / wall:,.0f} lines/s")
    # a stage's seconds, or a breakdown of one ({part: seconds}: the verification's rules)
    stages = {k: v for k, v in st.items() if k.endswith("_s") and isinstance(v, int | float)}
    for k, v in stages.items():
        print(f"  {k[:-2]:10s} {v:8.1f} s {v / wall:6.1%}")
    for k, parts in st.items():
        if k.endswith("_s") and isinstance(parts, dict):
            top = sorted(parts.items(), key=lambda kv: -kv[1])
            print(f"  {k[:-2]}, the slowest {min(len(top), 5)} of {len(top)}:")
            for part, v in top[:5]:
                print(f"    {part:30s} {v:8.2f} s {v / wall:6.1%}")
    other = wall - sum(stages.values())
    print(f"  {'other':10s} {other:8.1f} s {other / wall:6.1%}  (listing the tree, commands)")
    print(
        f"resources: {len(r.resources)} ({len(r.unconfirmed)} more proposed, none verified); "
        f"verified sites: {len(r.verified())} of {len(r.candidates)} candidates"
    )
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: this process {me:,.0f} MB, its largest child {kids:,.0f} MB")
    met = "met" if per_100k < GOAL_S else "not met"
    print(f"100k lines in under 2 minutes: {met} ({per_100k:.1f} s per 100k lines)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--work", type=Path, help="for the configured copy and the compile commands (kept, reused)"
    )
    ap.add_argument("--all", action="store_true", help="the whole of src/backend")
    ap.add_argument("--only", help="comma-separated folders of the tree to scan instead")
    ap.add_argument("--jobs", type=int, default=2, help="make's and the scan's (default 2)")
    args = ap.parse_args()
    found = source_tree(PACKAGE, MARKER)
    if found is None:
        sys.exit(f"cannot fetch Debian's source package {PACKAGE}")
    work = (args.work or Path(tempfile.mkdtemp(prefix="gigi-scan-scale-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"PostgreSQL tree: {found}\nwork: {work}")
    tree = build(found, work, args.jobs)
    commands = compile_commands(tree, work)
    show_entry(commands, tree)
    compiled = sorted(os.path.relpath(e["file"], tree) for e in json.loads(commands.read_text()))
    if args.all:
        dirs, name = ["src/backend"], "src/backend, all of it"
    else:
        dirs = [d.strip().strip("/") for d in args.only.split(",")] if args.only else SUBSET
        name = ", ".join(dirs)
    only = [f for f in compiled if any(f.startswith(d + "/") for d in dirs)]
    if not only:
        sys.exit(f"no compiled file under {', '.join(dirs)}")
    known = set(compiled)
    skipped = sum(
        1
        for d in dirs
        for p in (tree / d).rglob("*.c")
        if os.path.relpath(p.resolve(), tree) not in known
    )
    print(f"scanning {len(only)} files ({skipped} .c files there the build never compiles)")
    step, shown = max(len(only) // 10, 1), set()

    def progress(i: int, n: int) -> None:
        if (i % step == 0 or i == n) and i not in shown:
            shown.add(i)
            print(f"  parsed {i}/{n}", flush=True)

    # libclang prints what its driver says of the compiler's flags (a GCC option it does not
    # know) on stderr, for every file: into a log
    log = work / "scan-stderr.log"
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("w") as f:
        os.dup2(f.fileno(), 2)
    try:
        t = time.perf_counter()
        r = scan(tree, compile_commands=commands, jobs=args.jobs, progress=progress, only=only)
        wall = time.perf_counter() - t
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
    said = log.read_text(errors="replace").splitlines()
    print(f"  ({len(said)} lines on stderr while scanning: {log})")
    report(name, r, wall)


if __name__ == "__main__":
    main()
