-- resources: one row per resource class in the trace: what its writers declared, and what
-- they lost of its events.
CREATE VIEW resources AS
SELECT
    -- resource: resource class, as in events.resource
    resource,
    -- capacity: most units the resource can hold, null when unknown
    capacity,
    -- unit: what one unit is: pages, bytes, slots, locks, records; null when unsaid
    unit,
    -- sharing: exclusive, shared, pool (units handed out) or log (grows, is truncated); null when unsaid
    sharing,
    -- dropped: events of this resource the writers lost (buffers full), count
    dropped,
    -- sample_every: the writer kept one event in this many (1: all)
    sample_every
FROM {{resources}};
