-- detector: unbounded_growth
-- failure_mode: unbounded_growth
-- meaning: the units outstanding kept rising, window after window, without levelling off;
--   the culprits are the tasks whose holds make up the growth. A log is truncated only
--   behind what still reads it: for a log whose name extends another resource's (Wal.frames
--   of Wal), the tasks that held that resource through the episode, from its start to its
--   peak, kept the log from being truncated, and are blamed first.
-- param growth_pin_share: share of the episode a hold must cover to pin the log (default 0.9)
-- param growth_min_rise: rise as a multiple of the level it started from (default 1)
-- param growth_min_span: the episode's length as a share of the trace (default 0.15)
-- param growth_min_noise_ratio: rise as a multiple of what lost events alone could add (default 4)
WITH counted AS (
    -- Every RELEASE gave back one unit, the amount a probe records when it is given none,
    -- while the ACQUIREs took more each and the RELEASEs gave back under half of it: the two
    -- count different things (bytes taken, writes done), and what is outstanding is not a
    -- count of anything.
    SELECT *, coalesce(releases > 0 AND released = releases AND acquired > acquires
                       AND released < acquired / 2, false) AS units_differ
    FROM metrics_resources
), episode AS (
    -- A rise within what lost events could explain, or a count above the capacity (the
    -- events do not add up), is not evidence of growth. An exclusive resource's capacity is
    -- per object (one holder of each), so its class-wide count is not held to it.
    SELECT * FROM counted
    WHERE growth_sustained
        AND growth_rise >= getvariable('growth_min_rise') * greatest(growth_base, 1)
        AND growth_span_share >= getvariable('growth_min_span')
        AND growth_rise >= getvariable('growth_min_noise_ratio') * growth_noise
        AND (capacity IS NULL OR sharing = 'exclusive' OR peak <= 1.5 * capacity)
        AND NOT units_differ
), holders AS (
    -- unit-time each task held during the episode
    SELECT h.resource, h.task,
           sum(h.amount * (least(h.acquire_ts + h.hold_ns, e.growth_peak_ts)
                           - greatest(h.acquire_ts, e.growth_start_ts))) AS unit_ns
    FROM holds AS h JOIN episode AS e USING (resource)
    WHERE h.task IS NOT NULL AND h.acquire_ts < e.growth_peak_ts
        AND h.acquire_ts + h.hold_ns > e.growth_start_ts
    GROUP BY ALL
), pinners AS (
    -- tasks that held the log's own structure through the episode
    SELECT e.resource, h.task,
           sum(least(h.acquire_ts + h.hold_ns, e.growth_peak_ts)
               - greatest(h.acquire_ts, e.growth_start_ts)) AS pin_ns
    FROM episode AS e
    JOIN holds AS h ON h.resource = regexp_replace(e.resource, '[.][^.]*$', '')
    WHERE e.sharing = 'log' AND e.resource LIKE '%.%' AND h.task IS NOT NULL
        AND h.acquire_ts < e.growth_peak_ts AND h.acquire_ts + h.hold_ns > e.growth_start_ts
    GROUP BY ALL
    HAVING sum(least(h.acquire_ts + h.hold_ns, e.growth_peak_ts)
               - greatest(h.acquire_ts, e.growth_start_ts))
        >= getvariable('growth_pin_share') * any_value(e.growth_peak_ts - e.growth_start_ts)
), blamed AS (
    -- pinners first, by how long they pinned it; then the holders of the growth
    SELECT resource, task, 0 AS tier, pin_ns AS ns FROM pinners
    UNION ALL
    SELECT h.resource, h.task, 1 AS tier, h.unit_ns AS ns FROM holders AS h
    WHERE NOT EXISTS (SELECT 1 FROM pinners AS p WHERE p.resource = h.resource
                      AND p.task = h.task)
), ranked AS (
    SELECT *, ns / sum(ns) OVER (PARTITION BY resource, tier) AS share,
           row_number() OVER (PARTITION BY resource ORDER BY tier, ns DESC, task) AS place
    FROM blamed
)
SELECT
    e.resource,
    least(1.0, e.growth_rising_share) * least(1.0, e.growth_span_share / 0.3)
        * least(1.0, e.growth_rise / (getvariable('growth_min_rise') * greatest(e.growth_base, 1)))
        AS score,
    (SELECT list(task ORDER BY place) FROM ranked r
     WHERE r.resource = e.resource AND (place = 1 OR tier = 0 OR share >= 0.1) AND place <= 5)
        AS culprit_tasks,
    []::BIGINT[] AS victim_tasks,
    to_json({
        'growth_rise': e.growth_rise, 'growth_base': e.growth_base,
        'growth_slope_per_s': round(e.growth_slope_per_s, 1),
        'rising_share': round(e.growth_rising_share, 3),
        'span_share': round(e.growth_span_share, 3), 'peak_outstanding': e.peak,
        'final_outstanding': e.final,
        'top_culprit_share': (SELECT round(max(share), 3) FROM ranked r
                              WHERE r.resource = e.resource AND tier = 1),
        'pinned_by': (SELECT count(*) FROM pinners p WHERE p.resource = e.resource)
    })::VARCHAR AS evidence,
    printf('%s grew by %d units (%.0f per second) for %.1f s without levelling off',
           e.resource, e.growth_rise, e.growth_slope_per_s,
           (e.growth_peak_ts - e.growth_start_ts) / 1e9) AS summary,
    CAST(NULL AS VARCHAR) AS why_not
