-- detector: inefficient_policy
-- failure_mode: inefficient_policy
-- meaning: the resource is handed out in a way that wastes it. Either tasks hold objects long
--   while using little of them and others wait for those very objects (a lock kept on a table
--   the query never reads), or tasks that use next to nothing of what they hold keep most of a
--   pool's units, far longer than a typical hold, while others wait for units (worker slots
--   kept by idle connections), or units are acquired and released again and again with
--   almost no use in between (cache entries invalidated before they are ever hit); churn is
--   not judged for a resource whose sites include no USE (nothing there records use), and a
--   unit its holder used while holding it counts as used whatever resource's name the USE
--   carries (a page the pager hands its caller is the page cache's unit all the same).
-- param policy_max_utilization: a holder's used / held units of an object stay below this (default 0.2)
-- param policy_min_blame: others' wait blamed on such holds, share of the trace (default 0.05)
-- param policy_min_uses_elsewhere: USEs of other objects the idle holder must make (default 10)
-- param policy_min_idle_share: the idle holders' share of the units held while others waited (default 0.5)
-- param policy_min_hold_ratio: an idle holder's mean hold as a multiple of the median hold (default 4)
-- param policy_min_churn: ACQUIREs per second before churn counts (default 200)
-- param policy_max_churn_use: used / acquired units below which churn is waste (default 0.05)
WITH victims AS (
    -- per resource, the tasks whose waits were blamed on others, most blamed first
    SELECT resource, min_by(victim, {'ns': -ns, 'task': victim}, 100) AS victim_tasks
    FROM (SELECT resource, victim, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL)
    GROUP BY resource
), blamed AS (
    -- others' wait for an object, blamed directly on a holder
    SELECT b.resource, b.culprit AS task, b.object, sum(b.blame_ns) AS ns
    FROM metrics_blame AS b
    WHERE b.depth = 0 AND b.object <> 0
    GROUP BY ALL
), held AS (
    -- (a RELEASE whose ACQUIRE was lost still says its task held the object); only the
    -- holds others were blamed on are looked at
    SELECT h.resource, coalesce(h.task, h.release_task) AS task, h.object, sum(h.amount) AS held,
           sum(h.hold_ns) AS hold_ns
    FROM holds AS h
    SEMI JOIN blamed AS b ON b.resource = h.resource AND b.object = h.object
        AND b.task = coalesce(h.task, h.release_task)
    GROUP BY ALL
), used AS (
    SELECT e.resource, e.task, e.object, sum(e.amount) AS used
    FROM events AS e
    SEMI JOIN blamed AS b ON b.resource = e.resource AND b.task = e.task AND b.object = e.object
    WHERE e.kind = 2
    GROUP BY ALL
), uses AS (
    SELECT e.resource, e.task, count(*) AS n
    FROM events AS e
    SEMI JOIN blamed AS b ON b.resource = e.resource AND b.task = e.task
    WHERE e.kind = 2
    GROUP BY ALL
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
        min_by(i.task, {'ns': -i.ns, 'task': i.task}, 10) AS culprit_tasks,
        any_value(vl.victim_tasks) AS victim_tasks,
        to_json({
            'blamed_wait_ns': sum(i.ns), 'culprit_utilization': round(sum(i.used) / sum(i.held), 3),
            'culprit_hold_ns': sum(i.hold_ns), 'units_held': sum(i.held),
            'units_used': sum(i.used), 'objects': list(DISTINCT i.object ORDER BY i.object)
        })::VARCHAR AS evidence,
        printf('%d task(s) held objects of %s they used little of (%.0f%% of what they held) while others waited %.1f s for those objects',
               count(DISTINCT i.task), i.resource, 100 * sum(i.used) / sum(i.held),
               sum(i.ns) / 1e9) AS summary
    FROM idle_holds AS i JOIN metrics_resources AS m USING (resource)
    LEFT JOIN victims AS vl ON vl.resource = i.resource
    GROUP BY i.resource
    HAVING sum(i.ns) >= any_value(m.trace_ns) * getvariable('policy_min_blame')
), idle_tasks AS (
    -- tasks that used next to nothing of what they held, holding long while others waited
    SELECT t.resource, t.task, t.held_while_others_waited, t.hold_share, t.acquired, t.used,
           t.hold_ns
    FROM metrics_tasks AS t
    JOIN metrics_holds AS mh USING (resource)
    WHERE t.acquired > 0 AND t.hold_share > 0
        AND t.used < getvariable('policy_max_utilization') * t.acquired
        AND t.hold_ns >= getvariable('policy_min_hold_ratio') * greatest(mh.p50_ns, 1) * t.holds
), idle_blame AS (
    -- waits for any unit of the pool (object 0); waits for one object are the path above's
    SELECT b.resource, sum(b.blame_ns) AS ns
    FROM metrics_blame AS b JOIN idle_tasks AS i ON i.resource = b.resource AND i.task = b.culprit
    WHERE b.object = 0
    GROUP BY b.resource
), pool_findings AS (
    SELECT
        i.resource,
        least(1.0, any_value(b.ns) / (any_value(m.trace_ns) * getvariable('policy_min_blame') * 4.0))
            * least(1.0, sum(i.hold_share) / getvariable('policy_min_idle_share')) AS score,
        min_by(i.task, {'held': -i.held_while_others_waited, 'task': i.task}, 10)
            AS culprit_tasks,
        any_value(vl.victim_tasks) AS victim_tasks,
        to_json({
            'blamed_wait_ns': any_value(b.ns), 'idle_tasks': count(*),
            'idle_share_of_units_held_while_others_waited': round(sum(i.hold_share), 3),
            'idle_utilization': round(sum(i.used) / sum(i.acquired), 3),
            'median_hold_ns': any_value(mh.p50_ns),
            'idle_mean_hold_ns': sum(i.hold_ns) // count(*)
        })::VARCHAR AS evidence,
        printf('%d task(s) that used %.0f%% of what they took kept %.0f%% of %s while others waited %.1f s for it',
               count(*), 100 * sum(i.used) / sum(i.acquired), 100 * sum(i.hold_share),
               i.resource, any_value(b.ns) / 1e9) AS summary
    FROM idle_tasks AS i
    JOIN idle_blame AS b USING (resource)
    JOIN metrics_resources AS m USING (resource)
    JOIN metrics_holds AS mh USING (resource)
    LEFT JOIN victims AS vl ON vl.resource = i.resource
    WHERE m.used > 0
    GROUP BY i.resource
    HAVING sum(i.hold_share) >= getvariable('policy_min_idle_share')
        AND any_value(b.ns) >= any_value(m.trace_ns) * getvariable('policy_min_blame')
), churning AS (
    -- resources handed out again and again with next to nothing used under their own name
    SELECT m.*
    FROM metrics_resources AS m
    WHERE m.acquire_rate_per_s >= getvariable('policy_min_churn')
        AND m.used < getvariable('policy_max_churn_use') * m.acquired
        AND m.released >= 0.5 * m.acquired
        -- use unknown is not no use: a resource whose sites were found by a scan, none of
        -- them a USE, may well be used where nothing records it
        AND (m.uses > 0
             OR NOT EXISTS (SELECT 1 FROM sites AS s WHERE s.resource = m.resource)
             OR EXISTS (SELECT 1 FROM sites AS s WHERE s.resource = m.resource AND s.kind = 2))
), churners AS (
    -- the tasks that acquired the churning resources (only those: a count per task of every
    -- ACQUIRE in the trace is as large as the trace's tasks)
    SELECT e.resource, e.task, count(*) AS acquires
    FROM events AS e SEMI JOIN churning AS c USING (resource)
    WHERE e.kind = 1
    GROUP BY ALL
), churn_holds AS (
    -- their ended holds of one object (object 0, the resource as a whole, says nothing of a
    -- unit)
    SELECT h.resource, h.task, h.object, h.acquire_ts, h.release_ts
    FROM holds AS h SEMI JOIN churning AS c USING (resource)
    WHERE h.object <> 0 AND h.release_ts IS NOT NULL
), churn_used AS (
    -- of those, the holds whose holder used the object while holding it, under any
    -- resource's name, or used the resource as a whole (a WAL's frames written under its
    -- write lock)
    SELECT c.resource, count(*) AS used_holds
    FROM churn_holds AS c
    SEMI JOIN events AS e ON e.kind = 2 AND e.task = c.task
        AND (e.object = c.object OR e.object = 0 AND e.resource = c.resource)
        AND e.ts BETWEEN c.acquire_ts AND c.release_ts
    GROUP BY c.resource
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
    FROM churning AS m
    WHERE coalesce((SELECT u.used_holds FROM churn_used AS u WHERE u.resource = m.resource), 0)
        < getvariable('policy_max_churn_use')
          * (SELECT count(*) FROM churn_holds AS c WHERE c.resource = m.resource)
)
SELECT * FROM idle_findings
UNION ALL
SELECT * FROM pool_findings WHERE resource NOT IN (SELECT resource FROM idle_findings)
UNION ALL
SELECT * FROM churn_findings;
