-- drops: per resource, events the writers lost and the events that reached the trace.
CREATE VIEW drops AS
SELECT
    -- resource: resource class
    r.resource,
    -- recorded: events of the resource in the trace
    coalesce(c.n, 0) AS recorded,
    -- dropped: events the writers lost (buffers full)
    r.dropped,
    -- dropped_share: dropped / (recorded + dropped), 0 when there were none
    CASE WHEN coalesce(c.n, 0) + r.dropped = 0 THEN 0.0
         ELSE r.dropped / (coalesce(c.n, 0) + r.dropped) END AS dropped_share,
    -- sample_every: the writer kept one event in this many
    r.sample_every
FROM resources AS r
LEFT JOIN (SELECT resource, count(*) AS n FROM events GROUP BY resource) AS c USING (resource);
