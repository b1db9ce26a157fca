"""The ``metrics_*`` tables on Spark, the same figures as ``gigi.diagnosis._metrics`` computes
on one node, spread over Spark's workers:

- totals, outstanding by window and peaks: SQL (``sql/totals_by_window.sql``,
  ``sql/peak_by_block.sql``), whose per-resource and per-window results are small;
- hold and wait distributions: SQL (``sql/distribution.sql``, ``sql/distribution_buckets.sql``);
- the blame (the cascaded attribution sweep) and the task shares (the task-shares sweep): the
  very numba kernels, run by ``applyInArrow`` on stretches of time (``gigi.lake._stretches``):
  a stretch is the memory one worker needs, not the trace;
- per task: SQL (``sql/task_metrics.sql``) over the views and the shares.

Only per-resource figures come back to the driver, where ``metrics_resources`` is put
together by the same function as on one node.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gigi.diagnosis._metrics import WINDOWS, outstanding_table, resource_table
from gigi.lake._scope import LakeScope
from gigi.lake._spark import materialize
from gigi.lake._stretches import (
    BLAME_SCHEMA,
    BLAME_UNION,
    SHARES_SCHEMA,
    SHARES_UNION,
    VIEWS,
    blame_sweep,
    chunk_count,
    chunked,
    distribution,
    lake_sql,
    shares_sweep,
)
from gigi.lake._transpile import to_spark
from gigi.metrics.totals import TOTALS

PEAK_BLOCK = 1 << 22  # events per block of the running sum


def compute(spark, scope: LakeScope, stages, chunks: int | None = None) -> None:
    """Register the ``metrics_*`` views on ``spark`` for the trace views already there."""
    sql = lambda text: spark.sql(to_spark(text))  # noqa: E731
    rows = lambda text: sql(text).collect()  # noqa: E731
    resources = sql("SELECT resource, capacity, sharing FROM resources ORDER BY resource")
    resources = resources.toArrow()
    names = resources.column("resource").to_pylist()
    start, end = scope.start, scope.end
    span = max(end - start, 1)
    events = int(sql("SELECT events FROM trace_info").collect()[0][0])
    chunks = chunks or chunk_count(events)
    with stages("totals: events, outstanding, rates"):
        totals, level, rate, square = _totals(sql, names, start, end)
    with stages("blame: attribution over waits and holds"):
        materialize(_blame(spark, sql, names, start, span, chunks, events)).createOrReplaceTempView(
            "metrics_blame"
        )
        per_res = {
            r[0]: {"blame_ns_sum": r[1], "victim_count_distinct": r[2]}
            for r in sql(
                "SELECT resource, sum(blame_ns), count(DISTINCT victim) FROM metrics_blame "
                "GROUP BY resource"
            ).collect()
        }
    _register(
        spark,
        "metrics_resources",
        resource_table(resources, start, end, totals, level, rate, square, per_res),
    )
    _register(spark, "metrics_outstanding", outstanding_table(names, start, end, level, rate))
    with stages("holds: hold-time distribution"):
        _register(spark, "metrics_holds", distribution(rows, names, "holds", "hold_ns"))
    with stages("waits: wait-time distribution"):
        _register(spark, "metrics_waits", distribution(rows, names, "waits", "dur"))
    with stages("tasks: per-task shares"):
        _shares(spark, sql, names, start, span, chunks).createOrReplaceTempView(
            "task_shares_by_chunk"
        )
        # computed here, not by the first detector
        shares = "task_shares_by_chunk"
        text = lake_sql("task_metrics", shares=shares, all_shares=shares, tasks="TRUE", **VIEWS)
        tasks = materialize(sql(text))
        tasks.createOrReplaceTempView("metrics_tasks")


def _register(spark, name: str, table: pa.Table) -> None:
    spark.createDataFrame(table).createOrReplaceTempView(name)


def _totals(sql, names: list[str], start: int, end: int):
    """The totals kernel's ``(totals, level, rate, square)``, from per-window sums and the
    peaks."""
    span = max(end - start, 1)
    code = {n: i for i, n in enumerate(names)}
    per_window = np.zeros((len(names), WINDOWS, 9), np.int64)
    wait_max = np.zeros((len(names), WINDOWS), np.int64)
    square = np.zeros((len(names), WINDOWS), np.float64)
    text = lake_sql("totals_by_window", start=start, end=end, span=span, windows=WINDOWS)
    for row in sql(text).collect():
        r, w = code[row["resource"]], int(row["window_index"])
        per_window[r, w] = [
            row[c] or 0
            for c in ("waits", "wait_ns", "acquires", "acquired", "uses", "used")
            + ("releases", "released", "waits")
        ]
        wait_max[r, w] = row["wait_max_ns"] or 0
        square[r, w] = row["squares"] or 0.0
    peak = np.zeros(len(names), np.int64)
    for row in sql(lake_sql("peak_by_block", block=PEAK_BLOCK)).collect():
        peak[code[row["resource"]]] = row["peak"]
    s = per_window.sum(axis=1)
    totals = np.zeros((len(names), len(TOTALS)), np.int64)
    for i, key in enumerate(("waits", "wait_ns")):
        totals[:, TOTALS.index(key)] = s[:, i]
    totals[:, TOTALS.index("wait_max_ns")] = wait_max.max(axis=1) if WINDOWS else 0
    for i, key in enumerate(("acquires", "acquired", "uses", "used", "releases", "released")):
        totals[:, TOTALS.index(key)] = s[:, 2 + i]
    totals[:, TOTALS.index("peak")] = peak
    totals[:, TOTALS.index("final")] = s[:, 3] - s[:, 7]
    level = np.cumsum(per_window[:, :, 3] - per_window[:, :, 7], axis=1)
    rate = per_window[:, :, 2].copy()
    return totals, level, rate, square


def _blame(spark, sql, names: list[str], start: int, span: int, chunks: int, events: int):
    from pyspark.sql import functions as F

    rows = sql(chunked(BLAME_UNION, start, span, chunks))
    sweep = blame_sweep(names, start, span, chunks, events)
    parts = rows.groupBy("chunk").applyInArrow(sweep, BLAME_SCHEMA)
    keys = [c for c in parts.columns if c != "blame_ns"]
    summed = parts.groupBy(*keys).agg(F.sum("blame_ns").alias("blame_ns"))
    return summed.where("blame_ns > 0").select(
        *keys, F.bround("blame_ns", 0).cast("long").alias("blame_ns")
    )


def _shares(spark, sql, names: list[str], start: int, span: int, chunks: int):
    rows = sql(chunked(SHARES_UNION, start, span, chunks))
    sweep = shares_sweep(names, start, span, chunks)
    return rows.groupBy("chunk").applyInArrow(sweep, SHARES_SCHEMA)
