"""The documentation inside gigi's .sql files: a header per file, a comment per column.

A view or query file starts with ``-- name: what it is`` (continued on further ``--`` lines);
each output column is preceded by ``-- column: what it holds and its unit``; parameters are
declared as ``-- param name: meaning (default value)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_COMMENT = re.compile(r"^\s*--\s?(.*)$")
_COLUMN = re.compile(r"^\s*--\s*([A-Za-z_][A-Za-z0-9_]*):\s*(.+?)\s*$")
# A parameter line: "-- param NAME: what it sets (default VALUE)"; detectors use it too.
PARAM_LINE = re.compile(r"^\s*--\s*param\s+([A-Za-z_]\w*):\s*(.+?)\s*\(default\s+([^)]+)\)\s*$")


@dataclass(frozen=True)
class Param:
    name: str
    doc: str
    default: str


@dataclass
class SqlDoc:
    """What one .sql file says of itself."""

    name: str
    path: Path
    summary: str
    columns: dict[str, str] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)
    text: str = ""


def parse(path: Path) -> SqlDoc:
    text = path.read_text()
    lines = text.splitlines()
    header: list[str] = []
    i = 0
    while i < len(lines) and (m := _COMMENT.match(lines[i])):
        if PARAM_LINE.match(lines[i]):
            break
        header.append(m.group(1).strip())
        i += 1
    summary = " ".join(header)
    prefix = f"{path.stem}:"
    if summary.startswith(prefix):
        summary = summary[len(prefix) :].strip()
    doc = SqlDoc(path.stem, path, summary, text=text)
    for line in lines[i:]:
        if m := PARAM_LINE.match(line):
            doc.params[m.group(1)] = Param(m.group(1), m.group(2), m.group(3).strip())
        elif m := _COLUMN.match(line):
            doc.columns.setdefault(m.group(1), m.group(2))
    return doc
