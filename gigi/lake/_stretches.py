"""The sweeps cut into stretches of time, for any engine that can run SQL and hand over the
rows of one stretch at a time: Spark (``applyInArrow``) and DuckDB at scale.

Both sweeps (the cascaded blame and the task shares) depend, at any instant, only on the waits
and holds open then. So the trace is cut into ``chunks`` equal stretches, every interval goes
to each stretch it overlaps, cut to it, and the stretches' results add up: integers exactly;
blame, a float, to within rounding, before it is rounded to whole ns (half to even). A
stretch, not the trace, is the memory a sweep needs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from gigi.diagnosis._metrics import BLAME_HOLDERS, BLAME_WAITS, HELD_UNTIL, _codes
from gigi.lake._scope import SQL_DIR
from gigi.metrics.attribution import read_every

CHUNK_EVENTS = 1 << 21  # events per stretch of time of the sweeps, about
# task_metrics.sql over the views themselves
VIEWS = {"waits": "waits", "holds": "holds", "events": "events"}

# the intervals of the blame sweep: waits (src 0, with their seq) and what holds a resource
BLAME_UNION = f"""
    SELECT 0 AS src, resource, object, task, ts AS s, end_ts AS e, 1 AS weight, seq
    FROM ({BLAME_WAITS}) WHERE end_ts > ts
    UNION ALL
    SELECT 1, resource, object, task, start, "end", amount, 0
    FROM ({BLAME_HOLDERS}) WHERE "end" > start AND amount > 0"""
# the intervals and instants of the task-shares sweep: waits (0), holds (1), USEs (2)
SHARES_UNION = f"""
    SELECT 0 AS src, resource, task, ts AS s, end_ts AS e, 1 AS amount FROM waits
    UNION ALL
    SELECT 1, h.resource, h.task, h.acquire_ts, {HELD_UNTIL}, h.amount
    FROM holds AS h LEFT JOIN tasks AS t USING (task) WHERE h.task IS NOT NULL
    UNION ALL
    SELECT 2, resource, task, ts, ts, amount FROM events WHERE kind = 2"""
BLAME_SCHEMA = (
    "wait_seq long, resource string, object long, victim long, culprit long, "
    "culprit_resource string, depth long, blame_ns double"
)
SHARES_SCHEMA = "resource string, task long, held long, used long"


def lake_sql(name: str, **values) -> str:
    text = (SQL_DIR / f"{name}.sql").read_text().rstrip().rstrip(";")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    return text


def chunk_count(events: int) -> int:
    """Stretches of time the sweeps are cut into: at least 4 (so the cutting is always
    exercised), about one per CHUNK_EVENTS events."""
    return int(min(4096, max(4, events // CHUNK_EVENTS + 1)))


def chunked(union_sql: str, start: int, span: int, chunks: int) -> str:
    """The rows of ``union_sql`` (with ``s`` and ``e``: an interval ``[s, e)``, or ``s = e``
    for an instant), each once per stretch of time it overlaps, with the stretch's number
    ``chunk``. Stretch k is ``[start + ceil(k span / chunks), start + ceil((k+1) span /
    chunks))``, the first open to the past and the last to the future."""
    of = lambda x: _stretch_of(x, start, span, chunks)  # noqa: E731
    return f"""SELECT u.*, unnest(generate_series({of("s")}, {of("greatest(e - 1, s)")})) AS chunk
            FROM ({union_sql}) AS u"""


def chunked_holders_merged(union_sql: str, start: int, span: int, chunks: int) -> str:
    """``chunked`` for the blame's rows: a holder's row (``src`` 1) goes only to the
    stretches where it begins and ends. In a stretch it covers whole, its units are added to
    those of the other holds of the same (resource, object, task) that cover it, in one row
    per stretch (``s`` and ``e`` past the stretch's bounds, which the sweep cuts them to):
    the sweep reads only how many units each task holds of each (resource, object), so the
    blame is the same, and a hold never released, open to the trace's end, no longer costs a
    row in every stretch after it. (DuckDB's SQL.)"""
    of = lambda x: _stretch_of(x, start, span, chunks)  # noqa: E731
    return f"""
        WITH u AS (SELECT *, {of("s")} AS c0, {of("greatest(e - 1, s)")} AS c1
                   FROM ({union_sql})),
        steps AS (  -- the units a (resource, object, task) covers whole from stretch k on
            SELECT resource, object, task, k, CAST(sum(d) AS BIGINT) AS d FROM (
                SELECT resource, object, task, c0 + 1 AS k, weight AS d
                FROM u WHERE src = 1 AND c1 - c0 >= 2
                UNION ALL
                SELECT resource, object, task, c1 AS k, -weight AS d
                FROM u WHERE src = 1 AND c1 - c0 >= 2)
            GROUP BY ALL),
        levels AS (
            SELECT resource, object, task, k,
                   sum(d) OVER (PARTITION BY resource, object, task ORDER BY k) AS w,
                   lead(k) OVER (PARTITION BY resource, object, task ORDER BY k) AS next_k
            FROM steps)
        SELECT * EXCLUDE (c0, c1), unnest(generate_series(c0, c1)) AS chunk
        FROM u WHERE src <> 1
        UNION ALL
        SELECT * EXCLUDE (c0, c1), c0 AS chunk FROM u WHERE src = 1
        UNION ALL
        SELECT * EXCLUDE (c0, c1), c1 AS chunk FROM u WHERE src = 1 AND c1 > c0
        UNION ALL BY NAME
        SELECT 1 AS src, resource, object, task, CAST({start} - 1 AS BIGINT) AS s,
               CAST({start + span + 1} AS BIGINT) AS e, CAST(w AS BIGINT) AS weight,
               0 AS seq, unnest(generate_series(k, next_k - 1)) AS chunk
        FROM levels WHERE w > 0 AND next_k IS NOT NULL"""


def _stretch_of(x: str, start: int, span: int, chunks: int) -> str:
    """SQL for the stretch that the time ``x`` falls in (see ``chunked``)."""
    return f"least(greatest(({x} - {start}) * {chunks} // {span}, 0), {chunks - 1})"


def bounds(chunk: int, start: int, span: int, chunks: int) -> tuple[int, int]:
    """Stretch ``chunk``'s ``[lo, hi)`` (see ``chunked``)."""
    lo = start + -(-chunk * span // chunks) if chunk > 0 else -(2**63)
    hi = start + -(-(chunk + 1) * span // chunks) if chunk < chunks - 1 else 2**63 - 1
    return lo, hi


def blame_sweep(names: list[str], start: int, span: int, chunks: int, events: int):
    """The blame of one stretch's rows of BLAME_UNION (``chunk`` as ``chunked`` adds), cut to
    it: partial rows, whose blame_ns add up over the stretches. ``events``: the trace's, for
    how often its fractions are read (``read_every``; a stretch reads those of the waits
    running into it again at its start)."""
    every = read_every(events, span)

    def sweep(table: pa.Table) -> pa.Table:
        from gigi.metrics.attribution import Intervals, attribute_fast

        chunk = table.column("chunk")[0].as_py()
        lo, hi = bounds(chunk, start, span, chunks)
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

        b = attribute_fast(part(src == 0), part(src == 1), every)
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


def shares_sweep(names: list[str], start: int, span: int, chunks: int):
    """The task shares of one stretch's rows of SHARES_UNION, cut to it: (resource, task,
    held, used) rows, which add up over the stretches."""

    def sweep(table: pa.Table) -> pa.Table:
        from gigi.diagnosis._metrics import _factorize
        from gigi.metrics.tasks import task_shares

        chunk = table.column("chunk")[0].as_py()
        lo, hi = bounds(chunk, start, span, chunks)
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


def distribution(rows, names: list[str], view: str, column: str) -> pa.Table:
    """``metrics_holds`` or ``metrics_waits`` (the count column named after the view) by
    ``sql/distribution.sql`` and ``sql/distribution_buckets.sql``; ``rows(text)`` runs a query
    on the engine and gives its rows as mappings."""
    durations = f"(SELECT resource, {column} AS ns FROM {view})"
    code = {n: i for i, n in enumerate(names)}
    quant = np.zeros((len(names), 5), np.int64)
    for row in rows(lake_sql("distribution", durations=durations)):
        quant[code[row["resource"]]] = [row[c] for c in ("n", "p50_ns", "p90_ns", "p99_ns")] + [
            row["max_ns"]
        ]
    hist = np.zeros((len(names), 64), np.int64)
    for row in rows(lake_sql("distribution_buckets", durations=durations)):
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
