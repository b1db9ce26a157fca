-- outstanding: units of each resource held over time: one row per ACQUIRE or RELEASE, with
-- the running sum of ACQUIRE amounts minus RELEASE amounts up to and including it.
CREATE VIEW outstanding AS
SELECT
    -- resource: resource class
    e.resource,
    -- ts: when the change happened, ns
    e.ts,
    -- seq: events.seq of the ACQUIRE or RELEASE
    e.seq,
    -- task: task that acquired or released
    e.task,
    -- delta: units the event added (ACQUIRE) or removed (RELEASE, negative)
    CASE e.kind WHEN 1 THEN e.amount ELSE -e.amount END AS delta,
    -- outstanding: units held right after the event
    sum(CASE e.kind WHEN 1 THEN e.amount ELSE -e.amount END)
        OVER (PARTITION BY e.resource ORDER BY e.seq ROWS UNBOUNDED PRECEDING)::BIGINT AS outstanding,
    -- capacity: the resource's capacity, null when unknown
    r.capacity
FROM events AS e
LEFT JOIN resources AS r USING (resource)
WHERE e.kind IN (1, 3);
