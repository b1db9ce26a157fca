"""Where a probe goes in a function, found with libclang: the statement at a site's line
(or the loop or branch of a WAIT), the text to insert before and after it, and the object and amount
expressions as int64. Used by the instrumenter (``_instrument.py``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gigi.scan._offline import STATUS, sleeps

MARK_OPEN, MARK_CLOSE = "/*gigi{*/", "/*}gigi*/"


def functions_of(ci, root, path: str) -> dict:
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


class Unplaceable(Exception):
    pass


@dataclass
class _Stmt:
    cursor: object
    start: int
    end: int  # past the statement's last byte (its ';' included)
    line: int
    end_line: int
    in_block: bool  # a child of a compound statement: a probe can stand beside it
    block: int = -1  # that compound statement's first byte (its brace); -1: none
    # in a block, where a statement can go after its leading declarations (C90 and a build
    # with -Wdeclaration-after-statement want no statement before a declaration); -1: none
    lead: int = -1


def _holders(ci) -> set:
    """Statements that hold others without braces: if (x) stmt; while (x) stmt; label: stmt."""
    K = ci.CursorKind
    return {
        K.IF_STMT,
        K.WHILE_STMT,
        K.FOR_STMT,
        K.DO_STMT,
        K.LABEL_STMT,
        K.CASE_STMT,
        K.DEFAULT_STMT,
    }


def _statements(ci, fn, raw: bytes) -> list[_Stmt]:
    body = body_of(ci, fn)
    out: list[_Stmt] = []
    path = fn.location.file.name

    def add(c, block: int | None) -> _Stmt | None:
        ext = c.extent
        if ext.start.file is None or ext.start.file.name != path or ext.end.file is None:
            return None  # from a macro or another file: no place to stand in this one
        start, end = ext.start.offset, ext.end.offset
        if end <= start:
            return None
        if c.kind != ci.CursorKind.COMPOUND_STMT:
            j = end
            while j < len(raw) and raw[j : j + 1] in (b" ", b"\t"):
                j += 1
            if raw[j : j + 1] == b";":
                end = j + 1
        stmt = _Stmt(c, start, end, ext.start.line, ext.end.line, block is not None)
        stmt.block = -1 if block is None else block
        out.append(stmt)
        return stmt

    holders = _holders(ci)

    def walk(c) -> None:
        mine = []  # the statements of the block C, in order
        held = _held(ci, c) if c.kind in holders else []
        for child in c.get_children():
            if c.kind == ci.CursorKind.COMPOUND_STMT:
                if (stmt := add(child, c.extent.start.offset)) is not None:
                    mine.append(stmt)
            elif c.kind in holders and child in held:
                add(child, None)
            walk(child)
        lead = c.extent.start.offset + 1  # just inside its brace
        for x in mine:
            if x.cursor.kind != ci.CursorKind.DECL_STMT:
                break
            lead = x.end
        for x in mine:
            x.lead = lead

    walk(body)
    return out


def _held(ci, c) -> list:
    """The statements a holder C holds without braces, not its condition or its case's value
    (a condition is no statement: a probe braced in it does not compile): its conditional
    parts, or a do's body."""
    if c.kind == ci.CursorKind.DO_STMT:
        return [x for x in (_loop_body(ci, c),) if x is not None]
    return _conditional_parts(ci, c)


def _endless(ci, loop) -> bool:
    """Whether a for or while loop's condition is always true: none (``for (;;)``, ``for (i =
    0; ; i++)``) or a constant that is not zero (``while (1)``, ``while (true)``)."""
    if loop.kind not in (ci.CursorKind.FOR_STMT, ci.CursorKind.WHILE_STMT):
        return False
    header, depth = [], 0
    for t in loop.get_tokens():
        if t.spelling == "(":
            depth += 1
            if depth == 1:
                continue
        elif t.spelling == ")":
            depth -= 1
            if depth == 0:
                break
        if depth >= 1:
            header.append(t.spelling)
    cond = header
    if loop.kind == ci.CursorKind.FOR_STMT:  # its condition: between its two semicolons
        parts, depth = [[]], 0
        for x in header:
            depth += x in "([{"
            depth -= x in ")]}"
            if x == ";" and depth == 0:
                parts.append([])
            else:
                parts[-1].append(x)
        if len(parts) != 3:
            return False
        cond = parts[1]
    return not cond or cond in (["true"], ["TRUE"]) or _nonzero(cond)


