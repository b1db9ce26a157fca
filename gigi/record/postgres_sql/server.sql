-- server: who the recorded server is, for the trace's schema metadata; and whether the
-- recording role may see other sessions' activity.
SELECT
    -- version: the server's version string
    version() AS version,
    -- database: the connected database (dead tuples are counted in it only)
    current_database() AS database,
    -- database_oid: its oid (relation locks in it are named by the relation's oid alone)
    (SELECT oid FROM pg_database WHERE datname = current_database())::bigint AS database_oid,
    -- address, port: where the server listens for this connection (null over a unix socket)
    host(inet_server_addr()) AS address, inet_server_port() AS port,
    -- started: when the postmaster started (a restart changes it)
    pg_postmaster_start_time()::text AS started,
    -- role: the recording role
    current_user AS role,
    -- sees_all: the role sees other sessions' queries and waits (superuser or pg_read_all_stats)
    (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
        OR pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS sees_all
