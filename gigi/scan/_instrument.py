"""The instrumenter: a copy of a source tree with probe calls of the native runtime inserted at
the verified sites of a scan, found again with libclang.

- ACQUIRE after the statement that obtains the resource (before it when it is a return), with
  the object and amount expressions the scan found;
- RELEASE and USE before the statement;
- WAIT around the slow path: the wait begins when the loop's body first runs (a loop whose
  condition holds at once is no wait; for a do-while, when it runs again) and ends when the
  loop is left by any way out (a variable with a cleanup attribute, so a return or break
  inside still ends it); on a branch (a lookup's miss or full path), when the branch begins,
  ending the same way.

Every insertion sits on the line of the code it instruments, between ``/*gigi{*/`` and
``/*}gigi*/``; a prologue (the header, the file's resource ids) ends with a ``#line 1``
directive and the sites are registered at the end of the file, so line numbers, and every byte
of the original, stay as they were: deleting the marked text gives the original back. Files
without sites are copied unchanged. When the runtime is off, a probe is one load and a branch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from gigi.scan._parse import ScanError, compile_flags, load_compile_commands
from gigi.scan._placement import (
    MARK_CLOSE,
    MARK_OPEN,
    Unplaceable,
    body_of,
    functions_of,
    place,
    place_level,
    scope_handed_on,
)
from gigi.schema import KIND_NAMES

KIND_CODES = {name: code for code, name in enumerate(KIND_NAMES)}
MARKED = re.compile(re.escape(MARK_OPEN) + r".*?" + re.escape(MARK_CLOSE), re.S)
PROLOGUE_END = re.compile(r"\A.*?^#line 1 .*?\n", re.S | re.M)


@dataclass
class Placement:
    site: int
    file: str
    line: int
    function: str
    kind: str
    placed: bool
    how: str  # where the probe went, or why it could not be placed


def strip(text: str) -> str:
    """The original text of an instrumented file.

    >>> strip('#include "gigi_probe.h"\\n#line 1 "a.c"\\nx = 1;/*gigi{*/ f();/*}gigi*/\\n')
    'x = 1;\\n'
    """
    return MARKED.sub("", PROLOGUE_END.sub("", text, count=1))


def instrument(
    src: str | os.PathLike,
    sites_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    compile_commands: str | os.PathLike | None = None,
) -> dict:
    """Write an instrumented copy of ``src`` into ``out`` (which must not hold files yet);
    return the report (also written to OUT/gigi-instrument.json)."""
    src, out, sites_dir = Path(src), Path(out), Path(sites_dir)
    if not src.is_dir():
        raise ScanError(f"{src}: not a source directory")
    sites_path = sites_dir / "sites.parquet" if sites_dir.is_dir() else sites_dir
    if not sites_path.is_file():
        raise ScanError(f"{sites_dir}: no sites table (sites.parquet from gigi-query scan)")
    if out.exists() and any(out.iterdir()):
        raise ScanError(f"{out}: already holds files; give an empty or new folder")
    if out.resolve().is_relative_to(src.resolve()):
        raise ScanError(f"{out}: inside the source tree {src}")
    sites = pq.read_table(sites_path).to_pylist()
    res_path = sites_path.with_name("resources.parquet")
    resources = (
        {r["resource"]: r for r in pq.read_table(res_path).to_pylist()}
        if res_path.is_file()
        else {}
    )
    commands = load_compile_commands(Path(compile_commands)) if compile_commands else None
    levels = _lock_levels(sites_path.parent / "hierarchy" / "members.parquet", resources)
    nesting = _Nesting(sites_path.parent / "hierarchy", sites)
    shutil.copytree(src, out, symlinks=True)
    by_file: dict[str, list[dict]] = {}
    for s in sites:
        if s.get("verified", True):
            by_file.setdefault(s["file"], []).append(s)
    placements: list[Placement] = []
    for rel, file_sites in sorted(by_file.items()):
        path = src / rel
        if not path.is_file():
            placements += [_skip(s, f"no file {rel} under {src}") for s in file_sites]
            continue
        flags = compile_flags(path, src, commands)
        text, placed = _instrument_file(path, rel, flags, file_sites, resources, levels, nesting)
        placements += placed
        if any(p.placed for p in placed):
            target = out / rel
            target.unlink()  # a symlink in the copy must not write through to the original
            target.write_text(text)
    report = {
        "sites": len(sites),
        "placed": sum(p.placed for p in placements),
        "skipped": [asdict(p) for p in placements if not p.placed],
        "files": sorted({p.file for p in placements if p.placed}),
        "placements": [asdict(p) for p in placements],
    }
    (out / "gigi-instrument.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


# the member of a lock that holds its level: NO_LOCK < SHARED < RESERVED < EXCLUSIVE
LOCK_LEVEL = re.compile(r"^e_?lock$|^lock_?(mode|level|state)$|^lock$", re.I)


def _lock_levels(members_path: Path, resources: dict) -> dict[str, tuple[str, str]]:
    """Resources whose quantity is one member's value: locks whose record keeps the level it
    holds (Pager.eLock), and logs counted by their end position (Wal.frames, the scan's
    ``level`` column: hdr.mxFrame of Wal). resource -> (record, member path). Their ACQUIREs
    and RELEASEs are the changes of that member."""
    out = {
        r: (r.rsplit(".", 1)[0], row["level"])
        for r, row in resources.items()
        if row.get("level") and "." in r
    }
    if not members_path.is_file():
        return out
    shared = {r for r, row in resources.items() if row.get("sharing") in ("shared", "exclusive")}
    for m in pq.read_table(members_path).to_pylist():
        if m["record"] in shared and LOCK_LEVEL.match(m["name"]) and "*" not in m["type"]:
            out.setdefault(m["record"], (m["record"], m["name"]))
    return out


class _Nesting:
    """Which functions need a scope of their own: those that may call, directly or not, a
    function with a site of the same kind on the same resource, whose event would then be
    part of theirs. The others only check that no caller has such a scope open, which spares
    them a scope's bookkeeping on every call (and lets small accessors stay inlined). Read
    from the scan's call graph (hierarchy/calls.parquet); a call through a function pointer
    may reach anything, and without the call graph every function gets its scope."""

    def __init__(self, hierarchy: Path, sites: list[dict]) -> None:
        self.known = (hierarchy / "calls.parquet").is_file()
        self.calls: dict[str, set[str]] = {}
        self.pointers: set[str] = set()
        self.defined: set[str] = set()
        if self.known:
            for c in pq.read_table(hierarchy / "calls.parquet").to_pylist():
                self.calls.setdefault(c["function"], set()).add(c["callee"])
                if c.get("indirect", True):  # a call graph without the column: unknown
                    self.pointers.add(c["callee"])
            if (hierarchy / "functions.parquet").is_file():
                functions = pq.read_table(hierarchy / "functions.parquet").to_pylist()
                self.defined = {f["name"] for f in functions}
        self.keys: dict[str, set[tuple[str, str]]] = {}
        for s in sites:
            if s.get("verified", True):
                self.keys.setdefault(s["function"], set()).add((_kind(s), s["resource"]))

    def own_scope(self, function: str, kind: str, resource: str) -> bool:
        if not self.known:
            return True
        seen, todo = {function}, list(self.calls.get(function, ()))
        while todo:
            callee = todo.pop()
            if callee in seen:
                continue
            seen.add(callee)
            if callee in self.pointers or (kind, resource) in self.keys.get(callee, ()):
                return True
            if callee in self.defined:
                todo += self.calls.get(callee, ())
        return False


def _skip(s: dict, why: str) -> Placement:
    return Placement(s["site"], s["file"], s["line"], s["function"], _kind(s), False, why)


def _kind(s: dict) -> str:
    k = s["kind"]
    return k if isinstance(k, str) else KIND_NAMES[k]


# --- one file ------------------------------------------------------------------------------


def _instrument_file(
    path: Path,
    rel: str,
    flags: list[str],
    sites: list[dict],
    resources: dict,
    levels: dict,
    nesting: _Nesting,
):
    from clang import cindex as ci

    raw = path.read_bytes()
    try:
        tu = ci.Index.create().parse(str(path), args=flags)
    except ci.TranslationUnitLoadError as e:
        return raw.decode(errors="surrogateescape"), [_skip(s, f"cannot parse: {e}") for s in sites]
    functions = functions_of(ci, tu.cursor, str(path))
    stem = re.sub(r"\W", "_", rel)
    names = sorted({s["resource"] for s in sites})
    index = {n: i for i, n in enumerate(names)}
    inserts: list[tuple[int, int, str]] = []  # offset, order, text
    scopes: set[tuple[int, str]] = set()  # (function, scope) declared
    leveled: set[int] = set()  # offsets of lock-level assignments already marked
    placements = []
    for s in sites:
        kind = _kind(s)
        fn = functions.get(s["function"])
        if fn is None:
            placements.append(_skip(s, f"no definition of {s['function']} in {rel}"))
            continue
        i = index[s["resource"]]
        res = f"gigi_res_{stem}({i})"
        own = kind == "WAIT" or nesting.own_scope(s["function"], kind, s["resource"])
        scope = f"gigi_scope_{kind.lower()}_{i}" if own else None
        try:
            # the lock as a whole (no object): its level's changes are the events
            if (
                kind in ("ACQUIRE", "RELEASE")
                and s["resource"] in levels
                and not (s.get("object_expr") or "").strip()
            ):
                record, member = levels[s["resource"]]
                how, ins = place_level(ci, raw, fn, s, res, record, member, leveled)
                placements.append(
                    Placement(s["site"], rel, s["line"], s["function"], kind, True, how)
                )
                inserts += ins
                continue
            how, ins = place(ci, raw, fn, s, kind, res, scope)
        except Unplaceable as e:
            placements.append(_skip(s, str(e)))
            continue
        inserts += ins
        if kind != "WAIT" and scope is not None and (fn.hash, scope) not in scopes:
            # the function's scope for this kind and resource, first thing in its body
            scopes.add((fn.hash, scope))
            body_start = body_of(ci, fn).extent.start.offset + 1
            inserts.append(
                (
                    body_start,
                    -1,
                    f"{MARK_OPEN}int {scope} __attribute__((cleanup(gigi_scope_leave))) = "
                    f"gigi_scope_enter({res}, GIGI_{kind});{MARK_CLOSE}",
                )
            )
            inserts += scope_handed_on(ci, raw, fn, min(x[0] for x in ins), scope)
        placements.append(Placement(s["site"], rel, s["line"], s["function"], kind, True, how))
    if not inserts:
        return raw.decode(errors="surrogateescape"), placements
    body = bytearray(raw)
    for offset, _, text in sorted(inserts, key=lambda x: (x[0], x[1]), reverse=True):
        body[offset:offset] = text.encode()
    placed = [s for s, p in zip(sites, placements, strict=True) if p.placed]
    text = (
        _prologue(stem, names, resources, rel)
        + body.decode(errors="surrogateescape")
        + _epilogue(stem, placed)
    )
    return text, placements


def _c_string(s: str | None) -> str:
    if s is None:
        return "0"
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _c_array(ctype: str, name: str, values: list[str]) -> str:
    return f"    static const {ctype} {name}[] = {{{', '.join(values)}}};\n"


def _prologue(stem: str, names: list[str], resources: dict, rel: str) -> str:
    """The header, and the file's resources by index, declared to the runtime at first use."""
    rows = [resources.get(n, {}) for n in names]
    caps = [str(r["capacity"]) if r.get("capacity") is not None else "-1" for r in rows]
    # a header is included more than once in a file (its own guard keeps its body to one
    # copy, not what comes before the guard): its ids once per file
    return (
        '#include "gigi_probe.h"\n'
        "#include <stdint.h>\n"
        f"#ifndef GIGI_RES_{stem}\n"
        f"#define GIGI_RES_{stem}\n"
        f"static int32_t gigi_res_{stem}(int i) {{\n"
        f"    static int32_t ids[{len(names)}];\n"
        + _c_array("char *const", "names", [_c_string(n) for n in names])
        + _c_array("char *const", "units", [_c_string(r.get("unit")) for r in rows])
        + _c_array("char *const", "sharing", [_c_string(r.get("sharing")) for r in rows])
        + _c_array("long long", "capacity", caps)
        + "    if (ids[i] == 0)\n"
        "        ids[i] = gigi_resource(names[i], capacity[i], units[i], sharing[i]) + 1;\n"
        "    return ids[i] - 1;\n"
        "}\n"
        "#endif\n"
        f"#line 1 {_c_string(rel)}\n"
    )


def _epilogue(stem: str, sites: list[dict]) -> str:
    """The sites of the file, registered before main runs; on lines of their own after the
    original's last, inside the marks."""
    calls = "".join(
        "gigi_site("
        + ", ".join(
            [
                str(s["site"]),
                _c_string(s["file"]),
                str(s["line"]),
                _c_string(s["function"]),
                str(KIND_CODES[_kind(s)]),
                _c_string(s["resource"]),
                _c_string(s.get("origin") or "heuristic"),
                "1",
            ]
        )
        + "); "
        for s in sites
    )
    return (
        f"{MARK_OPEN}\n#ifndef GIGI_SITES_{stem}\n#define GIGI_SITES_{stem}\n"
        f"__attribute__((constructor)) static void gigi_sites_{stem}(void) "
        f"{{ {calls}}}\n#endif\n{MARK_CLOSE}"
    )
