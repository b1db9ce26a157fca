-- tasks: one row per logical task the writers described (rows of one task from several
-- segments merged). Tasks that only appear in events have no row here.
CREATE VIEW tasks AS
SELECT
    -- task: task id, as in events.task
    task,
    -- name: what a person calls it (purge, SELECT * FROM t1, GET /api/items)
    name,
    -- kind: foreground (serves a client) or background (purge, flush, vacuum); null if unsaid
    kind,
    -- parent: task that started this one, null for none
    parent,
    -- start: when the task began, ns, same clock as events.ts; null if unknown
    start,
    -- end: when the task ended, ns; null if it was still running when the trace ended
    "end"
FROM {{tasks}};
