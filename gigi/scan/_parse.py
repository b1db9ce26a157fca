"""C/C++ source into a hierarchy of facts with libclang: file -> record -> member -> function
-> code, one translation unit at a time (in worker processes, one per core).

What is kept of a function body is what the recall and the verification reason over:
member accesses (read, write, increment, decrement, address taken), loops and if-branches
with what their condition reads and what their body calls, calls with their line and
enclosing loops, returns with what they are derived from, assignments between locals and
members (and the calls whose result they hold), and deletes. Nothing later needs the AST again.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gigi.errors import GigiError

SOURCE_SUFFIXES = {".c": "c", ".h": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".hpp": "c++"}
HEADER_SUFFIXES = (".h", ".hpp")
# how clang spells a record that has no name
UNNAMED = ("struct (", "union (", "class (", "(anonymous", "(unnamed")


def file_record(file: str) -> str:
    """The record a source file's own variables make (its statics and the globals it
    defines): ``src/blockdata.c``'s ``keyblock_free`` and ``blockdata_count`` are the
    members ``blockdata_c.keyblock_free`` and ``blockdata_c.blockdata_count``. C code keeps
    many a free list, pool or queue in such variables rather than in a struct; as members of
    one record they are read as a struct's are."""
    return re.sub(r"\W", "_", Path(file).name)


class ScanError(GigiError, ValueError):
    """The source tree or its compile flags cannot be scanned."""


@dataclass
class Access:
    record: str  # the struct or class whose member it is
    member: str
    line: int
    op: str  # read, write, inc, dec, addr
    base: str  # the expression the member is taken of: "bp", "f", "this"
    path: tuple = ()  # the if-branches it sits in, as Call.path


@dataclass
class Loop:
    form: str  # while, do, for, range-for
    line: int
    end_line: int
    infinite: bool
    cond_members: list[str]  # record.member read by the condition
    cond_locals: list[str]  # locals read by the condition
    cond_calls: list[str]
    body_calls: list[str]
    cond_globals: list[str] = field(default_factory=list)  # variables of file scope it reads
    cond: str = ""  # the condition as its tokens spell it


@dataclass
class Branch:
    """One side of an if: the code that runs only when its condition says so."""

    if_id: int  # the if it belongs to, numbered in the function as paths number them
    side: int  # 0 then, 1 else
    line: int  # where the branch's statement starts (its '{', or 'else {' for an else)
    end_line: int
    block: bool  # a compound statement (not a single statement, nor an else-if)
    cond: str  # the if's condition as its tokens spell it
    cond_members: list[str]  # record.member the if's condition reads
    cond_locals: list[str]  # locals the if's condition reads
    cond_calls: list[str]
    body_calls: list[str]  # every call in the branch, nested ones too
    path: tuple = ()  # the if-branches it sits in, itself last
    # its last statement leaves what follows the if: a return, or a goto past it
    exits: bool = False


@dataclass
class Call:
    callee: str
    line: int
    loops: int  # how many loops enclose it
    receiver: str  # record.member a method is called on ("" when none)
    args: list[str]
    path: tuple = ()  # the if-branches it sits in: ((if id, 0 then / 1 else), ...)
    indirect: bool = False  # through a function pointer: the callee is not known
    method_of: str = ""  # the class whose method it calls (C++), "" for a plain function
    # a lock macro of the code's own read as one call: the calls it expanded to
    # (``MHD_mutex_lock_chk_``: pthread_mutex_lock, a panic when it fails)
    expands: tuple[str, ...] = ()
    # the callee is the code's own: declared in the tree or a library it names, not in a
    # system header (``LWLockAcquire``, not ``pthread_mutex_lock``)
    own: bool = False


@dataclass
class Assign:
    line: int
    target: str  # local name, or record.member
    target_base: str
    sources: list[str]  # locals and record.member read by the value
    op: str  # "=", "+=", "-=", ...
    text: str
    path: tuple = ()
    calls: list[str] = field(default_factory=list)  # the calls whose result the value holds
    # a count that some condition of the code compares with its record's limit
    # (``connections >= connection_limit``), whatever it is named: set by the recall
    limited: bool = False
    # a count of the units a list keeps to hand out (unbound's num_quar beside its quar
    # list): it falls as units are taken, whatever it is named; set by the recall
    stashed: bool = False


@dataclass
class Function:
    name: str  # qualified: Class::method
    file: str
    line: int
    end_line: int
    record: str  # owning class, "" for a free function
    return_type: str
    params: list[tuple[str, str]]  # (type, name)
    comment: str
    accesses: list[Access] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    assigns: list[Assign] = field(default_factory=list)
    returns: list[tuple[int, list[str], str]] = field(default_factory=list)  # line, from, text
    deletes: list[tuple[int, str]] = field(default_factory=list)
    locals: dict[str, str] = field(default_factory=dict)  # name -> type
    # local -> where it is referenced: (line, if-branch path)
    uses_after: dict[str, list[tuple[int, tuple]]] = field(default_factory=dict)
    internal: bool = False  # static in C, or a private method: a helper, not the interface


@dataclass
class Member:
    record: str
    name: str
    type: str
    comment: str
    line: int
    element: str  # the record a pointer, array or container of it holds ("" when none)
    # a list's head some function pops to hand the unit out: a stash of units to take, a
    # free list whatever it is named (unbound's quar); set by the recall
    stash: bool = False


@dataclass
class Record:
    name: str
    file: str
    line: int
    kind: str  # struct, class, union
    comment: str


@dataclass
class Diagnostic:
    file: str
    line: int
    severity: str
    message: str


@dataclass
class Unit:
    """What one translation unit gave."""

    file: str
    records: list[Record] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    lines: int = 0
    # the tree's own headers this unit includes, their facts taken in its context (macros and
    # types as the code that includes them sees them, which a header that is not
    # self-contained needs); empty for a header parsed on its own
    headers: list[Unit] = field(default_factory=list)


@functools.cache
def builtin_include_dir() -> str | None:
    """The compiler's own header directory (stddef.h, stdarg.h, stdatomic.h): the libclang
    wheel lacks it, and without it types quietly become ``int``."""
    for probe in (["clang", "-print-resource-dir"],):
        if shutil.which(probe[0]):
            out = subprocess.run(probe, capture_output=True, text=True).stdout.strip()
            if out and Path(out, "include", "stddef.h").exists():
                return str(Path(out, "include"))
    for d in sorted(glob.glob("/usr/lib/llvm-*/lib/clang/*/include"), reverse=True):
        if Path(d, "stddef.h").exists():
            return d
    for cc in ("cc", "gcc"):
        if shutil.which(cc):
            out = subprocess.run(
                [cc, "-print-file-name=include"], capture_output=True, text=True
            ).stdout.strip()
            if out and Path(out, "stddef.h").exists():
                return out
    return None


