-- throughput: foreground tasks that ended in each time window of the trace.
-- param window_ms: width of a window, ms (default 100)
SELECT
    -- window_start_ms: start of the window, ms since the trace start
    (floor((t."end" - i.start) / (getvariable('window_ms') * 1e6)) * getvariable('window_ms'))::BIGINT
        AS window_start_ms,
    -- tasks_done: foreground tasks that ended in the window
    count(*) AS tasks_done,
    -- per_second: tasks_done scaled to one second
    round(count(*) * 1000.0 / getvariable('window_ms'), 1) AS per_second,
    -- p50_ms: median duration of those tasks, ms
    round(quantile_cont(t."end" - t.start, 0.5) / 1e6, 3) AS p50_ms
FROM tasks AS t, trace_info AS i
WHERE t."end" IS NOT NULL AND t.kind = 'foreground' AND t.start IS NOT NULL
GROUP BY 1
ORDER BY 1;
