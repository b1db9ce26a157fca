-- wait_summary: per resource, how much time tasks spent waiting for it.
SELECT
    -- resource: resource class
    resource,
    -- waits: WAIT events
    count(*) AS waits,
    -- open_waits: waits still open at the trace end (counted to the end)
    count(*) FILTER (WHERE open) AS open_waits,
    -- tasks: distinct tasks that waited
    count(DISTINCT task) AS tasks,
    -- wait_ms: total time waiting, ms
    round(sum(dur) / 1e6, 3) AS wait_ms,
    -- p50_us: median wait, us
    round(quantile_cont(dur, 0.5) / 1e3, 1) AS p50_us,
    -- p99_us: 99th percentile wait, us
    round(quantile_cont(dur, 0.99) / 1e3, 1) AS p99_us,
    -- max_us: longest wait, us
    round(max(dur) / 1e3, 1) AS max_us
FROM waits
GROUP BY resource
ORDER BY sum(dur) DESC, resource;
