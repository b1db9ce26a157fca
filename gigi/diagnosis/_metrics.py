"""The ``metrics_*`` tables: kernels run over one trace's columns, registered in DuckDB.

- ``metrics_resources``: one row per resource: totals, utilization, rate, growth, blame.
- ``metrics_outstanding``: per resource and time window: outstanding at its end, ACQUIREs in it.
- ``metrics_holds``: per resource, hold-time quantiles and log2-bucket histogram.
- ``metrics_waits``: per resource, wait-time quantiles and log2-bucket histogram.
- ``metrics_tasks``: per resource and task: waits, holds, utilization, and its share of the
  holds and USEs made while other tasks waited.
- ``metrics_blame``: per victim WAIT, the tasks it is blamed on (see gigi.metrics.attribution).

Each column is described in ``METRICS_DOC``; ``gigi-query queries`` and the README list them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gigi.diagnosis._stages import Stages
from gigi.metrics.attribution import Intervals, attribute_fast, read_every
from gigi.metrics.growth import growth
from gigi.metrics.holdtime import hold_time
from gigi.metrics.tasks import task_shares
from gigi.metrics.totals import TOTALS, Totals

WINDOWS = 50
# Until when a hold keeps others out, for the blame and the shares: a hold that outlives its
# task has most often lost its RELEASE (or been paired with a stranger's by the lost one), so
# it ends with its task; a real leak is the leak detector's finding.
HELD_UNTIL = """CASE WHEN h.outlived_task
        THEN greatest(least(h.acquire_ts + h.hold_ns, t."end"), h.acquire_ts)
        ELSE h.acquire_ts + h.hold_ns END"""

METRICS_DOC = {
    "metrics_resources": {
        "resource": "resource class",
        "capacity": "units it can hold, null when unknown",
        "sharing": "exclusive, shared, pool or log; null when unsaid",
        "waits": "WAIT events",
        "wait_ns": "time waited in all, ns (open waits to the trace end)",
        "wait_max_ns": "longest wait, ns",
        "acquires": "ACQUIRE events",
        "acquired": "units acquired",
        "uses": "USE events",
        "used": "units used",
        "releases": "RELEASE events",
        "released": "units released",
        "peak": "most units outstanding at once",
        "final": "units outstanding at the trace end",
        "utilization": "used / acquired units; null when nothing was acquired",
        "acquire_rate_per_s": "ACQUIREs per second over the trace",
        "growth_base": "lowest outstanding before the peak (window ends)",
        "growth_rise": "peak - base over the growth episode, units",
        "growth_slope_per_s": "rise per second over the growth episode",
        "growth_rising_share": "share of the episode's windows in which outstanding rose",
        "growth_span_share": "the episode's length as a share of the trace",
        "growth_start_ts": "when the growth episode began, ns",
        "growth_peak_ts": "when it peaked, ns",
        "growth_noise": "how far outstanding could drift by lost events alone over the "
        "episode, units: the square root of the sum of its ACQUIREs' and RELEASEs' squared "
        "units (twice the widest spread any rate of loss could give)",
        "growth_plateau": "true when outstanding levelled off (warm-up, not growth)",
        "growth_sustained": "true when it rose steadily without levelling off",
        "blamed_ns": "wait time blamed on other tasks, ns",
        "unattributed_ns": "wait time no task held the resource for, ns",
        "victims": "tasks with wait time blamed on others",
        "trace_ns": "length of the trace, ns",
    },
    "metrics_outstanding": {
        "resource": "resource class",
        "window_index": "window number, 0-based",
        "window_end": "end of the window, ns",
        "outstanding": "units outstanding at the window's end",
        "acquires": "ACQUIREs in the window",
    },
    "metrics_holds": {
        "resource": "resource class",
        "holds": "paired holds (open ones counted to the trace end)",
        "p50_ns": "median hold time, ns",
        "p90_ns": "90th percentile hold time, ns",
        "p99_ns": "99th percentile hold time, ns",
        "max_ns": "longest hold, ns",
        "histogram": "holds per log2 bucket: bucket b counts 2^(b-1) <= ns < 2^b (b = 0: 0 ns)",
    },
    "metrics_waits": {
        "resource": "resource class",
        "waits": "WAIT events (open ones counted to the trace end)",
        "p50_ns": "median wait, ns",
        "p90_ns": "90th percentile wait, ns",
        "p99_ns": "99th percentile wait, ns",
        "max_ns": "longest wait, ns",
        "histogram": "waits per log2 bucket: bucket b counts 2^(b-1) <= ns < 2^b (b = 0: 0 ns)",
    },
    "metrics_tasks": {
        "resource": "resource class",
        "task": "the task",
        "waits": "its WAITs for the resource",
        "wait_ns": "time it waited, ns (open waits to the trace end)",
        "wait_max_ns": "its longest wait, ns",
        "wait_p50_ns": "its median wait, ns",
        "wait_p99_ns": "99th percentile of its waits, ns",
        "acquires": "its ACQUIREs",
        "acquired": "units it acquired",
        "used": "units it used",
        "utilization": "used / acquired units; null when it acquired nothing",
        "holds": "its holds (by the pairing rule; open ones to the trace end)",
        "hold_ns": "time its holds lasted, ns, summed",
        "held_while_others_waited": "unit-ns of its holds at instants when another task was "
        "waiting for the resource (a hold that outlived its task counted until the task ended)",
        "hold_share": "its share of the resource's held_while_others_waited; null when none",
        "used_while_others_waited": "units it used while another task was waiting",
        "use_share": "its share of the resource's used_while_others_waited; null when none",
    },
    "metrics_blame": {
        "wait_seq": "events.seq of the victim WAIT",
        "resource": "resource the victim waited for",
        "object": "object the victim waited for (0: any unit of the resource)",
        "victim": "task that waited",
        "culprit": "task the wait is blamed on",
        "culprit_resource": "resource the culprit held (differs along a chain)",
        "depth": "links down the chain of waits (0: the culprit held what the victim waited for)",
        "blame_ns": "wait time blamed on the culprit, ns",
    },
}


BLAME_WAITS = "SELECT resource, object, task, ts, end_ts, seq FROM waits"
# The intervals the blame is passed to: holds, and what else keeps a resource from others.
BLAME_HOLDERS = f"""
-- a task that has ended blocks nobody (see HELD_UNTIL)
SELECT h.resource, h.object, h.task, h.acquire_ts AS start, {HELD_UNTIL} AS "end",
       h.amount