FROM episode AS e
UNION ALL
-- the verdict on every other resource that rose at all: what fell short
SELECT
    m.resource, CAST(NULL AS DOUBLE), []::BIGINT[], []::BIGINT[],
    to_json({
        'growth_rise': m.growth_rise, 'growth_base': m.growth_base,
        'rising_share': round(m.growth_rising_share, 3),
        'span_share': round(m.growth_span_share, 3), 'growth_noise': round(m.growth_noise, 1),
        'plateau': m.growth_plateau, 'peak_outstanding': m.peak, 'capacity': m.capacity
    })::VARCHAR,
    '',
    CASE
        WHEN m.units_differ AND coalesce(m.growth_sustained, false) THEN
            printf('its %d RELEASEs each gave back 1 unit while its ACQUIREs took %.0f on average: '
                   'they count different things, so what is outstanding is no measure of growth',
                   m.releases, m.acquired / m.acquires)
        WHEN coalesce(m.growth_plateau, false) THEN
            'outstanding rose and levelled off: a warm-up, not growth'
        WHEN NOT coalesce(m.growth_sustained, false) THEN
            printf('outstanding did not keep rising: it rose in %.0f%% of its episode''s windows',
                   100 * coalesce(m.growth_rising_share, 0))
        WHEN m.growth_rise < getvariable('growth_min_rise') * greatest(m.growth_base, 1) THEN
            printf('it rose by %d from %d; growth needs %g times the level it started from (growth_min_rise)',
                   m.growth_rise, m.growth_base, getvariable('growth_min_rise'))
        WHEN m.growth_span_share < getvariable('growth_min_span') THEN
            printf('the rise lasted %.0f%% of the trace; growth needs %.0f%% (growth_min_span)',
                   100 * m.growth_span_share, 100 * getvariable('growth_min_span'))
        WHEN m.growth_rise < getvariable('growth_min_noise_ratio') * m.growth_noise THEN
            printf('it rose by %d, under %g times the %.0f that lost events alone could add (growth_min_noise_ratio)',
                   m.growth_rise, getvariable('growth_min_noise_ratio'), m.growth_noise)
        ELSE
            printf('its count peaked at %d, above 1.5 times its capacity of %d: the events do not add up',
                   m.peak, m.capacity)
    END
FROM counted AS m
WHERE m.growth_rise > 0 AND m.resource NOT IN (SELECT resource FROM episode);