# every comment, not only documentation comments (/** */, ///): most C code explains its
# members in plain /* */ comments, trailing on the same line (ref_cnt; /* reference count */)
COMMENTS = ["-fparse-all-comments"]


def default_flags(language: str) -> list[str]:
    flags = ["-x", language, "-std=gnu11" if language == "c" else "-std=gnu++17", *COMMENTS]
    return flags + builtin_flags()


# headers of gigi's own, searched before a C compiler's that is not clang: its stdatomic.h
OWN_HEADERS = Path(__file__).parent / "include"


@functools.cache
def builtin_flags() -> list[str]:
    """Where the builtin headers are searched: clang's own folder; or, without one, the C
    compiler's behind gigi's stdatomic.h (GCC's maps atomic operations onto builtins that
    clang refuses on ``_Atomic`` objects)."""
    inc = builtin_include_dir()
    if inc is None:
        return ["-isystem", str(OWN_HEADERS)]
    if Path(inc, "__stddef_max_align_t.h").exists():  # clang's own
        return ["-isystem", inc]
    return ["-isystem", str(OWN_HEADERS), "-isystem", inc]


def compile_flags(
    path: Path,
    root: Path,
    commands: dict[str, list[str]] | None,
    include_dirs: tuple[str, ...] = (),
    defines: tuple[str, ...] = (),
) -> list[str]:
    """The flags for one file: its compile_commands.json entry when there is one (compiler,
    output and the file itself left out); for a file without one (a header, most often) the
    entry of the nearest file that has one, as clangd interpolates; else defaults, with every
    folder of the tree that holds headers searched for ``#include "..."`` (a tree not built,
    whose headers live apart from its sources: include/, src/core/). Always the builtin
    headers, INCLUDE_DIRS (the headers of libraries the tree uses, installed apart) and
    DEFINES (``HAVE_CONFIG_H``, ``NAME=VALUE``: what its build defines)."""
    language = SOURCE_SUFFIXES.get(path.suffix, "c")
    extra = [a for d in include_dirs for a in ("-I", str(d))] + [f"-D{d}" for d in defines]
    if not commands:
        # the tree's folders given are searched first, for "..." includes too: a guessed
        # folder of another platform's headers of the same name (include/arch/beos) must
        # not win; a library's installed headers stay behind the tree's own
        inside = [d for d in include_dirs if Path(d).resolve().is_relative_to(root.resolve())]
        given = [a for d in inside for a in ("-iquote", str(d))]
        quoted = given + [a for d in header_dirs(str(root)) for a in ("-iquote", d)]
        # the file's own folder is searched for its "..." includes as a compiler does, and
        # only for those: as -I it would shadow the C library (libusual's string.h)
        here = ["-I", str(root)]
        return default_flags(language) + here + extra + quoted
    own = str(path.resolve())
    donor = own if own in commands else _nearest(own, commands)
    keep: list[str] = []
    skip = False
    for a in commands[donor][1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a == donor or Path(a).name == Path(donor).name:
            continue
        # a warning option changes no parse, and one clang does not know (GCC's
        # -Wimplicit-fallthrough=3) is a warning of its own, printed for every file
        if a.startswith("-W") and not a.startswith("-Wp,"):
            continue
        keep.append(a)
    return keep + COMMENTS + extra + builtin_flags()


@functools.lru_cache(maxsize=8)
def header_dirs(root: str) -> tuple[str, ...]:
    """The folders under ROOT that hold C or C++ headers, shallowest first (hidden ones left
    out): searched only for quoted includes, so that a platform's stand-in for a system
    header (port/win32/sys/socket.h) never shadows the system's own."""
    top = Path(root)
    if not top.is_dir():
        return ()
    found = {
        p.parent
        for p in top.rglob("*")
        if p.suffix in HEADER_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(top).parts)
    }
    return tuple(str(d) for d in sorted(found, key=lambda d: (len(d.parts), str(d))))


def _nearest(file: str, commands: dict[str, list[str]]) -> str:
    """The entry whose file shares the longest leading path with FILE (its own folder first)."""
    parts = Path(file).parts

    def shared(other: str) -> tuple[int, str]:
        n = 0
        for a, b in zip(parts[:-1], Path(other).parts[:-1], strict=False):
            if a != b:
                break
            n += 1
        return n, other

    return max(commands, key=shared)


def load_compile_commands(path: Path) -> dict[str, list[str]]:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ScanError(f"{path}: not a compile_commands.json ({e})") from None
    out = {}
    for e in entries:
        if not isinstance(e, dict) or "file" not in e:
            raise ScanError(f"{path}: an entry without 'file'")
        directory = Path(e.get("directory", "."))
        file = (directory / e["file"]).resolve()
        args = e.get("arguments") or shlex.split(e.get("command", ""))
        out[str(file)] = _absolute(args, directory, file)
    return out


# flags followed by a path, which the build meant relative to the entry's directory
PATH_FLAGS = ("-I", "-iquote", "-isystem", "-idirafter", "-include", "-imacros")


def _absolute(args: list[str], directory: Path, file: Path) -> list[str]:
    """An entry's arguments with its paths made absolute (libclang parses in the scanner's
    own folder, not the entry's), and without the source itself, by whatever name the build
    gave it (a link configure made: PostgreSQL's port/pg_sema.c is posix_sema.c)."""

    def absolute(path: str) -> str:
        return path if Path(path).is_absolute() else str(directory / path)

    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in PATH_FLAGS and i + 1 < len(args):
            out += [a, absolute(args[i + 1])]
            i += 2
            continue
        if a.startswith("-I") and len(a) > 2:
            out.append("-I" + absolute(a[2:]))
        elif i and not a.startswith("-") and a.endswith(tuple(SOURCE_SUFFIXES)):
            if (directory / a).resolve() != file:
                out.append(a)
        else:
            out.append(a)
        i += 1
    return out


def source_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ScanError(f"{root}: no such source file or directory")
    return sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


# --- the walk ---------------------------------------------------------------------------------


def unit_name(path: Path, root: Path) -> str:
    """How a file is named in the scan's tables: its path under ROOT (its name when it is
    ROOT, a single file scanned)."""
    return os.path.relpath(path, root) if path != root else path.name


