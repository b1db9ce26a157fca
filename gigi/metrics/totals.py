"""Per-resource totals and outstanding over time, in one pass over the events (numba).

``resource_totals`` walks the events in trace order once and returns, per resource code:
WAIT count, total and longest wait (open waits counted to the trace end), ACQUIRE/USE/RELEASE
counts and units, peak and final outstanding, and per time window the outstanding at the
window's end, the ACQUIREs in it and the summed squares of the units its ACQUIREs and RELEASEs
moved (what lost events could make outstanding drift by). Its twin is
``gigi/metrics/sql/resource_totals.sql``.
"""

from __future__ import annotations

import numpy as np

from gigi._interrupts import held

# Columns of the per-resource result, in order.
TOTALS = (
    "waits",
    "wait_ns",
    "wait_max_ns",
    "acquires",
    "acquired",
    "uses",
    "used",
    "releases",
    "released",
    "peak",
    "final",
)


class Totals:
    """The kernel's running state, fed batch by batch (``add``) in trace order, so a trace
    of any length goes through in the memory of one batch; ``result()`` when done."""

    def __init__(self, n_res: int, start: int, end: int, windows: int = 50) -> None:
        self.start, self.end = start, end
        self.out = np.zeros((n_res, len(TOTALS)), np.int64)
        self.outstanding = np.zeros(n_res, np.int64)
        self.level = np.zeros((n_res, windows), np.int64)  # outstanding at each window's end
        self.rate = np.zeros((n_res, windows), np.int64)  # ACQUIREs in each window
        # sum of the squared units of each window's ACQUIREs and RELEASEs
        self.square = np.zeros((n_res, windows), np.float64)
        self.w_cur = 0

    @held
    def add(self, kind, res, amount, ts, dur) -> None:
        from gigi.metrics._totals_kernel import step

        as64 = [np.ascontiguousarray(x, dtype=np.int64) for x in (kind, res, amount, ts, dur)]
        self.w_cur = step(
            *as64,
            self.start,
            self.end,
            self.out,
            self.outstanding,
            self.level,
            self.rate,
            self.square,
            self.w_cur,
        )

    def result(self):
        """``(totals, level, rate)``: per resource the TOTALS, outstanding at each window's
        end, ACQUIREs per window."""
        self.level[:, self.w_cur :] = self.outstanding[:, None]
        self.out[:, 10] = self.outstanding
        return self.out, self.level, self.rate


def resource_totals(
    kind, res, amount, ts, dur, n_res: int, start: int, end: int, windows: int = 50
):
    """See the module docstring; ``dur`` is -1 for a wait still open at the end."""
    t = Totals(n_res, start, end, windows)
    t.add(kind, res, amount, ts, dur)
    return t.result()