def _nonzero(tokens: list[str]) -> bool:
    """Whether TOKENS are one integer literal that is not zero (``1``, ``1U``)."""
    if len(tokens) != 1:
        return False
    digits = tokens[0].rstrip("uUlL")
    return digits.isdigit() and int(digits) != 0


def _first_sleep(ci, stmts: list[_Stmt], body, begin: str) -> list[tuple[int, int, str]]:
    """The insertions that put ``begin`` just before the first call in a loop's ``body`` whose
    name says it sleeps or waits (``LWLockWaitForVar``, ``sched_yield``; not a
    ``sem_trywait``), where it runs only when that call does: before its statement in a block,
    before the statement whose condition makes the call, or around the branch it is alone in
    (``if (locked) s = wait_unlocked(b);`` becomes ``if (locked) { begin s = ...; }``).
    Nothing when there is no such call, or where no probe can stand (a leading
    declaration)."""
    b0, b1 = body.extent.start.offset, body.extent.end.offset
    calls = [
        c.extent.start.offset
        for c in body.walk_preorder()
        if c.kind == ci.CursorKind.CALL_EXPR
        and c.extent.start.file is not None
        and sleeps(c.spelling)
        and "try" not in c.spelling.lower()
    ]
    if not calls:
        return []
    call = min(calls)
    around = sorted(
        (x for x in stmts if b0 < x.start <= call < x.end <= b1), key=lambda x: x.end - x.start
    )
    holders = _holders(ci)
    for i, x in enumerate(around):
        if x.in_block:
            if x.start < x.lead:  # one of its block's leading declarations
                return []
            return [(x.start, 1, f"{MARK_OPEN}{begin}{MARK_CLOSE}")]
        holder = next((h for h in around[i + 1 :] if h.cursor.kind in holders), None)
        if holder is None:
            return []
        parts = [p.extent.start.offset for p in _conditional_parts(ci, holder.cursor)]
        if x.start in parts:  # alone in a branch or a loop's body: braced, begun there
            return [
                (x.start, 1, f"{MARK_OPEN}{{ {begin}{MARK_CLOSE}"),
                (x.end, 8, f"{MARK_OPEN} }}{MARK_CLOSE}"),
            ]
        # else the holder's condition (or a for's header): the holder is the statement
    return []


def _conditional_parts(ci, c) -> list:
    """The parts of statement ``c`` that run only as its condition says, or only when a jump
    lands there: an if's branches, a while's or a for's body, a switch's cases, the statement
    of a case or a label (a do-while's body runs once anyway)."""
    kids = list(c.get_children())
    K = ci.CursorKind
    if c.kind == K.IF_STMT:
        return kids[1:]
    jumped = (K.SWITCH_STMT, K.CASE_STMT, K.DEFAULT_STMT, K.LABEL_STMT)
    if c.kind in (K.WHILE_STMT, K.FOR_STMT, *jumped):
        return kids[-1:]
    return []


def _loop_body(ci, loop):
    children = list(loop.get_children())
    if not children:
        return None
    return children[0] if loop.kind == ci.CursorKind.DO_STMT else children[-1]


def body_of(ci, fn):
    body = next((c for c in fn.get_children() if c.kind == ci.CursorKind.COMPOUND_STMT), None)
    if body is None:
        raise Unplaceable(f"{fn.spelling} has no body")
    return body


