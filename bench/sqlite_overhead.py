"""Throughput of SQLite with gigi's probes against SQLite as it is, in one process.

    python bench/sqlite_overhead.py [--rounds 60] [--txns 300] [--sample PCache=16,...]

Fetches SQLite's source from Debian's source packages (tests/sqlite/fetch.py), scans its page
cache, pager, WAL and b-tree offline, and builds with SQLite's own build system:

- as it is;
- scanned: probes at every site the scan verified (gigi-query instrument);
- validated: a run of the scanned build is validated (gigi-query validate) and the tree
  instrumented again with the sites that passed, as a user deploys it.

bench/native/sqlite_ab.c loads two builds as shared libraries into one process and runs
tests/sqlite/workload.c's normal transaction (five point reads and an update) on each in
alternating rounds, tracing on: whatever else the machine does falls on both alike. The
figure is the client thread's CPU time per transaction, probed over plain, per round; printed
are the median and quartiles of those ratios, events per transaction and the share dropped;
then the validated build with tracing off (its code alone), and SQLite as it is against
itself: how far the method reads from zero when nothing differs. With --callgrind, also the
instructions the process executes a transaction (the writer thread's included), under
valgrind's callgrind, which
counts the same whatever else the machine does: a figure a shared, noisy machine cannot blur
(instructions are not time: probes' stores and loads are cheap ones, and the kernel's share
of a transaction, its file locks and writes, is not counted).
The paper reports 3.7% on average and 7.8% at worst; the goal here is under 3%.
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
sys.path.insert(0, str(HERE.parent / "tests" / "sqlite"))

from build import (  # noqa: E402
    amalgamation,
    instrument_validated,
    scan_and_instrument,
    shared_library,
)
from fetch import sqlite_tree  # noqa: E402

from gigi.ingest import ingest  # noqa: E402
from gigi.probes import native  # noqa: E402


def ab_program(work: Path) -> Path:
    out = work / "sqlite_ab"
    subprocess.run(
        [
            native.compiler(),
            "-O2",
            *native.cflags(),
            str(HERE / "native" / "sqlite_ab.c"),
            *native.libs(work / "lib"),
            "-rdynamic",
            "-ldl",
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


def ab(
    program: Path,
    plain: Path,
    probed: Path,
    work: Path,
    rounds: int,
    txns: int,
    trace: Path | None,
    sample: str = "",
) -> list[float]:
    """Per round, the probed build's CPU per transaction over the plain one's (tracing off
    when TRACE is None)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    if trace is not None:
        shutil.rmtree(trace, ignore_errors=True)
        env["GIGI_TRACE"] = str(trace)
    if sample:
        env["GIGI_SAMPLE"] = sample
    dbs = work / "dbs"
    dbs.mkdir(exist_ok=True)
    out = subprocess.run(
        [str(program), str(plain), str(probed), str(dbs), str(rounds), str(txns)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pairs = [tuple(map(float, line.split())) for line in out.splitlines() if line.strip()]
    return [b / a for a, b in pairs]


def instructions(
    program: Path, plain: Path, build: Path, work: Path, txns: int, trace: Path | None
) -> float:
    """Instructions the process (all its threads) executes for TXNS transactions a round on each
    of PLAIN and BUILD (a warm-up round and one more), under callgrind: a run of TXNS and a
    run of one a round, subtracted, so that start-up and setup cancel out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIGI_")}
    if trace is not None:
        env["GIGI_TRACE"] = str(trace)
        # valgrind runs one thread at a time: rings large enough that the writer never lags
        env["GIGI_RING_RECORDS"] = str(1 << 22)
    totals = []
    for n in (1, txns + 1):
        out = work / f"callgrind-{build.stem}-{n}"
        dbs = work / f"cg-dbs-{n}"
        shutil.rmtree(dbs, ignore_errors=True)
        dbs.mkdir()
        if trace is not None:
            shutil.rmtree(trace, ignore_errors=True)
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={out}",
                str(program),
                str(plain),
                str(build),
                str(dbs),
                "1",
                str(n),
            ],
            env=env,
            capture_output=True,
            check=True,
        )
        # every thread's: the writer's conversions and segments are the probes' cost too (and
        # whichever thread writes the last of them, at exit, the sum is the same)
        total = 0
        for part in work.glob(f"{out.name}-*"):
            line = next(x for x in part.read_text().splitlines() if x.startswith("summary:"))
            total += int(line.split()[1])
            part.unlink()
        totals.append(total)
    return totals[1] - totals[0]


def summary(label: str, ratios: list[float]) -> str:
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    return (
        f"  {label:28s} overhead {med - 1:6.1%}  (quartiles {q1 - 1:.1%} to {q3 - 1:.1%}, "
        f"{len(ratios)} rounds)"
    )


def events_line(trace: Path, work: Path, rounds: int, txns: int) -> str:
    manifest = ingest(trace, work / f"store-{trace.name}")
    total = manifest.events + manifest.dropped
    per_txn = total / ((rounds + 1) * txns)  # the warm-up round is traced too (with setup)
    return (
        f"      {manifest.events:,} events, about {per_txn:.0f} a transaction, "
        f"{manifest.dropped / max(total, 1):.2%} dropped"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--txns", type=int, default=300, help="transactions per build per round")
    ap.add_argument("--sample", default="", help="GIGI_SAMPLE for one more, sampled pass")
    ap.add_argument(
        "--callgrind", action="store_true", help="also count instructions under callgrind"
    )
    args = ap.parse_args()
    tree = sqlite_tree()
    if tree is None:
        raise SystemExit("SQLite's source cannot be fetched here (needs apt with deb-src)")
    work = Path(tempfile.mkdtemp(prefix="gigi-sqlite-overhead-"))
    try:
        sites, scanned_src = scan_and_instrument(tree, work / "scan")
        plain = shared_library(amalgamation(tree, work / "plain"), work / "plain.so")
        scanned = shared_library(
            amalgamation(tree, work / "scanned", scanned_src), work / "scanned.so"
        )
        program = ab_program(work)
        # a short run of the scanned build is the validation run
        training = work / "trace-training"
        ab(program, plain, scanned, work, 3, 300, training)
        _, valid_src = instrument_validated(tree, sites, training, work / "valid")
        validated = shared_library(
            amalgamation(tree, work / "validated", valid_src), work / "validated.so"
        )
        print(
            f"SQLite normal workload: {args.rounds} rounds of {args.txns} transactions a build, "
            "alternating in one process; client thread CPU a transaction, probed / plain"
        )
        runs = [
            ("validated sites", validated, "", True),
            ("scanned sites", scanned, "", True),
            ("validated, tracing off", validated, "", False),
            ("as it is, twice (the method)", plain, "", False),
        ]
        if args.sample:
            runs.insert(1, (f"validated, {args.sample}", validated, args.sample, True))
        for i, (label, probed, sample, tracing) in enumerate(runs):
            trace = work / f"trace-{i}" if tracing else None
            ratios = ab(program, plain, probed, work, args.rounds, args.txns, trace, sample)
            print(summary(label, ratios))
            if trace is not None:
                print(events_line(trace, work, args.rounds, args.txns))
        if args.callgrind and shutil.which("valgrind"):
            print("instructions a transaction, all threads, under callgrind (1,000 a build)")
            # each run: two rounds (a warm-up and one more) of 500 on each build; the probed
            # build's share is what a run with it adds over a run of SQLite as it is twice
            txns = 500
            both = instructions(program, plain, plain, work, txns, None)
            base = both / (4 * txns)
            print(f"  {'as it is':28s} {base:9,.0f}")
            for label, build, tracing in (
                ("validated sites", validated, True),
                ("validated, tracing off", validated, False),
                ("scanned sites", scanned, True),
            ):
                trace = work / "trace-callgrind" if tracing else None
                n = base + (instructions(program, plain, build, work, txns, trace) - both) / (
                    2 * txns
                )
                print(f"  {label:28s} {n:9,.0f}  ({n / base - 1:+.1%})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
