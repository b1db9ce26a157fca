"""Parse speed of `perf script` text, against reading the same lines and doing nothing.

    python bench/perf_parse.py [--samples 200000] [--repeats 3] [--flat]

Builds a file of N samples from the real perf output in tests/perf/ (the call-graph excerpt's
samples, or with --flat the one-line samples of perf record without -g), each copy shifted in
time, then times in the same run: the baseline (iterate over the file's lines), the parser
(gigi.ingest.parse_perf_script, batches of Arrow columns) and the whole write of the samples
table to Parquet. Prints the median of each, lines and samples per second, and the ratio to
the baseline.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from gigi.ingest import parse_perf_script
from gigi.ingest._perf import write_samples

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "perf"
_TIME = re.compile(r"(\d+)\.(\d+):")


def make_file(path: Path, samples: int, flat: bool) -> int:
    """Write ``samples`` samples (real blocks, times shifted); return the number of lines."""
    if flat:
        blocks = [line for line in (FIXTURES / "flat.txt").read_text().splitlines() if line]
        sep = "\n"
    else:
        body = "\n".join(
            line
            for line in (FIXTURES / "callgraph.txt").read_text().splitlines()
            if not line.startswith("#")
        )
        blocks = [b.strip("\n") for b in body.split("\n\n") if b.strip()]
        sep = "\n\n"
    lines = 0
    with path.open("w") as f:
        for i in range(samples):
            block = blocks[i % len(blocks)]
            shifted = _TIME.sub(
                lambda m, i=i: f"{int(m.group(1)) + i // 1000}.{m.group(2)}:", block, count=1
            )
            f.write(shifted + sep)
            lines += shifted.count("\n") + 1 + (0 if flat else 1)
    return lines


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flat", action="store_true", help="one-line samples (no -g)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        text = Path(d) / "perf.txt"
        lines = make_file(text, args.samples, args.flat)
        size = text.stat().st_size

        def baseline():
            with text.open() as f:
                for _ in f:
                    pass

        def parse():
            n = sum(b.num_rows for b in parse_perf_script(text))
            assert n == args.samples, n

        def write():
            write_samples(text, Path(d) / "samples.parquet")

        base, parsed, written = (best_of(args.repeats, fn) for fn in (baseline, parse, write))
    print(
        f"{args.samples:,} samples, {lines:,} lines, {size / 1e6:.1f} MB "
        f"({'flat' if args.flat else 'call graphs'})"
    )
    for name, secs in (
        ("read lines (baseline)", base),
        ("parse", parsed),
        ("parse+Parquet", written),
    ):
        print(
            f"  {name:22s} {secs:7.3f} s  {lines / secs / 1e6:6.2f} M lines/s  "
            f"{args.samples / secs / 1e3:8.1f} k samples/s  x{secs / base:5.1f}"
        )


if __name__ == "__main__":
    main()