def parse_file(path: str, root: str, flags: list[str]) -> Unit:
    """Parse one file and return its facts (top-level, so that worker processes can run it)."""
    from clang import cindex as ci

    index = ci.Index.create()
    unit = Unit(file=unit_name(Path(path), Path(root)))
    try:
        tu = index.parse(
            path, args=flags, options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES * 0
        )
    except ci.TranslationUnitLoadError as e:
        unit.diagnostics.append(Diagnostic(unit.file, 0, "fatal", f"cannot parse: {e}"))
        return unit
    try:
        unit.lines = Path(path).read_text(errors="replace").count("\n")
    except OSError:
        pass
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Warning:
            loc = d.location
            unit.diagnostics.append(
                Diagnostic(
                    os.path.relpath(loc.file.name, root) if loc.file else unit.file,
                    loc.line,
                    {2: "warning", 3: "error", 4: "fatal"}.get(d.severity, "note"),
                    d.spelling,
                )
            )
    walker = _Walker(ci, path, unit, root=None if Path(path).suffix in HEADER_SUFFIXES else root)
    walker.walk(tu.cursor)
    unit.headers = [w.unit for w in walker.headers.values() if w not in (None, walker)]
    return unit


class _Walker:
    def __init__(self, ci, path: str, unit: Unit, root: str | None = None) -> None:
        self.ci = ci
        self.K = ci.CursorKind
        self.path = os.path.realpath(path)
        self.unit = unit
        self.seen_records: set[str] = set()
        self.seen_variables: set[str] = set()
        try:
            self.lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            self.lines = []
        self.unit.lines = self.unit.lines or len(self.lines)
        # with ROOT: the walkers of the tree's headers met in this unit, by the name clang
        # gives them (None: a file that is not one of the tree's headers)
        self.root = os.path.realpath(root) + os.sep if root is not None else None
        self.headers: dict[str, _Walker | None] = {}

    def owner(self, c) -> _Walker | None:
        """The walker whose file C is in: this one, one of the tree's headers, or None."""
        f = c.location.file
        if f is None:
            return None
        name = f.name
        if name not in self.headers:
            real = os.path.realpath(name)
            if real == self.path:
                self.headers[name] = self
            elif self.root and real.startswith(self.root) and real.endswith(HEADER_SUFFIXES):
                rel = os.path.relpath(real, self.root)
                self.headers[name] = _Walker(self.ci, real, Unit(file=rel))
            else:
                self.headers[name] = None
        return self.headers[name]

    def walk(self, cursor) -> None:
        K = self.K
        for c in cursor.get_children():
            if c.kind in (K.NAMESPACE, K.LINKAGE_SPEC, K.UNEXPOSED_DECL):
                self.walk(c)
                continue
            who = self.owner(c)
            if who is not None:
                who.take(c)

    def take(self, c) -> None:
        """Record a top-level declaration of this walker's file."""
        K = self.K
        if c.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.UNION_DECL, K.CLASS_TEMPLATE):
            self.record(c)
        elif c.kind == K.TYPEDEF_DECL:
            under = c.underlying_typedef_type.get_declaration()
            # a typedef of a record defined elsewhere (ngx_core.h's ``typedef struct
            # ngx_pool_s ngx_pool_t``) leaves the record to the file that defines it
            here = under.location.file and c.location.file
            same = here and under.location.file.name == c.location.file.name
            if under.kind in (K.STRUCT_DECL, K.UNION_DECL) and under.is_definition() and same:
                self.record(under, alias=c.spelling)
        elif (
            c.kind
            in (K.FUNCTION_DECL, K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR, K.FUNCTION_TEMPLATE)
            and c.is_definition()
        ):
            self.function(c)
        elif c.kind == K.VAR_DECL and self.root is not None and _defines(self.ci, c):
            self.variable(c)

    def variable(self, c) -> None:
        """A variable the file defines, as a member of its file's record; not a record held by
        value (``static slabclass_t slabclass[N]``), whose members are its own record's."""
        if _by_value(self.ci, c.type):
            return
        name = file_record(self.unit.file)
        if c.spelling in self.seen_variables:
            return  # declared again (a tentative definition, then the one that initializes)
        self.seen_variables.add(c.spelling)
        if name not in self.seen_records:
            self.seen_records.add(name)
            self.unit.records.append(Record(name, self.unit.file, c.location.line, "file", ""))
        element = _element_of(self.ci, c.type)
        self.unit.members.append(
            Member(name, c.spelling, _spelt(c.type), _comment(c), c.location.line, element)
        )

    # records and members

    def record_name(self, decl) -> str:
        """The name a record goes by: its tag, else its typedef."""
        name = decl.spelling
        if not name or name.startswith(UNNAMED):
            return ""
        return name

    def record(self, c, alias: str = "") -> None:
        K = self.K
        name = self.record_name(c) or alias
        if not name or not c.is_definition() or name in self.seen_records:
            return
        self.seen_records.add(name)
        kind = {K.STRUCT_DECL: "struct", K.UNION_DECL: "union"}.get(c.kind, "class")
        self.unit.records.append(Record(name, self.unit.file, c.location.line, kind, _comment(c)))
        for m in c.get_children():
            if m.kind == K.FIELD_DECL:
                self.unit.members.append(
                    Member(
                        name,
                        m.spelling,
                        _spelt(m.type),
                        _comment(m),
                        m.location.line,
                        _element_of(self.ci, m.type),
                    )
                )
            elif m.kind in (K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR) and m.is_definition():
                self.function(m)
            elif m.kind in (K.STRUCT_DECL, K.CLASS_DECL):
                self.record(m)

    # functions

    def function(self, c) -> None:
        K = self.K
        parent = c.semantic_parent
        owner = ""
        if parent is not None and parent.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.CLASS_TEMPLATE):
            owner = self.record_name(parent)
        name = f"{owner}::{c.spelling}" if owner else c.spelling
        fn = Function(
            name=name,
            file=self.unit.file,
            line=c.extent.start.line,
            end_line=c.extent.end.line,
            record=owner,
            return_type=_spelt(c.result_type),
            params=[(_type_names(a.type), a.spelling) for a in c.get_arguments()],
            comment=_comment(c),
            internal=_internal(self.ci, c),
        )
        for t, n in fn.params:
            fn.locals[n] = t
        body = next((x for x in c.get_children() if x.kind == K.COMPOUND_STMT), None)
        if body is not None:
            _Body(self.ci, fn, self.lines, c, body).visit(body, loops=0)
            _lock_macros(fn, self.lines)
        self.unit.functions.append(fn)


