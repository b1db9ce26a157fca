-- detector: inefficient_policy
-- failure_mode: inefficient_policy
-- meaning: tasks hold the resource long but use little of what they hold, while others wait
--   for it (a lock kept after its last use, a buffer filled for a reader that left).
-- param policy_max_utilization: a holder's used / acquired units must stay below this (default 0.2)
-- param policy_min_blame: others' wait blamed on such holders, share of the trace (default 0.05)
WITH holder AS (
    SELECT h.resource, h.task, sum(h.amount) AS held, sum(h.hold_ns) AS hold_ns
    FROM holds AS h WHERE h.task IS NOT NULL GROUP BY ALL
), used AS (
    SELECT resource, task, sum(amount) AS used FROM events WHERE kind = 2 GROUP BY ALL
), blamed AS (
    SELECT resource, culprit AS task, sum(blame_ns) AS ns FROM metrics_blame
    WHERE depth = 0 GROUP BY ALL
), bad AS (
    SELECT h.resource, h.task, h.held, coalesce(u.used, 0) AS used, h.hold_ns, b.ns,
           coalesce(u.used, 0) / h.held AS utilization
    FROM holder AS h
    JOIN blamed AS b USING (resource, task)
    LEFT JOIN used AS u USING (resource, task)
    WHERE coalesce(u.used, 0) / h.held < getvariable('policy_max_utilization')
)
SELECT
    b.resource,
    least(1.0, sum(b.ns) / (any_value(m.trace_ns) * getvariable('policy_min_blame') * 4.0))
        * (1.0 - least(1.0, sum(b.used) / sum(b.held) / getvariable('policy_max_utilization')))
        ^ 0.5 AS score,
    list(b.task ORDER BY b.ns DESC)[:10] AS culprit_tasks,
    (SELECT list(victim ORDER BY ns DESC)[:100] FROM
        (SELECT victim, sum(blame_ns) AS ns FROM metrics_blame mb
         WHERE mb.resource = b.resource GROUP BY victim)) AS victim_tasks,
    to_json({
        'blamed_wait_ns': sum(b.ns), 'culprit_utilization': round(sum(b.used) / sum(b.held), 3),
        'culprit_hold_ns': sum(b.hold_ns), 'units_held': sum(b.held), 'units_used': sum(b.used)
    })::VARCHAR AS evidence,
    printf('%d task(s) held %s for %.1f s using %.0f%% of what they held, while others waited %.1f s for it',
           count(*), b.resource, sum(b.hold_ns) / 1e9, 100 * sum(b.used) / sum(b.held),
           sum(b.ns) / 1e9) AS summary
FROM bad AS b JOIN metrics_resources AS m USING (resource)
GROUP BY b.resource
HAVING sum(b.ns) >= any_value(m.trace_ns) * getvariable('policy_min_blame');
