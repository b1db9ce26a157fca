-- detector: inconsistent_state
-- failure_mode: inconsistent_state
-- meaning: the events contradict the resource's own rules: a task used an object after it
--   had released it (and before acquiring it again), a task released an object twice with
--   no ACQUIRE of it by anyone between, or more units were outstanding than the declared
--   capacity by far more than lost events could explain. The program's use of the resource,
--   or its accounting of it, is wrong; the culprits are the tasks that broke the rule. The
--   rules by object do not apply where the events do not pair as recorded (an ACQUIRE site
--   and a RELEASE site that name objects differently, or a RELEASE site where there is
--   none): most RELEASEs repeating one already made, more than twice as many RELEASEs as
--   ACQUIREs, or most ACQUIREs naming no object while most RELEASEs name one. That is no
--   slip of the program, and the verdict says so instead.
-- param inconsistent_min_events: contradicting USEs and RELEASEs before they count (default 3)
-- param inconsistent_min_share: those as a share of the resource's USEs and RELEASEs (default 0.01)
WITH suspects AS (
    -- the objects on which a task used or released again after a RELEASE of its own: only
    -- there can the rules below be broken, so only their events go through the windows (two
    -- sorts, of every event on an object otherwise)
    SELECT DISTINCT resource, object
    FROM (SELECT resource, object
          FROM events
          WHERE object <> 0 AND kind IN (2, 3)
          GROUP BY resource, object, task
          HAVING min(seq) FILTER (WHERE kind = 3) < max(seq))
), ordered AS (
    -- per event on an object: what the same task did to the same object before it
    SELECT resource, object, task, kind, seq,
           coalesce(sum(CASE kind WHEN 1 THEN amount WHEN 3 THEN -amount ELSE 0 END) OVER mine,
                    0) AS task_units,
           last_value(CASE WHEN kind IN (1, 3) THEN kind END IGNORE NULLS) OVER mine AS task_last,
           last_value(CASE WHEN kind = 3 THEN seq END IGNORE NULLS) OVER mine AS task_release,
           -- (a sum, not count(*) FILTER: DuckDB does not tree a filtered window aggregate,
           -- and over a lock's millions of events by one task that was quadratic)
           sum(CASE WHEN kind = 1 THEN 1 ELSE 0 END) OVER mine AS task_acquires,
           max(CASE WHEN kind = 1 THEN seq END) OVER (
               PARTITION BY resource, object ORDER BY seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS any_acquire
    FROM events AS e
    SEMI JOIN suspects AS s ON s.resource = e.resource AND s.object = e.object
    WHERE e.object <> 0 AND e.kind IN (1, 2, 3)
    WINDOW mine AS (PARTITION BY resource, object, task ORDER BY seq
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), broken AS (
    -- the task had acquired the object, its last word on it was a RELEASE, and it holds
    -- none of it now (a reclaimer that releases what others took is not judged here: an
    -- ACQUIRE lost between two of its RELEASEs would look the same)
    SELECT resource, task,
           count(*) FILTER (WHERE kind = 2) AS uses_after_release,
           count(*) FILTER (WHERE kind = 3) AS double_releases
    FROM ordered
    WHERE task_acquires > 0 AND task_last = 3 AND task_units <= 0
        AND (kind = 2 OR (kind = 3 AND coalesce(any_acquire, -1) < task_release))
    GROUP BY ALL
), per_resource AS (
    SELECT resource, sum(uses_after_release) AS uar, sum(double_releases) AS dr,
           min_by(task, {'broken': -(uses_after_release + double_releases), 'task': task}, 20)
               AS culprit_tasks
    FROM broken GROUP BY resource
), objectless AS (
    -- ACQUIREs and RELEASEs that name no object, per resource
    SELECT resource,
           count(*) FILTER (WHERE kind = 1 AND object = 0) AS acquires_bare,
           count(*) FILTER (WHERE kind = 3 AND object <> 0) AS releases_named
    FROM events WHERE kind IN (1, 3) GROUP BY resource
), norms AS (
    SELECT m.resource,
           CASE WHEN coalesce(p.dr, 0) > 0.5 * m.releases
                    THEN printf('%d of its %d RELEASEs repeat one the same task had made, with no ACQUIRE between',
                                p.dr, m.releases)
                WHEN m.releases > 2 * m.acquires
                    THEN printf('it has %d RELEASEs against %d ACQUIREs', m.releases, m.acquires)
                WHEN o.acquires_bare > 0.5 * m.acquires AND o.releases_named > 0.5 * m.releases
                    THEN printf('%d of its %d ACQUIREs name no object while %d of its %d RELEASEs do',
                                o.acquires_bare, m.acquires, o.releases_named, m.releases)
           END AS unpaired
    FROM metrics_resources AS m LEFT JOIN per_resource AS p USING (resource)
    LEFT JOIN objectless AS o USING (resource)
), scored AS (
    SELECT m.resource, m.capacity, m.peak, coalesce(p.uar, 0) AS uar, coalesce(p.dr, 0) AS dr,
           n.unpaired,
           coalesce(p.culprit_tasks, []::BIGINT[]) AS culprit_tasks,
           sqrt(2.0 * m.acquires) * m.acquired / greatest(m.acquires, 1) AS noise,
           CASE WHEN n.unpaired IS NULL
                     AND coalesce(p.uar, 0) + coalesce(p.dr, 0)
                         >= getvariable('inconsistent_min_events')
                     AND coalesce(p.uar, 0) + coalesce(p.dr, 0)
                         >= getvariable('inconsistent_min_share') * (m.uses + m.releases)
                THEN least(1.0, 0.5 + (p.uar + p.dr)
                                      / (4.0 * getvariable('inconsistent_min_events')))
                ELSE 0.0 END AS rule_score,
           -- lost RELEASEs move the count by about sqrt(2 x ACQUIREs) x the units of one
           -- (an exclusive resource's capacity is per object, not for the class's count)
           CASE WHEN m.capacity > 0 AND m.sharing IS DISTINCT FROM 'exclusive'
                     AND m.peak > m.capacity
                     + 2.0 * sqrt(2.0 * m.acquires) * m.acquired / greatest(m.acquires, 1)
                THEN least(1.0, (m.peak - m.capacity)
                                / (4.0 * sqrt(2.0 * m.acquires) * m.acquired
                                   / greatest(m.acquires, 1)))
                ELSE 0.0 END AS count_score
    FROM metrics_resources AS m LEFT JOIN per_resource AS p USING (resource)
    JOIN norms AS n USING (resource)
)
SELECT
    resource,
    greatest(rule_score, count_score) AS score,
    CASE WHEN rule_score > 0 THEN culprit_tasks ELSE []::BIGINT[] END AS culprit_tasks,
    []::BIGINT[] AS victim_tasks,
    to_json({
        'uses_after_release': uar, 'double_releases': dr, 'capacity': capacity,
        'peak_outstanding': peak, 'lost_event_allowance': round(noise, 1)
    })::VARCHAR AS evidence,
    concat_ws('; ',
        CASE WHEN rule_score > 0
             THEN printf('%d USE(s) of %s after the same task released the object, and %d repeated RELEASE(s)',
                         uar, resource, dr) END,
        CASE WHEN count_score > 0
             THEN printf('%d unit(s) of %s outstanding at once against a capacity of %d',
                         peak, resource, capacity) END) AS summary,
    CASE WHEN unpaired IS NOT NULL AND count_score = 0 THEN
        unpaired || ': not a slip but the norm, so its events do not pair as recorded (its sites name objects differently), and no rule of its state can be judged'
    END AS why_not
FROM scored
WHERE greatest(rule_score, count_score) > 0 OR (unpaired IS NOT NULL AND dr + uar > 0);