class _Body:
    """The facts of one function body."""

    BLOCKING = (
        "wait",
        "sleep",
        "usleep",
        "nanosleep",
        "sched_yield",
        "poll",
        "select",
        "epoll_wait",
        "futex",
        "read",
        "write",
        "recv",
        "send",
        "pread",
        "pwrite",
        "fsync",
        "evict",
        "flush",
        "checkpoint",
        "yield",
        "lock",
        "sem_wait",
        "disk_read",
        "disk_write",
    )

    def __init__(self, ci, fn: Function, lines: list[str], decl=None, body=None) -> None:
        self.ci = ci
        self.K = ci.CursorKind
        self.fn = fn
        self.lines = lines
        self.path: tuple = ()
        self.ifs = 0
        self.decl = decl
        self.body = body
        self.atomics: dict | None = None  # atomic operation -> its builtin's name, when asked

    def visit(self, c, loops: int) -> None:
        K = self.K
        k = c.kind
        if k in (K.WHILE_STMT, K.FOR_STMT, K.DO_STMT, K.CXX_FOR_RANGE_STMT):
            self.loop(c, loops)
            return
        if k == K.IF_STMT:  # the condition on the current path, each branch on its own
            kids = list(c.get_children())
            self.ifs += 1
            me = self.ifs
            if kids:
                self.visit(kids[0], loops)
            outer = self.path
            for branch, kid in enumerate(kids[1:3]):
                self.path = (*outer, (me, branch))
                self.branch(me, branch, kids[0], kid, c)
                self.visit(kid, loops)
            self.path = outer
            return
        if k == K.VAR_DECL:
            self.fn.locals[c.spelling] = _type_names(c.type)
            init = [
                x
                for x in c.get_children()
                if x.kind not in (K.TYPE_REF, K.NAMESPACE_REF, K.TEMPLATE_REF)
            ]
            if init:
                self.fn.assigns.append(
                    Assign(
                        c.location.line,
                        c.spelling,
                        "",
                        self.reads(init[-1]),
                        "=",
                        _text(c),
                        path=self.path,
                        calls=self.calls_in(init[-1]),
                    )
                )
        elif k == K.BINARY_OPERATOR or k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            op = _operator(c)
            if op in ("=", "+=", "-=", "|=", "&=", "*=", "/="):
                lhs, rhs = list(c.get_children())[:2]
                target, base = self.target(lhs)
                self.fn.assigns.append(
                    Assign(
                        c.location.line,
                        target,
                        base,
                        self.reads(rhs),
                        op,
                        _text(c),
                        path=self.path,
                        calls=self.calls_in(rhs),
                    )
                )
                self.member_op(lhs, {"=": "write", "+=": "inc", "-=": "dec"}.get(op, "write"))
        elif k == K.UNARY_OPERATOR:
            op = _operator(c)
            child = next(iter(c.get_children()), None)
            if op in ("++", "--") and child is not None:
                self.member_op(child, "inc" if op == "++" else "dec")
                target, base = self.target(child)
                self.fn.assigns.append(
                    Assign(
                        c.location.line,
                        target,
                        base,
                        [target],
                        "+=" if op == "++" else "-=",
                        _text(c),
                        path=self.path,
                    )
                )
            elif op == "&" and child is not None:
                self.member_op(child, "addr")
        elif k == K.CALL_EXPR:
            self.call(c, loops)
            if (
                c.spelling in ("operator=", "operator+=", "operator-=")
                and len(list(c.get_arguments())) == 2
            ):
                lhs, rhs = list(c.get_arguments())
                target, base = self.target(lhs)
                op = c.spelling[len("operator") :]
                self.fn.assigns.append(
                    Assign(
                        c.location.line, target, base, self.reads(rhs), op, _text(c), path=self.path
                    )
                )
        elif k == K.UNEXPOSED_EXPR and not c.spelling and (name := self.atomic(c)):
            self.atomic_op(c, name, loops)
        elif k == K.UNEXPOSED_EXPR and c.location.line <= len(self.lines):
            # atomics the function's text did not name: keep them as calls, by the macro's
            # name on the source line
            line = c.location.line
            for name in re.findall(r"\b(atomic_\w+)\s*\(", self.lines[line - 1]):
                if not any(x.line == line and x.callee == name for x in self.fn.calls):
                    self.fn.calls.append(Call(name, line, loops, "", [], self.path))
        elif k == K.RETURN_STMT:
            kids = list(c.get_children())
            self.fn.returns.append((c.location.line, self.reads(kids[0]) if kids else [], _text(c)))
        elif k == K.CXX_DELETE_EXPR:
            self.fn.deletes.append((c.location.line, _text(c)))
        elif k == K.MEMBER_REF_EXPR:
            self.access(c, "read")
        elif k == K.DECL_REF_EXPR:
            name = c.spelling
            if name in self.fn.locals:
                self.fn.uses_after.setdefault(name, []).append((c.location.line, self.path))
            else:
                self.own_access(c, "read")
        for x in c.get_children():
            self.visit(x, loops)

    def atomic(self, c) -> str:
        """The builtin an atomic operation is (``__c11_atomic_fetch_add``,
        ``__atomic_sub_fetch``), or "". libclang shows one as an unnamed expression whose
        children are its operands, whatever macro spelt it (``atomicIncr(used, n)``,
        ``atomic_fetch_add_explicit``), and its name only in the function's printed text: the
        operations and the builtins printed are matched in order, and a function where their
        counts differ keeps none."""
        if len(list(c.get_children())) < 2:
            return ""
        if self.atomics is None:
            K = self.K
            ops = [
                x.hash
                for x in self.body.walk_preorder()
                if x.kind == K.UNEXPOSED_EXPR
                and not x.spelling
                and len(list(x.get_children())) >= 2
            ]
            names = ATOMIC_BUILTIN.findall(_printed(self.ci, self.decl)) if ops else []
            self.atomics = dict(zip(ops, names, strict=True)) if len(ops) == len(names) else {}
        return self.atomics.get(c.hash, "")

    def atomic_op(self, c, name: str, loops: int) -> None:
        """An atomic operation as the call it is written as, and, when it adds or subtracts,
        as the ``+=`` or ``-=`` it performs on its object (a reference count, a budget)."""
        pointer = next(iter(c.get_children()))
        obj = self.addressed(pointer)
        target, base = self.target(obj or pointer)
        arg = f"&{target}" if obj is not None else target
        line = c.location.line
        self.fn.calls.append(Call(name, line, loops, "", [arg], self.path))
        self.atomic_step(obj or pointer, target, base, name, arg, line)

    def addressed(self, pointer):
        """The object POINTER takes the address of (``&object``, its operator unnamed when a
        macro spelt it: no tokens of its own), or None when it takes none."""
        if pointer.kind == self.K.UNARY_OPERATOR and _operator(pointer) in ("&", ""):
            return next(iter(pointer.get_children()), pointer)
        return None

    def atomic_step(self, pointer, target: str, base: str, name: str, arg: str, line: int):
        """The ``+=`` or ``-=`` an atomic operation named NAME performs on its object TARGET,
        when it adds or subtracts."""
        step = ATOMIC_STEP.search(name)
        if step and target:
            op = "+=" if "add" in step.groups() else "-="
            self.member_op(pointer, "inc" if op == "+=" else "dec")
            self.fn.assigns.append(
                Assign(line, target, base, [target], op, f"{name}({arg}, ...)", path=self.path)
            )

    def sync_step(self, c, callee: str, line: int) -> None:
        """A GCC ``__sync`` builtin called by name (``__sync_fetch_and_add(&m->refs, 1)``,
        as a macro expands it): the step it performs on the object its first argument
        points to, as an atomic operation's."""
        pointer = next(iter(c.get_arguments()), None)
        while pointer is not None and pointer.kind == self.K.UNEXPOSED_EXPR:
            pointer = next(iter(pointer.get_children()), None)  # the implicit casts
        obj = self.addressed(pointer) if pointer is not None else None
        if obj is not None:
            target, base = self.target(obj)
            self.atomic_step(obj, target, base, callee, f"&{target}", line)

    def branch(self, me: int, side: int, cond, kid, stmt) -> None:
        K = self.K
        reads = self.reads(cond)
        # a condition that starts with a macro (NULL != c) has no tokens of its own, or ones
        # that start at the macro's definition: the if statement's, between its
        # parentheses, spell it
        text = _text(cond, within=stmt) or _parenthesized(_text(stmt))
        last = kid
        while last.kind == K.COMPOUND_STMT and list(last.get_children()):
            last = list(last.get_children())[-1]
        self.fn.branches.append(
            Branch(
                me,
                side,
                kid.extent.start.line,
                kid.extent.end.line,
                kid.kind == K.COMPOUND_STMT,
                text,
                [r for r in reads if "." in r],
                [r for r in reads if "." not in r],
                [x.spelling for x in cond.walk_preorder() if x.kind == K.CALL_EXPR],
                [x.spelling for x in kid.walk_preorder() if x.kind == K.CALL_EXPR],
                self.path,
                last.kind in (K.RETURN_STMT, K.GOTO_STMT),
            )
        )

    def once(self, loop, cond) -> bool:
        """Whether a do-loop's condition is a literal false (``while (0)``)."""
        K = self.K
        while cond.kind in (K.PAREN_EXPR, K.UNEXPOSED_EXPR, K.CXX_BOOL_LITERAL_EXPR) and list(
            cond.get_children()
        ):
            cond = next(iter(cond.get_children()))
        if cond.kind not in (K.INTEGER_LITERAL, K.CXX_BOOL_LITERAL_EXPR):
            return False
        text = _text(cond).strip()
        line = loop.extent.start.line
        written = 0 < line <= len(self.lines) and LOOP_WORD.search(self.lines[line - 1])
        return text in ("0", "false") or not written

    def loop(self, c, loops: int) -> None:
        K = self.K
        kids = list(c.get_children())
        body = kids[-1] if kids else None
        if c.kind == K.DO_STMT:
            body, cond_nodes = (kids[0] if kids else None), kids[1:]
            # do { ... } while (0): a macro's statement, run once, no loop; its tokens are
            # the macro's use where a macro spelt it, so a literal there is taken for 0
            if len(cond_nodes) == 1 and self.once(c, cond_nodes[0]):
                if body is not None:
                    self.visit(body, loops)
                return
        else:
            cond_nodes = kids[:-1]
        cond_members = []
        cond_locals = []
        cond_calls = []
        cond_globals = []
        for n in cond_nodes:
            cond_members += [r for r in self.reads(n) if "." in r]
            cond_locals += [r for r in self.reads(n) if "." not in r]
            cond_calls += [x.spelling for x in n.walk_preorder() if x.kind == K.CALL_EXPR]
            cond_globals += self.globals_read(n)
        text = _text(c)
        spelt = [_text(n, within=c) for n in cond_nodes]
        cond_text = " ".join(spelt) if all(spelt) else _parenthesized(text)
        infinite = (c.kind == K.FOR_STMT and text.replace(" ", "").startswith("for(;;)")) or (
            c.kind == K.WHILE_STMT and text.replace(" ", "").startswith(("while(1)", "while(true)"))
        )
        body_calls = (
            [x.spelling for x in body.walk_preorder() if x.kind == K.CALL_EXPR] if body else []
        )
        form = {K.WHILE_STMT: "while", K.DO_STMT: "do", K.FOR_STMT: "for"}.get(c.kind, "range-for")
        self.fn.loops.append(
            Loop(
                form,
                c.extent.start.line,
                c.extent.end.line,
                infinite,
                cond_members,
                cond_locals,
                cond_calls,
                body_calls,
                cond_globals,
                cond_text,
            )
        )
        for x in kids:
            self.visit(x, loops + 1)

    def call(self, c, loops: int) -> None:
        K = self.K
        callee = c.spelling
        receiver = ""
        kids = list(c.get_children())
        if kids and kids[0].kind == K.MEMBER_REF_EXPR:
            inner = list(kids[0].get_children())
            if inner:
                r = self.reads(inner[0])
                receiver = next((x for x in r if "." in x), "")
        # (an argument spelt from a macro defined above the function in its file has no text
        # of its own: its tokens would run from the definition on)
        within = self.body or self.decl
        args = [_text(a, within) for a in c.get_arguments()] if hasattr(c, "get_arguments") else []
        written = _written_args(c)
        if len(written) == len(args):
            args = written  # as written: a macro argument by its name, not its expansion
        if any(not a for a in args) and c.location.line <= len(self.lines):
            args.append(self.lines[c.location.line - 1].strip())  # arguments from macros
        ref = c.referenced
        indirect = ref is None or ref.kind not in (
            K.FUNCTION_DECL,
            K.CXX_METHOD,
            K.CONSTRUCTOR,
            K.DESTRUCTOR,
            K.FUNCTION_TEMPLATE,
        )
        # a method, by its class: cells.rm(i) on a local reference is llama_kv_cells::rm
        owner = ref.semantic_parent if ref is not None and ref.kind == K.CXX_METHOD else None
        method_of = owner.spelling if owner is not None else ""
        own = not indirect and ref.location.file is not None
        own = own and not ref.location.is_in_system_header
        self.fn.calls.append(
            Call(
                callee,
                c.location.line,
                loops,
                receiver,
                args,
                self.path,
                indirect,
                method_of,
                own=own,
            )
        )
        if SYNC_BUILTIN.match(callee):
            self.sync_step(c, callee, c.location.line)
        if receiver and kids:
            field = _field_of(kids[0])
            if field is not None and _container(field):
                self.container_step(c, callee, receiver, field, args)

    def container_step(self, c, callee: str, receiver: str, member, args: list[str]) -> None:
        """A standard container member grown or shrunk by a method (``used.insert(i)``,
        ``free_list.pop_back()``): the ``+=`` or ``-=`` it performs on the member's size, as
        a count's step is read."""
        op = "+=" if callee in CONTAINER_GROWS else "-=" if callee in CONTAINER_SHRINKS else ""
        if not op:
            return
        inner = list(member.get_children())
        base = _text(inner[0]) if inner else "this"
        self.fn.assigns.append(
            Assign(
                c.location.line,
                receiver,
                base or "this",
                [receiver],
                op,
                f"{receiver.split('.', 1)[-1]}.{callee}({', '.join(args[:1])})",
                path=self.path,
            )
        )

    # expressions

    def member_of(self, c) -> tuple[str, str, str] | None:
        """(record, member, base) of a member reference."""
        ref = c.referenced
        if ref is None or ref.kind != self.K.FIELD_DECL:
            return None
        parent = ref.semantic_parent
        record = parent.spelling if parent is not None else ""
        if not record or record.startswith(UNNAMED):
            record = ""
        kids = list(c.get_children())
        base = _text(kids[0]) if kids else "this"
        return record, ref.spelling, base

    def access(self, c, op: str) -> None:
        m = self.member_of(c)
        if m and m[0]:
            self.fn.accesses.append(Access(m[0], m[1], c.location.line, op, m[2], self.path))

    def own_variable(self, c) -> str:
        """``file_record.name`` for a reference to a variable of the function's own file (not
        one of a header's, nor a local), else ""."""
        if c.spelling in self.fn.locals:
            return ""
        ref = c.referenced
        if ref is None or ref.kind != self.K.VAR_DECL:
            return ""
        parent = ref.semantic_parent  # the file's scope, or a namespace's in it (C++)
        if parent is None or parent.kind not in (self.K.TRANSLATION_UNIT, self.K.NAMESPACE):
            return ""
        here = self.decl.location.file if self.decl is not None else None
        there = ref.location.file
        if here is None or there is None or here.name != there.name:
            return ""
        if _by_value(self.ci, ref.type):
            return ""
        return f"{file_record(self.fn.file)}.{c.spelling}"

    def member_op(self, c, op: str) -> None:
        """Record a write-like access on the member ``c`` names (through subscripts too), or
        on a variable of the file's own."""
        node = self.unwrap(c)
        if node is not None and node.kind == self.K.MEMBER_REF_EXPR:
            self.access(node, op)
        elif node is not None and node.kind == self.K.DECL_REF_EXPR:
            self.own_access(node, op)

    def own_access(self, c, op: str) -> None:
        """Record an access to a variable of the file's own, as to its record's member."""
        if own := self.own_variable(c):
            record, member = own.split(".", 1)
            self.fn.accesses.append(Access(record, member, c.location.line, op, "", self.path))

    def unwrap(self, c):
        """The expression under parentheses, implicit casts and subscripts."""
        K = self.K
        node = c
        while node is not None and node.kind in (
            K.ARRAY_SUBSCRIPT_EXPR,
            K.UNEXPOSED_EXPR,
            K.PAREN_EXPR,
        ):
            kids = list(node.get_children())
            node = kids[0] if kids else None
        return node

    def target(self, c) -> tuple[str, str]:
        K = self.K
        node = self.unwrap(c)
        if node is None:
            return "", ""
        if node.kind == K.CALL_EXPR and node.spelling == "operator[]":
            kids = list(node.get_children())
            return self.target(kids[0]) if kids else ("", "")
        if node.kind == K.UNARY_OPERATOR and _operator(node) == "*":
            # what an address points to is what was addressed: a macro's *(val) += 1 on
            # &pool->used (HAProxy's HA_ATOMIC_INC without threads) moves pool->used
            inner = self.unwrap(next(iter(node.get_children()), None))
            if inner is not None and inner.kind == K.UNARY_OPERATOR and _operator(inner) == "&":
                return self.target(next(iter(inner.get_children())))
            # and what is written through a list's last link (T **last) is linked into the
            # list: STAILQ_INSERT_TAIL's *(head)->stqh_last = (elm)
            if inner is not None and inner.kind == K.MEMBER_REF_EXPR:
                if inner.type.spelling.replace(" ", "").endswith("**"):
                    return self.target(inner)
        if node.kind == K.MEMBER_REF_EXPR:
            m = self.member_of(node)
            if m:
                return f"{m[0]}.{m[1]}", m[2]
        if node.kind == K.DECL_REF_EXPR:
            return self.own_variable(node) or node.spelling, ""
        return _text(node), ""

    def calls_in(self, c) -> list[str]:
        return [x.spelling for x in c.walk_preorder() if x.kind == self.K.CALL_EXPR]

    def globals_read(self, c) -> list[str]:
        """Variables of file scope (globals, a file's statics) an expression reads."""
        K = self.K
        out = []
        for x in c.walk_preorder():
            if x.kind == K.DECL_REF_EXPR and x.spelling not in self.fn.locals:
                ref = x.referenced
                parent = ref.semantic_parent if ref is not None else None
                if ref is not None and ref.kind == K.VAR_DECL and parent is not None:
                    if parent.kind == K.TRANSLATION_UNIT and x.spelling not in out:
                        out.append(x.spelling)
        return out

    def reads(self, c) -> list[str]:
        """Locals and record.member an expression reads."""
        K = self.K
        out = []
        for x in c.walk_preorder():
            if x.kind == K.MEMBER_REF_EXPR:
                m = self.member_of(x)
                if m and m[0]:
                    out.append(f"{m[0]}.{m[1]}")
            elif x.kind == K.DECL_REF_EXPR and x.spelling in self.fn.locals:
                out.append(x.spelling)
            elif x.kind == K.DECL_REF_EXPR and (own := self.own_variable(x)):
                out.append(own)
        return out


