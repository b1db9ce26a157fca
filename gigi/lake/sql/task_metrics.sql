-- task_metrics: metrics_tasks (gigi/diagnosis/_metrics.py) from {{waits}}, {{holds}} and
-- {{events}} (the views of those names, or narrower tables of their columns) and {{shares}},
-- the task-shares kernel's output (resource, task, held, used), which may hold several rows
-- of one pair (one per stretch of time it ran over): per resource and task, its waits (with
-- the distribution kernel's quantiles), what it acquired and used, its holds, and its share of
-- what was held and used while others waited. Only the tasks that {{tasks}} (a condition on
-- task) holds for get rows, so that a large trace can be done in parts; the shares are of
-- every task's, and a resource's totals of them are read from {{all_shares}} (the shares of
-- every task, or their sums per resource).
WITH w AS (
    SELECT resource, task, dur,
           row_number() OVER (PARTITION BY resource, task ORDER BY dur) AS k,
           count(*) OVER (PARTITION BY resource, task) AS n
    FROM {{waits}} WHERE {{tasks}}
), wq AS (
    SELECT resource, task, any_value(n) AS waits, sum(dur) AS wait_ns, max(dur) AS wait_max_ns,
           max(CASE WHEN k = greatest((50 * n + 99) // 100, 1) THEN dur END) AS wait_p50_ns,
           max(CASE WHEN k = greatest((99 * n + 99) // 100, 1) THEN dur END) AS wait_p99_ns
    FROM w
    GROUP BY resource, task
), h AS (
    SELECT resource, task, count(*) AS holds, sum(hold_ns) AS hold_ns
    FROM {{holds}} WHERE task IS NOT NULL AND {{tasks}}
    GROUP BY resource, task
), e AS (
    SELECT resource, task,
           count(*) FILTER (WHERE kind = 1) AS acquires,
           coalesce(sum(amount) FILTER (WHERE kind = 1), 0) AS acquired,
           coalesce(sum(amount) FILTER (WHERE kind = 2), 0) AS used
    FROM {{events}} WHERE kind IN (1, 2) AND {{tasks}}
    GROUP BY resource, task
), s AS (
    SELECT resource, task, sum(held) AS held, sum(used) AS used
    FROM {{shares}} WHERE {{tasks}}
    GROUP BY resource, task
), totals AS (
    SELECT resource, sum(held) AS held_total, sum(used) AS used_total
    FROM {{all_shares}}
    GROUP BY resource
), pairs AS (
    SELECT resource, task FROM wq
    UNION SELECT resource, task FROM h
    UNION SELECT resource, task FROM e
), t AS (
    SELECT p.resource, p.task, wq.waits, wq.wait_ns, wq.wait_max_ns, wq.wait_p50_ns,
           wq.wait_p99_ns, e.acquires, e.acquired, e.used, h.holds, h.hold_ns,
           coalesce(s.held, 0) AS held, coalesce(s.used, 0) AS used_during,
           coalesce(totals.held_total, 0) AS held_total,
           coalesce(totals.used_total, 0) AS used_total
    FROM pairs AS p
    LEFT JOIN wq ON wq.resource = p.resource AND wq.task = p.task
    LEFT JOIN h ON h.resource = p.resource AND h.task = p.task
    LEFT JOIN e ON e.resource = p.resource AND e.task = p.task
    LEFT JOIN s ON s.resource = p.resource AND s.task = p.task
    LEFT JOIN totals ON totals.resource = p.resource
)
SELECT
    -- resource: resource class
    resource,
    -- task: the task
    task,
    -- waits: its WAITs
    coalesce(waits, 0) AS waits,
    -- wait_ns: time it waited, ns
    coalesce(wait_ns, 0) AS wait_ns,
    -- wait_max_ns: its longest wait, ns
    coalesce(wait_max_ns, 0) AS wait_max_ns,
    -- wait_p50_ns: its median wait, ns
    coalesce(wait_p50_ns, 0) AS wait_p50_ns,
    -- wait_p99_ns: its 99th percentile wait, ns
    coalesce(wait_p99_ns, 0) AS wait_p99_ns,
    -- acquires: its ACQUIREs
    coalesce(acquires, 0) AS acquires,
    -- acquired: units it acquired
    coalesce(acquired, 0) AS acquired,
    -- used: units it used
    coalesce(used, 0) AS used,
    -- utilization: used / acquired; null when it acquired nothing
    CASE WHEN coalesce(acquired, 0) > 0 THEN used / acquired END AS utilization,
    -- holds: its holds
    coalesce(holds, 0) AS holds,
    -- hold_ns: time its holds lasted, ns, summed
    coalesce(hold_ns, 0) AS hold_ns,
    -- held_while_others_waited: unit-ns of its holds while another task waited
    held AS held_while_others_waited,
    -- hold_share: its share of the resource's held_while_others_waited; null when none
    CASE WHEN held_total > 0 THEN held / held_total END AS hold_share,
    -- used_while_others_waited: units it used while another task waited
    used_during AS used_while_others_waited,
    -- use_share: its share of the resource's used_while_others_waited; null when none
    CASE WHEN used_total > 0 THEN used_during / used_total END AS use_share
FROM t;
