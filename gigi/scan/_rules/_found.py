"""What the rules pass along: the scan's functions, the resources found so far, the
proposals, and every verdict given."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gigi.scan._offline import Candidate, ResourceGuess, owners
from gigi.scan._parse import Function


class Site(NamedTuple):
    """A candidate site and its verdict: kept (``ok``) or not, and why, in words."""

    candidate: Candidate
    ok: bool
    why: str


@dataclass(frozen=True)
class Found:
    functions: dict[tuple[str, str], Function]  # by (file, name)
    resources: tuple[ResourceGuess, ...]  # the recall's first, then what rules found
    proposals: tuple[Candidate, ...]  # what the recall proposed, unchecked
    sites: tuple[Site, ...] = ()  # every verdict so far
    # resources a rule found as a lock handed out by a lock API (not proposed from a record)
    locks: frozenset[str] = field(default_factory=frozenset)

    @cached_property
    def by_name(self) -> dict[str, ResourceGuess]:
        return {g.name: g for g in self.resources}

    @cached_property
    def owners(self) -> dict[str, list[str]]:
        """Record -> the resources it belongs to (see ``_offline.owners``)."""
        return owners(list(self.resources))

    @cached_property
    def declared(self) -> dict[str, str]:
        """Resource -> the file it is declared in."""
        return {g.name: g.file for g in self.resources}

    def kept(self) -> list[Candidate]:
        return [s.candidate for s in self.sites if s.ok]