# libclang's operator kinds (CXUnaryOperatorKind, CXBinaryOperatorKind) as C spells them
_UNARY = {1: "++", 2: "--", 3: "++", 4: "--", 5: "&", 6: "*", 7: "+", 8: "-", 9: "~", 10: "!"}
_BINARY = dict(
    enumerate(
        "* / % + - << >> <=> < > <= >= == != & ^ | && || "
        "= *= /= %= += -= <<= >>= &= ^= |= ,".split(),
        start=3,
    )
)


@functools.cache
def _operator_kinds():
    """libclang's functions that name an operator (libclang 17 and later; the Python binding
    does not wrap them), or None."""
    import ctypes

    from clang import cindex

    lib = cindex.conf.lib
    try:
        unary, binary = lib.clang_getCursorUnaryOperatorKind, lib.clang_getCursorBinaryOperatorKind
    except AttributeError:
        return None
    for f in (unary, binary):
        f.argtypes, f.restype = [cindex.Cursor], ctypes.c_int
    return unary, binary


def _operator(c) -> str:
    """The operator of a unary or binary expression, from the compiler where it can tell (an
    operator a macro spelt has no tokens of its own: ``refcount_incr(it)`` for
    ``++(it->refcount)``), else from the tokens."""
    kinds = _operator_kinds()
    if kinds is not None:
        if c.kind == c.kind.UNARY_OPERATOR:
            op = _UNARY.get(kinds[0](c), "")
        else:
            op = _BINARY.get(kinds[1](c), "")
        if op:
            return op
    for attr in ("binary_operator", "unary_operator"):
        op = getattr(c, attr, None)
        if op is not None and getattr(op, "name", "") not in ("", "Invalid"):
            name = op.name
            return _OP_NAMES.get(name, name)
    toks = [t.spelling for t in c.get_tokens()]
    kids = list(c.get_children())
    if c.kind == c.kind.UNARY_OPERATOR:
        if toks and toks[0] in ("++", "--", "&", "*", "!", "-"):
            return toks[0]
        return toks[-1] if toks and toks[-1] in ("++", "--") else ""
    if kids:
        n = len(list(kids[0].get_tokens()))
        return toks[n] if n < len(toks) else ""
    return ""


