-- samples_by_task: one row per perf sample taken while a task ran on the sample's thread:
-- the innermost task whose span on that thread (task_threads) covers the sample's time.
-- Samples outside every task's span are left out.
CREATE VIEW samples_by_task AS
WITH spans AS (
    SELECT task, thread, start, "end",
           -- another span on the thread begins inside this one: it may enclose samples that
           -- the span begun last before them does not cover
           coalesce(lead(start) OVER (PARTITION BY thread ORDER BY start, "end" DESC) <= "end",
                    false) AS encloses
    FROM task_threads
), latest AS (  -- the span that began last on the thread before the sample
    SELECT s.sample, s.ts, s.thread, sp.task, sp."end" >= s.ts AS covers
    FROM samples AS s
    ASOF JOIN spans AS sp ON s.thread = sp.thread AND s.ts >= sp.start
), enclosing AS (  -- it had ended: the innermost enclosing span still open around the sample
    SELECT l.sample, sp.task,
           row_number() OVER (PARTITION BY l.sample ORDER BY sp.start DESC, sp."end") AS r
    FROM latest AS l
    JOIN spans AS sp
      ON sp.encloses AND sp.thread = l.thread AND l.ts BETWEEN sp.start AND sp."end"
    WHERE NOT l.covers
), picked AS (
    SELECT sample, task FROM latest WHERE covers
    UNION ALL
    SELECT sample, task FROM enclosing WHERE r = 1
)
SELECT
    -- sample: samples.sample
    s.sample,
    -- task: the task running on the thread when the sample was taken
    p.task,
    -- name: the task's name, null if the writers gave none
    t.name,
    -- ts: when the sample was taken, ns on the trace's clock
    s.ts,
    -- thread: OS thread id
    s.thread,
    -- event: perf event that took the sample
    s.event,
    -- period: events the sample stands for (cpu-clock: ns)
    s.period,
    -- leaf: innermost function executing
    s.leaf,
    -- stack: functions on the call stack, innermost first
    s.stack,
    -- folded: the stack outermost first, joined by ';'
    s.folded
FROM picked AS p
JOIN samples AS s USING (sample)
LEFT JOIN tasks AS t ON t.task = p.task;
