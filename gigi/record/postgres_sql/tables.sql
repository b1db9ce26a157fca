-- tables: dead tuples of every table of the connected database, as the statistics system
-- counts them (backends report at most about once a second).
SELECT
    -- relid: the table's oid (the dead-tuple resource's object)
    relid,
    -- name: schema-qualified table name
    schemaname || '.' || relname AS name,
    -- n_dead_tup: dead row versions not yet removed, tuples
    n_dead_tup
FROM pg_stat_user_tables