FROM holds AS h LEFT JOIN tasks AS t USING (task) WHERE h.task IS NOT NULL
UNION ALL
-- a RELEASE whose ACQUIRE is not in the trace (before it began, or lost): the task
-- that released it held it, at most since that task began
SELECT h.resource, h.object, h.release_task, greatest(h.acquire_ts, t.start),
       h.release_ts, h.amount
FROM holds AS h JOIN tasks AS t ON t.task = h.release_task
WHERE h.began_before_trace AND t.start IS NOT NULL
UNION ALL
-- a task that uses an object again and again holds it in between, whatever events
-- of its hold were lost
SELECT resource, object, task, min(ts), max(ts + coalesce(dur, 0)), 1
FROM events WHERE kind = 2 AND object <> 0
GROUP BY resource, object, task HAVING count(*) >= 2
UNION ALL
SELECT resource, object, task, ts, ts + dur, amount FROM events WHERE kind = 2 AND dur > 0
UNION ALL
-- on a resource that admits one holder at a time, a task that used or released an object
-- without any ACQUIRE of it in the trace held it all the same (its ACQUIRE was lost): from
-- its first USE of it (or, with none, a typical hold of the resource before its RELEASE),
-- never before the end of its last wait for it nor before the task began, to its last
-- RELEASE of it, or to the task's end when it has none (a lock is kept to the end)
SELECT resource, object, task, least(start, "end"), "end", 1
FROM (
SELECT x.resource, x.object, x.task,
       greatest(coalesce(t.start, x.first_ts), coalesce(x.waited_until, t.start, x.first_ts),
                coalesce(x.first_use, x.released_ts - CAST(coalesce(m.typical, 0) AS BIGINT),
                         x.first_ts))
           AS start,
       coalesce(x.released_ts, greatest(t."end", x.last_ts), x.last_ts) AS "end"
FROM (
    SELECT e.resource, e.object, e.task,
           min(e.ts) FILTER (WHERE e.kind IN (2, 3)) AS first_ts,
           max(e.ts) FILTER (WHERE e.kind IN (2, 3)) AS last_ts,
           min(e.ts) FILTER (WHERE e.kind = 2) AS first_use,
           max(e.ts) FILTER (WHERE e.kind = 3) AS released_ts,
           max(e.ts + coalesce(e.dur, 0)) FILTER (WHERE e.kind = 0) AS waited_until
    FROM events AS e
    JOIN resources AS r ON r.resource = e.resource
        AND (r.sharing = 'exclusive' OR r.capacity = 1)
    WHERE e.object <> 0
    GROUP BY e.resource, e.object, e.task
    HAVING count(*) FILTER (WHERE e.kind = 1) = 0
        AND count(*) FILTER (WHERE e.kind IN (2, 3)) > 0
) AS x
LEFT JOIN tasks AS t ON t.task = x.task
LEFT JOIN (SELECT resource, median(hold_ns) AS typical FROM holds
           WHERE NOT open AND NOT began_before_trace GROUP BY resource) AS m
    ON m.resource = x.resource
)
"""


def _codes(column: pa.ChunkedArray | pa.Array, names: list[str]) -> np.ndarray:
    lookup = {n: i for i, n in enumerate(names)}
    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    local = np.array([lookup[v] for v in enc.dictionary.to_pylist()], dtype=np.int64)
    return local[enc.indices.to_numpy()] if len(local) else np.zeros(len(column), np.int64)


def compute(con, stages: Stages | None = None) -> dict[str, pa.Table]:
    """Run the kernels over the trace behind ``con`` and register the ``metrics_*`` tables
    (each stage timed into ``stages`` when given)."""
    stage = stages or Stages()
    resources = con.sql("SELECT resource, capacity, sharing FROM resources ORDER BY resource")
    resources = resources.to_arrow_table()
    names = resources.column("resource").to_pylist()
    start, end, events = con.sql('SELECT start, "end", events FROM trace_info').fetchall()[0]
    with stage("totals: events, outstanding, rates"):
        totals, level, rate, square = _totals(con, names, start, end)
    with stage("blame: attribution over waits and holds"):
        blame = _blame(con, names, read_every(events, max(end - start, 1)))
    per_res = {
        row["resource"]: row
        for row in blame.group_by("resource")
        .aggregate([("blame_ns", "sum"), ("victim", "count_distinct")])
        .to_pylist()
    }
    metrics_resources = resource_table(resources, start, end, totals, level, rate, square, per_res)
    with stage("holds: hold-time distribution"):
        holds = _distribution(con, names, "holds", "hold_ns")
    with stage("waits: wait-time distribution"):
        waits = _distribution(con, names, "waits", "dur")
    with stage("tasks: per-task shares"):
        per_task = _per_task(con, names)
    tables = {
        "metrics_resources": metrics_resources,
        "metrics_holds": holds,
        "metrics_outstanding": outstanding_table(names, start, end, level, rate),
        "metrics_waits": waits,
        "metrics_tasks": per_task,
        "metrics_blame": blame,
    }
    for name, table in tables.items():
        con.register(name, table)
    return tables


def resource_table(
    resources: pa.Table,
    start: int,
    end: int,
    totals: np.ndarray,
    level: np.ndarray,
    rate: np.ndarray,
    square: np.ndarray,
    per_res: dict[str, dict],
) -> pa.Table:
    """``metrics_resources`` from the totals kernel's result (per resource: ``totals``,
    outstanding at each window's end ``level``, ACQUIREs per window ``rate``, squared units
    of ACQUIREs and RELEASEs per window ``square``) and the blame per resource (``per_res``:
    ``blame_ns_sum``, ``victim_count_distinct``); the rows follow ``resources``.

    The growth episode's noise: each lost ACQUIRE lowers the running sum by its units, each
    lost RELEASE raises it by its own, so what lost events alone could add over the episode
    is a random walk. When a share p of the events is lost, its spread is the square root of
    p(1-p) times the summed squared units of the ACQUIREs and RELEASEs; p(1-p) is at most a
    quarter, so the noise is twice the widest spread any rate of loss could give. A log
    purged 512 records at a time drifts 256 times as far per lost purge as per lost append
    of 2."""
    names = resources.column("resource").to_pylist()
    span = max(end - start, 1)
    cols: dict[str, list] = {c: [] for c in METRICS_DOC["metrics_resources"]}
    window_ts = start + (np.arange(1, WINDOWS + 1) * span) // WINDOWS
    for r, name in enumerate(names):
        t = dict(zip(TOTALS, totals[r].tolist(), strict=True))
        g = growth(level[r])
        mine = per_res.get(name, {"blame_ns_sum": 0, "victim_count_distinct": 0})
        cols["resource"].append(name)
        cols["capacity"].append(resources.column("capacity")[r].as_py())
        cols["sharing"].append(resources.column("sharing")[r].as_py())
        for key in TOTALS:
            cols[key].append(t[key])
        cols["utilization"].append(t["used"] / t["acquired"] if t["acquired"] else None)
        cols["acquire_rate_per_s"].append(t["acquires"] / (span / 1e9))
        cols["growth_base"].append(g.base)
        cols["growth_rise"].append(g.rise)
        episode_ns = max((g.peak_window - g.start_window) * span / WINDOWS, span / WINDOWS)
        cols["growth_slope_per_s"].append(g.rise / (episode_ns / 1e9))
        cols["growth_rising_share"].append(g.rising_share)
        cols["growth_span_share"].append(g.span_share)
        cols["growth_start_ts"].append(int(window_ts[g.start_window]))
        cols["growth_peak_ts"].append(int(window_ts[g.peak_window]))
        squares = float(square[r, g.start_window : g.peak_window + 1].sum())  # the episode's
        cols["growth_noise"].append(float(np.sqrt(squares)))  # 2 * sqrt(squares / 4)
        cols["growth_plateau"].append(g.plateau)
        cols["growth_sustained"].append(g.sustained)
        blamed = int(mine["blame_ns_sum"] or 0)
        cols["blamed_ns"].append(blamed)
        cols["unattributed_ns"].append(max(t["wait_ns"] - blamed, 0))
        cols["victims"].append(int(mine["victim_count_distinct"]))
        cols["trace_ns"].append(span)
    return pa.table(cols)


def outstanding_table(
    names: list[str], start: int, end: int, level: np.ndarray, rate: np.ndarray
) -> pa.Table:
    """``metrics_outstanding`` from the totals kernel's ``level`` and ``rate``."""
    span = max(end - start, 1)
    window_ts = start + (np.arange(1, WINDOWS + 1) * span) // WINDOWS
    return pa.table(
        {
            "resource": np.repeat(np.array(names, dtype=object), WINDOWS).tolist(),
            "window_index": np.tile(np.arange(WINDOWS), len(names)),
            "window_end": np.tile(window_ts, len(names)),
            "outstanding": level.reshape(-1),
            "acquires": rate.reshape(-1),
        }
    )


