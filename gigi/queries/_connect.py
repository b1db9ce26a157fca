"""Building the read-only DuckDB connection over one store entry."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from pathlib import Path

from gigi._interrupts import interruptible
from gigi.errors import QueryError, did_you_mean
from gigi.ingest import StoreEntry, locate
from gigi.queries._docs import SqlDoc, parse

VIEWS_DIR = Path(__file__).parent / "views"
NAMED_DIR = Path(__file__).parent / "named"

# Statement types a query may be; anything else (CREATE, INSERT, COPY, ATTACH, SET...) writes
# or changes the session and is refused.
_READ_ONLY = {"SELECT", "EXPLAIN"}

# What a variable's name may be: an identifier, never text pasted into a statement.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def views() -> dict[str, SqlDoc]:
    return {p.stem: parse(p) for p in sorted(VIEWS_DIR.glob("*.sql"))}


def named_queries() -> dict[str, SqlDoc]:
    return {p.stem: parse(p) for p in sorted(NAMED_DIR.glob("*.sql"))}


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _bindings(entry: StoreEntry) -> dict[str, str]:
    m = entry.manifest
    base = entry.path

    def files(sub: str) -> str:
        return f"read_parquet({_literal(str(base / sub))})"

    return {
        "events": files("events/*.parquet"),
        "hold_pairs": files("hold_pairs/*.parquet"),
        "tasks": files("tasks.parquet"),
        "resources": files("resources.parquet"),
        "sites": files("sites.parquet"),
        # a relation, not a path: entries ingested before samples existed have no file
        "samples": files("samples.parquet")
        if (base / "samples.parquet").is_file()
        else "_no_samples",
        "trace_id": _literal(m.trace_id),
        "start": _literal(m.start if m.start is not None else 0),
        "end": _literal(m.end if m.end is not None else 0),
        "event_count": _literal(m.events),
        "dropped": _literal(m.dropped),
    }


def connect(
    target: str | os.PathLike | StoreEntry,
    *,
    trace: str | None = None,
    variables: dict[str, object] | None = None,
    memory_limit: str = "2GB",
    keep_order: bool = True,
):
    """A DuckDB connection with the views of one trace, able to read nothing else.

    ``target`` is a store, a store entry or a raw trace directory (see ``gigi.ingest.locate``).
    ``variables`` are set as DuckDB variables (``getvariable('name')``) for named queries;
    each query's declared defaults are set first. ``keep_order=False`` lets DuckDB return
    rows of queries without ORDER BY in any order, for less memory (the diagnosis sorts what
    it needs).
    """
    entry = target if isinstance(target, StoreEntry) else locate(target, trace)
    return connect_bindings(
        _bindings(entry),
        entry.path,
        variables=variables,
        memory_limit=memory_limit,
        keep_order=keep_order,
    )


def memory_limit() -> str:
    """DuckDB's share of the machine for work over a whole trace (a diagnosis, a validation):
    40% of physical memory (at least 2 GB); the kernels' arrays live beside it. Beyond it
    DuckDB spills to disk."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2GB"
    return f"{max(2 << 30, int(total * 0.4)) >> 20}MB"


def spill_directory() -> str:
    """A fresh directory of the caller's own (mode 0700, a new name that nothing could have
    planted a link at) where one connection's DuckDB spills beyond its memory limit: in the
    system's temp dir, not the caller's working directory."""
    return tempfile.mkdtemp(prefix="gigi-duckdb-")


def check_name(name: str) -> str:
    """``name`` if it can name a variable (letters, digits and _, not first a digit), else
    ``QueryError``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise QueryError(
            f"parameter name {name!r} is not a name: use letters, digits and _, not starting "
            "with a digit"
        )
    return name


def set_variables(con, values: dict[str, object]) -> None:
    """``SET VARIABLE`` each of ``values``: names checked, values bound, never pasted."""
    for name, value in values.items():
        con.execute(f"SET VARIABLE {check_name(name)} = ?", [value])


def connect_bindings(
    bindings: dict[str, str],
    allowed: Path,
    *,
    variables: dict[str, object] | None = None,
    memory_limit: str = "2GB",
    keep_order: bool = True,
):
    """``connect``'s work, with the views' ``{{name}}`` placeholders bound to ``bindings``
    (relations such as ``read_parquet('...')``, and literals) and reads confined to the
    directory ``allowed`` and DuckDB's own temp directory (where it spills, and the diagnosis
    at scale puts its scratch files)."""
    import duckdb

    for name in variables or {}:  # before anything is made, so a bad name leaves nothing
        check_name(name)
    spill = spill_directory()
    try:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": spill})
    except BaseException:
        shutil.rmtree(spill, ignore_errors=True)
        raise
    weakref.finalize(con, shutil.rmtree, spill, True)
    interruptible(con)  # a signal stops its query at once, not when the query returns
    con.execute("SET threads = 2")
    if not keep_order:
        con.execute("SET preserve_insertion_order = false")  # big scans and joins spill more
    if bindings["samples"] == "_no_samples":
        from gigi.schema import SAMPLES_SCHEMA

        con.register("_no_samples", SAMPLES_SCHEMA.empty_table())
    pending = list(views().values())
    while pending:  # create in dependency order: retry until nothing more binds
        failed = []
        for doc in pending:
            sql = doc.text
            for key, value in bindings.items():
                sql = sql.replace("{{" + key + "}}", value)
            try:
                con.execute(sql)
            except duckdb.CatalogException:
                failed.append(doc)
        if len(failed) == len(pending):
            names = ", ".join(d.name for d in failed)
            raise QueryError(f"views that refer to missing views: {names}")
        pending = failed
    places = ", ".join(_literal(str(d) + os.sep) for d in (allowed, spill))
    con.execute(f"SET allowed_directories = [{places}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    # only now, with the files and settings locked, anything a caller gave
    defaults = {p.name: p.default for d in named_queries().values() for p in d.params.values()}
    values = {**defaults, **(variables or {})}
    set_variables(con, {k: _number(v) for k, v in values.items()})
    return con


def _number(value: object) -> object:
    if isinstance(value, str):
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                pass
    return value


def run(con, sql: str):
    """Run a read-only query; refuse anything that writes, attaches or changes settings."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(_first_line(e)) from None
    if not statements:
        raise QueryError("empty query")
    for st in statements:
        kind = st.type.name
        if kind not in _READ_ONLY:
            raise QueryError(
                f"refused: {kind} statements are not allowed, queries are read-only "
                "(SELECT, WITH ... SELECT, EXPLAIN)"
            )
    try:
        for st in statements[:-1]:
            con.execute(st.query)
        return con.sql(statements[-1].query)
    except duckdb.PermissionException as e:
        raise QueryError(
            f"refused: queries may read only the trace's own tables ({_first_line(e)})"
        ) from None
    except duckdb.Error as e:
        raise QueryError(_first_line(e)) from None


def run_named(con, name: str):
    queries = named_queries()
    if name not in queries:
        raise QueryError(
            f"no named query {name!r}{did_you_mean(name, queries)}; there are: {', '.join(queries)}"
        )
    return run(con, queries[name].text)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0]
