-- detector: inefficient_policy
-- failure_mode: inefficient_policy
-- meaning: the resource is handed out in a way that wastes it. Either tasks hold objects long
--   while using little of them and others wait for those very objects (a lock kept on a table
--   the query never reads), or units are acquired and released again and again with almost no
--   use in between (cache entries invalidated before they are ever hit).
-- param policy_max_utilization: a holder's used / held units of an object stay below this (default 0.2)
-- param policy_min_blame: others' wait blamed on such holds, share of the trace (default 0.05)
-- param policy_min_uses_elsewhere: USEs of other objects the idle holder must make (default 10)
-- param policy_min_churn: ACQUIREs per second before churn counts (default 200)
-- param policy_max_churn_use: used / acquired units below which churn is waste (default 0.05)
WITH held AS (
    -- (a RELEASE whose ACQUIRE was lost still says its task held the object)
    SELECT resource, coalesce(task, release_task) AS task, object, sum(amount) AS held,
           sum(hold_ns) AS hold_ns
    FROM holds WHERE coalesce(task, release_task) IS NOT NULL GROUP BY ALL
), used AS (
    SELECT resource, task, object, sum(amount) AS used FROM events WHERE kind = 2 GROUP BY ALL
), blamed AS (
    -- others' wait for an object, blamed directly on a holder
    SELECT b.resource, b.culprit AS task, w.object, sum(b.blame_ns) AS ns
    FROM metrics_blame AS b JOIN waits AS w ON w.seq = b.wait_seq
    WHERE b.depth = 0 AND w.object <> 0
    GROUP BY ALL
), uses AS (
    SELECT resource, task, count(*) AS n FROM events WHERE kind = 2 GROUP BY ALL
), idle_holds AS (
    -- an object held and hardly used while the same task works through other objects of the
    -- resource: it did not need to keep it (one lost USE event cannot make a hold look idle)
    SELECT h.resource, h.task, h.object, h.held, coalesce(u.used, 0) AS used, h.hold_ns, b.ns
    FROM held AS h
    JOIN blamed AS b USING (resource, task, object)
    JOIN uses AS busy USING (resource, task)
    LEFT JOIN used AS u USING (resource, task, object)
    WHERE coalesce(u.used, 0) < getvariable('policy_max_utilization') * h.held
        AND busy.n >= getvariable('policy_min_uses_elsewhere')
), idle_findings AS (
    SELECT
        i.resource,
        least(1.0, sum(i.ns) / (any_value(m.trace_ns) * getvariable('policy_min_blame') * 4.0))
            AS score,
        list(i.task ORDER BY i.ns DESC)[:10] AS culprit_tasks,
        (SELECT list(victim ORDER BY ns DESC)[:100] FROM
            (SELECT mb.victim, sum(mb.blame_ns) AS ns FROM metrics_blame AS mb
             WHERE mb.resource = i.resource GROUP BY mb.victim)) AS victim_tasks,
        to_json({
            'blamed_wait_ns': sum(i.ns), 'culprit_utilization': round(sum(i.used) / sum(i.held), 3),
            'culprit_hold_ns': sum(i.hold_ns), 'units_held': sum(i.held),
            'units_used': sum(i.used), 'objects': list(DISTINCT i.object)
        })::VARCHAR AS evidence,
        printf('%d task(s) held objects of %s they used little of (%.0f%% of what they held) while others waited %.1f s for those objects',
               count(DISTINCT i.task), i.resource, 100 * sum(i.used) / sum(i.held),
               sum(i.ns) / 1e9) AS summary
    FROM idle_holds AS i JOIN metrics_resources AS m USING (resource)
    GROUP BY i.resource
    HAVING sum(i.ns) >= any_value(m.trace_ns) * getvariable('policy_min_blame')
), churners AS (
    SELECT e.resource, e.task, count(*) AS acquires
    FROM events AS e WHERE e.kind = 1 GROUP BY ALL
), churn_findings AS (
    SELECT
        m.resource,
        least(1.0, m.acquire_rate_per_s / (getvariable('policy_min_churn') * 2.0))
            * (1.0 - least(1.0, m.used / greatest(m.acquired, 1)
                                / getvariable('policy_max_churn_use'))) AS score,
        (SELECT list(task ORDER BY acquires DESC, task)[:10] FROM churners AS c
         WHERE c.resource = m.resource) AS culprit_tasks,
        []::BIGINT[] AS victim_tasks,
        to_json({
            'acquire_rate_per_s': round(m.acquire_rate_per_s, 1), 'acquired': m.acquired,
            'used': m.used, 'released': m.released,
            'utilization': round(m.used / greatest(m.acquired, 1), 4)
        })::VARCHAR AS evidence,
        printf('%s handed out %.0f units a second that were released again with %.1f%% of them ever used',
               m.resource, m.acquire_rate_per_s, 100 * m.used / greatest(m.acquired, 1))
            AS summary
    FROM metrics_resources AS m
    WHERE m.acquire_rate_per_s >= getvariable('policy_min_churn')
        AND m.used < getvariable('policy_max_churn_use') * m.acquired
        AND m.released >= 0.5 * m.acquired
)
SELECT * FROM idle_findings
UNION ALL
SELECT * FROM churn_findings;
