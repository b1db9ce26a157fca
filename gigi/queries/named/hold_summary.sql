-- hold_summary: per resource, how long units were held and by whom they were released.
SELECT
    -- resource: resource class
    resource,
    -- holds: paired holds (parts of one ACQUIRE released in parts count apart)
    count(*) AS holds,
    -- open_holds: holds still open at the trace end
    count(*) FILTER (WHERE open) AS open_holds,
    -- outlived_task: holds whose acquiring task ended before they were released
    count(*) FILTER (WHERE outlived_task) AS outlived_task,
    -- released_by_other: holds released by a task other than the one that acquired them
    count(*) FILTER (WHERE release_task IS DISTINCT FROM task AND NOT open) AS released_by_other,
    -- units: units held, summed over holds
    sum(amount)::BIGINT AS units,
    -- p50_us: median hold time, us
    round(quantile_cont(hold_ns, 0.5) / 1e3, 1) AS p50_us,
    -- p99_us: 99th percentile hold time, us
    round(quantile_cont(hold_ns, 0.99) / 1e3, 1) AS p99_us,
    -- max_ms: longest hold, ms
    round(max(hold_ns) / 1e6, 3) AS max_ms
FROM holds
GROUP BY resource
ORDER BY resource;
