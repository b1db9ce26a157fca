"""Detectors: one .sql file each; the registry is the folder (and any ``--detectors DIR``).

A detector's header says what it is::

    -- detector: contention
    -- failure_mode: contention
    -- meaning: what a finding means (continued on lines that start with "--   ")
    -- param contention_min_wait: what it sets (default 0.05)

and its query returns one row per finding with the columns ``resource``, ``score`` (0-1),
``culprit_tasks`` and ``victim_tasks`` (lists of task ids, most responsible first),
``evidence`` (a JSON object as text) and ``summary`` (one sentence). It may also return
``why_not`` (text): a row where it is set is not a finding but the detector's verdict on a
resource it looked at and did not accuse, saying what fell short (``diagnose --explain`` and
the no-findings report show them). It reads only the
documented views (``events``, ``holds``, ``waits``, ...) and ``metrics_*`` tables; parameters
are DuckDB variables: ``getvariable('contention_min_wait')``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from gigi.errors import DetectorError
from gigi.queries._docs import PARAM_LINE

BUILTIN_DIR = Path(__file__).parent
FAILURE_MODES = (
    "contention",
    "under_provisioning",
    "inefficient_policy",
    "leak",
    "unbounded_growth",
    "inconsistent_state",
)
# A detector's form for Spark, beside it, where its own does not transpile (gigi.lake).
SPARK_SUFFIX = ".spark.sql"
COLUMNS = ("resource", "score", "culprit_tasks", "victim_tasks", "evidence", "summary")
# Columns a detector may add: why_not, set on a row that is a verdict rather than a finding.
OPTIONAL_COLUMNS = ("why_not",)


def selected(columns: list[str]) -> list[str]:
    """The columns to read of a detector's result: ``COLUMNS`` and the optional ones it has."""
    return [*COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in columns)]


_KEY = re.compile(r"^--\s*(detector|failure_mode|meaning):\s*(.*?)\s*$")
_MORE = re.compile(r"^--\s{2,}(\S.*?)\s*$")


@dataclass(frozen=True)
class Param:
    name: str
    doc: str
    default: float


@dataclass
class Detector:
    name: str
    failure_mode: str
    meaning: str
    path: Path
    sql: str
    params: dict[str, Param] = field(default_factory=dict)
    builtin: bool = True


def parse(path: Path, builtin: bool = True) -> Detector:
    """Read one detector file, or raise ``DetectorError`` naming what is missing."""
    try:
        text = path.read_text()
    except OSError as e:
        raise DetectorError(f"{path}: cannot read ({e.strerror})") from None
    head: dict[str, str] = {}
    params: dict[str, Param] = {}
    last = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("--"):
            break
        if m := PARAM_LINE.match(line):
            try:
                default = float(m.group(3))
            except ValueError:
                raise DetectorError(
                    f"{path}:{number}: param {m.group(1)}: default {m.group(3)!r} is not a number"
                ) from None
            params[m.group(1)] = Param(m.group(1), m.group(2), default)
            last = None
        elif m := _KEY.match(line):
            head[m.group(1)] = m.group(2)
            last = m.group(1)
        elif (m := _MORE.match(line)) and last:
            head[last] += " " + m.group(1)
    for key in ("detector", "failure_mode", "meaning"):
        if not head.get(key):
            raise DetectorError(f"{path}: header lacks '-- {key}: ...'")
    if head["failure_mode"] not in FAILURE_MODES:
        raise DetectorError(
            f"{path}: failure_mode {head['failure_mode']!r} is not one of "
            f"{', '.join(FAILURE_MODES)}"
        )
    if not builtin:  # the built-in ones are checked by the tests, not on every run
        _check_query(path, text)
    return Detector(
        head["detector"], head["failure_mode"], head["meaning"], path, text, params, builtin
    )


def _check_query(path: Path, text: str) -> None:
    """Refuse a detector that is not one read-only query (a SELECT, WITH ... SELECT): a
    detector runs on the trace's connection, and a COPY, ATTACH, CREATE or SET there could
    write into the store or change what later queries see."""
    import duckdb

    try:
        statements = _parser().extract_statements(text)
    except duckdb.Error as e:
        raise DetectorError(f"{path}: {str(e).strip().splitlines()[0]}") from None
    offset = 0
    for st in statements:
        start = offset + _leading(st.query)
        offset += len(st.query)
        if st.type.name != "SELECT":
            line = text.count("\n", 0, start) + 1
            raise DetectorError(
                f"{path}:{line}: refused: a {st.type.name} statement; a detector is one "
                "read-only query (SELECT or WITH ... SELECT)"
            )
    if len(statements) != 1:
        raise DetectorError(
            f"{path}: a detector is one query (SELECT or WITH ... SELECT); "
            f"found {len(statements)} statements"
        )


@functools.cache
def _parser():
    """One in-memory DuckDB connection for splitting detectors into statements (a connection
    costs about 20 ms)."""
    import duckdb

    return duckdb.connect()


def _leading(query: str) -> int:
    """How many characters of ``query`` come before its first token (blanks and -- lines)."""
    i = 0
    while i < len(query):
        if query[i].isspace():
            i += 1
        elif query.startswith("--", i):
            end = query.find("\n", i)
            i = len(query) if end < 0 else end + 1
        else:
            break
    return i


def load(extra_dirs: list[Path] | None = None) -> list[Detector]:
    """The built-in detectors, then those in ``extra_dirs`` (a name may not repeat)."""
    found: dict[str, Detector] = {}
    dirs = [(BUILTIN_DIR, True)] + [(Path(d), False) for d in extra_dirs or []]
    for folder, builtin in dirs:
        if not folder.is_dir():
            raise DetectorError(f"{folder}: no such detectors directory")
        for path in sorted(folder.glob("*.sql")):
            if path.name.endswith(SPARK_SUFFIX):  # another engine's form of a detector
                continue
            det = parse(path, builtin)
            if det.name in found:
                raise DetectorError(
                    f"{path}: detector {det.name!r} is already defined in {found[det.name].path}"
                )
            found[det.name] = det
    return list(found.values())
