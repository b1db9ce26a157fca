"""The scanner's precision and recall per kind and per stage, and its speed.

    python bench/scan_eval.py [--no-sqlite] [--no-real] [--codebase NAME ...] [--details]
                              [--callers-inherit]

Real codebases first (tests/scan_real/*.json: Redis, nginx, libuv, memcached, httpd,
PostgreSQL, pgbouncer, lighttpd, HAProxy, Unbound, mosquitto, libmicrohttpd, libevent,
dnsmasq, APR, curl, rsyslog, Tor, h2o, LMDB, Knot Resolver, each fetched from Debian's
source packages by tests/debian.py, and
llama.cpp's KV cache in C++, from the llama-cpp-python source distribution; with function
labels written from reading the code):
the labeled files scanned offline in their whole tree, and per codebase and stage
(proposed; verified) the labeled functions found, their kinds right, the functions with more
than 3 sites, the decoys hit and the precision over every function of the labeled files, and
the parse errors (clang's: a header not found). Each tree is first made to parse as its
build would (``prepared``: its configure step, its include folders, the headers of the
libraries it uses). Codebases whose file says "held_out": true are printed apart: no rule or
threshold was tuned on them. --details lists what was missed, mistyped and falsely hit.
--callers-inherit also prints the means as they would be if every function of the labeled
files with no site of its own took the kinds of the functions it calls (all four, then
ACQUIRE and RELEASE alone): the labels' readers often give a longer function the kinds of
the callees it drives, which the scan gives only to thin wrappers, chains and walks; this
measures how much of the gap that convention is. It changes no site the scan writes.

On the labeled corpus (tests/scan_corpus) and on SQLite's page cache, pager and WAL (fetched
from Debian's source packages by tests/sqlite/fetch.py; labels in tests/sqlite/labels.json):
per kind, what the offline recall proposed and what passed static verification, with
precision and recall against the labels. Then the whole of SQLite's src/ scanned offline:
lines, files, wall time, lines per second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests" / "sqlite"))
sys.path.insert(0, str(HERE / "tests"))

from debian import sdist_tree, source_tree, unpacked  # noqa: E402
from fetch import SUBSET, link_files, prepare, sqlite_tree  # noqa: E402

from gigi.scan import scan  # noqa: E402
from gigi.scan._labels import MAX_SITES, evaluate, evaluate_functions, load_labels  # noqa: E402
from gigi.scan._scan import KINDS  # noqa: E402

REAL = HERE / "tests" / "scan_real"
GOALS = {"recall": 0.85, "kind_right": 0.85, "decoy_rate": 0.10}


def prepared(tree: Path, labels: dict) -> list[Path]:
    """What the tree needs to parse as its build would, from its labels: the libraries it
    includes but does not hold ("deps": Debian's packages, unpacked together, not installed,
    and their include folders: httpd's APR, memcached's libevent); the headers its configure
    step generates ("prepare": run once in the cached tree, "{deps}" and "{deps_lib}" naming
    where the packages were unpacked); and its own include folders ("include"). Returns the
    folders to search."""
    name = labels["codebase"]
    deps = labels.get("deps")
    root = unpacked(name, deps["packages"]) if deps else None
    if deps and root is None:
        print(f"{name}: cannot fetch {', '.join(deps['packages'])}; scanned without them")
    lib = next(iter(sorted(root.glob("usr/lib/*/*.so"))), None) if root else None
    prep = labels.get("prepare")
    if prep and not (tree / prep["made"]).exists():
        for cmd in prep["run"]:
            cmd = [a.format(deps=root, deps_lib=lib.parent if lib else "") for a in cmd]
            done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
                print(f"{name}: {' '.join(cmd)} failed ({' '.join(tail)}); scanned without it")
                break
    dirs = [tree / d for d in labels.get("include", [])]
    if root is not None:
        dirs += [root / d for d in deps["include"]]
    return dirs


def fetched(labels: dict) -> Path | None:
    """The tree a codebase's labels name: Debian's source package ("package"), or a source
    distribution from the Python package index ("sdist": project and version, for a C++
    tree vendored there, llama.cpp in llama-cpp-python)."""
    if "sdist" in labels:
        sd = labels["sdist"]
        return sdist_tree(sd["project"], sd["version"], labels["marker"])
    return source_tree(labels["package"], labels["marker"])


def inherited(r, files: set[str], kinds: set[str]):
    """R as if every function of FILES with no verified site of its own took, of KINDS, those
    of the functions it calls (one call deep, at the call)."""
    from dataclasses import replace

    given: dict[str, set[str]] = {}
    first: dict[str, object] = {}  # a callee's first verified site, to copy
    own = set()
    for c, ok, _ in r.candidates:
        if ok:
            given.setdefault(c.function, set()).add(c.kind)
            first.setdefault(c.function, c)
            own.add((c.file, c.function))
    added = []
    for u in r.units:
        for fn in u.functions:
            if fn.file not in files or (fn.file, fn.name) in own:
                continue
            for call in fn.calls:
                for kind in sorted(given.get(call.callee, set()) & kinds):
                    at = {"file": fn.file, "function": fn.name, "line": call.line}
                    c = replace(first[call.callee], kind=kind, **at)
                    added.append((c, True, f"inherited from {call.callee}"))
    return replace(r, candidates=[*r.candidates, *added])


def means(rows: list, label: str, pick: bool, stage: str = "verified") -> None:
    mine = [ev[stage] for _, held, _, _, ev in rows if held == pick]
    if not mine:
        return
    mean = {k: sum(m[k] for m in mine) / len(mine) for k in GOALS}
    met = all(
        (mean[k] >= goal) if k != "decoy_rate" else (mean[k] <= goal) for k, goal in GOALS.items()
    )
    print(
        f"mean of {len(mine)} {label}, verified: recall {mean['recall']:.0%}, kind right "
        f"{mean['kind_right']:.0%}, decoys hit {mean['decoy_rate']:.0%} "
        f"(goals {GOALS['recall']:.0%}, {GOALS['kind_right']:.0%}, "
        f"<= {GOALS['decoy_rate']:.0%}: {'met' if met else 'not met'})"
    )


def real_codebases(names: list[str] | None, details: bool, inherit: bool = False) -> None:
    """Every labeled real codebase: one row per codebase and stage, then the means of the
    tuned and the held-out ones."""
    import json

    rows = []
    readings: dict[str, list] = {"all four kinds": [], "ACQUIRE and RELEASE": []}
    for path in sorted(REAL.glob("*.json")):
        labels = json.loads(path.read_text())
        name = labels["codebase"]
        if names and name not in names:
            continue
        tree = fetched(labels)
        if tree is None:
            where = labels.get("package") or labels["sdist"]["project"]
            print(f"{name}: cannot fetch the source of {where}")
            continue
        includes = prepared(tree, labels)
        t = time.perf_counter()
        r = scan(tree, only=labels["files"], include_dirs=includes, defines=labels.get("defines"))
        wall = time.perf_counter() - t
        ev = evaluate_functions(r, labels)
        rows.append((name, labels.get("held_out", False), r.stats, wall, ev))
        if inherit:
            files = set(labels["files"])
            for reading, kinds in zip(readings, (set(KINDS), {"ACQUIRE", "RELEASE"}), strict=True):
                ev2 = evaluate_functions(inherited(r, files, kinds), labels)
                readings[reading].append((name, labels.get("held_out", False), r.stats, wall, ev2))
        if details:
            v = ev["verified"]
            for what in ("missed", "wrong_kind", "false"):
                for line in v[what]:
                    print(f"  {name} {what}: {line}")
    print(
        f"\n{'codebase':10s} {'lines':>6s} {'fns':>4s} {'decoys':>6s} {'stage':9s} "
        f"{'recall':>6s} {'kind ok':>7s} {f'>{MAX_SITES} sites':>8s} {'decoys':>6s} "
        f"{'precision':>9s} {'s':>5s} {'errs':>5s}"
    )
    for name, held, st, wall, ev in rows:
        for stage in ("recall", "verified"):
            m = ev[stage]
            print(
                f"{name + ('*' if held else ''):10s} {st['lines']:6d} {ev['labeled']:4d} "
                f"{ev['decoys']:6d} {stage:9s} {m['recall']:6.0%} {m['kind_right']:7.0%} "
                f"{m['crowded']:8d} {m['decoy_rate']:6.0%} {m['precision']:9.0%} {wall:5.1f} "
                f"{st['errors']:5d}"
            )
    print(
        "\nper kind, verified, by function: recall / precision (labeled functions of the kind;"
        " -: none labeled, or none given)"
    )
    print(f"{'codebase':10s} " + " ".join(f"{k:>17s}" for k in KINDS))
    for name, held, _, _, ev in rows:
        cells = []
        for k in KINDS:
            m = ev["verified"]["per_kind"][k]
            rec = f"{m['recall']:4.0%}" if m["labeled"] else "   -"
            pre = f"{m['precision']:4.0%}" if m["given"] else "   -"
            cells.append(f"{rec} / {pre} ({m['labeled']:2d})")
        print(f"{name + ('*' if held else ''):10s} " + " ".join(f"{c:>17s}" for c in cells))
    for label, pick in (("tuned", False), ("held out*", True)):
        means(rows, label, pick)
    for reading, inherited_rows in readings.items() if inherit else ():
        print(f"\nif callers took the kinds of their callees ({reading}), one call deep:")
        for label, pick in (("tuned", False), ("held out*", True)):
            means(inherited_rows, label, pick)


def table(name: str, ev: dict) -> None:
    print(f"\n{name}")
    print(
        f"{'kind':8s} {'stage':9s} {'tp':>4s} {'fp':>4s} {'fn':>4s} {'precision':>9s} "
        f"{'recall':>7s}"
    )
    for kind in ("WAIT", "ACQUIRE", "USE", "RELEASE", "all"):
        for stage in ("recall", "verified"):
            m = ev[stage][kind]
            print(
                f"{kind:8s} {stage:9s} {m['tp']:4d} {m['fp']:4d} {m['fn']:4d} "
                f"{m['precision']:9.1%} {m['recall']:7.1%}"
            )
    r = ev["resources"]
    print(f"resources: {r['tp']} found, false {r['fp']}, missed {r['fn']}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--no-real", action="store_true", help="skip the real codebases")
    ap.add_argument("--codebase", action="append", help="only this real codebase (repeatable)")
    ap.add_argument("--details", action="store_true", help="what each codebase missed")
    ap.add_argument(
        "--callers-inherit",
        action="store_true",
        help="also the means if callers took their callees' kinds (the labels' convention)",
    )
    args = ap.parse_args()
    if not args.no_real:
        real_codebases(args.codebase, args.details, args.callers_inherit)
    if args.codebase:
        return
    corpus = HERE / "tests" / "scan_corpus"
    table("corpus (offline)", evaluate(scan(corpus), load_labels(corpus / "labels.json")))
    if args.no_sqlite:
        return
    tree = sqlite_tree()
    if tree is None:
        print("\nSQLite: cannot fetch its source (needs apt with Debian's source packages)")
        return
    commands = prepare(tree, generated=True)
    sub = link_files(tree, SUBSET, Path(tempfile.mkdtemp(prefix="gigi-sqlite-sub-")))
    try:
        r = scan(sub, compile_commands=commands)
        table(
            "SQLite page cache, pager, WAL (offline)",
            evaluate(r, load_labels(HERE / "tests" / "sqlite" / "labels.json")),
        )
        print(f"parse diagnostics: {r.stats['diagnostics']}")
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    t = time.perf_counter()
    whole = scan(tree / "src", compile_commands=commands)
    wall = time.perf_counter() - t
    st = whole.stats
    print(
        f"\nSQLite src/ offline: {st['files']} files, {st['lines']:,} lines, "
        f"{st['functions']:,} functions in {wall:.1f} s ({st['lines'] / wall:,.0f} lines/s; "
        f"parse {st['parse_s']:.1f} s on {os.cpu_count()} cores), "
        f"{st['diagnostics']} parse diagnostics, {len(whole.verified())} verified sites"
    )


if __name__ == "__main__":
    main()
