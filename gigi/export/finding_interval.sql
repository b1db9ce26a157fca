-- finding_interval: the stretch of time a finding is about: from the first to the last hold of
-- $resource by its culprit tasks; without culprits (or holds of theirs), from the first to the
-- last wait for it; else the whole trace.
-- param resource: resource class (default none)
-- param tasks: culprit task ids, a BIGINT list (default none)
WITH culprit AS (
    SELECT min(acquire_ts) AS t0, max(acquire_ts + hold_ns) AS t1
    FROM holds
    WHERE resource = $resource AND coalesce(task, release_task) IN (SELECT unnest($tasks::BIGINT[]))
),
waited AS (
    SELECT min(ts) AS t0, max(end_ts) AS t1 FROM waits WHERE resource = $resource
)
SELECT
    -- start_ts: when the interval begins, ns
    coalesce(c.t0, w.t0, i.start) AS start_ts,
    -- end_ts: when it ends, ns
    coalesce(c.t1, w.t1, i."end") AS end_ts,
    -- basis: 'culprit holds', 'waits' or 'trace'
    CASE WHEN c.t0 IS NOT NULL THEN 'culprit holds' WHEN w.t0 IS NOT NULL THEN 'waits' ELSE 'trace' END
        AS basis
FROM culprit AS c, waited AS w, trace_info AS i;
