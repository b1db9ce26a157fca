"""Objects linked into and out of a resource's lists through a list library's functions
(libusual's ``statlist_append(&pool->idle_server_list, &server->head)``, the kernel-style
``list_add``/``list_del``, a ``dlist_push_head``). Each function's effect on the lists handed
to it is read from its code, to a fixed point over the calls it makes: it links an item into
a list (a member of the list set to the item: ``list->prev = item``), unlinks an item from
wherever it is (its neighbours set past it: ``item->prev->next = item->next``), or pops one
off a list (unlinks what the list holds: ``list_del(list->next)``). At a call that hands such
a function a member of a resource's record, the list says what moving an object there
means: onto a list of free units (``idle_server_list``, a free list) it is given back, off
it taken; onto a list of units in use or of work waiting its turn (``used_server_list``,
``waiting_client_list``) it is taken, off it given back. A list named neither way is
bookkeeping, and moves nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gigi.scan._offline import FLAG, FREE_LIST, QUEUE, Candidate, records_of
from gigi.scan._rules._code import record_at, root
from gigi.scan._rules._found import Found, Site

ROUNDS = 4  # wrappers of wrappers of a list's primitives, and no further
# a list of units in use, or of tasks waiting their turn: what is on it holds a place
HELD = re.compile(rf"{FLAG.pattern}|{QUEUE.pattern}|active|wait", re.I)
# an argument naming what a list holds, not an item: list->next, (head).first
HOLDS = re.compile(r"(->|\.)\s*(next|prev|first|last)\s*\)?\s*$")


@dataclass
class Moves:
    """What a function does to the lists it is handed, by parameter position."""

    links: set = field(default_factory=set)  # (list, item): links item into list
    unlinks: set = field(default_factory=set)  # item: unlinks it from its list
    pops: set = field(default_factory=set)  # list: takes an item off it
    removes: set = field(default_factory=set)  # (list, item): unlinks item, counted in list


def _moves(found: Found) -> dict[str, Moves]:
    out: dict[str, Moves] = {}
    for _ in range(ROUNDS):
        changed = False
        for fn in found.functions.values():
            at = {n: i for i, (t, n) in enumerate(fn.params) if n and "*" in t}
            m = Moves()
            for a in fn.assigns:
                if a.op == "=" and a.target_base in at:
                    for s in a.sources:
                        if s in at and s != a.target_base:
                            m.links.add((at[a.target_base], at[s]))
            for item, i in at.items():  # its neighbours relinked past it
                if (
                    sum(a.target_base.replace(" ", "").startswith(f"{item}->") for a in fn.assigns)
                    >= 2
                ):
                    m.unlinks.add(i)
            for c in fn.calls:
                got = out.get(c.callee)
                if got is None:
                    continue
                # by the callee's positions, the caller's parameter passed there (or None)
                mine = [at.get(root(x)) for x in c.args]
                m.links |= _pairs(got.links, mine)
                m.removes |= _pairs(got.removes, mine)
                for ii in got.unlinks:
                    if _at(mine, ii) is not None:
                        if HOLDS.search(c.args[ii]):  # what the list holds: list->next
                            m.pops.add(mine[ii])
                        else:  # the item itself, or its node: &server->head
                            m.unlinks.add(mine[ii])
                m.pops |= {mine[li] for li in got.pops if _at(mine, li) is not None}
            # an item unlinked while the list handed beside it is kept (its count lowered)
            kept = {at[a.target_base] for a in fn.assigns if a.target_base in at}
            m.removes |= {(li, ii) for ii in m.unlinks for li in kept if li != ii}
            if (m.links or m.unlinks or m.pops or m.removes) and out.get(fn.name) != m:
                out[fn.name] = m
                changed = True
        if not changed:
            break
    return out


def _at(mine: list, i: int) -> int | None:
    return mine[i] if i < len(mine) else None


def _pairs(pairs: set, mine: list) -> set:
    """A callee's (list, item) positions as the caller's own parameters', where both are."""
    return {
        (mine[li], mine[ii])
        for li, ii in pairs
        if _at(mine, li) is not None and _at(mine, ii) is not None
    }


def linked_through_calls(found: Found) -> Found:
    moves = _moves(found)
    if not moves:
        return found
    owner = {}  # record -> the resource that holds it
    for g in found.resources:
        for rec in sorted(records_of(g)):
            owner.setdefault(rec, g.name)
    has = {(c.file, c.function, c.kind) for c, ok, _ in found.sites if ok}
    added = []
    for fn in found.functions.values():
        for c in fn.calls:
            got = moves.get(c.callee)
            if got is None:
                continue
            for li, kind_on_free, kind_held, ii in _events(got):
                if li >= len(c.args):
                    continue
                member = _member(fn, c, c.args[li])
                if member is None or member[0] not in owner:
                    continue
                name = member[1]
                item = root(c.args[ii]) if ii is not None and ii < len(c.args) else ""
                free = _free(name, fn.locals.get(item, ""))
                kind = kind_on_free if free else kind_held if HELD.search(name) else ""
                if not kind or (fn.file, fn.name, kind) in has:
                    continue
                how = (
                    f"{'links' if kind_on_free == 'RELEASE' else 'takes'} {item or 'an object'} "
                    f"{'into' if (kind_on_free == 'RELEASE') else 'off'} "
                    f"{member[0]}.{name} through {c.callee}: a list of "
                    f"{'free units' if free else 'units held'}"
                )
                cand = Candidate(
                    fn.file, fn.name, c.line, kind, owner[member[0]], item, "1", "heuristic", how
                )
                added.append(Site(cand, True, f"verified: {how}"))
                has.add((fn.file, fn.name, kind))
    return replace(found, sites=(*found.sites, *added))


def _events(got: Moves):
    """(list position, kind onto/off a free list, kind on a list of held units, item
    position) for each move: linking in gives back to a free list and takes a place on
    another; unlinking or popping the other way round."""
    for li, ii in sorted(got.links):
        yield li, "RELEASE", "ACQUIRE", ii
    for li in sorted(got.pops):
        yield li, "ACQUIRE", "RELEASE", None
    for li, ii in sorted(got.removes):
        yield li, "ACQUIRE", "RELEASE", ii


def _member(fn, call, arg: str) -> tuple[str, str] | None:
    """The record and member a call's list argument names (``& pool -> idle_server_list``)."""
    m = re.search(r"(?:->|\.)\s*([A-Za-z_]\w*)\s*\)?\s*$", arg)
    if not m:
        return None
    rec = record_at(fn, m.group(1), call.line)
    return (rec, m.group(1)) if rec else None


def _free(name: str, item_type: str) -> bool:
    """Whether a list named NAME holds free units: named so (``idle_server_list``,
    ``conns_pool``), but not for the type of what it holds (a user's ``pool_list`` of
    ``PgPool``s is the list of its pools, not a pool of free ones).

    >>> _free("idle_server_list", "PgSocket *"), _free("pool_list", "PgPool *")
    (True, False)
    """
    hits = {m.group(0).lower() for m in FREE_LIST.finditer(name)}
    named_for = {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", item_type)}
    return bool(hits - named_for)
