-- sites: code locations that emit events (from the writers, the scanner or --sites).
CREATE VIEW sites AS
SELECT
    -- site: site id, as in events.site
    site,
    -- file: source file, relative to the scanned source root
    file,
    -- line: 1-based line in file
    line,
    -- function: qualified name of the enclosing function
    function,
    -- kind: event kind code emitted there (0 WAIT, 1 ACQUIRE, 2 USE, 3 RELEASE)
    kind,
    -- resource: resource class the site acts on
    resource,
    -- origin: who proposed the site: llm, heuristic, manual or adapter
    origin,
    -- verified: whether the site passed static verification
    verified
FROM {{sites}};
