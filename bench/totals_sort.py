"""The totals kernel over a lake's trace, its events sorted into trace order in one sort of the
whole trace (the baseline) or a range of ``seq`` at a time (the at-scale path's way), in one
process: time and peak resident memory of each (median of ``--repeat`` runs, alternated), the
ratios, and whether the figures agree.

    python bench/totals_sort.py LAKE [--repeat 3] [--step 8388608]

LAKE is a lake such as ``bench/lake_scale.py --keep`` writes. DuckDB gets the memory limit a
diagnosis gets (``gigi.diagnosis._diagnose.memory_limit``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time
from pathlib import Path

import numpy as np


class PeakRSS:
    """The largest resident set of this process while the block runs, sampled every 0.1 s."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        page = resource.getpagesize()
        while True:
            with open("/proc/self/statm") as f:
                self.peak = max(self.peak, int(f.read().split()[1]) * page)
            if self._stop.wait(0.1):
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lake", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--step", type=int, default=None, help="seq per sort (default: SEQ_STEP)")
    args = ap.parse_args()

    from gigi.diagnosis._diagnose import memory_limit
    from gigi.diagnosis._metrics import _totals
    from gigi.lake._duckdb import connect_lake
    from gigi.lake._duckdb_metrics import SEQ_STEP
    from gigi.lake._scope import open_lake

    step = args.step or SEQ_STEP
    con = connect_lake(open_lake(args.lake), memory_limit=memory_limit(), keep_order=False)
    names = [r[0] for r in con.sql("SELECT resource FROM resources ORDER BY 1").fetchall()]
    start, end, events = con.sql('SELECT start, "end", events FROM trace_info').fetchall()[0]
    ways = {"whole sort": 0, f"seq ranges of {step:,}": step}
    times: dict[str, list[float]] = {w: [] for w in ways}
    peaks: dict[str, list[int]] = {w: [] for w in ways}
    results: dict[str, tuple] = {}
    for _ in range(args.repeat):
        for way, seq_step in ways.items():
            with PeakRSS() as rss:
                t = time.perf_counter()
                results[way] = _totals(con, names, start, end, seq_step=seq_step)
                times[way].append(time.perf_counter() - t)
            peaks[way].append(rss.peak)
    base, ranged = ways
    agree = all(np.array_equal(a, b) for a, b in zip(results[base], results[ranged], strict=True))
    print(f"{events:,} events, {len(names)} resources, {args.repeat} runs each")
    for way in ways:
        med = statistics.median(times[way])
        print(
            f"  {way:>24}: {med:8.1f} s median ({med / events * 1e9:5.1f} ns/event), "
            f"peak RSS {max(peaks[way]) / 2**30:.2f} GiB"
        )
    ratio = statistics.median(times[ranged]) / statistics.median(times[base])
    print(f"  time ratio (ranges / whole): {ratio:.2f}x; figures equal: {agree}")


if __name__ == "__main__":
    main()