def seq_ranges(con, position: str, relation: str, step: int) -> list[str]:
    """Conditions that cut ``relation`` into ranges of ``step`` values of ``position`` (a
    position in trace order, such as ``seq``), in order; none when it has no rows."""
    lo, hi = con.execute(f"SELECT min({position}), max({position}) FROM {relation}").fetchall()[0]
    if lo is None:
        return []
    return [f"{position} >= {a} AND {position} < {a + step}" for a in range(lo, hi + 1, step)]


def _totals(
    con, names: list[str], start: int, end: int, batch_rows: int = 1 << 20, seq_step: int = 0
):
    """The totals kernel over the events in trace order, one batch at a time. With
    ``seq_step``, the events are read and sorted that many positions in trace order at a time
    (a range of ``seq``, which the lake's files are sorted by, so each read skips the row
    groups outside it) instead of in one sort of the whole trace."""
    totals = Totals(len(names), start, end, WINDOWS)
    select = "SELECT kind, resource, amount, ts, coalesce(dur, -1) AS dur FROM events"
    ranges = seq_ranges(con, "seq", "events", seq_step) if seq_step else ["TRUE"]
    texts = [f"{select} WHERE {where} ORDER BY seq" for where in ranges]
    batches = (b for text in texts for b in con.sql(text).to_arrow_reader(batch_rows))
    for b in batches:
        totals.add(
            b.column(0).to_numpy(zero_copy_only=False),
            _codes(b.column(1), names),
            b.column(2).to_numpy(zero_copy_only=False),
            b.column(3).to_numpy(zero_copy_only=False),
            b.column(4).to_numpy(zero_copy_only=False),
        )
    return (*totals.result(), totals.square)


