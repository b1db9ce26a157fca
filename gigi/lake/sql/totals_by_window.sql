-- totals_by_window: the totals kernel (gigi.metrics.totals) as a query an engine can spread
-- over its workers: per resource and time window (the kernel's windows: the trace cut in
-- {{windows}} equal parts), the events' counts and units by kind and their waits. Summed
-- over the windows they are the kernel's totals; the change in outstanding, summed up to a
-- window, is its outstanding at the window's end.
SELECT
    -- resource: resource class
    resource,
    -- window_index: the window the event's ts falls in, 0-based (before the start: 0)
    least(greatest(ts - {{start}}, 0) * {{windows}} // {{span}}, {{windows}} - 1) AS window_index,
    -- waits: WAIT events
    count(*) FILTER (WHERE kind = 0) AS waits,
    -- wait_ns: time waited, ns (a wait still open runs to the trace end)
    sum(CASE WHEN kind = 0 THEN coalesce(dur, greatest({{end}} - ts, 0)) ELSE 0 END) AS wait_ns,
    -- wait_max_ns: longest wait, ns; null when none
    max(CASE WHEN kind = 0 THEN coalesce(dur, greatest({{end}} - ts, 0)) END) AS wait_max_ns,
    -- acquires: ACQUIRE events
    count(*) FILTER (WHERE kind = 1) AS acquires,
    -- acquired: units acquired
    sum(CASE WHEN kind = 1 THEN amount ELSE 0 END) AS acquired,
    -- uses: USE events
    count(*) FILTER (WHERE kind = 2) AS uses,
    -- used: units used
    sum(CASE WHEN kind = 2 THEN amount ELSE 0 END) AS used,
    -- releases: RELEASE events
    count(*) FILTER (WHERE kind = 3) AS releases,
    -- released: units released
    sum(CASE WHEN kind = 3 THEN amount ELSE 0 END) AS released,
    -- squares: the summed squares of the units of ACQUIREs and RELEASEs (the growth noise)
    sum(CASE WHEN kind IN (1, 3) THEN amount::DOUBLE * amount::DOUBLE ELSE 0 END) AS squares
FROM events
GROUP BY ALL;
