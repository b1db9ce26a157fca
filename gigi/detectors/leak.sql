-- detector: leak
-- failure_mode: leak
-- meaning: tasks that have ended kept units they acquired and never released, and those
--   units are lost to the resource. The evidence is one of: objects of it that nobody
--   acquired again and that other tasks later waited for by name; or, on a resource of
--   units, tasks waiting for it while the tasks still running held well under its capacity
--   (the missing units are the lost ones, beyond the holds whose ACQUIRE the trace lost); or,
--   in a trace with no sign of lost events, units kept by ended tasks. A RELEASE lost leaves
--   a task keeping units just as a leak does, so kept units alone are no evidence where
--   events were lost: tasks releasing units they never took show how many were.
-- param leak_min_share: units lost as a share of the capacity (or of the peak) (default 0.05)
-- param leak_min_age: how long before the trace end the task must have ended, share of the trace (default 0.1)
WITH nets AS (
    -- per task: units it acquired and units it released itself
    SELECT resource, task,
           coalesce(sum(amount) FILTER (WHERE kind = 1), 0) AS acquired,
           coalesce(sum(amount) FILTER (WHERE kind = 3), 0) AS released
    FROM events WHERE kind IN (1, 3) AND task IS NOT NULL GROUP BY ALL
), resource_facts AS (
    SELECT resource, sharing, capacity, final, peak, acquires, acquired,
           acquired / greatest(acquires, 1) AS unit,
           coalesce(sharing = 'exclusive' OR capacity = 1, false) AS one_at_a_time
    FROM metrics_resources
    WHERE sharing IS DISTINCT FROM 'log' AND acquires > 0
), loss AS (
    -- Units released by a task that never acquired them: ACQUIREs lost (or a reclaimer).
    -- With p of the events lost, about p(1 - p) of the holds show so, as many again keep
    -- units through a lost RELEASE, and p of the holds have lost their ACQUIRE.
    SELECT n.resource, sum(greatest(n.released - n.acquired, 0)) AS orphaned,
           sum(greatest(n.released - n.acquired, 0)) / greatest(sum(n.acquired), 1) AS orphan_rate
    FROM nets AS n GROUP BY n.resource
), kept AS (
    -- units kept by tasks that ended long enough before the trace's end
    SELECT n.resource, n.task, n.acquired - n.released AS units
    FROM nets AS n JOIN tasks AS t USING (task) CROSS JOIN trace_info AS i
    WHERE n.acquired > n.released
        AND t."end" <= i."end" - getvariable('leak_min_age') * (i."end" - i.start)
), digests AS (
    -- each task's name with its numbers replaced: runs of one route or statement share it
    SELECT n.resource, n.task, n.acquired - n.released AS net,
           regexp_replace(coalesce(t.name, ''), '[0-9]+', '?', 'g') AS digest
    FROM nets AS n LEFT JOIN tasks AS t USING (task)
), suspicion AS (
    -- per name: units kept beyond units released untaken, in standard deviations of what
    -- lost events alone would give (they keep and release untaken about equally)
    SELECT d.resource, d.digest,
           (sum(greatest(d.net, 0)) - sum(greatest(-d.net, 0)))
               / sqrt(any_value(f.unit) * (sum(abs(d.net)) + 1.0)) AS z
    FROM digests AS d JOIN resource_facts AS f USING (resource)
    GROUP BY d.resource, d.digest
), kept_since AS (
    -- when the first task that kept units ended: waits after it may be for the lost ones
    SELECT k.resource, min(t."end") AS ts FROM kept AS k JOIN tasks AS t USING (task)
    GROUP BY k.resource
), victims AS (
    SELECT w.resource, min_by(w.task, {'ns': -w.ns, 'task': w.task}, 100) AS victim_tasks
    FROM (SELECT w.resource, w.task, sum(w.dur) AS ns
          FROM waits AS w JOIN kept_since AS ks ON ks.resource = w.resource AND w.ts >= ks.ts
          GROUP BY ALL) AS w
    GROUP BY w.resource
), keepers AS (
    -- the tasks that kept units, those of the most suspect names first
    SELECT k.resource, sum(k.units) AS units, count(*) AS tasks,
           min_by(k.task, {'z': -s.z, 'units': -k.units, 'task': k.task}, 20) AS culprit_tasks
    FROM kept AS k
    JOIN digests AS d ON d.resource = k.resource AND d.task = k.task
    JOIN suspicion AS s ON s.resource = d.resource AND s.digest = d.digest
    GROUP BY k.resource
), held AS (
    -- each hold ended at its task's end when it outlived the task: what live tasks hold
    SELECT h.resource, h.acquire_ts, h.amount,
           least(h.acquire_ts + h.hold_ns, coalesce(t."end", h.acquire_ts + h.hold_ns))
               AS held_until
    FROM holds AS h LEFT JOIN tasks AS t ON t.task = h.task
    WHERE h.task IS NOT NULL
), live AS (
    -- units held by running tasks at each window's end
    SELECT o.resource, o.window_index, sum(h.amount) AS units
    FROM metrics_outstanding AS o
    JOIN held AS h ON h.resource = o.resource AND h.acquire_ts <= o.window_end
        AND h.held_until > o.window_end
    GROUP BY ALL
), bound AS (
    -- the units the resource holds at most: declared, or the most running tasks were seen to
    -- hold (the running sum's peak drifts with lost events; an exclusive resource's capacity
    -- is per object, so its class-wide count is not held to it)
    SELECT f.*,
           greatest(coalesce(CASE WHEN f.one_at_a_time THEN NULL ELSE f.capacity END,
                             lm.units, f.peak), 1) AS bound
    FROM resource_facts AS f
    LEFT JOIN (SELECT resource, max(units) AS units FROM live GROUP BY resource) AS lm
        USING (resource)
), waiting AS (
    -- the window ends at which some task was waiting for units of the resource (object 0:
    -- any of them; a wait for one object is not for room), and the most one of them asked for
    SELECT o.resource, o.window_index, max(w.amount) AS asked
    FROM metrics_outstanding AS o
    JOIN waits AS w ON w.resource = o.resource AND w.object = 0 AND w.ts <= o.window_end
        AND w.end_ts > o.window_end
    GROUP BY ALL
), hidden AS (
    -- units held by running tasks whose ACQUIRE the trace lost: a task that released units
    -- it never took held them from (at most) its start, or the end of its last wait for
    -- them, to its last RELEASE of them
    SELECT o.resource, o.window_index, sum(n.released - n.acquired) AS units
    FROM nets AS n
    JOIN tasks AS t USING (task)
    JOIN (SELECT resource, task, max(ts) AS ts FROM events WHERE kind = 3 GROUP BY ALL) AS r
        ON r.resource = n.resource AND r.task = n.task
    LEFT JOIN (SELECT resource, task, max(end_ts) AS ts FROM waits GROUP BY ALL) AS w
        ON w.resource = n.resource AND w.task = n.task AND w.ts <= r.ts
    JOIN metrics_outstanding AS o ON o.resource = n.resource
        AND greatest(coalesce(t.start, r.ts), coalesce(w.ts, t.start, r.ts)) <= o.window_end
        AND r.ts > o.window_end
    WHERE n.released > n.acquired
    GROUP BY ALL
), missing AS (
    -- at those instants: the units neither free (or someone would not wait) nor held by a
    -- task still running, its holds whose ACQUIRE was lost included, beyond the holds that
    -- lost both their ACQUIRE and their RELEASE (p squared of them, with p estimated from
    -- the released-but-never-taken share, about p(1 - p)), give or take three deviations
    SELECT wt.resource, count(*) AS windows,
           median(b.bound - wt.asked + 1 - coalesce(hw.units, 0) - coalesce(hd.units, 0)
                  - l.both_lost * (coalesce(hw.units, 0) + coalesce(hd.units, 0))
                  - 3.0 * sqrt(l.both_lost * (coalesce(hw.units, 0) + coalesce(hd.units, 0))
                               * b.unit)) AS units
    FROM waiting AS wt
    JOIN bound AS b USING (resource)
    JOIN (SELECT resource,
                 pow((1.0 - sqrt(greatest(1.0 - 4.0 * least(orphan_rate, 0.25), 0.0))) / 2.0, 2)
                     AS both_lost
          FROM loss) AS l USING (resource)
    LEFT JOIN live AS hw ON hw.resource = wt.resource AND hw.window_index = wt.window_index
    LEFT JOIN hidden AS hd ON hd.resource = wt.resource AND hd.window_index = wt.window_index
    WHERE NOT b.one_at_a_time
    GROUP BY wt.resource
), last_acquire AS (
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
), lost_objects AS (
    -- objects held open by an ended task, that nobody acquired again (an object acquired
    -- again was not lost: its RELEASE was) and that another task waited for afterwards
    SELECT h.resource, sum(h.amount) AS units,
           min_by(h.task, {'units': -h.amount, 'task': h.task}, 20) AS culprit_tasks
    FROM holds AS h JOIN tasks AS t USING (task)
    CROSS JOIN trace_info AS i
    LEFT JOIN last_acquire AS la ON la.resource = h.resource AND la.object = h.object
    LEFT JOIN last_wait AS lw ON lw.resource = h.resource AND lw.object = h.object
    LEFT JOIN other_wait AS ow ON ow.resource = h.resource AND ow.object = h.object
    WHERE h.open AND h.outlived_task AND h.object <> 0
        AND t."end" <= i."end" - getvariable('leak_min_age') * (i."end" - i.start)
        AND coalesce(la.seq, 0) <= h.acquire_seq
        AND (lw.seq > h.acquire_seq AND lw.task <> h.task OR ow.seq > h.acquire_seq)
    GROUP BY h.resource
), released_by_others AS (
    -- resources whose units are normally released by tasks other than those that took them
    -- (a purge, a reclaimer): the share of released units a task released beyond what it
    -- took. Lost ACQUIREs give about p of it; the pairing of holds does not say (a RELEASE
    -- whose ACQUIRE was lost ends another task's hold).
    SELECT resource,
           sum(greatest(released - acquired, 0)) / greatest(sum(released), 1) AS share
    FROM nets GROUP BY resource
), judged AS (
    SELECT b.*, k.units AS kept, k.tasks AS keeping_tasks, l.orphaned,
           coalesce(lo.units, 0) AS lost_objects,
           coalesce(ms.units, 0) AS lost_at_waits, coalesce(ms.windows, 0) AS waiting_windows,
           coalesce(r.share, 0) AS released_by_others,
           coalesce(v.victim_tasks, []::BIGINT[]) AS victim_tasks,
           -- the least that counts: a share of the capacity, and at least one typical hold
           greatest(getvariable('leak_min_share') * b.bound, b.unit) AS least_lost,
           CASE WHEN coalesce(lo.units, 0) > 0 AND coalesce(lo.units, 0) >= coalesce(ms.units, 0)
                THEN lo.culprit_tasks ELSE k.culprit_tasks END AS culprit_tasks
    FROM bound AS b
    JOIN keepers AS k USING (resource)
    JOIN loss AS l USING (resource)
    LEFT JOIN missing AS ms USING (resource)
    LEFT JOIN lost_objects AS lo USING (resource)
    LEFT JOIN released_by_others AS r USING (resource)
    LEFT JOIN victims AS v USING (resource)
), evidence AS (
    -- the units lost: the objects waited for in vain, the capacity missing while tasks
    -- waited, or (with no sign of lost events) the units kept; never more than were kept
    SELECT *,
           least(kept, greatest(lost_objects,
                                CASE WHEN waiting_windows >= 3 THEN lost_at_waits ELSE 0 END,
                                CASE WHEN orphaned = 0 THEN kept ELSE 0 END, 0)) AS lost
    FROM judged
)
SELECT
    resource,
    CASE WHEN released_by_others >= 0.5 THEN 0.0
         ELSE least(1.0, 0.5 * lost / least_lost) END AS score,
    culprit_tasks,
    victim_tasks,
    to_json({
        'lost_units': round(lost, 1), 'kept_units': kept, 'keeping_tasks': keeping_tasks,
        'released_never_acquired_units': orphaned, 'objects_waited_for_in_vain': lost_objects,
        'units_missing_while_tasks_waited': round(lost_at_waits, 1),
        'windows_with_waits': waiting_windows, 'capacity': bound,
        'peak_outstanding': peak, 'final_outstanding': final
    })::VARCHAR AS evidence,
    CASE WHEN lost_objects >= lost THEN
        printf('%d unit(s) of %s held by ended tasks were never released nor acquired again, and other tasks waited for them in vain',
               lost_objects, resource)
    WHEN waiting_windows >= 3 AND lost_at_waits >= lost THEN
        printf('%d ended task(s) kept %d unit(s) of %s they never released, and while tasks waited for it about %.0f of its %d units were neither free nor held by a running task: they are lost',
               keeping_tasks, kept, resource, lost, bound)
    ELSE
        printf('%d ended task(s) kept %d unit(s) of %s they never released (the trace shows no lost event)',
               keeping_tasks, kept, resource)
    END AS summary,
    CASE
        WHEN released_by_others >= 0.5 THEN
            printf('%.0f%% of its holds are released by other tasks (a reclaimer): units kept by a task are not lost',
                   100 * released_by_others)
        WHEN lost < least_lost THEN
            printf('ended tasks kept %d units, but none is shown lost: %d objects waited for in vain, about %.0f units missing while tasks waited (%d windows), %d units released by tasks that never took them (lost events); a leak needs %.1f (leak_min_share, at least one hold)',
                   kept, lost_objects, greatest(lost_at_waits, 0), waiting_windows, orphaned,
                   least_lost)
    END AS why_not
FROM evidence;
