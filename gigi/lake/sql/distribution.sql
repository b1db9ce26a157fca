-- distribution: the distribution kernel (gigi.metrics.holdtime) as a query an engine can
-- spread over its workers: per resource, the count of the durations in {{durations}}
-- (columns resource, ns), the ceil(P n / 100)-th smallest for P = 50, 90 and 99, and the
-- largest. Its buckets are distribution_buckets.
WITH d AS (
    SELECT resource, ns,
           row_number() OVER (PARTITION BY resource ORDER BY ns) AS k,
           count(*) OVER (PARTITION BY resource) AS n
    FROM {{durations}}
)
SELECT
    -- resource: resource class
    resource,
    -- n: durations
    any_value(n) AS n,
    -- p50_ns: median, ns
    max(CASE WHEN k = greatest((50 * n + 99) // 100, 1) THEN ns END) AS p50_ns,
    -- p90_ns: 90th percentile, ns
    max(CASE WHEN k = greatest((90 * n + 99) // 100, 1) THEN ns END) AS p90_ns,
    -- p99_ns: 99th percentile, ns
    max(CASE WHEN k = greatest((99 * n + 99) // 100, 1) THEN ns END) AS p99_ns,
    -- max_ns: longest, ns
    max(ns) AS max_ns
FROM d
GROUP BY resource;
