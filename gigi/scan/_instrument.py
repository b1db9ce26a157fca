"""The instrumenter: a copy of a source tree with probe calls of the native runtime inserted at
the verified sites of a scan, found again with libclang.

- ACQUIRE after the statement that obtains the resource (before it when it is a return), with
  the object and amount expressions the scan found;
- RELEASE and USE before the statement;
- WAIT around the slow path: the wait begins when the loop's body first runs (a loop whose
  condition holds at once is no wait; for a do-while, when it runs again) and ends when the
  loop is left by any way out (a variable with a cleanup attribute, so a return or break
  inside still ends it).

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

from gigi.scan._offline import STATUS
from gigi.scan._parse import ScanError, compile_flags, load_compile_commands
from gigi.schema import KIND_NAMES

KIND_CODES = {name: code for code, name in enumerate(KIND_NAMES)}
MARK_OPEN, MARK_CLOSE = "/*gigi{*/", "/*}gigi*/"
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
        text, placed = _instrument_file(path, rel, flags, file_sites, resources, levels)
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


def _lock_levels(members_path: Path, resources: dict) -> dict[str, str]:
    """Lock resources whose record keeps the level it holds in one member (Pager.eLock):
    resource -> member. Their ACQUIREs and RELEASEs are the changes of that level."""
    if not members_path.is_file():
        return {}
    shared = {r for r, row in resources.items() if row.get("sharing") in ("shared", "exclusive")}
    out = {}
    for m in pq.read_table(members_path).to_pylist():
        if m["record"] in shared and LOCK_LEVEL.match(m["name"]) and "*" not in m["type"]:
            out.setdefault(m["record"], m["name"])
    return out


def _skip(s: dict, why: str) -> Placement:
    return Placement(s["site"], s["file"], s["line"], s["function"], _kind(s), False, why)


def _kind(s: dict) -> str:
    k = s["kind"]
    return k if isinstance(k, str) else KIND_NAMES[k]


# --- one file ------------------------------------------------------------------------------


def _instrument_file(
    path: Path, rel: str, flags: list[str], sites: list[dict], resources: dict, levels: dict
):
    from clang import cindex as ci

    raw = path.read_bytes()
    try:
        tu = ci.Index.create().parse(str(path), args=flags)
    except ci.TranslationUnitLoadError as e:
        return raw.decode(errors="surrogateescape"), [_skip(s, f"cannot parse: {e}") for s in sites]
    functions = _functions(ci, tu.cursor, str(path))
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
        scope = f"gigi_scope_{kind.lower()}_{i}"
        try:
            # the lock as a whole (no object): its level's changes are the events
            if (
                kind in ("ACQUIRE", "RELEASE")
                and s["resource"] in levels
                and not (s.get("object_expr") or "").strip()
            ):
                how, ins = _place_level(ci, raw, fn, s, res, levels[s["resource"]], leveled)
                placements.append(
                    Placement(s["site"], rel, s["line"], s["function"], kind, True, how)
                )
                inserts += ins
                continue
            how, ins = _place(ci, raw, fn, s, kind, res, scope)
        except _Unplaceable as e:
            placements.append(_skip(s, str(e)))
            continue
        inserts += ins
        if kind != "WAIT" and (fn.hash, scope) not in scopes:
            # the function's scope for this kind and resource, first thing in its body
            scopes.add((fn.hash, scope))
            body_start = _body(ci, fn).extent.start.offset + 1
            inserts.append(
                (
                    body_start,
                    -1,
                    f"{MARK_OPEN}int {scope} __attribute__((cleanup(gigi_scope_leave))) = "
                    f"gigi_scope_enter({res}, GIGI_{kind});{MARK_CLOSE}",
                )
            )
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


def _functions(ci, root, path: str) -> dict:
    out = {}
    kinds = {
        ci.CursorKind.FUNCTION_DECL,
        ci.CursorKind.CXX_METHOD,
        ci.CursorKind.CONSTRUCTOR,
        ci.CursorKind.DESTRUCTOR,
        ci.CursorKind.FUNCTION_TEMPLATE,
    }

    def walk(c) -> None:
        for child in c.get_children():
            loc = child.location
            if loc.file is not None and loc.file.name != path:
                continue
            if child.kind in kinds and child.is_definition():
                parent = child.semantic_parent
                record = (
                    parent.spelling
                    if parent is not None
                    and parent.kind
                    in (
                        ci.CursorKind.STRUCT_DECL,
                        ci.CursorKind.CLASS_DECL,
                    )
                    else ""
                )
                out[f"{record}::{child.spelling}" if record else child.spelling] = child
            elif child.kind in (
                ci.CursorKind.NAMESPACE,
                ci.CursorKind.STRUCT_DECL,
                ci.CursorKind.CLASS_DECL,
                ci.CursorKind.LINKAGE_SPEC,
            ):
                walk(child)

    walk(root)
    return out


class _Unplaceable(Exception):
    pass


@dataclass
class _Stmt:
    cursor: object
    start: int
    end: int  # past the statement's last byte (its ';' included)
    line: int
    end_line: int
    in_block: bool  # a child of a compound statement: a probe can stand beside it


def _statements(ci, fn, raw: bytes) -> list[_Stmt]:
    body = _body(ci, fn)
    out: list[_Stmt] = []
    path = fn.location.file.name

    def add(c, in_block: bool) -> None:
        ext = c.extent
        if ext.start.file is None or ext.start.file.name != path or ext.end.file is None:
            return  # from a macro or another file: no place to stand in this one
        start, end = ext.start.offset, ext.end.offset
        if end <= start:
            return
        if c.kind != ci.CursorKind.COMPOUND_STMT:
            j = end
            while j < len(raw) and raw[j : j + 1] in (b" ", b"\t"):
                j += 1
            if raw[j : j + 1] == b";":
                end = j + 1
        out.append(_Stmt(c, start, end, ext.start.line, ext.end.line, in_block))

    # statements that hold others without braces: if (x) stmt; while (x) stmt; label: stmt
    holders = {
        ci.CursorKind.IF_STMT,
        ci.CursorKind.WHILE_STMT,
        ci.CursorKind.FOR_STMT,
        ci.CursorKind.DO_STMT,
        ci.CursorKind.LABEL_STMT,
        ci.CursorKind.CASE_STMT,
        ci.CursorKind.DEFAULT_STMT,
    }

    def walk(c) -> None:
        for child in c.get_children():
            if c.kind == ci.CursorKind.COMPOUND_STMT:
                add(child, True)
            elif c.kind in holders and (child.kind.is_statement() or child.kind.is_expression()):
                add(child, False)
            walk(child)

    walk(body)
    return out


def _loop_body(ci, loop):
    children = list(loop.get_children())
    if not children:
        return None
    return children[0] if loop.kind == ci.CursorKind.DO_STMT else children[-1]


def _body(ci, fn):
    body = next((c for c in fn.get_children() if c.kind == ci.CursorKind.COMPOUND_STMT), None)
    if body is None:
        raise _Unplaceable(f"{fn.spelling} has no body")
    return body


def _place(ci, raw: bytes, fn, s: dict, kind: str, res: str, scope: str):
    line, site = s["line"], s["site"]
    stmts = _statements(ci, fn, raw)
    obj = _object(ci, fn, s.get("object_expr") or "")
    amount = _amount(ci, fn, s.get("amount_expr") or "1")
    loops = (ci.CursorKind.WHILE_STMT, ci.CursorKind.FOR_STMT, ci.CursorKind.DO_STMT)
    if kind == "WAIT":
        cands = [x for x in stmts if x.cursor.kind in loops and x.line <= line <= x.end_line]
        if not cands:
            raise _Unplaceable(f"no loop at line {line} of {s['function']}")
        loop = min(cands, key=lambda x: (x.line != line, x.end - x.start))
        body = _loop_body(ci, loop.cursor)
        if body is None or body.extent.start.file is None:
            raise _Unplaceable(f"the loop at line {loop.line} has no body to mark")
        var = f"gigi_wait_{site}"
        # a do-while's first pass is the fast path: the wait begins with its second
        retry = loop.cursor.kind == ci.CursorKind.DO_STMT
        passes = f"int gigi_pass_{site} = 0; " if retry else ""
        when = f"!{var} && gigi_pass_{site}++" if retry else f"!{var}"
        begin = f"if ({when}) {var} = gigi_wait_begin({res}, {obj}, {amount}, {site});"
        ins = [
            (
                loop.start,
                0,
                f"{MARK_OPEN}{{ int64_t {var} __attribute__((cleanup(gigi_wait_cleanup))) = 0; "
                f"{passes}{MARK_CLOSE}",
            ),
            (loop.end, 9, f"{MARK_OPEN} }}{MARK_CLOSE}"),
        ]
        b0, b1 = body.extent.start.offset, body.extent.end.offset
        if body.kind == ci.CursorKind.COMPOUND_STMT:
            ins.append((b0 + 1, 1, f"{MARK_OPEN}{begin}{MARK_CLOSE}"))
        else:
            b1 = next((x.end for x in stmts if x.cursor == body), b1)
            ins += [
                (b0, 1, f"{MARK_OPEN}{{ {begin}{MARK_CLOSE}"),
                (b1, 8, f"{MARK_OPEN} }}{MARK_CLOSE}"),
            ]
        return f"around the loop at line {loop.line}", ins
    cands = [x for x in stmts if x.line <= line <= x.end_line]
    if not cands:
        raise _Unplaceable(f"no statement at line {line} of {s['function']}")
    starting = [x for x in cands if x.line == line]
    stmt = (
        max(starting, key=lambda x: x.end - x.start)
        if starting
        else min(cands, key=lambda x: x.end - x.start)
    )
    call = f"gigi_{kind.lower()}({res}, {obj}, {amount}, {site})"
    is_return = stmt.cursor.kind == ci.CursorKind.RETURN_STMT
    after = kind == "ACQUIRE" and not is_return
    # an acquisition whose statement sets a status code (rc = lock(...)) happened only when
    # that says success
    status = _status_set(raw, stmt) if after else None
    # recorded only outside a caller's event of the same kind on the same resource
    probe = f"if (gigi_scope_outermost({scope}){f' && {status} == 0' if status else ''}) {call};"
    if stmt.in_block:
        at = stmt.end if after else stmt.start
        return (
            f"{'after' if after else 'before'} the statement at line {stmt.line}",
            [(at, 5, f"{MARK_OPEN}{probe}{MARK_CLOSE}")],
        )
    if stmt.cursor.kind == ci.CursorKind.DECL_STMT:
        raise _Unplaceable(f"the declaration at line {stmt.line} is not in a block")
    if after:
        ins = [
            (stmt.start, 0, f"{MARK_OPEN}{{{MARK_CLOSE}"),
            (stmt.end, 5, f"{MARK_OPEN}{probe} }}{MARK_CLOSE}"),
        ]
    else:
        ins = [
            (stmt.start, 0, f"{MARK_OPEN}{{ {probe}{MARK_CLOSE}"),
            (stmt.end, 5, f"{MARK_OPEN} }}{MARK_CLOSE}"),
        ]
    return f"{'after' if after else 'before'} the statement at line {stmt.line}", ins


def _place_level(ci, raw: bytes, fn, s: dict, res: str, member: str, done: set[int]):
    """A lock resource's ACQUIRE or RELEASE site becomes the changes of its level in the
    function: each assignment of the level member records the step up (ACQUIRE) or down
    (RELEASE) by as many levels, for the resource as a whole (object 0)."""
    assign = re.compile(rf"\s*([A-Za-z_]\w*)\s*(->|\.)\s*{re.escape(member)}\s*=[^=]")
    record = s["resource"]
    found = []
    for stmt in _statements(ci, fn, raw):
        m = assign.match(raw[stmt.start : stmt.end].decode(errors="replace"))
        if not m:
            continue
        t = _declared_type(ci, fn, m.group(1))
        if t is None or not re.search(rf"\b{re.escape(record)}\b", t.spelling):
            continue
        found.append((stmt, f"{m.group(1)}{m.group(2)}{member}"))
    if not found:
        raise _Unplaceable(
            f"{record}'s level is not set in {s['function']}: its changes are recorded where it is"
        )
    ins = []
    for stmt, expr in found:
        if stmt.start in done:
            continue  # the function's ACQUIRE and RELEASE sites share its assignments
        done.add(stmt.start)
        var = f"gigi_level_{stmt.start}"
        ins += [
            (stmt.start, 0, f"{MARK_OPEN}{{ int64_t {var} = (int64_t)({expr});{MARK_CLOSE}"),
            (
                stmt.end,
                5,
                f"{MARK_OPEN} gigi_level({res}, {var}, (int64_t)({expr}), {s['site']}); }}"
                f"{MARK_CLOSE}",
            ),
        ]
    lines = ", ".join(str(st.line) for st, _ in found)
    return f"the changes of {record}.{member}'s level at line(s) {lines}", ins


def _status_set(raw: bytes, stmt: _Stmt) -> str | None:
    """The status-code local a statement assigns (``rc = sqlite3OsLock(...)``), if any."""
    text = raw[stmt.start : stmt.end].decode(errors="replace")
    m = re.match(r"\s*(?:int\s+)?([A-Za-z_]\w*)\s*=[^=]", text)
    return m.group(1) if m and STATUS.match(m.group(1)) else None


def _declared_type(ci, fn, name: str):
    for c in fn.walk_preorder():
        if c.kind in (ci.CursorKind.PARM_DECL, ci.CursorKind.VAR_DECL) and c.spelling == name:
            return c.type.get_canonical()
    return None


_INTEGERS = {
    "BOOL",
    "CHAR_U",
    "UCHAR",
    "USHORT",
    "UINT",
    "ULONG",
    "ULONGLONG",
    "CHAR_S",
    "SCHAR",
    "SHORT",
    "INT",
    "LONG",
    "LONGLONG",
    "ENUM",
}


def _object(ci, fn, expr: str) -> str:
    """The object as an int64: a pointer by its address, an integer as it is; 0 when the scan
    gave none or it is neither (a struct)."""
    name = expr.strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return "0"
    t = _declared_type(ci, fn, name)
    if t is None:
        return "0"
    if t.kind == ci.TypeKind.POINTER:
        return f"(int64_t)(uintptr_t)({name})"
    if t.kind.name in _INTEGERS:
        return f"(int64_t)({name})"
    return "0"


def _amount(ci, fn, expr: str) -> str:
    e = expr.strip()
    if re.fullmatch(r"\d+", e):
        return e
    if re.fullmatch(r"[A-Za-z_]\w*", e):
        t = _declared_type(ci, fn, e)
        if t is not None and t.kind.name in _INTEGERS:
            return f"(int64_t)({e})"
    return "1"


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
    return (
        '#include "gigi_probe.h"\n'
        "#include <stdint.h>\n"
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
        f"{MARK_OPEN}\n__attribute__((constructor)) static void gigi_sites_{stem}(void) "
        f"{{ {calls}}}\n{MARK_CLOSE}"
    )
