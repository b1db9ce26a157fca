-- hold_time: the SQL twin of gigi.metrics.holdtime.hold_time: per resource, holds, the 50th,
-- 90th and 99th percentile and the longest hold time, and the log2-bucket histogram.
WITH h AS (
    SELECT resource, list_sort(list(hold_ns)) AS sorted, count(*) AS n
    FROM holds GROUP BY resource
), b AS (
    SELECT resource, CASE WHEN hold_ns <= 0 THEN 0
                          ELSE least(63, floor(log2(hold_ns))::BIGINT + 1) END AS bucket,
           count(*) AS n
    FROM holds GROUP BY ALL
), hist AS (
    SELECT r.resource, list(coalesce(b.n, 0) ORDER BY i.i) AS histogram
    FROM resources AS r CROSS JOIN range(64) AS i(i)
    LEFT JOIN b ON b.resource = r.resource AND b.bucket = i.i
    GROUP BY r.resource
)
SELECT
    -- resource: resource class
    r.resource,
    -- holds: paired holds (open ones to the trace end)
    coalesce(h.n, 0) AS holds,
    -- p50_ns: median hold time, ns (the ceil(50 n / 100)-th smallest)
    coalesce(h.sorted[greatest((50 * h.n + 99) // 100, 1)], 0) AS p50_ns,
    -- p90_ns: 90th percentile hold time, ns
    coalesce(h.sorted[greatest((90 * h.n + 99) // 100, 1)], 0) AS p90_ns,
    -- p99_ns: 99th percentile hold time, ns
    coalesce(h.sorted[greatest((99 * h.n + 99) // 100, 1)], 0) AS p99_ns,
    -- max_ns: longest hold, ns
    coalesce(h.sorted[h.n], 0) AS max_ns,
    -- histogram: holds per log2 bucket (bucket b: 2^(b-1) <= ns < 2^b; bucket 0: 0 ns)
    hist.histogram
FROM resources AS r
JOIN hist USING (resource)
LEFT JOIN h USING (resource)
ORDER BY r.resource;
