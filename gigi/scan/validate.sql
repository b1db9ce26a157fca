-- validation: per candidate site (the table `candidates`, a sites table from scan), its events
-- in the trace and how many of them fit a plausible lifecycle:
--   ACQUIRE: the hold it began was released (by its task, or by another by the spec's rule);
--   RELEASE: it ended a hold that an ACQUIRE in the trace began;
--   USE: its task had not released the same (resource, object) since it last acquired it;
--   WAIT: another task held the resource while it waited (an ACQUIRE before the wait ended,
--         not yet released when it began).
-- param validate_min_share: share of a site's events that must fit to keep it (default 0.2)
WITH acquires AS (
    SELECT acquire_site AS site,
        count(DISTINCT acquire_seq) AS events,
        count(DISTINCT acquire_seq) FILTER (WHERE NOT open) AS fitting
    FROM holds WHERE acquire_site IS NOT NULL AND acquire_seq IS NOT NULL
    GROUP BY 1
),
releases AS (
    SELECT release_site AS site,
        count(DISTINCT release_seq) AS events,
        count(DISTINCT release_seq) FILTER (WHERE acquire_seq IS NOT NULL) AS fitting
    FROM holds WHERE release_site IS NOT NULL AND release_seq IS NOT NULL
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
answered AS (
    SELECT w.seq
    FROM waits AS w
    JOIN holds AS h
        ON h.resource = w.resource
        AND h.acquire_ts < w.end_ts
        AND coalesce(h.release_ts, w.end_ts + 1) > w.ts
    WHERE w.site IS NOT NULL AND h.acquire_seq IS NOT NULL AND h.task <> w.task
    GROUP BY w.seq
),
waited AS (
    SELECT w.site, count(*) AS events, count(a.seq) AS fitting
    FROM waits AS w LEFT JOIN answered AS a ON a.seq = w.seq
    WHERE w.site IS NOT NULL
    GROUP BY 1
),
observed AS (
    SELECT site, 1::UTINYINT AS kind, events, fitting FROM acquires
    UNION ALL SELECT site, 3::UTINYINT, events, fitting FROM releases
    UNION ALL SELECT site, 2::UTINYINT, events, fitting FROM uses
    UNION ALL SELECT site, 0::UTINYINT, events, fitting FROM waited
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
    -- keep: true when it was not exercised, or enough of its events fit
    coalesce(o.events, 0) = 0 OR o.fitting >= getvariable('validate_min_share') * o.events AS keep
FROM candidates AS c
LEFT JOIN observed AS o ON o.site = c.site AND o.kind = c.kind
ORDER BY c.site
