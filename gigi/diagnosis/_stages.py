"""Time and peak memory of each stage of a diagnosis, for bench/ and ``--stages``."""

from __future__ import annotations

import resource
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field


def peak_rss() -> int:
    """The process's peak resident set so far, bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass
class Stages:
    """``with stages("name"): ...`` records (name, seconds, peak RSS bytes at its end)."""

    rows: list[tuple[str, float, int]] = field(default_factory=list)

    @contextmanager
    def __call__(self, name: str):
        t = time.perf_counter()
        yield
        self.rows.append((name, time.perf_counter() - t, peak_rss()))
