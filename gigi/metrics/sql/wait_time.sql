-- wait_time: the SQL twin of gigi.metrics.holdtime.hold_time run over the waits: per resource,
-- waits, the 50th, 90th and 99th percentile and the longest wait, and the log2 histogram.
WITH h AS (
    SELECT resource, list_sort(list(dur)) AS sorted, count(*) AS n
    FROM waits GROUP BY resource
), b AS (
    SELECT resource, CASE WHEN dur <= 0 THEN 0
                          ELSE least(63, floor(log2(dur))::BIGINT + 1) END AS bucket,
           count(*) AS n
    FROM waits GROUP BY ALL
), hist AS (
    SELECT r.resource, list(coalesce(b.n, 0) ORDER BY i.i) AS histogram
    FROM resources AS r CROSS JOIN range(64) AS i(i)
    LEFT JOIN b ON b.resource = r.resource AND b.bucket = i.i
    GROUP BY r.resource
)
SELECT
    -- resource: resource class
    r.resource,
    -- waits: WAIT events (open ones to the trace end)
    coalesce(h.n, 0) AS waits,
    -- p50_ns: median wait, ns (the ceil(50 n / 100)-th smallest)
    coalesce(h.sorted[greatest((50 * h.n + 99) // 100, 1)], 0) AS p50_ns,
    -- p90_ns: 90th percentile wait, ns
    coalesce(h.sorted[greatest((90 * h.n + 99) // 100, 1)], 0) AS p90_ns,
    -- p99_ns: 99th percentile wait, ns
    coalesce(h.sorted[greatest((99 * h.n + 99) // 100, 1)], 0) AS p99_ns,
    -- max_ns: longest wait, ns
    coalesce(h.sorted[h.n], 0) AS max_ns,
    -- histogram: waits per log2 bucket (bucket b: 2^(b-1) <= ns < 2^b; bucket 0: 0 ns)
    hist.histogram
FROM resources AS r
JOIN hist USING (resource)
LEFT JOIN h USING (resource)
ORDER BY r.resource;
