"""Cost of one Python probe event, as a ratio to a loop that only calls perf_counter_ns().

    python bench/probe_cost.py [--events N] [--repeats R]

Measures, in one process and interleaved: the bare loop, the probe loop with recording on, and
with recording off; single-threaded and with 8 threads (wall time over all events). Prints the
median over the repeats of ns per event and the ratio to the bare loop. Goal: <= 6x.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

import gigi.probes as gp


def bare(n: int) -> None:
    clock = time.perf_counter_ns
    for _ in range(n):
        clock()


def probe(res: gp.Resource, n: int) -> None:
    acquire = res.acquire
    for i in range(n):
        acquire(i)


def timed(fn, threads: int, *args) -> float:
    """Wall-clock ns per event of ``fn(*args)`` run on ``threads`` threads at once."""
    n = args[-1]
    workers = [threading.Thread(target=fn, args=args) for _ in range(threads)]
    start = time.perf_counter_ns()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (time.perf_counter_ns() - start) / (n * threads)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    n = args.events
    res = gp.resource("bench.pool", capacity=1024)
    for threads in (1, 8):
        per = max(n // threads, 1)
        results: dict[str, list[float]] = {"bare": [], "on": [], "off": []}
        dropped = written = 0
        with tempfile.TemporaryDirectory() as d:
            for _ in range(args.repeats):
                results["bare"].append(timed(bare, threads, per))
                results["off"].append(timed(probe, threads, res, per))
                gp.enable(d, interval=0.2, buffer_events=1 << 16)
                results["on"].append(timed(probe, threads, res, per))
                stats = gp.disable()
                dropped += stats.dropped["bench.pool"]
                written += stats.written["bench.pool"]
        base = statistics.median(results["bare"])
        print(f"threads={threads} events/run={per * threads:,} repeats={args.repeats}")
        for name in ("bare", "on", "off"):
            med = statistics.median(results[name])
            print(f"  {name:5s} median {med:7.1f} ns/event  ratio to bare {med / base:5.2f}x")
        print(
            f"  recorded {written:,} events, dropped {dropped:,} "
            f"({100 * dropped / max(written + dropped, 1):.2f}%)"
        )


if __name__ == "__main__":
    main()
