-- detector: leak
-- failure_mode: leak
-- meaning: units acquired by tasks that have ended were never released, and no other task
--   releases them either: they are lost to the resource (an object of it that is lost counts
--   once somebody waits for it, or for any unit of the resource: a pool's connections are
--   waited for as object 0). The resource's own count must agree
--   (units still outstanding at the end, not above its capacity by more than lost events
--   explain): releases lost from the trace also leave holds open, but they do not add up.
-- param leak_min_share: leaked units as a share of the capacity (or of the peak) (default 0.05)
-- param leak_min_age: how long before the trace end the task must have ended, share of the trace (default 0.1)
WITH last_acquire AS (
    -- per object: its last ACQUIRE
    SELECT resource, object, max(seq) AS seq FROM events
    WHERE kind = 1 AND object <> 0 GROUP BY ALL
), last_wait AS (
    -- per object: its last WAIT, and the last by a task other than that one's; together they
    -- tell whether a task other than any given one waited after a given point
    SELECT resource, object, max(seq) AS seq, arg_max(task, seq) AS task
    FROM waits WHERE object <> 0 GROUP BY ALL
), other_wait AS (
    SELECT w.resource, w.object, max(w.seq) AS seq
    FROM waits AS w JOIN last_wait AS l USING (resource, object)
    WHERE w.task <> l.task GROUP BY ALL
), last_any_wait AS (
    -- the same for waits for any unit of the resource (object 0): a pool's waiters
    SELECT resource, max(seq) AS seq, arg_max(task, seq) AS task
    FROM waits WHERE object = 0 GROUP BY ALL
), other_any_wait AS (
    SELECT w.resource, max(w.seq) AS seq
    FROM waits AS w JOIN last_any_wait AS l USING (resource)
    WHERE w.object = 0 AND w.task <> l.task GROUP BY ALL
), leaked AS (
    -- An object acquired again later (by anyone) was not really lost: its RELEASE was.
    SELECT h.resource, h.task, sum(h.amount) AS units,
           sum(h.amount) FILTER (WHERE h.object = 0) AS pooled_units, min(t."end") AS ended
    FROM holds AS h JOIN tasks AS t USING (task)
    CROSS JOIN trace_info AS i
    LEFT JOIN last_acquire AS la ON la.resource = h.resource AND la.object = h.object
    LEFT JOIN last_wait AS lw ON lw.resource = h.resource AND lw.object = h.object
    LEFT JOIN other_wait AS ow ON ow.resource = h.resource AND ow.object = h.object
    LEFT JOIN last_any_wait AS law ON law.resource = h.resource
    LEFT JOIN other_any_wait AS oaw ON oaw.resource = h.resource
    WHERE h.open AND h.outlived_task
        AND t."end" <= i."end" - getvariable('leak_min_age') * (i."end" - i.start)
        AND (h.object = 0 OR (
            -- an object nobody acquired again, and that somebody else waited for in vain,
            -- by name or as any unit of the resource
            coalesce(la.seq, 0) <= h.acquire_seq
            AND (lw.seq > h.acquire_seq AND lw.task <> h.task
                 OR ow.seq > h.acquire_seq
                 OR law.seq > h.acquire_seq AND law.task <> h.task
                 OR oaw.seq > h.acquire_seq)))
    GROUP BY ALL
), released_by_others AS (
    -- resources whose holds are normally ended by other tasks (a purge, a reclaimer)
    SELECT resource, avg(CASE WHEN release_task <> task THEN 1.0 ELSE 0.0 END) AS share
    FROM holds WHERE NOT open AND task IS NOT NULL GROUP BY resource
)
SELECT
    l.resource,
    least(1.0, sum(l.units) / (greatest(coalesce(any_value(m.capacity), any_value(m.peak)), 1)
        * getvariable('leak_min_share') * 2.0)) AS score,
    min_by(l.task, {'units': -l.units, 'task': l.task}, 20) AS culprit_tasks,
    []::BIGINT[] AS victim_tasks,
    to_json({
        'leaked_units': sum(l.units), 'leaking_tasks': count(*),
        'capacity': any_value(m.capacity), 'peak_outstanding': any_value(m.peak),
        'final_outstanding': any_value(m.final)
    })::VARCHAR AS evidence,
    printf('%d ended task(s) left %d unit(s) of %s acquired and never released',
           count(*), sum(l.units), l.resource) AS summary
FROM leaked AS l
JOIN metrics_resources AS m USING (resource)
LEFT JOIN released_by_others AS r USING (resource)
WHERE coalesce(r.share, 0) < 0.5
    -- a log's records outlive the tasks that append them by design: a truncation gives
    -- them back (a log that is never truncated is unbounded growth, not a leak)
    AND m.sharing IS DISTINCT FROM 'log'
GROUP BY l.resource
HAVING sum(l.units) >= greatest(coalesce(any_value(m.capacity), any_value(m.peak)), 1)
        * getvariable('leak_min_share')
    AND any_value(m.final) >= 0.5 * sum(l.units)
    -- never above the capacity by more than lost events could move the running sum
    AND any_value(m.final) <= coalesce(any_value(m.capacity), any_value(m.final))
        + sqrt(2.0 * any_value(m.acquires)) * any_value(m.acquired)
          / greatest(any_value(m.acquires), 1)
    AND any_value(m.peak) <= 1.5 * coalesce(any_value(m.capacity), any_value(m.peak))
    -- units of the pool as a whole (object 0): more than lost events could leave behind,
    -- about sqrt(2 x ACQUIREs) x the units of one
    AND coalesce(sum(l.pooled_units), 0) >= sqrt(2.0 * any_value(m.acquires))
        * any_value(m.acquired) / greatest(any_value(m.acquires), 1)
        * (CASE WHEN coalesce(sum(l.pooled_units), 0) = 0 THEN 0 ELSE 1 END);
