-- task_threads: one row per task and OS thread it has events on, with the span it covers
-- there: its first event to the end of its last (a WAIT's end). A task whose events are all on
-- one thread covers that thread from its start to its end (tasks table; a task with a row but
-- no end runs to the trace end) when those are wider.
-- Tasks nest (a request inside a job on the same thread): the innermost is the one that began
-- last.
CREATE VIEW task_threads AS
WITH per AS (
    SELECT task, thread, min(ts) AS first_ts,
           max(CASE WHEN dur IS NULL THEN i."end" ELSE ts + dur END) AS last_ts
    FROM events, trace_info AS i
    GROUP BY task, thread
), threads AS (
    SELECT task, count(*) AS n FROM per GROUP BY task
)
SELECT
    -- task: task id, as in events.task
    p.task,
    -- thread: OS thread id the task has events on
    p.thread,
    -- start: when the task began on this thread, ns
    CASE WHEN n.n = 1 AND t.task IS NOT NULL THEN least(p.first_ts, coalesce(t.start, p.first_ts))
         ELSE p.first_ts END AS start,
    -- end: when the task last ran on this thread, ns (trace end for a task still running)
    CASE WHEN n.n = 1 AND t.task IS NOT NULL THEN greatest(p.last_ts, coalesce(t."end", i."end"))
         ELSE p.last_ts END AS "end",
    -- threads: threads the task has events on
    n.n AS threads
FROM per AS p
JOIN threads AS n USING (task)
LEFT JOIN tasks AS t USING (task)
CROSS JOIN trace_info AS i;
