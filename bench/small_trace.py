"""Time to a first answer: `gigi-query diagnose` on a small trace, in a fresh process each time.

    python bench/small_trace.py [--scenario pg-wal-buffers] [--seconds 2.5] [--runs 7]

Records a scenario for --seconds (about 10k events at the default), ingests a copy into a
store, then runs `gigi-query diagnose` in fresh subprocesses, as a user does: on the trace
directory (ingest included) and on the store. The cold run of each has an empty numba cache
(NUMBA_CACHE_DIR a new temp dir: every kernel it runs compiles); the --runs of each after
those are warm (the trace directory's cache: every kernel, from ingest on). Bytecode is
cached in a temp dir too (PYTHONPYCACHEPREFIX), primed by one untimed run, so that every
timed run reads .pyc files as an installed package does, even where PYTHONDONTWRITEBYTECODE
is set. Prints wall and CPU (user and system, DuckDB's threads included) seconds, the wall
time against `python -c pass` measured in the same run, and where the time goes. Goal:
under 1 s warm for 10k events.

Where the time goes comes from a driver that runs the very same command (`gigi.cli.entry`)
and times from inside: imports (every module loaded, wherever it is first needed: numba,
pyarrow, DuckDB, pandas when pyarrow finds it installed), numba (loading kernels from its
cache, or compiling them; imports made meanwhile count as imports), compute (the rest of the
command: ingest, SQL, kernels, rendering) and start+exit (the interpreter's: the
subprocess's wall time less the driver's). Warm, the driver runs as many times as
gigi-query, interleaved, and each part is the median of its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runs `gigi-query ARGS...` (gigi.cli.entry) and prints, on the last line of stderr, the
# seconds in the process after this line, in imports, and in numba's compiler lock.
DRIVER = r"""
import time
T0 = time.perf_counter()
import importlib._bootstrap as bootstrap
import sys, json
S = {"depth": 0, "imports": 0.0, "imports_in_numba": 0.0, "numba": 0.0, "locks": 0, "t": 0.0}
find_and_load = bootstrap._find_and_load


def timed_load(name, import_):
    if S["depth"]:
        return find_and_load(name, import_)
    S["depth"] += 1
    t = time.perf_counter()
    try:
        return find_and_load(name, import_)
    finally:
        dt = time.perf_counter() - t
        S["imports"] += dt
        if S["locks"]:
            S["imports_in_numba"] += dt
        S["depth"] -= 1


bootstrap._find_and_load = timed_load
import numba.core.event as ev


class Lock(ev.Listener):  # held while numba loads a kernel from its cache, or compiles it
    def on_start(self, event):
        if not S["locks"]:
            S["t"] = time.perf_counter()
        S["locks"] += 1

    def on_end(self, event):
        S["locks"] -= 1
        if not S["locks"]:
            S["numba"] += time.perf_counter() - S["t"]


ev.register("numba:compiler_lock", Lock())
sys.argv = ["gigi-query", *sys.argv[1:]]
from gigi.cli import entry

try:
    entry()
finally:
    sys.stdout.flush()
    numba = S["numba"] - S["imports_in_numba"]
    out = {"inside": time.perf_counter() - T0, "imports": S["imports"], "numba": numba}
    print(json.dumps(out), file=sys.stderr)
"""


def command() -> list[str]:
    """`gigi-query` as installed beside this interpreter, or the module."""
    script = Path(sys.executable).parent / "gigi-query"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gigi.cli"]


def wall(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """Wall and CPU (user and system) seconds of one run of ``cmd``, and its stderr."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    used = after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime
    return took, used, p.stderr


PARTS = ("import", "numba", "compute", "start+exit")


def shares(cmd_args: list[str], env: dict) -> dict[str, float]:
    """One run of the driver: wall and CPU seconds, and the seconds of each of PARTS."""
    took, cpu, err = wall([sys.executable, "-c", DRIVER, *cmd_args], env)
    inside = json.loads(err.strip().splitlines()[-1])
    return {
        "wall": took,
        "cpu": cpu,
        "import": inside["imports"],
        "numba": inside["numba"],
        "compute": inside["inside"] - inside["imports"] - inside["numba"],
        "start+exit": took - inside["inside"],
    }


def record(scenario: str, seconds: float, trace: Path) -> None:
    from gigi.scenarios import get

    get(scenario).run(trace, seconds=seconds)


def line(label: str, took: float, cpu: float, base: float, parts: dict[str, float]) -> str:
    total = sum(parts[p] for p in PARTS)
    return f"{label:<26} {took:7.3f} {cpu:7.3f} {took / base:8.0f}x  " + " ".join(
        f"{parts[p]:6.3f} {parts[p] / total:4.0%}" for p in PARTS
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="pg-wal-buffers")
    ap.add_argument("--seconds", type=float, default=2.5, help="how long the scenario runs")
    ap.add_argument("--runs", type=int, default=7, help="warm runs of each kind")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gigi-bench-small-"))
    try:
        trace, store = scratch / "trace", scratch / "store"
        record(args.scenario, args.seconds, trace)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        gigi = command()

        def run(*argv: str) -> str:
            return subprocess.run(
                [*gigi, *argv], env=env, check=True, capture_output=True, text=True
            ).stdout

        run("ingest", str(trace), "--store", str(store))
        count = run("sql", str(store), "SELECT count(*) AS n FROM events", "-f", "json")
        events = json.loads(count)[0]["n"]
        # the bytecode, once (and a numba cache thrown away)
        wall([*gigi, "diagnose", str(trace)], {**env, "NUMBA_CACHE_DIR": str(scratch / "prime")})
        base = statistics.median(
            wall([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)
        )
        targets = {"trace directory": trace, "store": store}
        cold = {}
        for i, (name, target) in enumerate(targets.items()):  # each an empty numba cache
            cache = {**env, "NUMBA_CACHE_DIR": str(scratch / f"numba-{i}")}
            cold[name] = shares(["diagnose", str(target)], cache)
        env["NUMBA_CACHE_DIR"] = str(scratch / "numba-0")  # every kernel, from ingest on
        warm: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
        inside: dict[str, list[dict]] = {name: [] for name in targets}
        for _ in range(args.runs):
            for name, target in targets.items():
                warm[name].append(wall([*gigi, "diagnose", str(target)], env)[:2])
                inside[name].append(shares(["diagnose", str(target)], env))
        print(
            f"{args.scenario} recorded for {args.seconds:g} s: {events:,} events; "
            f"`python -c pass` {base:.3f} s (median of {args.runs})"
        )
        print(
            f"{'gigi-query diagnose':<26} {'wall s':>7} {'cpu s':>7} {'x python':>9}  "
            + " ".join(f"{p:>11}" for p in PARTS)
        )
        for name in targets:
            c = cold[name]
            print(line(f"cold, {name}", c["wall"], c["cpu"], base, c))
        for name in targets:
            took = statistics.median(w for w, _ in warm[name])
            cpu = statistics.median(c for _, c in warm[name])
            med = {p: statistics.median(r[p] for r in inside[name]) for p in PARTS}
            print(line(f"warm, {name}", took, cpu, base, med))
        drove = ", ".join(
            f"{name} {statistics.median(r['wall'] for r in inside[name]):.3f} s" for name in targets
        )
        print(
            f"cold: one run of the driver; warm: medians of {args.runs} runs of gigi-query, "
            f"the parts medians of as many of the driver ({drove}). Goal: under 1 s warm."
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
