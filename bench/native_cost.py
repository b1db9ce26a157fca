"""Per-event cost of the native probes against one clock_gettime(CLOCK_MONOTONIC) call.

    python bench/native_cost.py [--events 1000000] [--work 300] [--repeats 5]

Builds bench/native/cost.c against the runtime (`gigi-query probes libs`) and runs, with 1
and 8 threads, each thread making --events iterations of --work steps of arithmetic followed
by nothing, by one clock_gettime, or by one USE probe (tracing on; tracing off). The cost of
a call is its run's thread CPU time per iteration less the arithmetic alone's, medians of
the repeats; the ratio is probe / clock_gettime, measured in the same run. The rings hold a
whole run, so nothing is dropped (the run checks it: the cheaper drop path would flatter the
probes) and every record goes to memory the thread has not touched before. Goal: at most 2x.
References elsewhere: LTTng-UST about 150 ns an event, Tracy about 15 ns a zone.

A last line runs the default ring (16384 records a thread) with its writer draining, and
prints the share of events dropped: with 8 busy threads on this machine's 2 cores the writer
thread gets little CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from gigi.probes import native  # noqa: E402


def run(binary: Path, threads: int, args, mode: str, trace: Path | None, ring: int | None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    if trace is not None:
        shutil.rmtree(trace, ignore_errors=True)
        env["GIGI_TRACE"] = str(trace)
        if ring:
            env["GIGI_RING_RECORDS"] = str(ring)
    out = subprocess.run(
        [str(binary), str(threads), str(args.events), str(args.work), mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--work", type=int, default=300, help="arithmetic steps between calls")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    whole = 1 << (args.events - 1).bit_length()
    work = Path(tempfile.mkdtemp(prefix="gigi-native-cost-"))
    try:
        binary = work / "cost"
        cc = native.compiler()
        flags = [*native.cflags(), str(HERE / "native" / "cost.c"), *native.libs(work / "lib")]
        subprocess.run([cc, "-O2", *flags, "-o", str(binary)], check=True)
        trace = work / "trace"
        print(
            f"{args.events:,} calls a thread, {args.work} arithmetic steps apart; "
            f"thread CPU ns per call, medians of {args.repeats}"
        )
        print(
            f"{'threads':>7} {'clock_gettime':>13} {'probe on':>9} {'probe off':>9} {'on/clock':>9}"
        )
        for threads in (1, 8):
            rows: dict[str, list[float]] = {"work": [], "clock": [], "on": [], "off": []}
            for _ in range(args.repeats):
                rows["work"].append(run(binary, threads, args, "work", None, None)[0])
                rows["clock"].append(run(binary, threads, args, "clock", None, None)[0])
                ns, dropped = run(binary, threads, args, "probe", trace, whole)
                if dropped:
                    raise SystemExit(
                        f"{dropped} events dropped: the figure would flatter the probes"
                    )
                rows["on"].append(ns)
                rows["off"].append(run(binary, threads, args, "probe", None, None)[0])
            base = statistics.median(rows["work"])
            clock, on, off = (statistics.median(rows[k]) - base for k in ("clock", "on", "off"))
            print(f"{threads:7d} {clock:13.1f} {on:9.1f} {off:9.1f} {on / clock:8.2f}x")
        for threads in (1, 8):
            _, dropped = run(binary, threads, args, "probe", trace, None)
            total = threads * args.events
            print(
                f"default ring, {threads} thread(s): {dropped:,} of {total:,} events dropped "
                f"({dropped / total:.1%})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
