-- culprit_holds: when the given tasks held a resource, as intervals: each task's holds of
-- $resource merged where they overlap or lie less than $gap_ns apart (so a task's thousand short
-- holds in a burst read as one busy stretch). A hold still open at the trace end runs to it.
-- param resource: resource class (default none)
-- param tasks: task ids, a BIGINT list (default none)
-- param gap_ns: holds closer than this are merged, ns (default 0)
WITH spans AS (
    SELECT task, acquire_ts AS t0, acquire_ts + hold_ns AS t1
    FROM holds
    WHERE resource = $resource AND task IN (SELECT unnest($tasks::BIGINT[]))
),
marked AS (
    SELECT
        task,
        t0,
        t1,
        CASE
            WHEN t0 > max(t1) OVER (
                PARTITION BY task ORDER BY t0, t1
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) + $gap_ns THEN 1
            ELSE 0
        END AS begins
    FROM spans
),
islands AS (
    SELECT task, t0, t1, sum(begins) OVER (PARTITION BY task ORDER BY t0, t1) AS island
    FROM marked
)
SELECT
    -- task: the task that held the resource
    task,
    -- start_ts: when the first hold of the interval began, ns
    min(t0) AS start_ts,
    -- end_ts: when the last one ended, ns (the trace end for a hold still open)
    max(t1) AS end_ts,
    -- holds: holds merged into the interval
    count(*) AS holds
FROM islands
GROUP BY task, island
ORDER BY task, start_ts;