def place(ci, raw: bytes, fn, s: dict, kind: str, res: str, scope: str | None):
    line, site = s["line"], s["site"]
    stmts = _statements(ci, fn, raw)
    obj = _object(ci, fn, s.get("object_expr") or "")
    amount = _amount(ci, fn, s.get("amount_expr") or "1")
    loops = (ci.CursorKind.WHILE_STMT, ci.CursorKind.FOR_STMT, ci.CursorKind.DO_STMT)
    if kind == "WAIT" and not any(x.cursor.kind in loops and x.line == line for x in stmts):
        branch = _branch_at(ci, fn, line)
        if branch is not None:
            return _place_branch(ci, branch, stmts, res, obj, amount, site)
    if kind == "WAIT":
        cands = [x for x in stmts if x.cursor.kind in loops and x.line <= line <= x.end_line]
        if not cands:
            return _place_call(ci, stmts, s, res, obj, amount)
        loop = min(cands, key=lambda x: (x.line != line, x.end - x.start))
        body = _loop_body(ci, loop.cursor)
        if body is None or body.extent.start.file is None:
            raise Unplaceable(f"the loop at line {loop.line} has no body to mark")
        var = f"gigi_wait_{site}"
        # the first pass of a loop that always makes one (a do-while, or one whose condition
        # is always true: a spin lock's for (;;) that breaks once its swap won) is the fast
        # path: the wait begins with its second
        retry = loop.cursor.kind == ci.CursorKind.DO_STMT or _endless(ci, loop.cursor)
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
            # after the body's leading declarations, which no statement may precede
            lead = next((x.lead for x in stmts if x.block == b0), b0 + 1)
            ins.append((lead, 1, f"{MARK_OPEN}{begin}{MARK_CLOSE}"))
        else:
            b1 = next((x.end for x in stmts if x.cursor == body), b1)
            ins += [
                (b0, 1, f"{MARK_OPEN}{{ {begin}{MARK_CLOSE}"),
                (b1, 8, f"{MARK_OPEN} }}{MARK_CLOSE}"),
            ]
        if retry:
            # a call that says it waits blocks on the first pass too: the wait begins there
            early = f"if (!{var}) {var} = gigi_wait_begin({res}, {obj}, {amount}, {site});"
            ins += _first_sleep(ci, stmts, body, early)
        return f"around the loop at line {loop.line}", ins
    cands = [x for x in stmts if x.line <= line <= x.end_line]
    if not cands:
        raise Unplaceable(f"no statement at line {line} of {s['function']}")
    starting = [x for x in cands if x.line == line]
    stmt = (
        max(starting, key=lambda x: x.end - x.start)
        if starting
        else min(cands, key=lambda x: x.end - x.start)
    )
    is_return = stmt.cursor.kind == ci.CursorKind.RETURN_STMT
    after = kind == "ACQUIRE" and not is_return
    # one event per call path (gigi_scoped): the function's own scope, if it opens one
    token = scope if scope is not None else "0"
    handed = _returned_call(ci, stmt) if kind == "ACQUIRE" and is_return else None
    if handed is not None:
        # what a call returns, handed back: acquired only when it is something, and that
        # is the object (a wrapper's probe before the call would record a failed one)
        a, b = handed.extent.start.offset, handed.extent.end.offset
        return f"on what the return at line {stmt.line} hands back", [
            (a, 5, f"{MARK_OPEN}GIGI_ACQUIRED({MARK_CLOSE}"),
            (b, 0, f"{MARK_OPEN}, {res}, {amount}, {site}, {token}){MARK_CLOSE}"),
        ]
    # an acquisition whose statement sets a status code (rc = lock(...)) happened only when
    # that says success
    status = _status_set(raw, stmt) if after else None
    # and one whose statement sets a pointer from a call (p = lookup(...)) only when that
    # found something, which is the object when the scan named none
    pointer = _pointer_set(ci, fn, raw, stmt) if after and not status else None
    if pointer and obj == "0":
        obj = f"(int64_t)(uintptr_t)({pointer})"
    call = f"gigi_scoped(GIGI_{kind}, {res}, {obj}, {amount}, {site}, {token});"
    found = f"{status} == 0" if status else f"{pointer} != 0" if pointer else ""
    probe = f"if ({found}) {call}" if found else call
    if stmt.in_block:
        at = stmt.end if after else stmt.start
        if stmt.cursor.kind == ci.CursorKind.DECL_STMT and stmt.start < stmt.lead:
            at = stmt.lead  # one of the block's leading declarations: after them all
        return (
            f"{'after' if after else 'before'} the statement at line {stmt.line}",
            [(at, 5, f"{MARK_OPEN}{probe}{MARK_CLOSE}")],
        )
    if stmt.cursor.kind == ci.CursorKind.DECL_STMT:
        raise Unplaceable(f"the declaration at line {stmt.line} is not in a block")
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