# the atomic builtins a compiler prints for C11's and GCC's atomic operations, and those of them
# that add to or subtract from their object
# what a standard container's methods do to its size
CONTAINER_GROWS = {"insert", "emplace", "emplace_back", "emplace_front", "push_back", "push_front"}
CONTAINER_SHRINKS = {"erase", "pop_back", "pop_front", "clear", "extract"}
CONTAINER = re.compile(
    r"\bstd::(__\w+::)?(vector|deque|list|forward_list|set|multiset|map"
    r"|multimap|unordered_\w+|queue|priority_queue|stack)\b"
)


def _field_of(method_ref):
    """The member a method is called on (``used`` in ``used.erase(i)``), or None."""
    for x in method_ref.walk_preorder():
        if x is not method_ref and x.kind.name == "MEMBER_REF_EXPR":
            ref = x.referenced
            return x if ref is not None and ref.kind.name == "FIELD_DECL" else None
    return None


def _container(member_ref) -> bool:
    """Whether a member reference names a standard container member of a record."""
    ref = member_ref.referenced
    if ref is None or ref.kind.name != "FIELD_DECL":
        return False
    return bool(CONTAINER.search(ref.type.get_canonical().spelling))


ATOMIC_BUILTIN = re.compile(r"\b(__c11_atomic_\w+|__atomic_\w+)\s*\(")
ATOMIC_STEP = re.compile(r"fetch_(?:and_)?(add|sub)(?:_\d+)?$|_(add|sub)_(?:and_)?fetch(?:_\d+)?$")
# GCC's older atomic builtins, called by name (a size suffix where the compiler resolved one)
SYNC_BUILTIN = re.compile(r"__sync_\w+$")


