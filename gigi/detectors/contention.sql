-- detector: contention
-- failure_mode: contention
-- meaning: tasks spent a significant time waiting for this resource while other tasks held
--   or used it. Either some holders stand out (a long holder among short ones: they are named
--   first, with their share of the blame), or the resource admits one holder at a time and
--   the blame is spread over many short holders (a hot spot: a hot row, a hot lock), whose
--   tasks are named as groups; so is a resource whose blame is mostly on waits for one
--   object another task held (each of many locks of a kind). A pool whose blame is spread
--   evenly over waits for any of its units is under-provisioning's.
-- param min_wait: wait blamed on other tasks, as a share of the trace's length and weighed by the share of all the resource's wait it is (all of the wait on a resource declared to admit one holder at a time), before a resource's waits are significant (default 0.2)
-- param contention_standout_share: share of the blame a holder must carry by itself to stand out (default 0.1)
-- param contention_standout_ratio: how many times the mean blame of the holders below it a standout carries (default 5)
WITH blame AS (
    SELECT resource, culprit, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL
), spread AS (
    SELECT resource, sum(ns) AS total, count(*) AS culprits FROM blame GROUP BY resource
), ranked AS (
    -- the ten most blamed of each resource, each with the mean blame of those below it
    SELECT b.resource, b.culprit, b.ns, b.ns / s.total AS share, s.culprits,
           (s.total - sum(b.ns) OVER (PARTITION BY b.resource ORDER BY b.ns DESC, b.culprit))
               / greatest(s.culprits - row_number() OVER (PARTITION BY b.resource
                                                          ORDER BY b.ns DESC, b.culprit), 1)
               AS mean_below,
           row_number() OVER (PARTITION BY b.resource ORDER BY b.ns DESC, b.culprit) AS place
    FROM blame AS b JOIN spread AS s USING (resource)
    WHERE b.ns > 0
), flagged AS (
    -- a standout carries a large share by itself, far above the holders below it, and so
    -- does every holder above it: the last of eight equal holders stands far above one small
    -- holder below it, but it is one of eight peers, not a standout
    SELECT *, min(CASE WHEN stands THEN 1 ELSE 0 END)
                  OVER (PARTITION BY resource ORDER BY place
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) = 1 AS standout
    FROM (SELECT *, place <= 10 AND share >= getvariable('contention_standout_share')
                    AND (ns >= getvariable('contention_standout_ratio') * mean_below
                         OR culprits = 1) AS stands
          FROM ranked)
), named AS (
    -- the standouts, or with none the five most blamed (the rest are in the culprit groups)
    SELECT f.resource, list(f.culprit ORDER BY f.place) AS tasks
    FROM flagged AS f
    JOIN (SELECT resource, max(CASE WHEN standout THEN 1 ELSE 0 END) AS any_standout
          FROM flagged GROUP BY resource) AS a USING (resource)
    WHERE f.standout OR (a.any_standout = 0 AND f.place <= 5)
    GROUP BY f.resource
), top AS (
    SELECT f.resource, any_value(n.tasks) AS tasks,
           max(f.share) AS top_share, any_value(f.culprits) AS culprits,
           sum(CASE WHEN f.standout THEN 1 ELSE 0 END) AS standouts,
           coalesce(sum(CASE WHEN f.standout THEN f.share ELSE 0 END), 0) AS standout_share,
           min(CASE WHEN f.standout THEN f.place END) AS first_place
    FROM flagged AS f JOIN named AS n USING (resource)
    GROUP BY f.resource
), held_through AS (
    -- what each culprit held that the victims' waits were blamed through: the resource
    -- itself, or along a chain of waits another one (the lock its own waiter was behind)
    SELECT resource, culprit, arg_max(culprit_resource, ns) AS held
    FROM (SELECT resource, culprit, culprit_resource, sum(blame_ns) AS ns
          FROM metrics_blame GROUP BY ALL)
    GROUP BY resource, culprit
), objects AS (
    -- how the blame falls on the objects waited for: one hot object, or many
    SELECT resource, count(*) AS objects, max(ns) / greatest(sum(ns), 1) AS top_object_share,
           arg_max(object, ns) AS top_object
    FROM (SELECT resource, object, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL)
    GROUP BY resource
), for_objects AS (
    -- blame on waits for an object somebody held: each is passed to that object's holders,
    -- and more units of the resource would not have ended it
    SELECT b.resource, sum(b.blame_ns) AS ns
    FROM metrics_blame AS b
    JOIN (SELECT DISTINCT resource, object FROM holds WHERE object <> 0) AS o
        USING (resource, object)
    WHERE b.depth = 0
    GROUP BY b.resource
), victims AS (
    -- tasks slowed, most first; a culprit is not its own victim (min_by with a count keeps
    -- the first 100 by its key, a heap a resource, where a sorted list would hold them all)
    SELECT b.resource, min_by(b.victim, {'ns': -b.ns, 'task': b.victim}, 100) AS victim_tasks
    FROM (SELECT resource, victim, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL) AS b
    LEFT JOIN top AS t USING (resource)
    WHERE NOT coalesce(list_contains(t.tasks, b.victim), false)
    GROUP BY b.resource
), judged AS (
    SELECT m.*, coalesce(n.name, printf('task %d', ff.culprit)) AS first_name,
           coalesce(h.hold_ns, 0) / m.trace_ns AS first_held,
           coalesce(ht.held, m.resource) AS first_held_resource, t.tasks AS top_tasks, t.top_share, t.culprits,
           coalesce(t.standouts, 0) AS standouts, coalesce(t.standout_share, 0) AS standout_share,
           -- one holder at a time: declared exclusive, a capacity of one, or never seen
           -- held by two when nothing was declared
           coalesce(m.sharing = 'exclusive' OR m.capacity = 1
                    OR (m.capacity IS NULL AND m.sharing IS NULL AND m.peak <= 1), false)
               AS one_at_a_time,
           coalesce(fo.ns, 0) / greatest(m.blamed_ns, 1) AS for_objects_share,
           v.victim_tasks, coalesce(ob.objects, 0) AS objects,
           coalesce(ob.top_object_share, 0) AS top_object_share, ob.top_object,
           m.blamed_ns / m.trace_ns AS blamed_per_trace,
           -- the blamed wait counts in proportion to the share of all the resource's wait
           -- that had a holder to blame: where most waits had none (the slow path itself, or
           -- holds whose RELEASE was lost and that were paired with a later one), blame is
           -- the lesser part of the story and the less certain. On a resource that admits
           -- one holder at a time (declared so) every wait is behind a holder, seen or not:
           -- all of it counts.
           m.blamed_ns / greatest(m.wait_ns, 1) AS attributed,
           CASE WHEN coalesce(m.sharing = 'exclusive' OR m.capacity = 1, false)
                THEN m.wait_ns / m.trace_ns
                ELSE (m.blamed_ns / m.trace_ns) * (m.blamed_ns / greatest(m.wait_ns, 1))
           END AS weighed
    FROM metrics_resources AS m
    LEFT JOIN top AS t USING (resource)
    LEFT JOIN victims AS v USING (resource)
    LEFT JOIN objects AS ob USING (resource)
    LEFT JOIN for_objects AS fo USING (resource)
    -- the first standout's name and how long it held the resource
    LEFT JOIN flagged AS ff ON ff.resource = m.resource AND ff.place = t.first_place
    LEFT JOIN tasks AS n ON n.task = ff.culprit
    LEFT JOIN held_through AS ht ON ht.resource = m.resource AND ht.culprit = ff.culprit
    LEFT JOIN metrics_tasks AS h ON h.resource = coalesce(ht.held, m.resource)
        AND h.task = ff.culprit
    WHERE m.waits > 0
)
SELECT
    resource,
    -- 0.5 where the blamed wait reaches min_wait, 1 at five times it
    least(1.0, 0.5 + 0.125 * (weighed / getvariable('min_wait') - 1.0)) AS score,
    coalesce(top_tasks, []::BIGINT[]) AS culprit_tasks,
    coalesce(victim_tasks, []::BIGINT[]) AS victim_tasks,
    to_json({
        'wait_ns': wait_ns, 'blamed_wait_ns': blamed_ns,
        'unattributed_wait_ns': unattributed_ns, 'victims': victims,
        'blamed_wait_per_trace_time': round(blamed_per_trace, 3),
        'blamed_share_of_wait': round(attributed, 3), 'weighed_blame': round(weighed, 3),
        'culprits': coalesce(culprits, 0),
        'top_culprit_share': round(coalesce(top_share, 0), 3),
        'standouts': standouts,
        'standout_share': round(standout_share, 3),
        'one_at_a_time': one_at_a_time, 'objects_waited_for': objects,
        'blame_share_on_held_objects': round(for_objects_share, 3),
        'top_object_share': round(top_object_share, 3),
        'peak_outstanding': peak, 'capacity': capacity
    })::VARCHAR AS evidence,
    CASE WHEN standouts > 0 THEN
        printf('%s%s held %s %s and carr%s %.0f%% of the blame%s: %d tasks waited %.1f s for it',
               first_name,
               CASE WHEN standouts > 1 THEN printf(' and %d other standout(s)', standouts - 1)
                    ELSE '' END,
               first_held_resource,
               -- holds summed: over the run's length, the units it held on average
               CASE WHEN first_held <= 1 THEN printf('for %.0f%% of the run', 100 * first_held)
                    ELSE printf('%.1f units on average over the run', first_held) END,
               CASE WHEN standouts > 1 THEN 'y' ELSE 'ies' END,
               100 * standout_share,
               CASE WHEN culprits > standouts
                    THEN printf('; the rest is spread over %d other task%s', culprits - standouts,
                                CASE WHEN culprits - standouts = 1 THEN '' ELSE 's' END)
                    ELSE '' END,
               victims, blamed_ns / 1e9)
        || CASE WHEN first_held_resource <> resource
                THEN printf(' (%s, which its waiters held)', resource) ELSE '' END
    ELSE
        printf('%d tasks waited %.1f s for %s, a hot spot %s%s: the blame is spread over %d holders, none carrying more than %.0f%%',
               victims, blamed_ns / 1e9, resource,
               CASE WHEN one_at_a_time THEN 'that admits one holder at a time'
                    ELSE printf('(%.0f%% of the blame is on waits for an object another task held)',
                                100 * for_objects_share) END,
               CASE WHEN top_object = 0 THEN ''
                    WHEN top_object_share >= 0.5
                    THEN printf(' (object %d carries %.0f%% of the blame)', top_object,
                                100 * top_object_share)
                    ELSE printf(' (waited for as %d objects)', objects) END,
               culprits, 100 * top_share)
    END AS summary,
    CASE
        WHEN weighed < getvariable('min_wait') THEN
            CASE WHEN coalesce(sharing = 'exclusive' OR capacity = 1, false)
                 THEN printf('its waits (each behind a holder: it admits one at a time) are %.3f of the trace''s length; significant from %.3f (min_wait)',
                             weighed, getvariable('min_wait'))
                 ELSE printf('wait blamed on other holders is %.3f of the trace''s length and %.0f%% of all its wait, which weighs %.3f; significant from %.3f (min_wait)',
                             blamed_per_trace, 100 * attributed, weighed, getvariable('min_wait'))
            END
        WHEN standouts = 0 AND NOT one_at_a_time AND for_objects_share <= 0.5 THEN
            printf('no holder stands out (the most blamed carries %.0f%%; a standout needs %.0f%% and %gx the mean of those below it), %s admits more than one holder, and %.0f%% of its blame is on waits for any of its units: spread blame on a pool is under-provisioning''s',
                   100 * coalesce(top_share, 0), 100 * getvariable('contention_standout_share'),
                   getvariable('contention_standout_ratio'), resource,
                   100 * (1 - for_objects_share))
    END AS why_not
FROM judged;
