"""Durations as a person writes them on the command line: ``30s``, ``10ms``, ``2m``."""

from __future__ import annotations

import re

from gigi.errors import RecordError

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|m|h)?\s*$")


def parse_duration(text: str, option: str = "duration") -> float:
    """Seconds in ``text``; a bare number is seconds.

    >>> parse_duration("10ms"), parse_duration("30s"), parse_duration("2m"), parse_duration("1.5")
    (0.01, 30.0, 120.0, 1.5)
    >>> parse_duration("ten")
    Traceback (most recent call last):
    gigi.errors.RecordError: --duration 'ten': expected a number and a unit (us, ms, s, m, h), ...
    """
    match = _DURATION.match(text)
    if match is None:
        raise RecordError(
            f"--{option} {text!r}: expected a number and a unit (us, ms, s, m, h), like 30s"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]
