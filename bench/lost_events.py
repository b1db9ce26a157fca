"""Accuracy of the diagnosis on independently generated traces as events are lost.

    python bench/lost_events.py [--quick] [--shapes pool_hog,kv_leak] [--seeds 4 | 0,5,9]
                                [--loss 0,0.1,0.2,0.3,0.4,0.5] [--failures-at 0.3]

The traces come from bench/independent, a discrete-event simulation written apart from gigi's
scenario suite (its own rates, sizes, task counts and seeds). For each shape and seed the
workload is simulated once; for each share p of events lost, that share is removed uniformly
at random and NOT counted (the trace's `dropped` stays 0, as when a ring wraps unnoticed or a
collector drops spans), the trace is written with TraceWriter, ingested and diagnosed with
gigi.diagnosis.diagnose.

A faulty shape is right when rank 1 names its resource and failure mode, and, when its truth
names a culprit, rank 1's first culprit task's name starts with it. A healthy shape is right
when there is no finding. Prints one row per p (accuracy per shape, then over faulty,
healthy and all), then what went wrong at --failures-at: shape, seed, what rank 1 said (with
--why, every detector's verdict on the resource that should have been named).

--quick: one seed (under a minute on two cores); default four seeds (about three minutes).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from independent import SHAPES, simulate, write_trace  # noqa: E402

from gigi.diagnosis import diagnose  # noqa: E402
from gigi.ingest import ingest  # noqa: E402

LOSS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


@dataclass
class Outcome:
    shape: str
    seed: int
    loss: float
    right: bool
    said: str  # what rank 1 said (or "no findings")
    events: int
    why: list[str]  # wrong: each detector's verdict on the truth's resource, where it gives one


def _name(con, task: int) -> str:
    row = con.execute("SELECT name FROM tasks WHERE task = ?", [task]).fetchone()
    return row[0] if row and row[0] is not None else f"task {task}"


def _said(d) -> str:
    if not d.findings:
        lost = [u.resource for u in getattr(d, "unexplained", [])]
        return "no findings" + (f" (unexplained: {', '.join(lost)})" if lost else "")
    f = d.findings[0]
    culprit = f"culprit {_name(d.con, f.culprit_tasks[0])!r}" if f.culprit_tasks else "no culprit"
    more = f" (+{len(d.findings) - 1} more)" if len(d.findings) > 1 else ""
    return (
        f"rank 1 {f.failure_mode} on {f.resource}, {culprit}, score {f.score:.2f}{more}: "
        f"{f.summary}"
    )


def _why(shape: str, d) -> list[str]:
    """Each detector's word on the truth's resource: its finding's score, or why it let it be
    (the diagnosis's verdicts, where it gives them)."""
    truth = SHAPES[shape].truth
    if truth is None:
        return [f"rank {f.rank} {f.failure_mode} on {f.resource}" for f in d.findings[1:4]]
    out = [
        f"found {f.failure_mode} (rank {f.rank}, score {f.score:.2f})"
        for f in d.findings
        if f.resource == truth.resource
    ]
    for v in getattr(d, "verdicts", []):
        if v.resource == truth.resource:
            score = "" if v.score is None else f" (score {v.score:.2f})"
            out.append(f"{v.detector}{score}: {v.why_not}")
    return out


def judge(shape: str, d) -> bool:
    truth = SHAPES[shape].truth
    if truth is None:
        return not d.findings
    if not d.findings:
        return False
    f = d.findings[0]
    if (f.resource, f.failure_mode) != (truth.resource, truth.failure_mode):
        return False
    if truth.culprit is None:
        return True
    return bool(f.culprit_tasks) and _name(d.con, f.culprit_tasks[0]).startswith(truth.culprit)


def run_one(shape: str, seed: int, loss: float, tables, scratch: Path) -> Outcome:
    trace = scratch / "trace"
    store = scratch / "store"
    n = write_trace(
        tables,
        trace,
        lose=loss,
        lose_seed=seed * 1000 + round(loss * 100),
        trace_id=f"{shape}-s{seed}-p{round(loss * 100)}",
    )
    try:
        manifest = ingest(trace, store)
        d = diagnose(store / manifest.trace_id)
        try:
            right = judge(shape, d)
            return Outcome(shape, seed, loss, right, _said(d), n, [] if right else _why(shape, d))
        finally:
            d.con.close()
    finally:
        shutil.rmtree(trace, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)


def _seeds(text: str) -> list[int]:
    """'3': seeds 0, 1, 2; '0,5,9': those seeds."""
    if "," in text:
        return [int(s) for s in text.split(",") if s]
    return list(range(int(text)))


def table(outcomes: list[Outcome], shapes: list[str], losses: list[float]) -> str:
    faulty = [s for s in shapes if SHAPES[s].truth is not None]
    healthy = [s for s in shapes if SHAPES[s].truth is None]
    cols = [SHAPES[s].short for s in shapes] + ["faulty", "healthy", "all"]
    width = max(5, *(len(c) for c in cols))
    lines = ["lost  " + " ".join(f"{c:>{width}}" for c in cols)]
    for p in losses:
        row = [o for o in outcomes if o.loss == p]

        def acc(group: list[str], row=row) -> str:
            hits = [o.right for o in row if o.shape in group]
            return f"{sum(hits)}/{len(hits)}" if hits else "-"

        cells = [acc([s]) for s in shapes] + [acc(faulty), acc(healthy), acc(shapes)]
        lines.append(f"{p:4.0%}  " + " ".join(f"{c:>{width}}" for c in cells))
    lines.append("")
    lines += [f"{SHAPES[s].short:>{width}}  {s}: {SHAPES[s].title}" for s in shapes]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shape names")
    ap.add_argument("--seeds", default=None, help="a count (4: seeds 0-3) or a list (0,5,9)")
    ap.add_argument("--loss", default=",".join(str(p) for p in LOSS), help="shares lost")
    ap.add_argument("--quick", action="store_true", help="one seed: about a minute")
    ap.add_argument("--failures-at", type=float, default=0.3, help="list what went wrong here")
    ap.add_argument(
        "--why", action="store_true", help="with each failure, every detector's verdict on it"
    )
    args = ap.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"no shape {s!r}; shapes: {', '.join(SHAPES)}")
    seeds = _seeds(args.seeds or ("1" if args.quick else "4"))
    losses = [float(p) for p in args.loss.split(",")]

    scratch = Path(tempfile.mkdtemp(prefix="gigi-lost-events-"))
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    try:
        for shape in shapes:
            t = time.perf_counter()
            for seed in seeds:
                tables = simulate(shape, seed)
                for p in losses:
                    outcomes.append(run_one(shape, seed, p, tables, scratch))
            mine = [o for o in outcomes if o.shape == shape]
            print(
                f"{shape:18s} {sum(o.right for o in mine)}/{len(mine)} right, "
                f"{sum(o.events for o in mine if o.loss == 0) // len(seeds)} events a trace, "
                f"{time.perf_counter() - t:.1f} s",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"seeds {','.join(map(str, seeds))}; {time.perf_counter() - started:.0f} s")
    print(table(outcomes, shapes, losses))
    wrong = [o for o in outcomes if o.loss == args.failures_at and not o.right]
    print(f"\nwrong at {args.failures_at:.0%} lost: {len(wrong)}")
    for o in wrong:
        truth = SHAPES[o.shape].truth
        want = (
            "no findings"
            if truth is None
            else f"{truth.failure_mode} on {truth.resource}"
            + (f", culprit {truth.culprit!r}" if truth.culprit else "")
        )
        print(f"- {o.shape} seed {o.seed} (want {want}): {o.said}")
        if args.why:
            for line in o.why:
                print(f"    {line}")


if __name__ == "__main__":
    main()
