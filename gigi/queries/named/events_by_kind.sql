-- events_by_kind: per resource, events of each kind in the trace and events lost.
SELECT
    -- resource: resource class
    e.resource,
    -- waits: WAIT events
    count(*) FILTER (WHERE e.kind = 0) AS waits,
    -- acquires: ACQUIRE events
    count(*) FILTER (WHERE e.kind = 1) AS acquires,
    -- uses: USE events
    count(*) FILTER (WHERE e.kind = 2) AS uses,
    -- releases: RELEASE events
    count(*) FILTER (WHERE e.kind = 3) AS releases,
    -- tasks: distinct tasks with events on the resource
    count(DISTINCT e.task) AS tasks,
    -- dropped: events the writers lost
    any_value(d.dropped) AS dropped
FROM events AS e
LEFT JOIN drops AS d USING (resource)
GROUP BY e.resource
ORDER BY e.resource;
