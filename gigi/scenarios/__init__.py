"""Scenario suite: small workloads instrumented with the probes, each reproducing the mechanism
of a real reported issue, with its ground truth; and healthy ones that must yield no finding.

``SCENARIOS[name].run(trace_dir)`` records the workload; ``truth`` says what rank 1 must be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gigi.errors import GigiError, did_you_mean


@dataclass(frozen=True)
class Truth:
    """What rank 1 of the diagnosis must say."""

    resource: str
    failure_mode: str
    culprit: str | None  # prefix of the culprit task's name; None: no task is to blame


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str  # the issue it reproduces
    truth: Truth | None  # None: a healthy workload, no finding expected
    body: Callable[[float], None]
    seconds: float = 1.5

    def run(self, trace_dir: Path, seconds: float | None = None) -> None:
        """Record the workload into ``trace_dir``."""
        import gigi.probes as gp

        gp.enable(trace_dir, interval=0.2, buffer_events=1 << 16)
        try:
            self.body(seconds or self.seconds)
        finally:
            gp.disable()


def _registry() -> dict[str, Scenario]:
    from gigi.scenarios import _workloads

    return {s.name: s for s in _workloads.ALL}


def get(name: str) -> Scenario:
    scenarios = _registry()
    if name not in scenarios:
        raise GigiError(
            f"no scenario {name!r}{did_you_mean(name, scenarios)}; "
            f"`gigi-query demo --list` lists them"
        )
    return scenarios[name]


def all_scenarios() -> list[Scenario]:
    return list(_registry().values())
