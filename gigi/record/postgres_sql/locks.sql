-- locks: the heavyweight locks held and awaited, one row per lock and mode, as pg_locks shows
-- them at this poll; the recorder's own locks are left out.
SELECT
    -- pid: the holder or waiter; null for a prepared transaction
    pid,
    -- locktype and the fields that name the locked thing (which apply depends on the type)
    locktype, database, relation, page, tuple, virtualxid, transactionid::text AS transactionid,
    classid, objid, objsubid,
    -- virtualtransaction: the transaction's virtual id (names a prepared transaction's holder)
    virtualtransaction,
    -- mode: AccessShareLock ... AccessExclusiveLock, ShareLock, ExclusiveLock
    mode,
    -- granted: held (true) or awaited (false)
    granted,
    -- waitstart: when the wait began (server timestamp); null for held locks
    waitstart,
    -- relname: the table a transaction writes (or locks rows of), for a holder's name when the
    -- statement that wrote it ended between two polls; null for the other locks
    CASE WHEN locktype = 'relation' AND mode IN ('RowExclusiveLock', 'RowShareLock')
            AND (SELECT c.relkind FROM pg_class AS c WHERE c.oid = relation) IN ('r', 'p')
        THEN relation::regclass::text END AS relname,
    -- now: the server's clock as the rows are read, after the view's snapshot of the locks
    clock_timestamp() AS now
FROM pg_locks
WHERE pid IS DISTINCT FROM pg_backend_pid()
