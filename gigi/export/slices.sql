-- slices: what each task's track shows: one row per WAIT (from the waits view) and per hold
-- (from the holds view), with where it begins and ends. Open waits and holds run to the trace
-- end; a hold that began before the trace is put on the task that released it.
SELECT
    -- task: the task whose track the slice is on
    task,
    -- what: 'wait' or 'hold'
    'wait' AS what,
    -- resource: resource class waited for or held
    resource,
    -- object: instance; 0 = the resource as a whole
    object,
    -- amount: units waited for or held
    amount,
    -- start_ts: when the wait or hold began, ns
    ts AS start_ts,
    -- end_ts: when it ended, ns (the trace end while open)
    end_ts,
    -- open: true when it had not ended when the trace ended
    open,
    -- seq: events.seq of the WAIT or ACQUIRE (of the RELEASE for a hold begun before the trace)
    seq
FROM waits
UNION ALL
SELECT
    coalesce(task, release_task),
    'hold',
    resource,
    object,
    amount,
    acquire_ts,
    acquire_ts + hold_ns,
    open,
    coalesce(acquire_seq, release_seq)
FROM holds
ORDER BY task, start_ts, end_ts DESC, seq;
