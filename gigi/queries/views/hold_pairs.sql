-- hold_pairs: the pairing of ACQUIRE to RELEASE by the spec's rule, as ingest computed it
-- (gigi/metrics/pairing.py): one row per matched amount. Use the view holds instead.
CREATE VIEW hold_pairs AS
SELECT
    -- acquire_seq: events.seq of the ACQUIRE; null when the RELEASE ended a hold that began before the trace
    acquire_seq,
    -- release_seq: events.seq of the RELEASE; null when the hold was still open at the end
    release_seq,
    -- amount: units this ACQUIRE/RELEASE match covers
    amount
FROM {{hold_pairs}};
