-- outstanding_summary: per resource, units held: at most, at the end, against capacity.
SELECT
    -- resource: resource class
    resource,
    -- capacity: the resource's capacity, null when unknown
    any_value(capacity) AS capacity,
    -- peak: most units held at once
    max(outstanding) AS peak,
    -- final: units still held at the trace end
    arg_max(outstanding, seq) AS final,
    -- peak_share: peak / capacity, null when capacity is unknown
    round(max(outstanding) / nullif(any_value(capacity), 0), 3) AS peak_share,
    -- changes: ACQUIRE and RELEASE events
    count(*) AS changes
FROM outstanding
GROUP BY resource
ORDER BY resource;
