"""DuckDB over a lake, in place: the views of ``gigi.queries`` over the scope's Parquet."""

from __future__ import annotations

from gigi.lake._scope import EVENT_COLUMNS, PAIR_COLUMNS, LakeScope


def _scan(scope: LakeScope, table: str, columns: str, where: str = "TRUE") -> str:
    dated = table in ("events", "hold_pairs", "samples")
    glob = scope.lake / table / "*" / ("*/*.parquet" if dated else "*.parquet")
    types = "{'trace': VARCHAR, 'day': VARCHAR}" if dated else "{'trace': VARCHAR}"
    path = "'" + str(glob).replace("'", "''") + "'"
    return (
        f"(SELECT {columns} FROM read_parquet({path}, hive_partitioning = true, "
        f"hive_types = {types}) WHERE {scope.partition_filter(dated)} AND {where})"
    )


def relations(scope: LakeScope) -> dict[str, str]:
    """The lake's tables as DuckDB subqueries, narrowed by ``scope`` (``samples`` only when
    the trace has perf samples)."""
    rel = {
        "events": _scan(scope, "events", ", ".join(EVENT_COLUMNS), scope.event_filter()),
        "hold_pairs": _scan(scope, "hold_pairs", ", ".join(PAIR_COLUMNS), scope.pair_filter()),
        "tasks": _scan(scope, "tasks", "* EXCLUDE (trace)"),
        "resources": _scan(scope, "resources", "* EXCLUDE (trace)"),
        "sites": _scan(scope, "sites", "* EXCLUDE (trace)"),
    }
    if scope.sampled:
        rel["samples"] = _scan(scope, "samples", "* EXCLUDE (trace, day)", scope.time_filter())
    return rel


def connect_lake(scope: LakeScope, **options):
    """A read-only DuckDB connection with the trace views over ``scope`` (``options`` as for
    ``gigi.queries._connect.connect_bindings``)."""
    from gigi.queries._connect import connect_bindings

    return connect_bindings(scope.bindings(relations(scope)), scope.lake, **options)
