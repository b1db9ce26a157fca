"""Each proposal checked against its function's code (``_verify.verify``): an ACQUIRE must
take what the resource holds, a RELEASE give it back, a WAIT stand on a slow path, a USE
touch the resource's data. Every later rule revises what this one kept."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import free_heads, links_of, queue_heads, records_of
from gigi.scan._rules._found import Found, Site
from gigi.scan._verify import verify


def verified(found: Found) -> Found:
    # a resource's records, its lists and its lists of free units: read once per resource
    lists = {}
    for g in found.resources:
        links = links_of(g)
        lists[g.name] = (records_of(g), links, free_heads(g, links), queue_heads(g, links))
    sites = []
    for c in found.proposals:
        fn = found.functions.get((c.file, c.function))
        g = found.by_name.get(c.resource)
        mine, links, free, queues = lists[c.resource] if g else (set(), set(), set(), set())
        level, positions, lengths = (g.level, g.positions, g.lengths) if g else ("", [], [])
        v = verify(c, fn, mine, g is not None, links, level, free, queues, positions, lengths)
        sites.append(Site(c, v.ok, v.reason))
    return replace(found, sites=(*found.sites, *sites))