@functools.cache
def _printer(ci):
    """libclang's printer of a declaration, which its Python binding does not wrap."""
    import ctypes

    lib = ci.conf.lib
    policy = lib.clang_getCursorPrintingPolicy
    policy.argtypes, policy.restype = [ci.Cursor], ctypes.c_void_p
    printed = lib.clang_getCursorPrettyPrinted
    printed.argtypes, printed.restype = [ci.Cursor, ctypes.c_void_p], ci._CXString
    dispose = lib.clang_PrintingPolicy_dispose
    dispose.argtypes, dispose.restype = [ctypes.c_void_p], None
    return policy, printed, dispose


def _printed(ci, decl) -> str:
    """A declaration as the compiler prints it, macros expanded; "" when libclang cannot."""
    try:
        policy, printed, dispose = _printer(ci)
    except AttributeError:  # a libclang older than 7
        return ""
    p = policy(decl)
    try:
        return ci._CXString.from_result(printed(decl, p))
    finally:
        dispose(p)


_OP_NAMES = {
    "Assign": "=",
    "AddAssign": "+=",
    "SubAssign": "-=",
    "OrAssign": "|=",
    "AndAssign": "&=",
    "MulAssign": "*=",
    "DivAssign": "/=",
    "PostInc": "++",
    "PreInc": "++",
    "PostDec": "--",
    "PreDec": "--",
    "AddrOf": "&",
}


def _type_names(t) -> str:
    """A type as written and, when a typedef hides it, as it is: ``DbPage * | PgHdr *``."""
    written, canonical = _spelt(t), _spelt(t.get_canonical()).replace("struct ", "")
    return written if canonical == written else f"{written} | {canonical}"


# where clang says a record with no name of its own was declared: a path of the scanning
# machine, which no result of the scan (nor a prompt sent to a model) should carry
DECLARED_AT = re.compile(r"\((unnamed|anonymous)( struct| union| enum)? at [^)]*\)")


def _spelt(t) -> str:
    """A type's spelling, a record with no name spelt without where it was declared:
    ``struct (unnamed struct at /src/x.c:5:5)`` is ``struct (unnamed struct)``.

    >>> from types import SimpleNamespace as T
    >>> _spelt(T(spelling="struct (unnamed struct at /src/x.c:5:5) *"))
    'struct (unnamed struct) *'
    """
    return DECLARED_AT.sub(lambda m: f"({m.group(1)}{m.group(2) or ''})", t.spelling)


def _internal(ci, c) -> bool:
    try:
        if c.linkage == ci.LinkageKind.INTERNAL:
            return True
        return c.access_specifier == ci.AccessSpecifier.PRIVATE
    except ValueError:  # a kind this libclang's bindings do not know
        return False


WRITTEN_MAX = 400  # tokens of a call past which its arguments are read from the AST instead


def _written_args(c) -> list[str]:
    """A call's arguments as its own tokens spell them, split at the top-level commas; []
    for a call too long to spell cheaply (its arguments are then read from the AST)."""
    toks = []
    for t in c.get_tokens():
        toks.append(t.spelling)
        if len(toks) > WRITTEN_MAX:
            return []
    if "(" not in toks or toks[-1] != ")":
        return []
    if ";" in toks:  # a macro's call: its extent runs from the macro's definition to its use
        return []
    out, cur, depth = [], [], 0
    for t in toks[toks.index("(") + 1 : -1]:
        if t == "," and depth == 0:
            out.append(" ".join(cur)[:300])
            cur = []
            continue
        depth += t in ("(", "[", "{")
        depth -= t in (")", "]", "}")
        cur.append(t)
    if cur:
        out.append(" ".join(cur)[:300])
    return out


