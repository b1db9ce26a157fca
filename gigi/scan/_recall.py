"""Recall: what proposes resources and the sites of their events, before anything checks
them. Two implementations answer the same two questions: the offline rules
(``_offline.phase1``/``phase2``) and an LLM (``_llm.LLMBackend``); whatever they propose is
verified by the same rules (``_rules``)."""

from __future__ import annotations

from typing import Protocol

from gigi.scan._offline import (
    REFCOUNT,
    Candidate,
    ResourceGuess,
    arenas,
    gives_units,
    growables,
    limited_counts,
    list_elements,
    log_levels,
    owners,
    phase1,
    phase2,
    resource_of,
    shared_objects,
    stashed_counts,
    takes_units,
)
from gigi.scan._parse import Function, Member, Record
from gigi.scan._summaries import through_calls


def counts_moved(
    fn: Function, resources: dict[str, ResourceGuess], main: str | None = None
) -> set[str]:
    """The resources whose own counts FN raises or lowers: besides the one it works on most
    (a table's), the one it takes or drops a unit of on the way (a reference on an entry the
    table's lookup returns, ``e->ref_cnt++``)."""
    out = set()
    # and the resources whose objects' references it takes or drops (it->refcount++ on an
    # item the hash table found: the item is the slab class's), where the one it works on
    # (MAIN) is not among them (a page's references are its pager's, and its cache's)
    owning: dict[str, set[str]] = {}
    for name, g in resources.items():
        for e in g.elements:
            owning.setdefault(e, set()).add(name)
    for a in fn.assigns:
        record, _, member = a.target.partition(".")
        # a step of a fixed amount (++, += 1), not an adjustment computed from other state
        # (a page moved between caches: nPurgeable -= other->bPurgeable - mine)
        step = set(a.sources) <= {a.target}
        if not member or not step or not (takes_units(a) or gives_units(a)):
            continue
        if record in resources:
            out.add(record)
        elif REFCOUNT.search(member) and main not in owning.get(record, set()):
            out |= owning.get(record, set())
    return out


class Recall(Protocol):
    """What proposes: the resources among a tree's records, and each function's events."""

    def resources(self, records: list[Record], members: list[Member]) -> list[ResourceGuess]:
        """The records that are resources, each with its sharing, unit and objects."""
        ...

    def events(self, fn: Function, resource: str, guess: ResourceGuess) -> list[Candidate]:
        """The events FN, a function that works on RESOURCE, performs on it."""
        ...

    def report(self) -> dict | None:
        """What the recall cost (requests, cache hits), for the scan's stats; None: nothing."""
        ...


class OfflineRecall:
    """The offline rules: records by their members' structure and names, events by what a
    function does to them. Sends nothing anywhere."""

    def resources(self, records: list[Record], members: list[Member]) -> list[ResourceGuess]:
        return phase1(records, members)

    def events(self, fn: Function, resource: str, guess: ResourceGuess) -> list[Candidate]:
        return phase2(fn, resource, guess)

    def report(self) -> None:
        return None


def recall(
    recaller: Recall,
    functions: dict[tuple[str, str], Function],
    records: list[Record],
    members: list[Member],
) -> tuple[list[ResourceGuess], list[Candidate]]:
    """The resources RECALLER proposes and the events it proposes in the functions that work
    on them, with the arenas and the logs counted by their end position, which a code
    pattern shows whatever proposed the records."""
    list_elements(functions.values(), members)
    limited_counts(functions.values())
    stashed_counts(functions.values(), members)
    through_calls(list(functions.values()), {r.name for r in records})
    guesses = recaller.resources(records, members)
    guesses += arenas(list(functions.values()), members, guesses)
    guesses += growables(list(functions.values()), members, guesses)
    guesses += shared_objects(list(functions.values()), members, guesses)
    names = {g.name: g for g in guesses}
    own = owners(guesses)
    declared = {g.name: g.file for g in guesses}
    proposals: list[Candidate] = []
    for fn in functions.values():
        res = resource_of(fn, own, declared)
        if res is not None:
            proposals += recaller.events(fn, res, names[res])
        for other in sorted(counts_moved(fn, names, res) - {res}):
            proposals += [
                c
                for c in recaller.events(fn, other, names[other])
                if c.kind in ("ACQUIRE", "RELEASE")
            ]
    logs, logged = log_levels(list(functions.values()), records, members, guesses)
    return [*guesses, *(g for g in logs if g.name not in names)], proposals + logged
