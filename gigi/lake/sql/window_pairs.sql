-- window_pairs: ingest's pairing of ACQUIRE to RELEASE (the lake's hold_pairs), seen from a
-- time window [since, until) as if the window were a trace of its own: a pair acquired in it
-- whose RELEASE came after it is open; what a RELEASE in it ended of holds acquired before it
-- is one hold begun before the window (no ACQUIRE). A RELEASE's pairs add up to its amount,
-- so that part is its amount less what the pairs acquired in the window matched.
WITH p AS (
    SELECT acquire_seq, release_seq, amount, acquire_ts, release_ts
    FROM {{pairs}}
    WHERE acquire_ts >= {{since}} AND acquire_ts < {{until}}
), matched AS (
    SELECT release_seq, sum(amount) AS amount
    FROM p
    WHERE release_ts < {{until}}
    GROUP BY release_seq
)
SELECT
    -- acquire_seq: events.seq of the ACQUIRE; null when the hold began before the window
    acquire_seq,
    -- release_seq: events.seq of the RELEASE; null when the hold outlasted the window
    CASE WHEN release_ts < {{until}} THEN release_seq END AS release_seq,
    -- amount: units the match covers
    amount
FROM p
UNION ALL
SELECT NULL AS acquire_seq, r.seq AS release_seq, r.amount - coalesce(m.amount, 0) AS amount
FROM {{events}} AS r
LEFT JOIN matched AS m ON m.release_seq = r.seq
WHERE r.kind = 3 AND r.amount > coalesce(m.amount, 0);
