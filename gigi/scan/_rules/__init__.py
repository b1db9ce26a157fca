"""Verification as an ordered tuple of rules, one module each: every rule takes what the scan
has found so far (``Found``) and returns it revised. The first checks each proposal against
the code (``verified``); the ones after it move an event to where callers see it, name what a
wait waits for, reject what another event already covers, and find what no record proposed
(a lock API, a wait on a condition variable, an allocator that keeps a budget, a count
waited on, a lock taken by compare-and-swap, the thin wrappers of them).

Each rule has its own tests on small C snippets (tests/test_scan_rules.py); ``scan`` takes the
tuple as an argument, so a test or a bench can run without one rule to see what it adds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.allocators import allocators_with_a_budget
from gigi.scan._rules.callers import handed_through_calls
from gigi.scan._rules.cas_locks import locks_by_compare_and_swap
from gigi.scan._rules.conditions import waits_on_conditions
from gigi.scan._rules.containers import pools_in_containers
from gigi.scan._rules.counts import counts_waited_for
from gigi.scan._rules.grows import grows_when_full
from gigi.scan._rules.holds import uses_within_holds
from gigi.scan._rules.interface import at_the_interface
from gigi.scan._rules.libraries import pools_of_libraries
from gigi.scan._rules.lists import linked_through_calls
from gigi.scan._rules.lock_waits import waits_around_locks
from gigi.scan._rules.locks import lock_apis
from gigi.scan._rules.misses import waits_on_what_they_missed
from gigi.scan._rules.moves import uses_inside_a_move
from gigi.scan._rules.narrows import waits_on_their_slow_branch
from gigi.scan._rules.objects import objects_through_calls
from gigi.scan._rules.published import published_after_writing
from gigi.scan._rules.reads import waits_on_what_they_read
from gigi.scan._rules.reserves import reservations
from gigi.scan._rules.retries import waits_for_what_they_retry
from gigi.scan._rules.room import makes_room_when_low
from gigi.scan._rules.slots import claims_free_slots
from gigi.scan._rules.slow_paths import slow_path_callees
from gigi.scan._rules.stacks import global_free_lists
from gigi.scan._rules.verified import verified
from gigi.scan._rules.wait_objects import waits_name_their_object
from gigi.scan._rules.waits_first import waits_in_a_callee_first
from gigi.scan._rules.wrappers import through_wrappers

Rule = Callable[[Found], Found]

RULES: tuple[Rule, ...] = (
    verified,
    uses_inside_a_move,
    objects_through_calls,
    at_the_interface,
    waits_on_what_they_missed,
    waits_on_what_they_read,
    lock_apis,
    waits_around_locks,
    reservations,
    pools_of_libraries,
    waits_on_conditions,
    allocators_with_a_budget,
    counts_waited_for,
    pools_in_containers,
    locks_by_compare_and_swap,
    linked_through_calls,
    global_free_lists,
    claims_free_slots,
    through_wrappers,
    grows_when_full,
    waits_for_what_they_retry,
    makes_room_when_low,
    slow_path_callees,
    waits_in_a_callee_first,
    published_after_writing,
    handed_through_calls,
    uses_within_holds,
    waits_on_their_slow_branch,
    waits_name_their_object,
)


# the rules that carry a callee's events to its callers: run once more at the end, so that
# what the rules after them found (a longer function's event: do_item_alloc keeps what
# do_item_alloc_pull acquired) reaches the thin wrappers of it too (item_alloc)
CARRIERS: tuple[Rule, ...] = (through_wrappers,)


def apply(found: Found, rules: tuple[Rule, ...] = RULES) -> tuple[Found, dict[str, float]]:
    """FOUND revised by each of RULES in order, and the seconds each took, by its name."""
    seconds = {}
    for rule in rules:
        t = time.perf_counter()
        found = rule(found)
        seconds[rule.__name__] = round(time.perf_counter() - t, 3)
    for rule in (r for r in CARRIERS if r in rules):
        t = time.perf_counter()
        found = _new_events(rule, found)
        seconds[rule.__name__] += round(time.perf_counter() - t, 3)
    return found, seconds


def _new_events(rule: Rule, found: Found) -> Found:
    """FOUND with the sites RULE adds that give a function an event it had not."""
    have = {(s.candidate.function, s.candidate.kind) for s in found.sites if s.ok}
    added = rule(found).sites[len(found.sites) :]
    new = [s for s in added if s.ok and (s.candidate.function, s.candidate.kind) not in have]
    return replace(found, sites=(*found.sites, *new))


__all__ = ["RULES", "Found", "Rule", "Site", "apply"]