def _calls(ci, cursor) -> bool:
    """Whether the statement or expression at CURSOR calls a function."""
    return any(x.kind == ci.CursorKind.CALL_EXPR for x in cursor.walk_preorder())


def _returned_call(ci, stmt):
    """The expression a return statement hands back, when it is a pointer a call made
    (``return pcache1FetchStage2(...)``, through casts): else None."""
    expr = next(iter(stmt.cursor.get_children()), None)
    if expr is None or expr.type.get_canonical().kind != ci.TypeKind.POINTER:
        return None
    if not _calls(ci, expr):
        return None
    ext = expr.extent
    if ext.start.file is None or ext.end.file is None or ext.start.offset >= ext.end.offset:
        return None
    return expr


def _place_call(ci, stmts: list, s: dict, res: str, obj: str, amount: str):
    """A WAIT that is one blocking call (``sem_wait(sem)``, a lock API's wrapper of it): it
    begins before the statement and ends when the statement does, in a block of its own, with
    a scope as a branch's wait has (a wait of the same resource in what it calls is part of
    it). A declaration is left alone: the block would hide what it declares."""
    line, site = s["line"], s["site"]
    starting = [x for x in stmts if x.line == line]
    if not starting:
        raise Unplaceable(f"no loop or statement at line {line} of {s['function']}")
    stmt = max(starting, key=lambda x: x.end - x.start)
    if stmt.cursor.kind == ci.CursorKind.DECL_STMT:
        raise Unplaceable(f"the wait at line {line} is a declaration's value")
    # the block closes before an ACQUIRE placed after the same statement: the wait ends first;
    # and a call that took its fast way (under GIGI_SLOW_CALL_NS) waited for nothing
    begin = _wait_begin(res, obj, amount, site, "gigi_wait_cleanup_slow")
    return f"around the call at line {line}", [
        (stmt.start, 1, f"{MARK_OPEN}{{ {begin}{MARK_CLOSE}"),
        (stmt.end, 4, f"{MARK_OPEN} }}{MARK_CLOSE}"),
    ]


def _wait_begin(
    res: str, obj: str, amount: str, site: int, cleanup: str = "gigi_wait_cleanup"
) -> str:
    """A wait's beginning, in a scope of its own, ended by leaving the block it stands in
    (by CLEANUP)."""
    var, scope = f"gigi_wait_{site}", f"gigi_in_wait_{site}"
    return (
        f"int {scope} __attribute__((cleanup(gigi_scope_leave))) = "
        f"gigi_scope_enter({res}, GIGI_WAIT); "
        f"int64_t {var} __attribute__((cleanup({cleanup}))) = "
        f"gigi_scope_outermost({scope}) ? gigi_wait_begin({res}, {obj}, {amount}, {site}) : 0;"
    )


def scope_handed_on(ci, raw: bytes, fn, before: int, scope: str) -> list:
    """Where a function leaves its scope early: before each return, ahead of its probe at
    ``before``, that returns what a call returns. That path hands the event to the call
    (sqlite3PcacheFetchFinish returns pcacheFetchFinishWithInit, which finishes the fetch
    through sqlite3PcacheFetchFinish again): the function will not record it, so the call's
    own probe must."""
    out = []
    for st in _statements(ci, fn, raw):
        c = st.cursor
        if c.kind != ci.CursorKind.RETURN_STMT or st.start >= before or st.end > before:
            continue  # after the probe, or the probe's own (what it hands back, recorded)
        if not _calls(ci, c):
            continue
        leave = f"gigi_scope_leave(&{scope}); {scope} = 0;"
        if st.in_block:
            out.append((st.start, 0, f"{MARK_OPEN}{leave}{MARK_CLOSE}"))
        else:
            out += [
                (st.start, 0, f"{MARK_OPEN}{{ {leave}{MARK_CLOSE}"),
                (st.end, 5, f"{MARK_OPEN} }}{MARK_CLOSE}"),
            ]
    return out


