-- task_summary: per task, its events and the time it spent waiting.
SELECT
    -- task: task id
    e.task,
    -- name: the task's name, null if the writers gave none
    any_value(t.name) AS name,
    -- kind: foreground or background, null if unsaid
    any_value(t.kind) AS kind,
    -- events: events of the task
    count(*) AS events,
    -- waits: WAIT events of the task
    count(*) FILTER (WHERE e.kind = 0) AS waits,
    -- wait_ms: time the task spent waiting, ms (open waits to the trace end)
    round(coalesce(sum(w.dur), 0) / 1e6, 3) AS wait_ms,
    -- duration_ms: task end - start, ms; null when either is unknown
    round(any_value(t."end" - t.start) / 1e6, 3) AS duration_ms
FROM events AS e
LEFT JOIN tasks AS t USING (task)
LEFT JOIN waits AS w ON w.seq = e.seq
GROUP BY e.task
ORDER BY wait_ms DESC, e.task;
