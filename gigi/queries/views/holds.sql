-- holds: one row per ACQUIRE paired to the RELEASE that ended it, by the spec's rule: the
-- releasing task's own open hold first, else the oldest open hold of the same (resource,
-- object) by any task, amounts first in, first out. An ACQUIRE released in parts gives one row
-- per part. Holds still open at the end are kept and flagged open; a RELEASE of a hold that
-- began before the trace gives a row flagged began_before_trace. 0-unit events hold nothing.
CREATE VIEW holds AS
SELECT
    -- resource: resource class held
    coalesce(a.resource, r.resource) AS resource,
    -- object: instance held; 0 = the resource as a whole
    coalesce(a.object, r.object) AS object,
    -- task: task that acquired the hold (null if it began before the trace)
    a.task,
    -- release_task: task that released it (null while open); may differ from task
    r.task AS release_task,
    -- acquire_ts: when it was acquired, ns (trace start if it began before the trace)
    coalesce(a.ts, i.start) AS acquire_ts,
    -- release_ts: when it was released, ns; null while open
    r.ts AS release_ts,
    -- hold_ns: time held, ns; to the trace end for an open hold
    coalesce(r.ts, greatest(i."end", a.ts)) - coalesce(a.ts, i.start) AS hold_ns,
    -- amount: units of this hold
    p.amount,
    -- open: true when no RELEASE ended it before the trace ended
    p.release_seq IS NULL AS open,
    -- began_before_trace: true when the RELEASE had no ACQUIRE in the trace to end
    p.acquire_seq IS NULL AS began_before_trace,
    -- outlived_task: true when the acquiring task ended before the hold was released (or while it was open)
    coalesce(t."end" < coalesce(r.ts, i."end" + 1), false) AS outlived_task,
    -- acquire_site: site of the ACQUIRE, null if unknown
    a.site AS acquire_site,
    -- release_site: site of the RELEASE, null if unknown
    r.site AS release_site,
    -- acquire_seq: events.seq of the ACQUIRE, null if it began before the trace
    p.acquire_seq,
    -- release_seq: events.seq of the RELEASE, null while open
    p.release_seq
FROM hold_pairs AS p
CROSS JOIN trace_info AS i
LEFT JOIN events AS a ON a.seq = p.acquire_seq
LEFT JOIN events AS r ON r.seq = p.release_seq
LEFT JOIN tasks AS t ON t.task = a.task;
