"""``scan``: parse, recall (offline or LLM), verify, and write the tables and the report."""

from __future__ import annotations

import gc
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gigi.scan._offline import Candidate, ResourceGuess
from gigi.scan._parse import (
    HEADER_SUFFIXES,
    ScanError,
    Unit,
    compile_flags,
    load_compile_commands,
    parse_file,
    source_files,
    unit_name,
)
from gigi.scan._recall import OfflineRecall, Recall, recall
from gigi.scan._rules import RULES, Found, Rule, apply
from gigi.schema import RESOURCES, SITES, Table, Type

KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE")


@dataclass
class ScanResult:
    root: str
    units: list[Unit]
    resources: list[ResourceGuess]
    candidates: list[tuple[Candidate, bool, str]]  # candidate, verified, reason
    stats: dict = field(default_factory=dict)
    # resources the recall proposed but no event site of which passed verification: nothing
    # confirms them and nothing could record them, so they stay out of resources.parquet
    unconfirmed: list[ResourceGuess] = field(default_factory=list)

    def verified(self) -> list[Candidate]:
        return [c for c, ok, _ in self.candidates if ok]


def _parse_one(args):
    return parse_file(*args)


def _parse_all(
    files: list[Path],
    base: Path,
    commands,
    includes: tuple[str, ...],
    defines: tuple[str, ...],
    jobs: int,
    progress,
    done: int,
    total: int,
    headers: dict[str, Unit],
) -> list[Unit]:
    """Parse FILES (in worker processes when there are JOBS and files enough), reporting
    progress as DONE + i of TOTAL. The tree's headers each file walked go into HEADERS, the
    first walk of each kept, as the files come in: held per file until all were parsed, the
    copies of a large tree's headers took gigabytes (PostgreSQL's backend: 808 files, each
    with its walk of the same src/include)."""
    work = [(str(p), str(base), compile_flags(p, base, commands, includes, defines)) for p in files]
    units: list[Unit] = []

    def take(u: Unit) -> None:
        for h in u.headers:
            headers.setdefault(h.file, h)
        u.headers = []
        units.append(u)

    parsed = (
        _pooled(_parse_one, work, jobs) if jobs > 1 and len(work) > 1 else map(_parse_one, work)
    )
    for i, u in enumerate(parsed, 1):
        take(u)
        if progress:
            progress(done + i, total)
    return units


# a worker that dies (libclang's bindings have crashed in garbage collection, now and then,
# on a file they parse fine the next time) costs the files not yet taken one more try each
POOL_TRIES = 3


def _pooled(parse: Callable, work: list[tuple], jobs: int) -> Iterator[Unit]:
    """PARSE each of WORK in JOBS worker processes, yielding the units in order. When a
    worker dies, the files not yet yielded go to a new pool; the last of POOL_TRIES pools has
    one worker, given one file at a time, so that a file that kills it is the one named."""
    start = 0
    for tries in range(1, POOL_TRIES + 1):
        last = tries == POOL_TRIES
        try:
            # (a forked worker freezes what it inherits: its collector then never runs the
            # finalizers of the parent's clang objects, a crash seen during garbage
            # collection in the workers of a process that had parsed before)
            with ProcessPoolExecutor(1 if last else jobs, initializer=gc.freeze) as pool:
                for u in pool.map(parse, work[start:], chunksize=1 if last else 4):
                    start += 1
                    yield u
            return
        except BrokenProcessPool:
            if last:
                raise ScanError(
                    f"{work[start][0]}: a parse worker died {tries} times "
                    "(libclang crashed); scan it alone, or with --jobs 1, to see why"
                ) from None


def _only(root: Path, files: list[Path], only: list[str]) -> list[Path]:
    """The FILES of the tree at ROOT that ONLY names: files, or folders whose source files
    are all named, each given under ROOT (relative to it, or as an absolute path in it)."""
    names = {os.path.relpath(p, root): p for p in files}
    picked: dict[str, Path] = {}
    for entry in only:
        if not str(entry).strip():
            raise ScanError("an empty path to scan only: name a file or folder of the tree")
        rel = os.path.normpath(os.path.relpath(entry, root) if os.path.isabs(entry) else entry)
        if rel == ".." or rel.startswith(".." + os.sep):
            raise ScanError(f"{entry}: not under the scanned tree {root}")
        if rel in names:
            picked[rel] = names[rel]
            continue
        inside = {n: p for n, p in names.items() if rel == "." or n.startswith(rel + os.sep)}
        if not inside:
            what = "folder with C or C++ source files" if (root / rel).is_dir() else "source file"
            raise ScanError(f"{root}: no {what} {rel}")
        picked.update(inside)
    return [p for n, p in names.items() if n in picked]


