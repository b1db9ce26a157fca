-- events: one row per resource event of the trace (trace format v1, normalized), in trace
-- order: by ts, ties in the order their segment held them.
CREATE VIEW events AS
SELECT
    -- ts: when the event happened (for WAIT: when the wait began), ns on the trace's monotonic clock
    ts,
    -- kind: event kind code, 0 WAIT, 1 ACQUIRE, 2 USE, 3 RELEASE
    kind,
    -- kind_name: the kind's name: WAIT, ACQUIRE, USE or RELEASE
    ['WAIT', 'ACQUIRE', 'USE', 'RELEASE'][kind + 1] AS kind_name,
    -- resource: resource class, dotted (innodb.buffer_pool)
    resource,
    -- task: logical task (request, transaction, background job) the event belongs to
    task,
    -- thread: OS thread id that emitted the event
    thread,
    -- amount: units acquired, used, released or waited for (pages, bytes, slots)
    amount,
    -- dur: WAIT: ns spent waiting, null if still waiting when the trace ended; USE: ns the use took, or 0
    dur,
    -- object: which instance of the resource (page, slot, table id); 0 = the resource as a whole
    object,
    -- site: code location that emitted the event, key into sites; null if unknown
    site,
    -- value: a figure sampled at the site (queue length, free pages); null if none
    value,
    -- seq: position of the event in trace order, 0-based
    seq
FROM {{events}};
