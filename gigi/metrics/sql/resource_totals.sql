-- resource_totals: the SQL twin of gigi.metrics.totals.resource_totals: per resource, event
-- counts and units by kind, wait time (open waits to the trace end), peak and final outstanding.
SELECT
    -- resource: resource class
    r.resource,
    -- waits: WAIT events
    count(e.kind) FILTER (WHERE e.kind = 0) AS waits,
    -- wait_ns: time waited, ns (open waits counted to the trace end)
    coalesce(sum(CASE WHEN e.kind = 0 THEN coalesce(e.dur, greatest(i."end" - e.ts, 0)) END), 0)
        AS wait_ns,
    -- wait_max_ns: longest wait, ns
    coalesce(max(CASE WHEN e.kind = 0 THEN coalesce(e.dur, greatest(i."end" - e.ts, 0)) END), 0)
        AS wait_max_ns,
    -- acquires: ACQUIRE events
    count(e.kind) FILTER (WHERE e.kind = 1) AS acquires,
    -- acquired: units acquired
    coalesce(sum(e.amount) FILTER (WHERE e.kind = 1), 0) AS acquired,
    -- uses: USE events
    count(e.kind) FILTER (WHERE e.kind = 2) AS uses,
    -- used: units used
    coalesce(sum(e.amount) FILTER (WHERE e.kind = 2), 0) AS used,
    -- releases: RELEASE events
    count(e.kind) FILTER (WHERE e.kind = 3) AS releases,
    -- released: units released
    coalesce(sum(e.amount) FILTER (WHERE e.kind = 3), 0) AS released,
    -- peak: most units outstanding right after an ACQUIRE (0 when none)
    greatest(coalesce((SELECT max(o.outstanding) FROM outstanding o
                       WHERE o.resource = r.resource), 0), 0) AS peak,
    -- final: units outstanding at the end
    coalesce(sum(e.amount) FILTER (WHERE e.kind = 1), 0)
        - coalesce(sum(e.amount) FILTER (WHERE e.kind = 3), 0) AS final
FROM resources AS r
CROSS JOIN trace_info AS i
LEFT JOIN events AS e ON e.resource = r.resource
GROUP BY r.resource
ORDER BY r.resource;