TEXT_MAX = 300  # characters of an expression's or statement's text the scan keeps


def _text(c, within=None) -> str:
    """The first TEXT_MAX characters of C's tokens, spelt with a space between each. The
    tokens are read only as far as that: spelling a whole loop or function to keep its first
    line (yyparse, 10k lines of tokens, once for each loop nested in it) cost minutes.
    With WITHIN (the statement C is part of), "" when the tokens start above it in its file:
    an expression that starts with a macro defined there is spelt from the macro's
    definition on."""
    out, n = [], 0
    for t in c.get_tokens():
        if within is not None and not out and _above(t.location, within.extent.start):
            return ""
        out.append(t.spelling)
        n += len(out[-1]) + 1
        if n > TEXT_MAX:
            break
    return " ".join(out)[:TEXT_MAX]


def _above(at, start) -> bool:
    return (
        at.file is not None
        and start.file is not None
        and at.file.name == start.file.name
        and at.line < start.line
    )


def _parenthesized(text: str) -> str:
    """What the first parentheses of TEXT (tokens spelt with spaces) hold: an if's
    condition."""
    depth, out = 0, []
    for tok in text.split(" "):
        if tok == ")":
            depth -= 1
            if depth == 0:
                return " ".join(out)
        if depth:
            out.append(tok)
        if tok == "(":
            depth += 1
    return ""


LOCK_NAME = re.compile(r"(try|un|rd|wr|spin)?lock|latch", re.I)
LOOP_WORD = re.compile(r"\b(while|for|do)\b")


def _lock_macros(fn: Function, lines: list[str]) -> None:
    """Read a lock a macro spells as the one call it is to its reader. A spinlock written as
    a macro (``HA_SPIN_LOCK(QUEUE_LOCK, &q->lock)``) expands to loops, atomics and
    size-checked helpers on one line; its calls become one call named for the macro, with the
    macro's arguments, and the loops it spelt (on a line with no loop keyword) are dropped.
    A macro that is one plain call (``mutex_lock(m)`` for ``pthread_mutex_lock(m)``) stays
    that call."""
    by_line: dict[int, list[Call]] = {}
    for c in fn.calls:
        by_line.setdefault(c.line, []).append(c)
    spelt: dict[int, Call] = {}
    for line, calls in by_line.items():
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        m = re.match(r"\s*([A-Za-z_]\w*)\s*\(", text)
        if not m or any(c.callee == m.group(1) for c in calls):
            continue
        name = m.group(1)
        words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)
        if not any(LOCK_NAME.fullmatch(w) for w in words):
            continue
        if len(calls) == 1 and not calls[0].callee.startswith("__"):
            continue  # an alias of one call
        args = _macro_args(text[m.end() - 1 :])
        real = sum(
            1
            for lp in fn.loops
            if lp.line <= line <= lp.end_line and (lp.line != line or _loop_written(lines, lp))
        )
        first = min(calls, key=lambda c: len(c.path))
        expands = tuple(dict.fromkeys(c.callee for c in calls))
        spelt[line] = Call(name, line, real, "", args, first.path, False, expands=expands)
    kept = []
    for c in fn.calls:
        if c.line not in spelt:
            kept.append(c)
        elif c is by_line[c.line][0]:
            kept.append(spelt[c.line])
    fn.calls = kept
    fn.loops = [
        lp
        for lp in fn.loops
        if not (lp.line == lp.end_line and lp.line in spelt and not _loop_written(lines, lp))
    ]


def _loop_written(lines: list[str], lp: Loop) -> bool:
    text = lines[lp.line - 1] if 0 < lp.line <= len(lines) else ""
    return bool(LOOP_WORD.search(text))


def _macro_args(text: str) -> list[str]:
    """The arguments of a macro call as written: ``(A, f(b, c))`` is ``["A", "f(b, c)"]``."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        elif ch == "," and depth == 1:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return [*out, cur.strip()] if cur.strip() or out else out


def _comment(c) -> str:
    raw = c.raw_comment or ""
    return " ".join(
        line.strip().lstrip("/*! ").rstrip("*/ ").strip() for line in raw.splitlines()
    ).strip()


def _defines(ci, c) -> bool:
    """Whether a variable's declaration defines it here: not ``extern`` (``static int n;``
    is a definition, though clang calls it a tentative one)."""
    try:
        return c.storage_class != ci.StorageClass.EXTERN
    except ValueError:  # a storage class this libclang's bindings do not know
        return c.is_definition()


def _by_value(ci, t) -> bool:
    """Whether type T is a record, or an array of them, held by value."""
    for _ in range(4):
        if t.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
            t = t.element_type
        elif t.kind in (ci.TypeKind.ELABORATED, ci.TypeKind.TYPEDEF):
            t = t.get_canonical()
        else:
            break
    return t.kind == ci.TypeKind.RECORD


def _element_of(ci, t) -> str:
    """The record a member's type points to, is an array of, or contains (std::list<T*>)."""
    K = ci.CursorKind
    seen = 0
    while seen < 4:
        seen += 1
        kind = t.kind
        if kind in (ci.TypeKind.POINTER, ci.TypeKind.LVALUEREFERENCE):
            t = t.get_pointee()
        elif kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
            t = t.element_type
        elif kind in (ci.TypeKind.ELABORATED, ci.TypeKind.TYPEDEF):
            t = t.get_canonical()
        else:
            break
    decl = t.get_declaration()
    system = (
        decl is not None and decl.location.file is not None and (decl.location.is_in_system_header)
    )
    if (
        decl is not None
        and decl.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.UNION_DECL, K.CLASS_TEMPLATE)
        and not system
    ):
        # a record with no name of its own names no element (clang spells it "struct
        # (unnamed at FILE:LINE:COL)", a path of the machine that scanned)
        if decl.spelling and not decl.spelling.startswith(("std", *UNNAMED)):
            name = decl.spelling
            if t.get_num_template_arguments() > 0:
                for i in range(t.get_num_template_arguments()):
                    inner = _element_of(ci, t.get_template_argument_type(i))
                    if inner:
                        return inner
                return ""
            return name
    if t.get_num_template_arguments() > 0:
        for i in range(t.get_num_template_arguments() - 1, -1, -1):
            inner = _element_of(ci, t.get_template_argument_type(i))
            if inner:
                return inner
    return ""