def scan(
    src: str | os.PathLike,
    *,
    compile_commands: str | os.PathLike | None = None,
    backend: Recall | None = None,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    only: list[str] | None = None,
    rules: tuple[Rule, ...] = RULES,
    include_dirs: list[str | os.PathLike] | None = None,
    defines: list[str] | None = None,
) -> ScanResult:
    """Scan a source tree: parse it, let ``backend`` propose resources and events (``None``:
    the offline rules), and check and revise the proposals with ``rules`` in order. ``only``
    names the files to scan (paths under ``src``); the rest of the tree is still there for
    their includes. ``include_dirs`` are searched for headers too (a library the tree uses,
    whose headers are installed apart), and ``defines`` defined (``HAVE_CONFIG_H``), with or
    without compile commands. ``only`` may name folders too: every source file under them."""
    root = Path(src)
    backend = backend or OfflineRecall()
    files = source_files(root)
    if only is not None:
        files = _only(root, files, only)
    if not files:
        raise ScanError(f"{root}: no C or C++ source files")
    base = root if root.is_dir() else root.parent
    commands = load_compile_commands(Path(compile_commands)) if compile_commands else None
    t0 = time.perf_counter()
    jobs = jobs or min(os.cpu_count() or 1, 8)
    # sources first; the tree's headers they include come with them, walked in their context,
    # and only a header no source includes is parsed on its own
    sources = [p for p in files if p.suffix not in HEADER_SUFFIXES]
    includes = tuple(str(Path(d).resolve()) for d in include_dirs or ())
    missing_dir = next((d for d in includes if not Path(d).is_dir()), None)
    if missing_dir is not None:
        raise ScanError(f"{missing_dir}: no such include folder")
    defs = tuple(defines or ())
    bad = next((d for d in defs if not re.fullmatch(r"[A-Za-z_]\w*(=.*)?", d)), None)
    if bad is not None:
        raise ScanError(f"{bad!r}: not a macro to define (NAME or NAME=VALUE)")
    headers: dict[str, Unit] = {}
    units = _parse_all(
        sources, base, commands, includes, defs, jobs, progress, 0, len(files), headers
    )
    by_file = {u.file: u for u in units}
    for name, h in headers.items():
        by_file.setdefault(name, h)
    alone = [p for p in files if p.suffix in HEADER_SUFFIXES and unit_name(p, base) not in by_file]
    done = len(files) - len(alone)
    if progress:
        progress(done, len(files))
    for u in _parse_all(
        alone, base, commands, includes, defs, jobs, progress, done, len(files), {}
    ):
        by_file[u.file] = u
    order = {unit_name(p, base): i for i, p in enumerate(files)}
    if only is not None:  # and the tree's headers those files include
        for name in by_file:
            order.setdefault(name, len(order))
    units = sorted((u for f, u in by_file.items() if f in order), key=lambda u: order[u.file])
    parse_s = time.perf_counter() - t0
    records = [r for u in units for r in u.records]
    members = [m for u in units for m in u.members]
    functions = {(f.file, f.name): f for u in units for f in u.functions}
    t1 = time.perf_counter()
    guesses, proposals = recall(backend, functions, records, members)
    recall_s = time.perf_counter() - t1
    found, rule_s = apply(Found(functions, tuple(guesses), tuple(proposals)), rules)
    stats = {
        "files": len(files),
        "lines": sum(u.lines for u in units),
        "functions": len(functions),
        "records": len(records),
        "diagnostics": sum(len(u.diagnostics) for u in units),
        # of which errors: a header not found, flags the build's and not the parse's (a
        # warning, such as gcc's gnu_printf, changes nothing the scan reads)
        "errors": sum(d.severity in ("error", "fatal") for u in units for d in u.diagnostics),
        "commonest_errors": commonest_errors(units),
        "parse_s": round(parse_s, 3),
        "recall_s": round(recall_s, 3),
        "verify_s": round(sum(rule_s.values()), 3),
        "rules_s": rule_s,
    }
    if (cost := backend.report()) is not None:
        stats["llm"] = cost
    sited = {c.resource for c in found.kept()}
    return ScanResult(
        str(base),
        units,
        [g for g in found.resources if g.name in sited],
        [tuple(s) for s in found.sites],
        stats,
        unconfirmed=[g for g in found.resources if g.name not in sited],
    )


def commonest_errors(units, most: int = 3) -> list[dict]:
    """The parse's commonest error messages, fatal ones (a header not found, the cause of
    the errors after it) first, each with how often it came and in how many files."""
    fatal: set[str] = set()
    count: dict[str, int] = {}
    files: dict[str, set[str]] = {}
    for u in units:
        for d in u.diagnostics:
            if d.severity in ("error", "fatal"):
                count[d.message] = count.get(d.message, 0) + 1
                files.setdefault(d.message, set()).add(d.file)
                if d.severity == "fatal":
                    fatal.add(d.message)
    ranked = sorted(count, key=lambda m: (m not in fatal, -count[m], m))[:most]
    return [{"message": m, "count": count[m], "files": len(files[m])} for m in ranked]


# --- output ------------------------------------------------------------------------------------