def _distribution(con, names: list[str], view: str, column: str) -> pa.Table:
    """``metrics_holds`` or ``metrics_waits``: the distribution kernel over one view's
    durations, per resource; the count column is named after the view."""
    t = con.sql(f"SELECT resource, {column} FROM {view}").to_arrow_table()
    counts, quant, hist = hold_time(
        _codes(t.column("resource"), names), t.column(column).to_numpy(), len(names)
    )
    return pa.table(
        {
            "resource": names,
            view: counts,
            "p50_ns": quant[:, 0],
            "p90_ns": quant[:, 1],
            "p99_ns": quant[:, 2],
            "max_ns": quant[:, 3],
            "histogram": pa.array(hist.tolist(), pa.list_(pa.int64())),
        }
    )


def task_inputs(con) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The waits, the holds (until HELD_UNTIL) and the ACQUIRE/USE events the per-task
    kernels read."""
    w = con.sql("SELECT resource, task, ts, end_ts, dur FROM waits").to_arrow_table()
    h = con.sql(f"""
        SELECT h.resource, h.task, h.acquire_ts, {HELD_UNTIL} AS end_ts, h.hold_ns, h.amount
        FROM holds AS h LEFT JOIN tasks AS t USING (task) WHERE h.task IS NOT NULL
    """).to_arrow_table()
    e = con.sql("SELECT resource, task, kind, ts, amount FROM events WHERE kind IN (1, 2)")
    return w, h, e.to_arrow_table()


def _per_task(con, names: list[str]) -> pa.Table:
    """``metrics_tasks``: bincounts per (resource, task) pair, the wait quantiles by the
    hold-time kernel keyed by pair, and the shares by ``gigi.metrics.tasks``."""
    w, h, e = task_inputs(con)
    # resource by resource: the pairs and the sweep never mix resources, and the sweep's
    # arrays are then the size of one resource's share of the trace
    parts = []
    for name in names:
        mine = [t.filter(pc.equal(t.column("resource"), name)) for t in (w, h, e)]
        if any(t.num_rows for t in mine):
            parts.append(_task_table(*mine, [name]))
    if not parts:
        return _task_table(w, h, e, names)
    return pa.concat_tables(parts)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values (first seen first) and each value's index among them, by hashing."""
    enc = pc.dictionary_encode(pa.array(values, pa.int64()))
    return enc.dictionary.to_numpy(), enc.indices.to_numpy().astype(np.int64)


