-- activity: every backend but the recorder's own, one row each, as pg_stat_activity shows it
-- at this poll; the recorder polls it every interval.
SELECT
    -- pid: the backend's process id (the trace's thread)
    a.pid,
    -- backend_type: client backend, autovacuum worker, walwriter, parallel worker, ...
    a.backend_type,
    -- leader_pid: the leader of a parallel worker's group, null otherwise
    a.leader_pid,
    -- usename, datname, application_name: who the session is, for its task's name
    a.usename, a.datname, a.application_name,
    -- state: active, idle, idle in transaction, ...
    a.state,
    -- wait_event_type, wait_event: what the backend waits for now (Lock, LWLock, IO, ...)
    a.wait_event_type, a.wait_event,
    -- backend_start, xact_start, query_start: server timestamps (timestamptz)
    a.backend_start, a.xact_start, a.query_start,
    -- query: the current statement, or the last one when the backend is idle
    a.query,
    -- horizon_age: transactions since the oldest of the backend's xid and snapshot xmin
    -- (null when it has neither): the oldest holds back what vacuum may remove
    greatest(age(a.backend_xid), age(a.backend_xmin)) AS horizon_age,
    -- vacuum_relid: the table the backend is vacuuming, null when it is not
    v.relid AS vacuum_relid,
    -- blockers: pids that block a backend waiting for a heavyweight lock (0: a prepared
    -- transaction), null for the others
    CASE WHEN a.wait_event_type = 'Lock' THEN pg_blocking_pids(a.pid) END AS blockers,
    -- now: the server's clock when the row was read, to place the timestamps above
    clock_timestamp() AS now
FROM pg_stat_activity AS a
LEFT JOIN pg_stat_progress_vacuum AS v ON v.pid = a.pid
WHERE a.pid <> pg_backend_pid()