def write(result: ScanResult, out: str | os.PathLike) -> dict:
    """Write sites.parquet and resources.parquet (trace format v1), candidates.parquet (every
    candidate with its verdict), the hierarchy tables and report.json; return the report."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sites = [c for c, ok, _ in result.candidates if ok]
    pq.write_table(
        _table(
            SITES,
            {
                "site": range(1, len(sites) + 1),
                "file": [c.file for c in sites],
                "line": [c.line for c in sites],
                "function": [c.function for c in sites],
                "kind": [c.kind for c in sites],
                "resource": [c.resource for c in sites],
                "origin": [c.origin for c in sites],
                "verified": [True] * len(sites),
            },
            # the scanner's own (readers ignore them): what the instrumenter passes as the
            # event's object and amount
            object_expr=[c.object_expr for c in sites],
            amount_expr=[c.amount_expr for c in sites],
        ),
        out / "sites.parquet",
    )
    resources = result.resources
    pq.write_table(
        _table(
            RESOURCES,
            {
                "resource": [g.name for g in resources],
                "unit": [g.unit for g in resources],
                "sharing": [g.sharing for g in resources],
            },
            # the scanner's own (readers ignore it): for a log counted by its end position,
            # the member path to it from the record the log is named after
            level=[g.level or None for g in resources],
        ),
        out / "resources.parquet",
    )
    cands = [dict(asdict(c), verified=ok, reason=why) for c, ok, why in result.candidates]
    pq.write_table(
        _rows(cands, Candidate, extra={"verified": pa.bool_(), "reason": pa.string()}),
        out / "candidates.parquet",
    )
    hierarchy = out / "hierarchy"
    hierarchy.mkdir(exist_ok=True)
    for name, rows in (
        ("records", [asdict(r) for u in result.units for r in u.records]),
        ("members", [asdict(m) for u in result.units for m in u.members]),
        (
            "functions",
            [
                {
                    k: v
                    for k, v in asdict(f).items()
                    if k in ("name", "file", "line", "end_line", "record", "return_type", "comment")
                }
                for u in result.units
                for f in u.functions
            ],
        ),
        (
            "calls",
            [
                {
                    "function": f.name,
                    "file": f.file,
                    "callee": c.callee,
                    "line": c.line,
                    "indirect": c.indirect,
                }
                for u in result.units
                for f in u.functions
                for c in f.calls
            ],
        ),
        (
            "accesses",
            [
                {
                    "function": f.name,
                    "file": f.file,
                    "record": a.record,
                    "member": a.member,
                    "line": a.line,
                    "op": a.op,
                }
                for u in result.units
                for f in u.functions
                for a in f.accesses
            ],
        ),
        ("diagnostics", [asdict(d) for u in result.units for d in u.diagnostics]),
    ):
        pq.write_table(
            pa.Table.from_pylist(rows) if rows else pa.table({"file": pa.array([], pa.string())}),
            hierarchy / f"{name}.parquet",
        )
    report = report_of(result)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def _table(spec: Table, values: dict, **own: list) -> pa.Table:
    """The table SPEC of trace format v1 with VALUES by column, each column of SPEC that is
    not given at its default, and the writer's OWN columns (strings) after them. Kinds are
    written by name, which readers accept beside the codes."""
    n = len(next(iter(values.values())))
    columns = {}
    schema = spec.arrow_schema
    for col in spec.columns:
        kind = pa.string() if col.type is Type.KIND else schema.field(col.name).type
        data = values[col.name] if col.name in values else [col.default] * n
        columns[col.name] = pa.array(list(data), kind)
    columns |= {name: pa.array(data, pa.string()) for name, data in own.items()}
    return pa.table(columns)


def _rows(rows: list[dict], cls, extra: dict) -> pa.Table:
    fields = [f for f in cls.__dataclass_fields__]
    types = {f: pa.int32() if f == "line" else pa.string() for f in fields} | extra
    return pa.table({k: pa.array([r[k] for r in rows], t) for k, t in types.items()})


def report_of(result: ScanResult) -> dict:
    per_kind = {}
    for k in KINDS:
        mine = [(c, ok, why) for c, ok, why in result.candidates if c.kind == k]
        per_kind[k] = {
            "candidates": len(mine),
            "verified": sum(ok for _, ok, _ in mine),
            "rejected": [
                {
                    "file": c.file,
                    "function": c.function,
                    "line": c.line,
                    "resource": c.resource,
                    "reason": why,
                }
                for c, ok, why in mine
                if not ok
            ],
        }
    return {
        "root": os.path.basename(result.root.rstrip("/")) or result.root,
        "stats": result.stats,
        "resources": [
            {
                "name": g.name,
                "file": g.file,
                "line": g.line,
                "sharing": g.sharing,
                "unit": g.unit,
                "objects": g.elements,
                "why": g.reasons,
            }
            for g in result.resources
        ],
        "unconfirmed_resources": [
            {"name": g.name, "file": g.file, "line": g.line, "why": g.reasons}
            for g in result.unconfirmed
        ],
        "kinds": per_kind,
        "diagnostics": [asdict(d) for u in result.units for d in u.diagnostics][:200],
    }
