-- executing: what a finding's culprit tasks were executing, from perf samples: one row per
-- perf event and innermost function of the culprits' samples (samples_by_task) taken while
-- the finding's victims waited for its resource (basis victim_waits) or, for a finding
-- without such waits, while the culprits held it (basis culprit_holds). Overlapping windows
-- are merged, so no sample counts twice. Parameters: $resource, $culprits, $victims, $basis.
WITH windows AS (
    SELECT ts AS lo, end_ts AS hi
    FROM waits
    WHERE $basis = 'victim_waits' AND resource = $resource
      AND task IN (SELECT unnest($victims::BIGINT[]))
    UNION ALL
    SELECT acquire_ts, acquire_ts + hold_ns
    FROM holds
    WHERE $basis = 'culprit_holds' AND resource = $resource
      AND task IN (SELECT unnest($culprits::BIGINT[]))
), marked AS (
    SELECT lo, hi,
           CASE WHEN lo <= max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING
                                                              AND 1 PRECEDING)
                THEN 0 ELSE 1 END AS starts
    FROM windows
), merged AS (
    SELECT min(lo) AS lo, max(hi) AS hi
    FROM (SELECT lo, hi, sum(starts) OVER (ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
          FROM marked)
    GROUP BY island
), picked AS (
    SELECT s.*
    FROM samples_by_task AS s
    JOIN merged AS m ON s.ts BETWEEN m.lo AND m.hi
    WHERE s.task IN (SELECT unnest($culprits::BIGINT[]))
)
SELECT
    -- event: perf event that took the samples (null when perf script did not print it)
    event,
    -- function: innermost function executing
    leaf AS function,
    -- samples: samples with this function innermost
    count(*) AS samples,
    -- weight: their period summed (cpu-clock: ns), or their count when perf gave no period
    sum(coalesce(period, 1)) AS weight,
    -- callers: the commonest three callers above it, nearest first
    mode(stack[2:4]) AS callers,
    -- tasks: culprit tasks the samples came from
    list(DISTINCT task ORDER BY task) AS tasks,
    -- threads: OS threads the samples came from
    list(DISTINCT thread ORDER BY thread) AS threads
FROM picked
GROUP BY event, leaf
ORDER BY event, weight DESC, function;
