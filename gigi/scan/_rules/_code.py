"""What several rules read in a function's code: its arguments without casts, whether a call
runs whenever the function does, what it returns, what counts as a check beside real work."""

from __future__ import annotations

import re

from gigi.scan._offline import ResourceGuess, bare, made_from_params, root
from gigi.scan._parse import file_record

WRAPPER_LINES = 30  # a wrapper is short: its job is the call


def code_lines(fn) -> int:
    """How many of FN's lines the compiler saw do anything (a call, an assignment, a
    return, a branch or a loop): a wrapper's length, not counting comments, blank lines and
    code another platform's ``#ifdef`` leaves out."""
    lines = {c.line for c in fn.calls} | {a.line for a in fn.assigns}
    lines |= {r[0] for r in fn.returns} | {b.line for b in fn.branches}
    return len(lines | {lp.line for lp in fn.loops})


# calls that check or report, not work: a wrapper may make them beside its one call
CHECKS = re.compile(
    r"assert|sanity|trace|debug|log|^memset$|^memcpy$|^printf$|^perror$|^fprintf$"
    # and what ends the program when a check fails: no work of its own,
    r"|^abort$|^_?exit$|panic|^die$"
    # and clock reads, that compute a deadline for the call
    r"|(^|_)time_now$|^clock_gettime$|^gettimeofday$|hrtime$",
    re.I,
)
# calls that take or give back a lock: a wrapper may take one around its call
GUARDS = re.compile(r"mutex|spin_?(un)?lock|rwlock|(^|_)(un)?lock$", re.I)
ERRNO = "__errno_location"  # errno, as the C library spells it
C_SCALARS = {"void", "char", "int", "long", "short", "unsigned", "signed", "float", "double"}


def loops_around(fn, line: int) -> list:
    """The loops of FN that enclose LINE, outermost first."""
    return [lp for lp in fn.loops if lp.line <= line <= lp.end_line]


def unconditional(fn, call) -> bool:
    """Whether CALL runs whenever FN does, but for tests of FN's own locals and parameters
    (``if (p)``): a branch on the state of something else, or on what another call
    returned (``rc = lock(p); if (rc) unlock(p)``), makes it a decision, not a wrapper's one
    call."""
    on_path = set(call.path)
    own = file_record(fn.file) + "."  # a setting of its file's picks an implementation

    def results(before: int) -> set[str]:
        # the locals a call's result went to before the test (a parameter adjusted by a
        # clock read in one branch, timeout += now(), is still the caller's in the test)
        return {a.target for a in fn.assigns if a.calls and "." not in a.target and a.line < before}

    # a test that what the call is handed is there at all (``if (allocator->mutex)
    # lock(allocator->mutex)``) is no decision about another's state
    handed = {re.sub(r"\s+", "", bare(a)) for a in call.args}
    present = {f"{x}{y}" for x in handed for y in ("", "!=NULL", "!=0")} - {""}
    return all(
        (
            re.sub(r"\s+", "", b.cond) in present
            or not [m for m in b.cond_members if not m.startswith(own)]
            and not b.cond_calls
            and not set(b.cond_locals) & results(b.line)
        )
        for b in fn.branches
        if (b.if_id, b.side) in on_path
    )


def returns_result_of(fn, callee: str) -> bool:
    """Whether FN returns the result of calling CALLEE: in the return itself, or through a
    local the call's result was assigned to. A function that may return a string literal
    instead (``return copy ? copy : "unknown"``) hands out nothing its caller owns; a
    literal handed to the call (``return take_named(p, "")``) is no such thing.

    >>> from types import SimpleNamespace as F
    >>> returns_result_of(F(returns=[(3, [], 'return take ( p , "" )')], assigns=[]), "take")
    True
    >>> returns_result_of(F(returns=[(3, ["c"], 'return c ? c : "none"')], assigns=[]), "take")
    False
    """
    if any(re.search(r'(\breturn|[?:])\s*"', text) for _, _, text in fn.returns):
        return False
    held = {a.target for a in fn.assigns if callee in a.calls and "." not in a.target}
    for _, reads, text in fn.returns:
        if re.search(rf"\b{re.escape(callee)}\s*\(", text) or held & set(reads):
            return True
    return False


def stores_result_of(fn, callee: str) -> str:
    """Where FN hands out what calling CALLEE returned through a parameter (``area =
    pool_alloc(...); buf->area = area``, ``*out = p``): the parameter's member or the
    parameter it is stored through, or ''."""
    params = {n for _, n in fn.params if n}
    held = {a.target for a in fn.assigns if callee in a.calls and "." not in a.target}
    for a in fn.assigns:
        base = root(a.target_base) if a.target_base else ""
        through = "." in a.target or a.target.lstrip().startswith("*")
        if base in params and through and (held & set(a.sources) or callee in a.calls):
            return a.target.split(".", 1)[-1] if "." in a.target else f"*{base}"
    return ""


def record_at(fn, member: str, line: int) -> str:
    """The record whose MEMBER FN touches at LINE (``uv__allocator.local_malloc``, ``&
    pool->idle_server_list``), or ''."""
    return next((a.record for a in fn.accesses if a.member == member and a.line == line), "")


def handed_param(fn, call, at: set[int]) -> str:
    """The parameter of FN's that FN hands CALL at one of the positions AT (where the callee
    takes the object its event is on), as it is or looked up by a call
    (``UnpinBuffer(GetBufferDescriptor(buffer - 1))``: ``buffer``), or ''."""
    params = {n for _, n in fn.params if n}
    args = [_looked_up(bare(a)) for a in call.args]
    return next((args[i] for i in sorted(at) if i < len(args) and args[i] in params), "")


def handed_unit(fn, call, at: set[int]) -> str:
    """The unit CALL hands over at one of the positions AT (a loop's turn, or a parameter
    handed on to be used): an argument made from one of FN's locals or parameters
    (``server``, ``got[i]``), or ''."""
    return next(
        (
            bare(call.args[i])
            for i in sorted(at)
            if i < len(call.args) and root(call.args[i]) in fn.locals
        ),
        "",
    )


def _looked_up(arg: str) -> str:
    """What a lookup call's first argument names (``GetBufferDescriptor(buffer - 1)``:
    ``buffer``), or ARG as it is.

    >>> _looked_up("GetBufferDescriptor ( buffer - 1 )"), _looked_up("p")
    ('buffer', 'p')
    """
    m = re.fullmatch(r"[A-Za-z_]\w*\s*\(\s*([A-Za-z_]\w*)\b[^,()]*\)", arg)
    return m.group(1) if m else arg


def from_params(fn, arg: str) -> bool:
    """Whether ARG is one of FN's parameters, or a local made from one, or either moved by
    pointer arithmetic (``(size_t *)ptr - 1``: the block's header ahead of it)."""
    b = bare(arg)
    moved = re.fullmatch(r"([A-Za-z_]\w*)\s*[-+]\s*[^,]+", b)
    return b in made_from_params(fn) or bool(moved) and moved.group(1) in made_from_params(fn)


def found_by(name: str, fn, sharing: str, unit: str, reason: str) -> ResourceGuess:
    """A resource found by what one function does to it (a lock API, an allocator), rather
    than proposed from its record by the recall."""
    return ResourceGuess(name, fn.file, fn.line, sharing, unit, [], 1.0, [reason])
