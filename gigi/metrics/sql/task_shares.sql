-- task_shares: the SQL twin of gigi.metrics.tasks.task_shares: per resource and task, the
-- unit-ns of its holds and the units of its USEs at instants when another task was waiting
-- for the same resource (intervals half-open, [start, end)).
WITH w AS (
    SELECT resource, task, ts AS s, end_ts AS e FROM waits
), h AS (
    -- a hold that outlived its task counts until the task ended
    SELECT h.resource, h.task, h.acquire_ts AS s,
           CASE WHEN h.outlived_task
                THEN greatest(least(h.acquire_ts + h.hold_ns, t."end"), h.acquire_ts)
                ELSE h.acquire_ts + h.hold_ns END AS e,
           h.amount
    FROM holds AS h LEFT JOIN tasks AS t USING (task) WHERE h.task IS NOT NULL
), u AS (
    SELECT resource, task, ts, amount FROM events WHERE kind = 2
), pairs AS (
    SELECT resource, task FROM w
    UNION SELECT resource, task FROM h
    UNION SELECT resource, task FROM events WHERE kind IN (1, 2)
), points AS (
    SELECT resource, s AS t FROM w UNION SELECT resource, e FROM w
    UNION SELECT resource, s FROM h UNION SELECT resource, e FROM h
), segments AS (
    -- the elementary pieces of time between two consecutive boundaries of one resource
    SELECT resource, t AS s, lead(t) OVER (PARTITION BY resource ORDER BY t) AS e FROM points
), held AS (
    SELECT h.resource, h.task, sum(h.amount * (g.e - g.s)) AS n
    FROM h JOIN segments AS g ON g.resource = h.resource AND h.s <= g.s AND g.e <= h.e
    WHERE EXISTS (SELECT 1 FROM w WHERE w.resource = h.resource AND w.task <> h.task
                  AND w.s <= g.s AND g.e <= w.e)
    GROUP BY ALL
), used AS (
    SELECT u.resource, u.task, sum(u.amount) AS n
    FROM u
    WHERE EXISTS (SELECT 1 FROM w WHERE w.resource = u.resource AND w.task <> u.task
                  AND w.s <= u.ts AND u.ts < w.e)
    GROUP BY ALL
)
SELECT
    -- resource: resource class
    p.resource,
    -- task: the task
    p.task,
    -- held_while_others_waited: unit-ns of its holds while another task waited
    coalesce(held.n, 0) AS held_while_others_waited,
    -- used_while_others_waited: units it used while another task waited
    coalesce(used.n, 0) AS used_while_others_waited
FROM pairs AS p
LEFT JOIN held USING (resource, task)
LEFT JOIN used USING (resource, task)
ORDER BY p.resource, p.task;
