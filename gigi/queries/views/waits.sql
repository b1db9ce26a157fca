-- waits: one row per WAIT, with its end. A wait still open when the trace ended runs to the
-- trace's end and is flagged open.
CREATE VIEW waits AS
SELECT
    -- resource: resource class waited for
    e.resource,
    -- object: instance waited for; 0 = the resource as a whole
    e.object,
    -- task: task that waited
    e.task,
    -- thread: OS thread that waited
    e.thread,
    -- ts: when the wait began, ns
    e.ts,
    -- end_ts: when the wait ended (trace end for an open wait), ns
    CASE WHEN e.dur IS NULL THEN greatest(i."end", e.ts) ELSE e.ts + e.dur END AS end_ts,
    -- dur: ns spent waiting (to the trace end for an open wait)
    CASE WHEN e.dur IS NULL THEN greatest(i."end", e.ts) - e.ts ELSE e.dur END AS dur,
    -- open: true when the wait had not ended when the trace ended
    e.dur IS NULL AS open,
    -- amount: units waited for
    e.amount,
    -- site: code location of the wait, null if unknown
    e.site,
    -- value: figure sampled at the site, null if none
    e.value,
    -- seq: events.seq of the WAIT
    e.seq
FROM events AS e, trace_info AS i
WHERE e.kind = 0;
