-- peak_by_block: the totals kernel's peak (the most units outstanding right after an
-- ACQUIRE, at least 0) per resource, as a query an engine can spread over its workers: the
-- running sum is taken inside blocks of {{block}} events (by seq) in parallel, and each
-- block's highest point is lifted by what the blocks before it left outstanding.
WITH d AS (
    SELECT resource, seq // {{block}} AS block, seq, kind,
           CASE kind WHEN 1 THEN amount ELSE -amount END AS delta
    FROM events
    WHERE kind IN (1, 3)
), r AS (
    SELECT resource, block, kind, delta,
           sum(delta) OVER (PARTITION BY resource, block ORDER BY seq
                            ROWS UNBOUNDED PRECEDING) AS run
    FROM d
), b AS (
    SELECT resource, block, sum(delta) AS net, max(CASE WHEN kind = 1 THEN run END) AS top
    FROM r
    GROUP BY resource, block
), lifted AS (
    SELECT resource, top,
           coalesce(sum(net) OVER (PARTITION BY resource ORDER BY block
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS before
    FROM b
)
SELECT
    -- resource: resource class
    resource,
    -- peak: most units outstanding right after an ACQUIRE (0 when none)
    greatest(coalesce(max(top + before), 0), 0) AS peak
FROM lifted
GROUP BY resource;
