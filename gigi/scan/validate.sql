-- validation: per candidate site (the table `candidates`, a sites table from scan), its events
-- in the trace and how many of them fit a plausible lifecycle:
--   ACQUIRE: the hold it began was released (by its task, or by another by the spec's rule),
--            at a RELEASE site that itself stays (one removed would leave the hold open in
--            the build deployed without it: a count that only grows);
--   RELEASE: it ended a hold that an ACQUIRE in the trace began;
--   USE: its task had not released the same (resource, object) since it last acquired it;
--   WAIT: another task held the resource while it waited (an ACQUIRE before the wait ended,
--         not yet released when it began).
-- An ACQUIRE on a resource whose RELEASEs count other units (each gives back 1, the amount a
-- probe records when given none, while ACQUIREs take many: bytes reserved in a log, written
-- out by a store of its position) is not judged: unit by unit, its holds never close.
-- param validate_min_share: share of a site's events that must fit to keep it (default 0.2)
WITH units_differ AS (
    SELECT resource
    FROM events WHERE kind IN (1, 3)
    GROUP BY resource
    HAVING count(*) FILTER (WHERE kind = 3) > 0
        AND count(*) FILTER (WHERE kind = 3 AND amount <> 1) = 0
        AND sum(amount) FILTER (WHERE kind = 1) > count(*) FILTER (WHERE kind = 1)
        AND count(*) FILTER (WHERE kind = 3) < sum(amount) FILTER (WHERE kind = 1) / 2
),
h AS MATERIALIZED (
    -- the holds, paired once (the view pairs a whole run each time it is read)
    SELECT resource, task, acquire_ts, release_ts, acquire_seq, release_seq, acquire_site,
           release_site, open
    FROM holds
),
releases AS (
    SELECT release_site AS site,
        count(DISTINCT release_seq) AS events,
        count(DISTINCT release_seq) FILTER (WHERE acquire_seq IS NOT NULL) AS fitting
    FROM h WHERE release_site IS NOT NULL AND release_seq IS NOT NULL
    GROUP BY 1
),
releases_removed AS (
    -- the RELEASE sites that go: exercised, and too few of their events fit
    SELECT site FROM releases
    WHERE fitting < getvariable('validate_min_share') * events
),
acquires AS (
    SELECT acquire_site AS site,
        count(DISTINCT acquire_seq) AS events,
        count(DISTINCT acquire_seq) FILTER (
            WHERE NOT open
                AND (release_site IS NULL
                     OR release_site NOT IN (SELECT site FROM releases_removed))
        ) AS fitting,
        bool_or(resource IN (SELECT resource FROM units_differ)) AS unjudged
    FROM h WHERE acquire_site IS NOT NULL AND acquire_seq IS NOT NULL
    GROUP BY 1
),
moves AS (
    SELECT seq, kind, site, task, resource, object,
        last_value(CASE WHEN kind IN (1, 3) THEN kind END IGNORE NULLS) OVER (
            PARTITION BY task, resource, object ORDER BY seq
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS before
    FROM events
    WHERE kind IN (1, 2, 3)
),
uses AS (
    SELECT site, count(*) AS events, count(*) FILTER (WHERE before IS DISTINCT FROM 3) AS fitting
    FROM moves WHERE kind = 2 AND site IS NOT NULL
    GROUP BY 1
),
w AS (
    SELECT seq, resource, task, ts, end_ts, site FROM waits WHERE site IS NOT NULL
),
swept AS (
    -- per wait, the holds of its resource, of every task and of its own, begun before it
    -- ended (read at its end, before the holds begun at that instant) and released by the
    -- time it began (read at its start, after the releases at that instant): running counts
    -- over the holds' starts and ends and the waits' ends and starts in time order (a range
    -- join of waits and holds grew as their product)
    SELECT seq, tag,
           sum(da) OVER every AS begun, sum(da) OVER own AS begun_own,
           sum(dr) OVER every AS ended, sum(dr) OVER own AS ended_own
    FROM (SELECT resource, task, release_ts AS ts, 0 AS tag, 0 AS da, 1 AS dr,
                 NULL::BIGINT AS seq
          FROM h WHERE acquire_seq IS NOT NULL AND release_ts IS NOT NULL
          UNION ALL SELECT resource, task, end_ts, 1, 0, 0, seq FROM w
          UNION ALL
          SELECT resource, task, acquire_ts, 2, 1, 0, NULL FROM h WHERE acquire_seq IS NOT NULL
          UNION ALL SELECT resource, task, ts, 3, 0, 0, seq FROM w)
    WINDOW every AS (PARTITION BY resource ORDER BY ts, tag ROWS UNBOUNDED PRECEDING),
           own AS (PARTITION BY resource, task ORDER BY ts, tag ROWS UNBOUNDED PRECEDING)
    QUALIFY tag IN (1, 3)
),
answered AS (
    -- the waits that another task's hold overlapped: begun before the wait ended, not
    -- released when it began
    SELECT seq
    FROM swept
    GROUP BY seq
    HAVING max(begun - begun_own) FILTER (WHERE tag = 1)
           - max(ended - ended_own) FILTER (WHERE tag = 3) > 0
),
waited AS (
    SELECT w.site, count(*) AS events, count(a.seq) AS fitting
    FROM w LEFT JOIN answered AS a ON a.seq = w.seq
    GROUP BY 1
),
observed AS (
    SELECT site, 1::UTINYINT AS kind, events, fitting, unjudged FROM acquires
    UNION ALL SELECT site, 3::UTINYINT, events, fitting, false FROM releases
    UNION ALL SELECT site, 2::UTINYINT, events, fitting, false FROM uses
    UNION ALL SELECT site, 0::UTINYINT, events, fitting, false FROM waited
)
SELECT
    -- site: the candidate's id
    c.site,
    -- kind: the event kind the candidate emits
    c.kind,
    -- events: its events in the trace, of its kind
    coalesce(o.events, 0) AS events,
    -- fitting: those that fit a plausible lifecycle
    coalesce(o.fitting, 0) AS fitting,
    -- unjudged: its units cannot be paired (an ACQUIRE where RELEASEs count other units)
    coalesce(o.unjudged, false) AS unjudged,
    -- keep: true when it was not exercised, not judged, or enough of its events fit
    coalesce(o.events, 0) = 0 OR coalesce(o.unjudged, false)
        OR o.fitting >= getvariable('validate_min_share') * o.events AS keep
FROM candidates AS c
LEFT JOIN observed AS o ON o.site = c.site AND o.kind = c.kind
ORDER BY c.site
