-- timeline: per resource and time window, the three series of a report plot: units
-- outstanding, tasks waiting and ACQUIREs per second. The trace is cut into $windows windows of
-- equal length; outstanding and waiting are time-weighted means over each window, so a level
-- held for half a window counts half.
-- param windows: number of windows the trace is cut into (default 200)
WITH bounds AS (
    SELECT start AS t_start, greatest("end" - start, 1) AS span, $windows::BIGINT AS n
    FROM trace_info
),
grid AS (
    SELECT
        r.resource,
        w.window_index,
        b.t_start + w.window_index * b.span // b.n AS w0,
        b.t_start + (w.window_index + 1) * b.span // b.n AS w1
    FROM (SELECT DISTINCT resource FROM events) AS r
    CROSS JOIN bounds AS b
    CROSS JOIN (SELECT unnest(range($windows::BIGINT)) AS window_index) AS w
),
-- outstanding as a step function: each level lasts from its event to the next one
levels AS (
    SELECT
        o.resource,
        o.ts AS t0,
        coalesce(
            lead(o.ts) OVER (PARTITION BY o.resource ORDER BY o.seq), b.t_start + b.span
        ) AS t1,
        o.outstanding
    FROM outstanding AS o, bounds AS b
),
held AS (
    SELECT
        g.resource,
        g.window_index,
        sum((least(l.t1, g.w1) - greatest(l.t0, g.w0))::DOUBLE * l.outstanding) AS unit_ns
    FROM grid AS g
    JOIN levels AS l ON l.resource = g.resource AND l.t0 < g.w1 AND l.t1 > g.w0
    GROUP BY ALL
),
waiting AS (
    SELECT
        g.resource,
        g.window_index,
        sum((least(w.end_ts, g.w1) - greatest(w.ts, g.w0))::DOUBLE) AS wait_ns
    FROM grid AS g
    JOIN waits AS w ON w.resource = g.resource AND w.ts < g.w1 AND w.end_ts > g.w0
    GROUP BY ALL
),
acquired AS (
    SELECT
        e.resource,
        least(b.n - 1, (e.ts - b.t_start) * b.n // b.span) AS window_index,
        count(*) AS acquires
    FROM events AS e, bounds AS b
    WHERE e.kind = 1
    GROUP BY ALL
)
SELECT
    -- resource: resource class
    g.resource,
    -- window_index: window number, 0-based
    g.window_index,
    -- window_start: when the window begins, ns
    g.w0 AS window_start,
    -- window_end: when it ends, ns
    g.w1 AS window_end,
    -- outstanding: units held, time-weighted mean over the window
    coalesce(h.unit_ns, 0) / greatest(g.w1 - g.w0, 1) AS outstanding,
    -- waiting: tasks waiting, time-weighted mean over the window
    coalesce(q.wait_ns, 0) / greatest(g.w1 - g.w0, 1) AS waiting,
    -- acquire_rate_per_s: ACQUIREs in the window per second
    coalesce(a.acquires, 0) * 1e9 / greatest(g.w1 - g.w0, 1) AS acquire_rate_per_s
FROM grid AS g
LEFT JOIN held AS h USING (resource, window_index)
LEFT JOIN waiting AS q USING (resource, window_index)
LEFT JOIN acquired AS a USING (resource, window_index)
ORDER BY g.resource, g.window_index;
