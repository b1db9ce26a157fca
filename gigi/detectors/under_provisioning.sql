-- detector: under_provisioning
-- failure_mode: under_provisioning
-- meaning: tasks waited for the resource while it was full, and once the holders that stand
--   out (contention's culprits) and the waits for one object another task held are set
--   aside, the wait left is still significant and spread over many holders: the resource is
--   too small for the load. A resource can be both
--   contended and too small; the diagnosis then lists both, contention first.
-- param min_wait: wait blamed on other tasks, as a share of the trace's length and weighed by the share of all the resource's wait it is (all of the wait on a resource declared to admit one holder at a time), before a resource's waits are significant (default 0.2)
-- param underprov_full_share: share of the trace the resource must spend near capacity (default 0.3)
-- param underprov_waited_share: share of its ACQUIREs that waited, when how full the resource was cannot be measured, before its waits say it was full rather than stalled (default 0.01)
-- param contention_standout_share: share of the blame a holder must carry by itself to stand out (default 0.1)
-- param contention_standout_ratio: how many times the mean blame of the holders below it a standout carries (default 5)
-- A resource declared without a capacity (a scan cannot know a pool's size) is taken to hold
-- at most the most it was seen to hold: a pool that sat at that level while tasks waited
-- behaved as full. A log has no such bound (it only grows, and its peak is its end), and a
-- resource whose ACQUIREs and RELEASEs count different things (bytes taken, writes done)
-- has no level at all: for those, how full it was cannot be measured, and the spread wait
-- alone is the evidence, weighed as a level never near capacity is (no contention standout
-- takes it, and tasks waited for room that was not there), provided many of its requests
-- had to wait (underprov_waited_share of its ACQUIREs): a resource too small for its load
-- turns requests away again and again, while a few long waits among millions of requests
-- that got in at once are stalls of whatever let them go (a write-out held up by I/O), which
-- more units would not have ended. A resource that admits one
-- holder at a time cannot be made larger (its spread blame is a hot spot). Nor can one whose
-- waits name the object they wait for while another task holds it (one of many locks of a
-- kind, a page being read in): more units would not have ended them, so their blame is
-- contention's, and only the waits for any unit of the resource are weighed here.
WITH bound AS (
    SELECT resource, coalesce(capacity, peak) AS capacity, capacity IS NULL AS inferred
    FROM metrics_resources
    WHERE waits > 0
), marked AS (
    -- each row of blame, and whether its wait was for an object somebody held (passed to
    -- that object's holders) rather than for any unit of the resource
    SELECT b.resource, b.culprit, b.blame_ns, o.object IS NOT NULL AS for_object
    FROM metrics_blame AS b
    LEFT JOIN (SELECT DISTINCT resource, object FROM holds WHERE object <> 0) AS o
        ON o.resource = b.resource AND o.object = b.object AND b.depth = 0
), for_objects AS (
    SELECT resource, sum(blame_ns) AS ns FROM marked WHERE for_object GROUP BY resource
), blame AS (
    SELECT resource, culprit, sum(blame_ns) AS ns FROM marked WHERE NOT for_object GROUP BY ALL
), ranked AS (
    SELECT b.resource, b.ns, b.ns / s.total AS share, s.culprits,
           (s.total - sum(b.ns) OVER (PARTITION BY b.resource ORDER BY b.ns DESC, b.culprit))
               / greatest(s.culprits - row_number() OVER (PARTITION BY b.resource
                                                          ORDER BY b.ns DESC, b.culprit), 1)
               AS mean_below,
           row_number() OVER (PARTITION BY b.resource ORDER BY b.ns DESC, b.culprit) AS place
    FROM blame AS b
    JOIN (SELECT resource, sum(ns) AS total, count(*) AS culprits FROM blame GROUP BY resource)
        AS s USING (resource)
    WHERE b.ns > 0
), standouts AS (
    -- the blame carried by holders that stand out, as contention.sql picks them (each
    -- far above those below it, and every holder above it too)
    SELECT resource, sum(ns) AS ns
    FROM (SELECT resource, ns,
                 min(CASE WHEN stands THEN 1 ELSE 0 END)
                     OVER (PARTITION BY resource ORDER BY place
                           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS prefix
          FROM (SELECT *, place <= 10 AND share >= getvariable('contention_standout_share')
                          AND (ns >= getvariable('contention_standout_ratio') * mean_below
                               OR culprits = 1) AS stands
                FROM ranked))
    WHERE prefix = 1
    GROUP BY resource
), users AS (
    -- the tasks that used the resource, where anything records its use at all
    SELECT DISTINCT resource, task FROM events WHERE kind = 2
), held AS (
    -- each hold's end at its task's end when it outlived the task (HELD_UNTIL's rule), and
    -- whether it is idle: far longer than the typical hold, by a task that never used the
    -- resource (where others did). A unit held idle is a policy's waste, not a sign that the
    -- resource is too small; a short hold whose USEs were lost is not set aside.
    SELECT h.resource, h.acquire_ts, h.amount,
           least(h.acquire_ts + h.hold_ns, coalesce(t."end", h.acquire_ts + h.hold_ns))
               AS held_until,
           u.task IS NULL AND m.uses > 0 AND h.hold_ns > 4 * coalesce(q.p50_ns, 0) AS idle
    FROM holds AS h LEFT JOIN tasks AS t ON t.task = h.task
    JOIN metrics_resources AS m ON m.resource = h.resource
    LEFT JOIN metrics_holds AS q ON q.resource = h.resource
    LEFT JOIN users AS u ON u.resource = h.resource AND u.task = h.task
    WHERE h.task IS NOT NULL
), self_released AS (
    -- resources whose units are let go by the tasks that took them (most RELEASEs are by a
    -- task that has an ACQUIRE of the resource): a pool's, a lock's, not a log's; and only
    -- those where some task let go of more than it took (an ACQUIRE lost, or taken before
    -- the trace). Elsewhere every RELEASE finds its own task's hold, and pairing within
    -- tasks cannot count more than the holds already do.
    SELECT resource
    FROM (SELECT resource, task, sum(CASE WHEN kind = 1 THEN 1 ELSE 0 END) AS acquired,
                 sum(CASE WHEN kind = 3 THEN 1 ELSE 0 END) AS released
          FROM events WHERE kind IN (1, 3) AND task IS NOT NULL GROUP BY resource, task)
    GROUP BY resource
    HAVING sum(CASE WHEN acquired > 0 THEN released ELSE 0 END) >= 0.5 * sum(released)
        AND sum(CASE WHEN released > acquired THEN 1 ELSE 0 END) > 0
), own AS (
    -- each task's ACQUIREs and RELEASEs of one object in order, with their neighbours
    SELECT e.resource, e.task, e.seq, e.kind, e.ts, e.amount,
           lead(e.ts) OVER w AS next_ts, lag(e.kind) OVER w AS prev_kind,
           lag(e.ts) OVER w AS prev_ts
    FROM events AS e
    WHERE e.kind IN (1, 3) AND e.task IS NOT NULL
        AND e.resource IN (SELECT resource FROM self_released)
    WINDOW w AS (PARTITION BY e.resource, e.object, e.task ORDER BY e.ts, e.seq)
), last_waits AS (
    -- for each RELEASE with no ACQUIRE of its own before it, the end of its task's last wait
    -- for the resource that ended at or before it: a running max over the waits' ends and
    -- the RELEASEs in time order, a wait's end first at one instant (a join of RELEASEs and
    -- waits grew as their product, per task)
    SELECT seq, waited_until
    FROM (SELECT seq, tag,
                 max(wait_end) OVER (PARTITION BY resource, task ORDER BY t, tag
                                     ROWS UNBOUNDED PRECEDING) AS waited_until
          FROM (SELECT resource, task, end_ts AS t, 0 AS tag, -1 AS seq, end_ts AS wait_end
                FROM waits
                WHERE end_ts IS NOT NULL AND resource IN (SELECT resource FROM self_released)
                UNION ALL
                SELECT resource, task, ts, 1, seq, NULL
                FROM own WHERE kind = 3 AND coalesce(prev_kind, 3) = 3))
    WHERE tag = 1
), own_held AS (
    -- The same units paired within each task, where units are let go by their takers: an
    -- ACQUIRE lasts to the task's next event of the object (its RELEASE, or, that lost, its
    -- next ACQUIRE) or to the task's end; a RELEASE with no ACQUIRE of its own before it
    -- (lost, or before the trace) was held since the task's previous event of the object,
    -- the end of its last wait for the resource, or its start. Holds of a pool are paired
    -- across tasks (oldest first), so there one lost ACQUIRE cuts short every hold after it
    -- until the pool empties; paired this way, a lost event costs one hold's worth.
    SELECT o.resource, o.ts AS acquire_ts, o.amount,
           coalesce(o.next_ts, t."end", i."end") AS held_until
    FROM own AS o LEFT JOIN tasks AS t ON t.task = o.task CROSS JOIN trace_info AS i
    WHERE o.kind = 1
    UNION ALL
    SELECT o.resource,
           greatest(coalesce(o.prev_ts, i.start), coalesce(t.start, i.start),
                    coalesce(l.waited_until, i.start)),
           o.amount, o.ts
    FROM own AS o LEFT JOIN tasks AS t ON t.task = o.task CROSS JOIN trace_info AS i
    LEFT JOIN last_waits AS l ON l.seq = o.seq
    WHERE o.kind = 3 AND coalesce(o.prev_kind, 3) = 3
), holds_both AS (
    SELECT 0 AS way, resource, acquire_ts, held_until, amount, idle
    FROM held WHERE resource IN (SELECT resource FROM bound)
    UNION ALL
    SELECT 1, resource, acquire_ts, held_until, amount, false
    FROM own_held WHERE resource IN (SELECT resource FROM bound)
), held_at_ends AS (
    -- the units held at each window's end (acquired at or before it, held past it), by the
    -- holds open then (way 0) and by the holds paired within each task (way 1): a running
    -- sum over the holds' starts (+) and ends (-) in time order, read at the windows' ends,
    -- which sort after the holds' points at the same instant (a range join of holds and
    -- windows grew as holds times windows: a hold open to the trace's end met every window
    -- after it)
    SELECT way, resource, window_index, units, idle_units
    FROM (SELECT way, resource, window_index, tag,
                 sum(d) OVER w AS units, sum(di) OVER w AS idle_units
          FROM (SELECT way, resource, acquire_ts AS ts, 0 AS tag, -1 AS window_index,
                       amount AS d, CASE WHEN idle THEN amount ELSE 0 END AS di
                FROM holds_both
                UNION ALL
                SELECT way, resource, greatest(held_until, acquire_ts), 0, -1, -amount,
                       CASE WHEN idle THEN -amount ELSE 0 END
                FROM holds_both
                UNION ALL
                SELECT way, resource, window_end, 1, window_index, 0, 0
                FROM metrics_outstanding CROSS JOIN (VALUES (0), (1)) AS ways(way)
                WHERE resource IN (SELECT resource FROM bound))
          WINDOW w AS (PARTITION BY way, resource ORDER BY ts, tag ROWS UNBOUNDED PRECEDING))
    WHERE tag = 1
), full_share AS (
    -- Share of the window ends at which the resource was (near) full, counted three ways: by
    -- the running sum of its events, by the holds open then (each ended at its task's end),
    -- and, where takers let go of their own units, by the holds paired within each task;
    -- the last two stay near the truth when events were lost and the sum drifts. Units held
    -- by tasks that never used them are set aside.
    SELECT o.resource,
           greatest(
               avg(CASE WHEN o.outstanding - coalesce(hw.idle_units, 0) >= 0.9 * b.capacity
                        THEN 1.0 ELSE 0.0 END),
               avg(CASE WHEN coalesce(hw.units, 0) - coalesce(hw.idle_units, 0)
                             >= 0.75 * b.capacity
                        THEN 1.0 ELSE 0.0 END),
               avg(CASE WHEN coalesce(ow.units, 0) - coalesce(hw.idle_units, 0)
                             >= 0.75 * b.capacity
                        THEN 1.0 ELSE 0.0 END))
               AS share
    FROM metrics_outstanding AS o
    JOIN bound AS b USING (resource)
    LEFT JOIN held_at_ends AS hw
        ON hw.way = 0 AND hw.resource = o.resource AND hw.window_index = o.window_index
    LEFT JOIN held_at_ends AS ow
        ON ow.way = 1 AND ow.resource = o.resource AND ow.window_index = o.window_index
    GROUP BY o.resource
), waiters AS (
    SELECT resource, min_by(task, {'ns': -ns, 'task': task}, 100) AS victim_tasks,
           count(*) AS n
    FROM (SELECT resource, task, sum(dur) AS ns FROM waits GROUP BY ALL)
    GROUP BY resource
), judged AS (
    SELECT m.*, b.capacity AS bound, b.inferred, coalesce(f.share, 0) AS near_full,
           w.victim_tasks, coalesce(w.n, 0) AS waiting,
           -- weighed as contention weighs blame: by the share of all the wait it is
           s.ns AS standout_ns, coalesce(fo.ns, 0) AS object_ns,
           m.blamed_ns - coalesce(fo.ns, 0) AS any_unit_ns,
           (m.blamed_ns - coalesce(fo.ns, 0) - coalesce(s.ns, 0)) / m.trace_ns
               * (m.blamed_ns - coalesce(fo.ns, 0)) / greatest(m.wait_ns, 1)
               AS rest_per_trace,
           m.waits / greatest(m.acquires, 1) AS waited_share,
           coalesce(m.sharing = 'exclusive' OR m.capacity = 1
                    OR (m.capacity IS NULL AND m.sharing IS NULL AND m.peak <= 1), false)
               AS one_at_a_time,
           -- why its level cannot be measured, if it cannot (unbounded_growth's test of units
           -- that differ: every RELEASE gave back 1 while ACQUIREs took more)
           CASE WHEN coalesce(m.releases > 0 AND m.released = m.releases
                              AND m.acquired > m.acquires AND m.released < m.acquired / 2,
                              false)
                    THEN printf('its RELEASEs each gave back 1 unit while its ACQUIREs took %.0f on average',
                                m.acquired / m.acquires)
                WHEN m.sharing = 'log' AND b.inferred THEN 'a log with no declared capacity'
           END AS level_unknown
    FROM metrics_resources AS m
    JOIN bound AS b USING (resource)
    LEFT JOIN full_share AS f USING (resource)
    LEFT JOIN waiters AS w USING (resource)
    LEFT JOIN standouts AS s USING (resource)
    LEFT JOIN for_objects AS fo USING (resource)
)
SELECT
    resource,
    -- 0.5 where the wait left reaches min_wait, 1 at five times it; less when the resource
    -- was near capacity only a little longer than the least that counts
    least(1.0, 0.5 + 0.125 * (rest_per_trace / getvariable('min_wait') - 1.0))
        * least(1.0, 0.75 + 0.25 * CASE WHEN level_unknown IS NULL THEN near_full ELSE 0 END
                                 / greatest(getvariable('underprov_full_share'), 1e-9))
        AS score,
    []::BIGINT[] AS culprit_tasks,
    coalesce(victim_tasks, []::BIGINT[]) AS victim_tasks,
    to_json({
        'wait_ns': wait_ns, 'blamed_wait_ns': blamed_ns,
        'blamed_wait_for_held_objects_ns': object_ns, 'waiting_tasks': waiting,
        'capacity': bound, 'capacity_inferred': inferred, 'peak_outstanding': peak,
        'share_of_time_near_capacity': round(near_full, 3),
        'wait_not_on_standouts_per_trace_time': round(rest_per_trace, 3),
        'used_per_acquired_unit': round(utilization, 3), 'level_unknown': level_unknown,
        'waits_per_acquire': round(waited_share, 5)
    })::VARCHAR AS evidence,
    CASE WHEN level_unknown IS NULL THEN
        printf('%d tasks waited %.1f s for %s while it was near its capacity of %d%s for %.0f%% of the trace, and %.1f s of it is spread over holders none of whom stands out: it is too small for the load',
               waiting, wait_ns / 1e9, resource, bound,
               CASE WHEN inferred THEN ' (the most it held; none was declared)' ELSE '' END,
               100 * near_full, (any_unit_ns - coalesce(standout_ns, 0)) / 1e9)
    ELSE
        printf('%d tasks waited %.1f s for %s, and %.1f s of it is spread over holders none of whom stands out: it looks too small for the load, though how full it was cannot be measured (%s)',
               waiting, wait_ns / 1e9, resource, (any_unit_ns - coalesce(standout_ns, 0)) / 1e9,
               level_unknown)
    END AS summary,
    CASE
        WHEN one_at_a_time THEN
            printf('%s admits one holder at a time: it cannot be made larger (spread blame on it is a hot spot, contention''s)',
                   resource)
        WHEN bound <= 0 AND level_unknown IS NULL THEN
            'nothing was ever held, so it was never full'
        WHEN rest_per_trace < getvariable('min_wait') AND object_ns > any_unit_ns THEN
            printf('%.1f s of the blamed wait was for objects other tasks held (each waiter wanted one of them): more units would not have ended it (contention''s); the wait for any unit weighs %.3f of the trace''s length, significant from %.3f (min_wait)',
                   object_ns / 1e9, greatest(rest_per_trace, 0), getvariable('min_wait'))
        WHEN rest_per_trace < getvariable('min_wait') THEN
            printf('wait blamed on holders other than the standouts weighs %.3f of the trace''s length; significant from %.3f (min_wait)',
                   greatest(rest_per_trace, 0), getvariable('min_wait'))
        WHEN level_unknown IS NOT NULL AND waited_share < getvariable('underprov_waited_share') THEN
            printf('%d of its %d ACQUIREs waited (%.2f%%), and how full it was cannot be measured (%s): a resource too small for its load makes many requests wait, from %.0f%% (underprov_waited_share); %.1f s in so few waits is stalls of its holders, not a lack of room',
                   waits, acquires, 100 * waited_share, level_unknown,
                   100 * getvariable('underprov_waited_share'), wait_ns / 1e9)
        WHEN near_full < getvariable('underprov_full_share') AND level_unknown IS NULL THEN
            printf('near its capacity of %d for %.0f%% of the trace; too small needs %.0f%% (underprov_full_share)',
                   bound, 100 * near_full, 100 * getvariable('underprov_full_share'))
    END AS why_not
FROM judged;
