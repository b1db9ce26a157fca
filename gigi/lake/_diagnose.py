"""``diagnose`` over a lake, on DuckDB (in place, one node) or on Spark."""

from __future__ import annotations

import os

from gigi.diagnosis._diagnose import DuckDBEngine, load_detectors, run
from gigi.errors import QueryError, did_you_mean
from gigi.lake._scope import open_lake
from gigi.queries._connect import memory_limit

ENGINES = ("duckdb", "spark")


def diagnose_lake(
    lake: str | os.PathLike,
    *,
    trace: str | None = None,
    since: int | str | None = None,
    until: int | str | None = None,
    resources: list[str] | tuple[str, ...] = (),
    engine: str = "duckdb",
    master: str | None = None,
    spark_memory: str | None = None,
    sites: str | os.PathLike | None = None,
    detectors: list[str | os.PathLike] | None = None,
    threshold: float = 0.5,
    params: dict[str, float] | None = None,
    spark=None,
    stretches: int | None = None,
):
    """Diagnose one trace of ``lake`` (``trace`` picks it), or the window ``[since, until)``
    of it, or only ``resources``; on ``engine`` ``duckdb`` or ``spark`` (``master``: a Spark
    master URL, local mode by default; ``spark``: a SparkSession to use instead). On DuckDB, a
    trace of ``AT_SCALE`` events or more, or any with ``stretches`` given, has its metrics
    computed that many stretches of time at a time, in bounded memory (Spark always does).
    The other arguments are ``gigi.diagnosis.diagnose``'s."""
    if engine not in ENGINES:
        raise QueryError(f"unknown engine {engine!r}{did_you_mean(engine, ENGINES)}")
    scope = open_lake(lake, trace, since=since, until=until, resources=resources)
    dets = load_detectors(detectors, params)
    from gigi.lake import _duckdb_metrics as at_scale
    from gigi.lake._duckdb import connect_lake

    if engine == "duckdb":
        con = connect_lake(scope, memory_limit=memory_limit(), keep_order=False)
        events = con.sql("SELECT events FROM trace_info").fetchall()[0][0]
        if stretches is not None or events >= at_scale.AT_SCALE:
            eng = at_scale.StretchedEngine(con, stretches)
        else:
            eng = DuckDBEngine(con)
    else:
        from gigi.lake._spark import SparkEngine

        eng = SparkEngine(scope, spark=spark, master=master, memory=spark_memory)
        # the findings come from Spark; a person's queries (the report) and what the culprits
        # executed (perf samples) are read by DuckDB over the same scope
        con = connect_lake(scope, memory_limit=memory_limit(), keep_order=False)
        if scope.sampled:
            eng.samples = DuckDBEngine(con)
    d = run(eng, dets, params, threshold=threshold, sites=sites)
    d.trace, d.dropped, d.con, d.manifest = scope.trace_id, scope.dropped, con, scope.manifest
    d.events = int(eng.rows("SELECT events FROM trace_info")[0][0])
    return d
