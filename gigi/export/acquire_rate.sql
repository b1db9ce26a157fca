-- acquire_rate: ACQUIREs per second of each resource in windows of $window_ns from the trace
-- start; every window of the trace gets a row, 0 where nothing was acquired.
-- param window_ns: window length, ns (default 10000000)
WITH grid AS (
    SELECT r.resource, w.window_index
    FROM (SELECT DISTINCT resource FROM events WHERE kind = 1) AS r
    CROSS JOIN trace_info AS i
    CROSS JOIN (
        SELECT unnest(range(greatest(("end" - start) // $window_ns + 1, 1))) AS window_index
        FROM trace_info
    ) AS w
),
counted AS (
    SELECT resource, (e.ts - i.start) // $window_ns AS window_index, count(*) AS acquires
    FROM events AS e, trace_info AS i
    WHERE e.kind = 1
    GROUP BY ALL
)
SELECT
    -- resource: resource class
    g.resource,
    -- window_ts: when the window begins, ns
    i.start + g.window_index * $window_ns AS window_ts,
    -- acquires: ACQUIRE events in the window
    coalesce(c.acquires, 0) AS acquires,
    -- per_second: acquires / window length, per second
    coalesce(c.acquires, 0) * 1e9 / $window_ns AS per_second
FROM grid AS g
CROSS JOIN trace_info AS i
LEFT JOIN counted AS c USING (resource, window_index)
ORDER BY g.resource, window_ts;