def _branch_at(ci, fn, line: int):
    """The then- or else-statement of an if that starts at ``line`` (a WAIT on a branch)."""
    for c in body_of(ci, fn).walk_preorder():
        if c.kind == ci.CursorKind.IF_STMT:
            for kid in list(c.get_children())[1:3]:
                if kid.extent.start.line == line and kid.kind != ci.CursorKind.IF_STMT:
                    return kid
    return None


def _place_branch(ci, branch, stmts: list[_Stmt], res: str, obj: str, amount: str, site: int):
    """A WAIT on a branch (a lookup's slow path) begins where the branch begins and ends
    when it is left by any way out (a variable with a cleanup attribute: a goto out, a
    return or a break end it too). A slow path of the same resource inside it, in a function
    it calls (the spill inside a miss), is part of this wait: a scope, as for other kinds."""
    begin = _wait_begin(res, obj, amount, site)
    b0, b1 = branch.extent.start.offset, branch.extent.end.offset
    if branch.extent.start.file is None:
        raise Unplaceable(f"the branch at line {branch.extent.start.line} is in a macro")
    if branch.kind == ci.CursorKind.COMPOUND_STMT:
        ins = [(b0 + 1, 1, f"{MARK_OPEN}{begin}{MARK_CLOSE}")]
    else:
        b1 = next((x.end for x in stmts if x.cursor == branch), b1)
        ins = [
            (b0, 1, f"{MARK_OPEN}{{ {begin}{MARK_CLOSE}"),
            (b1, 8, f"{MARK_OPEN} }}{MARK_CLOSE}"),
        ]
    return f"around the branch at line {branch.extent.start.line}", ins


def place_level(ci, raw: bytes, fn, s: dict, res: str, record: str, member: str, done: set[int]):
    """A lock's or log's ACQUIRE or RELEASE site becomes the changes of its level in the
    function: each assignment of the level member (``member``, a path from ``record``:
    ``eLock`` of Pager, ``hdr.mxFrame`` of Wal) records the step up (ACQUIRE) or down
    (RELEASE) by as many units, for the resource as a whole (object 0)."""
    path = r"\s*\.\s*".join(re.escape(p) for p in member.split("."))
    assign = re.compile(rf"\s*([A-Za-z_]\w*)\s*(->|\.)\s*{path}\s*=[^=]")
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
        raise Unplaceable(
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


def _pointer_set(ci, fn, raw: bytes, stmt: _Stmt) -> str | None:
    """The pointer a statement sets from a call (``pDbPage = sqlite3PagerLookup(...)``,
    ``item *it = do_item_get(...)``), if any."""
    if not _calls(ci, stmt.cursor):
        return None
    text = raw[stmt.start : stmt.end].decode(errors="replace")
    m = re.match(r"\s*(?:[A-Za-z_][\w\s]*?[\s*]+)?\*?\s*([A-Za-z_]\w*)\s*=[^=]", text)
    if m is None:
        return None
    t = _declared_type(ci, fn, m.group(1))
    return m.group(1) if t is not None and t.kind == ci.TypeKind.POINTER else None


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
    gave none or it is neither (a struct). An expression other than a name is what the
    function passes a callee's integer parameter (``WAL_READ_LOCK(mxI)``): taken as it is."""
    name = expr.strip()
    if name and not re.fullmatch(r"[A-Za-z_]\w*", name):
        effects = re.search(r"[;{}\"']|\+\+|--|[^=!<>]=[^=]", name)
        return "0" if effects else f"(int64_t)({name})"
    if not name:
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
