"""Telling sustained growth from a warm-up that levels off, on an outstanding series.

The series is the outstanding units at the end of each of W equal time windows. The growth
episode runs from the lowest point before the peak to the peak. It is sustained when most of
its steps rise; it has levelled off (a plateau) when, after the peak, the series stays near
the peak for a good part of the trace, or when most of the episode's steps are flat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A step "rises" when it adds more than this share of the episode's rise.
RISE_STEP = 0.01
# After the peak, staying within this share of the peak this long (share of windows) is a
# plateau.
PLATEAU_LEVEL = 0.9
PLATEAU_SPAN = 0.3


@dataclass(frozen=True)
class Growth:
    base: int  # lowest outstanding before the peak
    peak: int  # highest outstanding (at a window's end)
    rise: int  # peak - base, units
    start_window: int  # where the episode starts (the low point)
    peak_window: int  # where it peaks
    rising_share: float  # share of the episode's steps that rise
    span_share: float  # the episode's length, as a share of the trace
    plateau: bool  # levelled off: near the peak for long after it, or mostly flat

    @property
    def sustained(self) -> bool:
        return self.rise > 0 and not self.plateau and self.rising_share >= 0.6


def growth(level: np.ndarray) -> Growth:
    """Analyse one resource's outstanding-per-window series.

    >>> growth(np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 90])).sustained
    True
    >>> growth(np.array([0, 60, 100, 100, 100, 100, 100, 100, 100, 100])).sustained
    False
    """
    w = len(level)
    if w == 0:
        return Growth(0, 0, 0, 0, 0, 0.0, 0.0, False)
    peak_w = int(np.argmax(level))
    start_w = int(np.argmin(level[: peak_w + 1]))
    base, peak = int(level[start_w]), int(level[peak_w])
    rise = peak - base
    steps = np.diff(level[start_w : peak_w + 1])
    rising = float(np.mean(steps > RISE_STEP * rise)) if len(steps) and rise > 0 else 0.0
    after = level[peak_w:]
    near_peak = float(np.sum(after >= PLATEAU_LEVEL * peak)) / w if peak > 0 else 0.0
    plateau = near_peak >= PLATEAU_SPAN or (len(steps) > 0 and rising < 0.5)
    return Growth(base, peak, rise, start_w, peak_w, rising, (peak_w - start_w) / w, plateau)
