-- detector: contention
-- failure_mode: contention
-- meaning: a large share of the time tasks waited for this resource was spent behind other
--   tasks that held or used it, and a few of those tasks account for most of it.
-- param contention_min_wait: blamed wait as a share of the trace's length before it counts (default 0.1)
-- param contention_dominance: share of the blame the top culprits must carry (default 0.5)
WITH blame AS (
    SELECT resource, culprit, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL
), top AS (
    -- the five most blamed of each resource (a heap of five, not a sort of every culprit)
    SELECT resource, sum(ns) AS total, min_by(culprit, {'ns': -ns, 'task': culprit}, 5) AS five
    FROM blame GROUP BY resource
), ranked AS (
    SELECT b.resource, b.culprit, b.ns, b.ns / t.total AS share,
           row_number() OVER (PARTITION BY b.resource ORDER BY b.ns DESC, b.culprit) AS place
    FROM blame AS b JOIN top AS t ON t.resource = b.resource
    WHERE list_contains(t.five, b.culprit)
), culprits AS (
    -- the fewest culprits that carry the dominant share (at most 5)
    SELECT resource, list(culprit ORDER BY place) AS culprit_tasks, sum(share) AS top_share
    FROM (SELECT *, sum(share) OVER (PARTITION BY resource ORDER BY place) - share AS before
          FROM ranked)
    WHERE place <= 5 AND before < getvariable('contention_dominance')
    GROUP BY resource
), victims AS (
    -- tasks slowed, most first; a culprit is not its own victim (min_by with a count keeps
    -- the first 100 by its key, a heap a resource, where a sorted list would hold them all)
    SELECT b.resource, min_by(b.victim, {'ns': -b.ns, 'task': b.victim}, 100) AS victim_tasks
    FROM (SELECT resource, victim, sum(blame_ns) AS ns FROM metrics_blame GROUP BY ALL) AS b
    JOIN culprits AS c USING (resource)
    WHERE NOT list_contains(c.culprit_tasks, b.victim)
    GROUP BY b.resource
)
SELECT
    m.resource,
    -- pressure: blamed wait against the trace length, saturating; weighted by dominance
    least(1.0, m.blamed_ns / (m.trace_ns * getvariable('contention_min_wait') * 5.0))
        * least(1.0, c.top_share / getvariable('contention_dominance'))
        * (m.blamed_ns / greatest(m.wait_ns, 1)) ^ 0.5 AS score,
    c.culprit_tasks,
    v.victim_tasks,
    to_json({
        'wait_ns': m.wait_ns, 'blamed_wait_ns': m.blamed_ns,
        'unattributed_wait_ns': m.unattributed_ns, 'victims': m.victims,
        'top_culprits_share': round(c.top_share, 3),
        'blamed_wait_per_trace_time': round(m.blamed_ns / m.trace_ns, 3),
        'peak_outstanding': m.peak, 'capacity': m.capacity
    })::VARCHAR AS evidence,
    printf('%d tasks waited %.1f s for %s behind %d task(s) that held it, which carry %.0f%% of the blame',
           m.victims, m.blamed_ns / 1e9, m.resource, array_length(c.culprit_tasks), 100 * c.top_share)
        AS summary
FROM metrics_resources AS m
JOIN culprits AS c USING (resource)
JOIN victims AS v USING (resource)
WHERE m.blamed_ns >= m.trace_ns * getvariable('contention_min_wait')
    AND c.top_share >= getvariable('contention_dominance');
