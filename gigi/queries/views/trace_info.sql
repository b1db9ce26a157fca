-- trace_info: one row describing the trace as a whole (from the store's manifest).
CREATE VIEW trace_info AS
SELECT
    -- trace_id: the trace's id in the store
    {{trace_id}}::VARCHAR AS trace_id,
    -- start: first event's ts, ns
    {{start}}::BIGINT AS start,
    -- end: latest ts + dur over all events, ns; where open waits and open holds are cut
    {{end}}::BIGINT AS "end",
    -- events: events in the trace
    {{event_count}}::BIGINT AS events,
    -- dropped: events the writers reported lost
    {{dropped}}::BIGINT AS dropped;
