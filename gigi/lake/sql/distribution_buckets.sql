-- distribution_buckets: the log2 histogram of the distribution kernel: per resource and
-- bucket, how many durations of {{durations}} fall in it (bucket b: 2^(b-1) <= ns < 2^b, the
-- bit length of ns, at most 63; bucket 0: 0 ns or less). Buckets with none have no row.
SELECT
    -- resource: resource class
    resource,
    -- bucket: log2 bucket, 0 to 63
    CASE WHEN ns <= 0 THEN 0 ELSE least(length(bin(ns)), 63) END AS bucket,
    -- n: durations in it
    count(*) AS n
FROM {{durations}}
GROUP BY ALL;
