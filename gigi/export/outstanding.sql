-- outstanding: the counter samples of units outstanding per resource: one row per resource and
-- time at which an ACQUIRE or RELEASE happened, with the level after the last event at that
-- time (the outstanding view's running sum).
SELECT
    -- resource: resource class
    resource,
    -- ts: when the level changed, ns
    ts,
    -- outstanding: units held right after the events at ts
    arg_max(outstanding, seq) AS outstanding
FROM outstanding
GROUP BY resource, ts
ORDER BY resource, ts;