def _task_table(w: pa.Table, h: pa.Table, e: pa.Table, names: list[str]) -> pa.Table:
    """``metrics_tasks`` from the waits, holds and ACQUIRE/USE events (the kernels' part)."""
    parts = [w, h, e]
    res = [_codes(t.column("resource"), names) for t in parts]
    task = np.concatenate([t.column("task").to_numpy() for t in parts])
    n_res = max(len(names), 1)
    lo = int(task.min()) if len(task) else 0
    if len(task) and int(task.max()) - lo < (2**63 - 1) // n_res:
        uniq_key, pair = _factorize((task - lo) * n_res + np.concatenate(res))
        task_of_pair = uniq_key // n_res + lo
    else:
        uniq_task, task_code = _factorize(task)
        uniq_key, pair = _factorize(task_code * n_res + np.concatenate(res))
        task_of_pair = uniq_task[uniq_key // n_res]
    n = len(uniq_key)
    pw, ph, pe = np.split(pair, np.cumsum([len(w), len(h)]))
    res_of_pair = uniq_key % n_res
    kind = e.column("kind").to_numpy()
    amount = e.column("amount").to_numpy()
    acq, use = kind == 1, kind == 2

    def count(p, weights=None):
        return np.bincount(p, weights, minlength=n).astype(np.int64)

    dur = w.column("dur").to_numpy()
    _, wq, _ = hold_time(pw, dur, n, histogram=False)  # quantiles, then the max
    held, used_during = task_shares(
        {"pair": pw, "start": w.column("ts").to_numpy(), "end": w.column("end_ts").to_numpy()},
        {
            "pair": ph,
            "start": h.column("acquire_ts").to_numpy(),
            "end": h.column("end_ts").to_numpy(),
            "amount": h.column("amount").to_numpy(),
        },
        {"pair": pe[use], "ts": e.column("ts").to_numpy()[use], "amount": amount[use]},
        res_of_pair,
        len(names),
    )
    acquired, used = count(pe[acq], amount[acq]), count(pe[use], amount[use])

    def share(x):
        total = np.bincount(res_of_pair, x, minlength=len(names))[res_of_pair]
        return pa.array(np.where(total > 0, x / np.maximum(total, 1), 0.0), mask=total == 0)

    return pa.table(
        {
            "resource": pa.array(names, pa.string()).take(res_of_pair),
            "task": task_of_pair.astype(np.int64),
            "waits": count(pw),
            "wait_ns": count(pw, dur),
            "wait_max_ns": wq[:, 3],
            "wait_p50_ns": wq[:, 0],
            "wait_p99_ns": wq[:, 2],
            "acquires": count(pe[acq]),
            "acquired": acquired,
            "used": used,
            "utilization": pa.array(
                np.where(acquired > 0, used / np.maximum(acquired, 1), 0.0), mask=acquired == 0
            ),
            "holds": count(ph),
            "hold_ns": count(ph, h.column("hold_ns").to_numpy()),
            "held_while_others_waited": held,
            "hold_share": share(held),
            "used_while_others_waited": used_during,
            "use_share": share(used_during),
        }
    )


def _blame(con, names: list[str], every: int = 0):
    waits = con.sql(BLAME_WAITS).to_arrow_table()
    holders = con.sql(BLAME_HOLDERS).to_arrow_table()
    w = Intervals(
        _codes(waits.column("resource"), names),
        waits.column("task").to_numpy(),
        waits.column("ts").to_numpy(),
        waits.column("end_ts").to_numpy(),
        np.ones(waits.num_rows, np.int64),
        waits.column("seq").to_numpy(),
        waits.column("object").to_numpy(),
    )
    h = Intervals(
        _codes(holders.column("resource"), names),
        holders.column("task").to_numpy(),
        holders.column("start").to_numpy(),
        holders.column("end").to_numpy(),
        holders.column("amount").to_numpy(),
        np.zeros(holders.num_rows, np.int64),
        holders.column("object").to_numpy(),
    )
    b = attribute_fast(w, h, every)
    labels = pa.array(names, pa.string())
    return pa.table(
        {
            "wait_seq": b.wait_seq,
            "resource": labels.take(b.resource),
            "object": b.object,
            "victim": b.victim,
            "culprit": b.culprit,
            "culprit_resource": labels.take(b.culprit_resource),
            "depth": b.depth,
            "blame_ns": np.round(b.blame_ns).astype(np.int64),
        }
    )
