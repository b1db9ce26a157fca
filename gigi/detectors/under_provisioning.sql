-- detector: under_provisioning
-- failure_mode: under_provisioning
-- meaning: tasks waited for the resource while it was full, and the waits are spread over
--   many tasks with no task to blame for most of them: the resource is too small for the load.
-- param underprov_min_wait: wait as a share of the trace's length before it counts (default 0.05)
-- param underprov_full_share: share of the trace the resource must spend near capacity (default 0.3)
-- A resource declared without a capacity (a scan cannot know a pool's size) is taken to hold
-- at most the most it was seen to hold: a pool that sat at that level while tasks waited
-- behaved as full. Logs, which have no such bound, need a declared capacity.
-- param underprov_max_dominance: the top culprit's share of the blame must stay below this (default 0.3)
WITH bound AS (
    SELECT resource, coalesce(capacity, peak) AS capacity, capacity IS NULL AS inferred
    FROM metrics_resources
    WHERE coalesce(capacity, peak) > 0 AND (capacity IS NOT NULL OR sharing IS DISTINCT FROM 'log')
), top AS (
    SELECT resource, max(ns) / sum(ns) AS top_share
    FROM (SELECT resource, culprit, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL)
    GROUP BY resource
), full_share AS (
    -- Share of the window ends at which the resource was (near) full, counted two ways: by
    -- the running sum of its events, and by the holds open then (each ended at its task's
    -- end); the second stays right when events were lost and the sum drifts.
    SELECT o.resource,
           greatest(
               avg(CASE WHEN o.outstanding >= 0.9 * m.capacity THEN 1.0 ELSE 0.0 END),
               avg(CASE WHEN coalesce(hw.units, 0) >= 0.75 * m.capacity THEN 1.0 ELSE 0.0 END))
               AS share
    FROM metrics_outstanding AS o
    JOIN bound AS m USING (resource)
    LEFT JOIN (
        SELECT o2.resource, o2.window_index, sum(h.amount) AS units
        FROM metrics_outstanding AS o2
        JOIN holds AS h ON h.resource = o2.resource AND h.task IS NOT NULL
            AND h.acquire_ts <= o2.window_end
            AND least(h.acquire_ts + h.hold_ns,
                      coalesce((SELECT t."end" FROM tasks AS t WHERE t.task = h.task),
                               h.acquire_ts + h.hold_ns)) > o2.window_end
        GROUP BY ALL
    ) AS hw ON hw.resource = o.resource AND hw.window_index = o.window_index
    GROUP BY o.resource
), waiters AS (
    SELECT resource, min_by(task, {'ns': -ns, 'task': task}, 100) AS victim_tasks,
           count(*) AS n
    FROM (SELECT resource, task, sum(dur) AS ns FROM waits GROUP BY ALL)
    GROUP BY resource
)
SELECT
    m.resource,
    least(1.0, m.wait_ns / (m.trace_ns * getvariable('underprov_min_wait') * 4.0))
        * least(1.0, f.share / getvariable('underprov_full_share'))
        * least(1.0, w.n / 3.0) AS score,
    []::BIGINT[] AS culprit_tasks,
    w.victim_tasks,
    to_json({
        'wait_ns': m.wait_ns, 'waiting_tasks': w.n, 'capacity': b.capacity,
        'capacity_inferred': b.inferred,
        'peak_outstanding': m.peak, 'share_of_time_near_capacity': round(f.share, 3),
        'top_culprit_share': round(coalesce(t.top_share, 0), 3),
        'utilization': m.utilization
    })::VARCHAR AS evidence,
    printf('%d tasks waited %.1f s for %s while it was near its capacity of %d%s for %.0f%% of the trace, with no task to blame: it is too small for the load',
           w.n, m.wait_ns / 1e9, m.resource, b.capacity,
           CASE WHEN b.inferred THEN ' (the most it held; none was declared)' ELSE '' END,
           100 * f.share) AS summary
FROM metrics_resources AS m
JOIN bound AS b USING (resource)
JOIN full_share AS f USING (resource)
JOIN waiters AS w USING (resource)
LEFT JOIN top AS t USING (resource)
WHERE m.wait_ns >= m.trace_ns * getvariable('underprov_min_wait')
    AND f.share >= getvariable('underprov_full_share')
    AND coalesce(t.top_share, 0) < getvariable('underprov_max_dominance');
