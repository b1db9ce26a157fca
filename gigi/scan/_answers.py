"""The check every LLM answer passes before the scan uses it or caches it, and a cached answer
again before it is reused (an older gigi may have cached what this one refuses): the JSON
shape, each field's type, line numbers inside the file, kinds and sharings among the known
ones, and names and expressions of a length and form a name or an expression can have. A
check returns "" for an answer the scan can use, else its first problem, in words.

>>> check_phase2({"events": [{"kind": "WAIT", "line": 27, "object": "c"}]}, lines=59)
''
>>> check_phase2({"events": [{"kind": "WAIT", "line": 2**40}]}, lines=59)
'event 1: line 1099511627776 is not in the file (lines 1-59)'
"""

from __future__ import annotations

import re

KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE")
SHARING = ("exclusive", "shared", "pool", "log")

# Bounds on what an answer may carry. They are not tuned to any code: a C or C++ name or the
# expression of an object or an amount is far shorter, so an answer past them describes
# something else (a model that went on generating), and the scan would carry it into its
# tables and, for expressions, into the instrumented source.
NAME_MAX = 256
WHY_MAX = 4000
LIST_MAX = 1000  # objects of a resource, events of one function
AMOUNT_MAX = 2**63 - 1  # an amount is an int64 in the trace
# what an expression pasted into the source must not hold: a line break or another control
# character, or a comment mark, would break the line or the markers around the inserted code
_NOT_IN_CODE = re.compile(r"[\x00-\x1f\x7f]|/\*|\*/|//")


def check_phase1(answer) -> str:
    """An answer about one record: is it a resource, with which sharing, unit and objects."""
    if not isinstance(answer, dict):
        return f"the answer is {_type(answer)}, not an object"
    if not isinstance(answer.get("resource"), bool):
        return "the answer lacks a boolean 'resource'"
    if problem := _text(answer, "why", WHY_MAX):
        return problem
    if not answer["resource"]:
        return ""
    if answer.get("sharing") not in SHARING:
        return f"sharing {_short(answer.get('sharing'))} is not one of {', '.join(SHARING)}"
    if not isinstance(answer.get("unit"), str) or not answer["unit"].strip():
        return "the answer lacks a 'unit'"
    if problem := _text(answer, "unit", NAME_MAX, code=True):
        return problem
    objects = answer.get("objects", [])
    if not isinstance(objects, list):
        return f"'objects' is {_type(objects)}, not a list"
    if len(objects) > LIST_MAX:
        return f"{len(objects)} objects, more than {LIST_MAX}"
    for i, o in enumerate(objects, 1):
        if not isinstance(o, str) or not 0 < len(o) <= NAME_MAX or _NOT_IN_CODE.search(o):
            return f"object {i} ({_short(o)}) is not a record's name"
    return ""


def check_phase2(answer, lines: int) -> str:
    """An answer about one function of a file of ``lines`` lines: its events."""
    if not isinstance(answer, dict):
        return f"the answer is {_type(answer)}, not an object"
    events = answer.get("events")
    if not isinstance(events, list):
        return "the answer lacks an 'events' list"
    if len(events) > LIST_MAX:
        return f"{len(events)} events, more than {LIST_MAX}"
    for i, e in enumerate(events, 1):
        if problem := _event(e, lines):
            return f"event {i}: {problem}"
    return ""


def _event(e, lines: int) -> str:
    if not isinstance(e, dict):
        return f"{_type(e)}, not an object"
    if e.get("kind") not in KINDS:
        return f"kind {_short(e.get('kind'))} is not one of {', '.join(KINDS)}"
    line = e.get("line")
    if type(line) is not int:  # bool is an int to isinstance
        return f"line {_short(line)} is not an integer"
    if not 1 <= line <= lines:
        return f"line {line} is not in the file (lines 1-{lines})"
    amount = e.get("amount")
    if type(amount) is int:
        if not 0 <= amount <= AMOUNT_MAX:
            return f"amount {amount} is not a count of units"
    elif problem := _text(e, "amount", NAME_MAX, code=True):
        return problem
    for name, most in (("object", NAME_MAX), ("function", NAME_MAX), ("why", WHY_MAX)):
        if problem := _text(e, name, most, code=name != "why"):
            return problem
    return ""


def _text(d: dict, name: str, most: int, code: bool = False) -> str:
    """'' when d[name] is absent, null or a string of at most ``most`` characters (which,
    for a name or an expression, ``code``, can stand on one line of source)."""
    v = d.get(name)
    if v is None:
        return ""
    if not isinstance(v, str):
        return f"'{name}' is {_type(v)}, not a string"
    if len(v) > most:
        return f"'{name}' is {len(v)} characters long, more than {most}"
    if code and _NOT_IN_CODE.search(v):
        return f"'{name}' ({_short(v)}) holds a line break or a comment mark"
    return ""


def _type(v) -> str:
    return "null" if v is None else f"a {type(v).__name__}"


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["KINDS", "SHARING", "check_phase1", "check_phase2"]
