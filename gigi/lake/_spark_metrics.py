"""The ``metrics_*`` tables on Spark, the same figures as ``gigi.diagnosis._metrics`` computes
on one node, spread over Spark's workers:

- totals, outstanding by window and peaks: SQL (``sql/totals_by_window.sql``,
  ``sql/peak_by_block.sql``), whose per-resource and per-window results are small;
- hold and wait distributions: SQL (``sql/distribution.sql``, ``sql/distribution_buckets.sql``);
- the blame (the cascaded attribution sweep) and the task shares (the task-shares sweep): the
  very numba kernels, run by ``applyInArrow`` on stretches of time. Both sweeps depend, at any
  instant, only on the waits and holds open then, so the trace is cut into ``chunks`` equal
  stretches, every interval goes to each stretch it overlaps, cut to it, and the stretches'
  results add up (integers exactly; blame, a float, to within rounding before it is rounded
  to whole ns). A stretch is the memory one worker needs, not the trace;
- per task: SQL (``sql/task_metrics.sql``) over the views and the shares.

Only per-resource figures come back to the driver, where ``metrics_resources`` is put
together by the same function as on one node.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gigi.diagnosis._metrics import (
    BLAME_HOLDERS,
    BLAME_WAITS,
    HELD_UNTIL,
    WINDOWS,
    _codes,
    outstanding_table,
    resource_table,
)
from gigi.lake._scope import SQL_DIR, LakeScope
from gigi.lake._spark import materialize
from gigi.lake._transpile import to_spark
from gigi.metrics.totals import TOTALS

PEAK_BLOCK = 1 << 22  # events per block of the running sum
CHUNK_EVENTS = 1 << 21  # events per stretch of time of the sweeps, about


def lake_sql(name: str, **values) -> str:
    text = (SQL_DIR / f"{name}.sql").read_text().rstrip().rstrip(";")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    return text


def chunk_count(events: int) -> int:
    """Stretches of time the sweeps are cut into: at least 4 (so the cutting is always
    exercised), about one per CHUNK_EVENTS events."""
    return int(min(4096, max(4, events // CHUNK_EVENTS + 1)))


def compute(spark, scope: LakeScope, stages, chunks: int | None = None) -> None:
    """Register the ``metrics_*`` views on ``spark`` for the trace views already there."""
    sql = lambda text: spark.sql(to_spark(text))  # noqa: E731
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
        materialize(_blame(spark, sql, names, start, span, chunks)).createOrReplaceTempView(
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
        _register(spark, "metrics_holds", _distribution(sql, names, "holds", "hold_ns"))
    with stages("waits: wait-time distribution"):
        _register(spark, "metrics_waits", _distribution(sql, names, "waits", "dur"))
    with stages("tasks: per-task shares"):
        shares = _shares(spark, sql, names, start, span, chunks)
        shares.createOrReplaceTempView("task_shares_by_chunk")
        # computed here, not by the first detector
        tasks = materialize(sql(lake_sql("task_metrics", shares="task_shares_by_chunk")))
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


def _distribution(sql, names: list[str], view: str, column: str) -> pa.Table:
    """``metrics_holds`` or ``metrics_waits`` (the count column named after the view)."""
    durations = f"(SELECT resource, {column} AS ns FROM {view})"
    code = {n: i for i, n in enumerate(names)}
    quant = np.zeros((len(names), 5), np.int64)
    for row in sql(lake_sql("distribution", durations=durations)).collect():
        quant[code[row["resource"]]] = [row[c] for c in ("n", "p50_ns", "p90_ns", "p99_ns")] + [
            row["max_ns"]
        ]
    hist = np.zeros((len(names), 64), np.int64)
    for row in sql(lake_sql("distribution_buckets", durations=durations)).collect():
        hist[code[row["resource"]], int(row["bucket"])] = row["n"]
    return pa.table(
        {
            "resource": names,
            view: quant[:, 0],
            "p50_ns": quant[:, 1],
            "p90_ns": quant[:, 2],
            "p99_ns": quant[:, 3],
            "max_ns": quant[:, 4],
            "histogram": pa.array(hist.tolist(), pa.list_(pa.int64())),
        }
    )


def _chunked(sql, union_sql: str, start: int, span: int, chunks: int):
    """The rows of ``union_sql`` (with ``s`` and ``e``: an interval ``[s, e)``, or ``s = e``
    for an instant), each once per stretch of time it overlaps, with the stretch's number
    ``chunk``. Stretch k is ``[start + ceil(k span / chunks), start + ceil((k+1) span /
    chunks))``, the first open to the past and the last to the future."""
    of = lambda x: (  # noqa: E731
        f"least(greatest(({x} - {start}) * {chunks} // {span}, 0), {chunks - 1})"
    )
    return sql(
        f"""SELECT u.*, unnest(generate_series({of("s")}, {of("greatest(e - 1, s)")})) AS chunk
            FROM ({union_sql}) AS u"""
    )


def _bounds(chunk: int, start: int, span: int, chunks: int) -> tuple[int, int]:
    lo = start + -(-chunk * span // chunks) if chunk > 0 else -(2**63)
    hi = start + -(-(chunk + 1) * span // chunks) if chunk < chunks - 1 else 2**63 - 1
    return lo, hi


def _blame(spark, sql, names: list[str], start: int, span: int, chunks: int):
    from pyspark.sql import functions as F

    union = f"""
        SELECT 0 AS src, resource, object, task, ts AS s, end_ts AS e, 1 AS weight, seq
        FROM ({BLAME_WAITS}) WHERE end_ts > ts
        UNION ALL
        SELECT 1, resource, object, task, start, "end", amount, 0
        FROM ({BLAME_HOLDERS}) WHERE "end" > start AND amount > 0"""
    rows = _chunked(sql, union, start, span, chunks)
    schema = (
        "wait_seq long, resource string, object long, victim long, culprit long, "
        "culprit_resource string, depth long, blame_ns double"
    )
    sweep = _blame_sweep(names, start, span, chunks)
    parts = rows.groupBy("chunk").applyInArrow(sweep, schema)
    keys = [c for c in parts.columns if c != "blame_ns"]
    summed = parts.groupBy(*keys).agg(F.sum("blame_ns").alias("blame_ns"))
    return summed.where("blame_ns > 0").select(
        *keys, F.bround("blame_ns", 0).cast("long").alias("blame_ns")
    )


def _blame_sweep(names: list[str], start: int, span: int, chunks: int):
    def sweep(table: pa.Table) -> pa.Table:
        from gigi.metrics.attribution import Intervals, attribute_fast

        chunk = table.column("chunk")[0].as_py()
        lo, hi = _bounds(chunk, start, span, chunks)
        col = lambda name: table.column(name).to_numpy().astype(np.int64)  # noqa: E731
        src, s, e = col("src"), np.maximum(col("s"), lo), np.minimum(col("e"), hi)
        res = _codes(table.column("resource"), names)

        def part(mask):
            return Intervals(
                res[mask],
                col("task")[mask],
                s[mask],
                e[mask],
                col("weight")[mask],
                col("seq")[mask],
                col("object")[mask],
            )

        b = attribute_fast(part(src == 0), part(src == 1))
        labels = pa.array(names, pa.string())
        return pa.table(
            {
                "wait_seq": b.wait_seq,
                "resource": labels.take(pa.array(b.resource)),
                "object": b.object,
                "victim": b.victim,
                "culprit": b.culprit,
                "culprit_resource": labels.take(pa.array(b.culprit_resource)),
                "depth": b.depth.astype(np.int64),
                "blame_ns": b.blame_ns.astype(np.float64),
            }
        )

    return sweep


def _shares(spark, sql, names: list[str], start: int, span: int, chunks: int):
    union = f"""
        SELECT 0 AS src, resource, task, ts AS s, end_ts AS e, 1 AS amount FROM waits
        UNION ALL
        SELECT 1, h.resource, h.task, h.acquire_ts, {HELD_UNTIL}, h.amount
        FROM holds AS h LEFT JOIN tasks AS t USING (task) WHERE h.task IS NOT NULL
        UNION ALL
        SELECT 2, resource, task, ts, ts, amount FROM events WHERE kind = 2"""
    rows = _chunked(sql, union, start, span, chunks)
    schema = "resource string, task long, held long, used long"
    return rows.groupBy("chunk").applyInArrow(_shares_sweep(names, start, span, chunks), schema)


def _shares_sweep(names: list[str], start: int, span: int, chunks: int):
    def sweep(table: pa.Table) -> pa.Table:
        from gigi.diagnosis._metrics import _factorize
        from gigi.metrics.tasks import task_shares

        chunk = table.column("chunk")[0].as_py()
        lo, hi = _bounds(chunk, start, span, chunks)
        col = lambda name: table.column(name).to_numpy().astype(np.int64)  # noqa: E731
        src, task, amount = col("src"), col("task"), col("amount")
        s, e = col("s"), col("e")
        clipped_s, clipped_e = np.maximum(s, lo), np.minimum(e, hi)
        n_res = max(len(names), 1)
        res = _codes(table.column("resource"), names)
        uniq_task, task_code = _factorize(task)
        uniq_key, pair = _factorize(task_code * n_res + res)
        w, h, u = src == 0, src == 1, src == 2
        held, used = task_shares(
            {"pair": pair[w], "start": clipped_s[w], "end": clipped_e[w]},
            {"pair": pair[h], "start": clipped_s[h], "end": clipped_e[h], "amount": amount[h]},
            {"pair": pair[u], "ts": s[u], "amount": amount[u]},
            uniq_key % n_res,
            len(names),
        )
        return pa.table(
            {
                "resource": pa.array(names, pa.string()).take(pa.array(uniq_key % n_res)),
                "task": uniq_task[uniq_key // n_res].astype(np.int64),
                "held": np.asarray(held, np.int64),
                "used": np.asarray(used, np.int64),
            }
        )

    return sweep
