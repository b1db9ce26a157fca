"""Invariants of an ingested trace, checked with SQL over its views.

``self_check(con)`` returns the broken ones (empty when all hold); tests run it after every
ingest. Each check is one query that must return no rows.
"""

from __future__ import annotations

CHECKS = {
    "events are numbered 0..n-1 in order": """
        SELECT 1 FROM (SELECT count(*) AS n, min(seq) AS lo, max(seq) AS hi,
                              count(DISTINCT seq) AS d FROM events)
        WHERE n > 0 AND (lo <> 0 OR hi <> n - 1 OR d <> n)""",
    "ts never decreases along seq": """
        SELECT 1 FROM (SELECT ts < lag(ts) OVER (ORDER BY seq) AS back FROM events) WHERE back""",
    "the manifest counts every event": """
        SELECT 1 FROM trace_info WHERE events <> (SELECT count(*) FROM events)""",
    "durations are not negative": """
        SELECT 1 FROM events WHERE dur < 0
        UNION ALL SELECT 1 FROM waits WHERE dur < 0
        UNION ALL SELECT 1 FROM holds WHERE hold_ns < 0""",
    "every ACQUIRE's units are paired exactly once": """
        SELECT 1 FROM events e
        LEFT JOIN (SELECT acquire_seq, sum(amount) AS n FROM hold_pairs GROUP BY 1) p
            ON p.acquire_seq = e.seq
        WHERE e.kind = 1 AND e.amount > 0 AND coalesce(p.n, 0) <> e.amount""",
    "every RELEASE's units are paired exactly once": """
        SELECT 1 FROM events e
        LEFT JOIN (SELECT release_seq, sum(amount) AS n FROM hold_pairs
                   WHERE release_seq IS NOT NULL GROUP BY 1) p ON p.release_seq = e.seq
        WHERE e.kind = 3 AND e.amount > 0 AND coalesce(p.n, 0) <> e.amount""",
    "a hold pairs an ACQUIRE and a later RELEASE of the same resource and object": """
        SELECT 1 FROM hold_pairs p JOIN events a ON a.seq = p.acquire_seq
        JOIN events r ON r.seq = p.release_seq
        WHERE a.kind <> 1 OR r.kind <> 3 OR r.seq < a.seq OR a.resource <> r.resource
            OR a.object <> r.object""",
}


def self_check(con) -> list[str]:
    """The invariants that do not hold on the trace behind ``con`` (a ``connect`` result)."""
    return [name for name, sql in CHECKS.items() if con.sql(sql + " LIMIT 1").fetchall()]
