"""Locks as the servers define them, as resources of a trace; shared by both recorders.

A server's lock on one thing (a table, a row, a transaction id, an advisory key) is taken in a
mode, and the modes differ in what they let others do at the same time. The trace's resources
table has one ``capacity`` and one ``sharing`` per resource class, so a class cannot mix modes
that exclude everybody with modes that admit many. Each lock type is therefore two classes:

- ``<type>`` (``mdl.table``, ``pg.lock.transactionid``, ``innodb.row_lock``): the holds in the
  modes that conflict with themselves (EXCLUSIVE, SHARED_UPGRADABLE, SHARED_NO_WRITE and
  SHARED_NO_READ_WRITE for a metadata lock; ShareUpdateExclusive, ShareRowExclusive, Exclusive
  and AccessExclusive in PostgreSQL; InnoDB's X record lock). Two of them are never granted on
  one object at once, so the class is ``sharing = exclusive`` with ``capacity = 1``: the
  capacity of one object (one lock) of the class, the object being the locked thing.
- ``<type>.shared`` (``mdl.table.shared``, ``pg.lock.relation.shared``): the holds in the modes
  that admit each other (SHARED_READ, SHARED_WRITE, AccessShare, RowExclusive, ShareLock, an
  InnoDB S or gap lock): ``sharing = shared``, no capacity.

A transaction that holds one object in several modes of one family has one hold of it. A WAIT
is on the class of what keeps it waiting: the exclusive class when another transaction holds
the object in an exclusive mode, else the shared class (an ALTER waiting for SELECTs' shared
locks waits on ``mdl.table.shared``; an INSERT queued behind that ALTER's SHARED_UPGRADABLE
waits on ``mdl.table``, whose holder, the ALTER, waits in turn: the chain leads to the SELECT).

Polling sees a lock change hands between two polls; the recorders write the previous holder's
RELEASE at or before the next holder's ACQUIRE, so exclusive holds of one object never
overlap in the trace.
"""

from __future__ import annotations

SHARED_SUFFIX = ".shared"


def lock_class(base: str, exclusive: bool) -> str:
    """The resource class of a hold (or wait) on a lock of type ``base``.

    >>> lock_class("mdl.table", True), lock_class("mdl.table", False)
    ('mdl.table', 'mdl.table.shared')
    """
    return base if exclusive else base + SHARED_SUFFIX


def lock_type(resource: str) -> str:
    """The lock type a class of it stands for: ``lock_class``'s inverse.

    >>> lock_type("pg.lock.relation.shared"), lock_type("pg.lock.tuple")
    ('pg.lock.relation', 'pg.lock.tuple')
    """
    return resource if is_exclusive(resource) else resource[: -len(SHARED_SUFFIX)]


def is_exclusive(resource: str) -> bool:
    return not resource.endswith(SHARED_SUFFIX)


def resource_row(resource: str) -> dict:
    """The resources table's row of a lock class.

    >>> resource_row("pg.lock.advisory")
    {'resource': 'pg.lock.advisory', 'capacity': 1, 'unit': 'locks', 'sharing': 'exclusive'}
    >>> resource_row("pg.lock.advisory.shared")["sharing"]
    'shared'
    """
    if is_exclusive(resource):
        return {"resource": resource, "capacity": 1, "unit": "locks", "sharing": "exclusive"}
    return {"resource": resource, "capacity": None, "unit": "locks", "sharing": "shared"}


def ordered(acquires: list[tuple], releases: list[tuple]) -> None:
    """Within one poll, the RELEASEs and ACQUIREs of exclusive classes put in order: a hold
    released in this poll ends at or before the first ACQUIRE of the same (class, object) by
    another task, and every such ACQUIRE is at or after it. Both lists hold mutable records
    that begin ``[ts, resource, object, task, floor, ...]`` (``floor``: a RELEASE's earliest
    allowed time, its ACQUIRE's; unused for ACQUIREs); their ``ts`` are changed in place.

    >>> acq = [[150, "l", 7, 2, None]]
    >>> rel = [[200, "l", 7, 1, 100]]
    >>> ordered(acq, rel); rel[0][0], acq[0][0]
    (150, 150)
    >>> acq = [[150, "l", 7, 2, None]]
    >>> rel = [[200, "l", 7, 1, 180]]
    >>> ordered(acq, rel); rel[0][0], acq[0][0]
    (180, 180)
    """
    first: dict[tuple, int] = {}
    for a in acquires:
        if is_exclusive(a[1]):
            key = (a[1], a[2])
            first[key] = min(first.get(key, a[0]), a[0])
    if not first:
        return
    ends: dict[tuple, int] = {}
    for r in releases:
        key = (r[1], r[2])
        if key in first:
            others = [a[0] for a in acquires if (a[1], a[2]) == key and a[3] != r[3]]
            if others:
                r[0] = max(r[4] if r[4] is not None else min(others), min(r[0], min(others)))
                ends[key] = max(ends.get(key, r[0]), r[0])
    for a in acquires:
        end = ends.get((a[1], a[2]))
        if end is not None and a[0] < end:
            a[0] = end
