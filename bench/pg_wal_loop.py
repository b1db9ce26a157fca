"""The whole loop on PostgreSQL 15, as a user would run it: its backend scanned offline,
instrumented, built with its own configure and make, run under pgbench with WAL buffers too
small and then large, and each run diagnosed, with the server's own figures beside gigi's.

    python bench/pg_wal_loop.py [--work DIR] [--seconds 15] [--clients 8]
                                [--wal-buffers 32kB,512MB] [--jobs 2] [--validate-seconds 5]
                                [--validate-rounds 2] [--overhead-rounds 3]

1. Scan. PostgreSQL's tree (Debian's source package, tests/debian.py; $GIGI_SRC_CACHE is
   honoured) is copied and configured, and its compile commands derived from `make -n`, as
   bench/scan_scale.py does; `gigi-query scan` reads src/backend/access/transam and
   src/backend/storage (the WAL, the buffer pool and the locks around them) with them.
2. Instrument and build. `gigi-query instrument` writes the probed copy, which is configured
   again with the flags of `gigi-query probes cflags` and `libs` and built and installed
   (`make install`) into --work/inst. A rerun with the same --work reuses each step whose
   inputs did not change.
   Validate (--validate-seconds, default 5; 0 skips it): a short traced run of the same
   workload, `gigi-query validate` on its trace to drop the sites whose events formed no
   plausible lifecycle (an ACQUIRE never released, a RELEASE that ended no hold), and the
   tree instrumented and built again with the sites kept, into --work/inst-valid; and again
   on that build (--validate-rounds, default 2, until a round removes nothing), as the sites
   that record nested events change when others go: the paper's loop, no
   hand annotation.
3. Run. First the baseline: the same tree built with no probes (once, into
   --work/inst-plain) and the same runs on it, the server's figures only; the probes change
   what they measure, and the two are printed side by side at the end (probed / plain TPS).
   Then, for each --wal-buffers value: a private cluster (initdb, loopback, fsync off,
   synchronous_commit off, max_wal_size 20GB so that no checkpoint comes in the run), started
   with GIGI_TRACE set, so that every backend is traced; pgbench runs a script of bulk inserts
   (50 rows of 1 kB a transaction, each client into a table of its own) with --clients
   clients for --seconds. The server's figures
   are the truth: transactions a second, pg_stat_wal's wal_buffers_full, and the share of
   the active client backends' pg_stat_activity samples (every 20 ms) that wait on the WAL's
   lightweight locks (WALInsert, WALWrite, WALBufMapping).
4. Diagnose. `gigi-query diagnose` on each trace: wall time, the events, and the first
   findings with their victims' sites; then whether the small buffers' run ranks a WAL
   resource first with a wait site in xlog.c, and the large one has no finding on it.
5. The probes' cost (--overhead-rounds, default 3): for each --wal-buffers value, rounds of
   runs one after the other (no probes; probed with tracing off; probed and traced, into
   --work and, where there is one, into /dev/shm), TPS medians and probed / plain, against
   the goal of under 3% lost. The machine is shared:
   run it on an idle one, and read the ratios of the rounds, not one run's.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))
sys.path.insert(0, str(HERE))

from debian import source_tree  # noqa: E402
from scan_scale import CONFIGURE, MARKER, PACKAGE, build, compile_commands, run  # noqa: E402

from tests.postgres.server import USER, Server  # noqa: E402

SCANNED = ["src/backend/access/transam", "src/backend/storage"]
WAL_LOCKS = {"WALInsert", "WALWrite", "WALBufMapping"}
# a bulk insert: 50 rows of 1 kB, about 60 kB of WAL a transaction
# each client its own table: one shared table makes the clients queue for its last page's
# content lock and its extension lock instead (measured here with 8 clients on the build
# with no probes: WAL locks 13% of wait samples at 32kB, 0.92x the TPS of 512MB; with a
# table each, 85% and 0.54x)
SCRIPT = "INSERT INTO bulk_:client_id (pad) SELECT repeat('x', 1000) FROM generate_series(1, 50);\n"
SETTINGS = {
    "synchronous_commit": "off",
    "max_wal_size": "20GB",
    "checkpoint_timeout": "1h",
    "shared_buffers": "128MB",
    "max_connections": "40",
}


GIGI = HERE / ".venv" / "bin" / "gigi-query"


def gigi(*args: str, log: Path) -> None:
    run([str(GIGI), *args], HERE, log)


def once(stamp: Path, said: str, step) -> bool:
    """Run STEP unless STAMP says it ran with the inputs SAID; returns whether it ran."""
    if stamp.exists() and stamp.read_text() == said:
        return False
    stamp.unlink(missing_ok=True)
    step()
    stamp.write_text(said)
    return True


def scan_and_build(
    work: Path,
    jobs: int,
    validate_seconds: int,
    validate_rounds: int,
    clients: int,
    first: str,
    min_share: float | None = None,
) -> Path:
    """The probed build's bin folder: scanned, instrumented, configured, made, installed; and,
    with VALIDATE_SECONDS, its sites validated by a run that long (with wal_buffers FIRST)
    and the tree built again with the sites kept, up to VALIDATE_ROUNDS times (until a
    round removes nothing)."""
    tree = source_tree(PACKAGE, MARKER)
    t = time.perf_counter()
    copy = build(tree, work, jobs)
    commands = compile_commands(copy, work)
    print(f"tree configured, compile commands derived: {time.perf_counter() - t:.0f} s")
    sites = work / "sites"
    only = [a for d in SCANNED for a in ("--only", d)]
    with_commands = ["--compile-commands", str(commands)]

    def scan() -> None:
        shutil.rmtree(sites, ignore_errors=True)
        gigi("scan", str(copy), "--out", str(sites), *with_commands, *only, log=work / "scan.log")

    t = time.perf_counter()
    if once(work / "scanned", f"{copy}\n{SCANNED}\n{_scanner()}\n", scan):
        print(f"scanned {', '.join(SCANNED)} in {time.perf_counter() - t:.1f} s")
    report = (
        json.loads((sites / "report.json").read_text()) if (sites / "report.json").exists() else {}
    )
    if report:
        print(f"  {_said(report)}")
    bins = instrumented_build(copy, sites, work, "", with_commands, jobs)
    # each round validates the build the last one made: with fewer sites, others record the
    # events nested sites took before (a lock's inner step once its outer ACQUIRE is gone),
    # which the run before never judged
    for k in range(1, validate_rounds + 1 if validate_seconds else 1):
        suffix = "-valid" if k == 1 else f"-valid{k}"
        trace, valid, log = (
            work / "trace-validate",
            work / f"sites{suffix}",
            work / f"validate{k}.log",
        )

        def validate(bins=bins, sites=sites, valid=valid, log=log, trace=trace) -> None:
            settings = {**SETTINGS, "wal_buffers": first}
            traced(bins, trace, settings, validate_seconds, clients, work)
            shutil.rmtree(valid, ignore_errors=True)
            share = ["--min-share", str(min_share)] if min_share is not None else []
            gigi(
                "validate", str(trace), "--sites", str(sites), "--out", str(valid), *share, log=log
            )
            shutil.rmtree(trace, ignore_errors=True)

        t = time.perf_counter()
        said = f"{(sites / 'sites.parquet').stat().st_mtime_ns}\n{validate_seconds}\n{first}\n"
        said += SCRIPT  # and the workload that exercises them
        said += "" if min_share is None else f"{min_share}\n"
        if once(work / f"validated{k}", said, validate):
            took = time.perf_counter() - t
            print(f"validated (round {k}) by a {validate_seconds} s run in {took:.0f} s")
        lines = log.read_text().splitlines()
        for line in [x for x in lines if not x.lstrip().startswith("removed site")]:
            print(f"  {line.strip()}")
        if not any(x.lstrip().startswith("removed site") for x in lines):
            break  # the build judged is the one to run
        bins, sites = instrumented_build(copy, valid, work, suffix, with_commands, jobs), valid
    return bins


def instrumented_build(
    copy: Path, sites: Path, work: Path, suffix: str, with_commands: list[str], jobs: int
) -> Path:
    """The bin folder of COPY instrumented at SITES, built and installed (into --work/inst
    and the SUFFIX)."""
    probed, inst = work / f"probed{suffix}", work / f"inst{suffix}"

    def instrument() -> None:
        shutil.rmtree(probed, ignore_errors=True)
        gigi(
            "instrument",
            str(copy),
            "--sites",
            str(sites),
            "--out",
            str(probed),
            *with_commands,
            log=work / f"instrument{suffix}.log",
        )

    t = time.perf_counter()
    if once(
        work / f"instrumented{suffix}",
        f"{copy}\n{(sites / 'sites.parquet').stat().st_mtime_ns}\n",
        instrument,
    ):
        print(f"instrumented in {time.perf_counter() - t:.1f} s")
    placed = json.loads((probed / "gigi-instrument.json").read_text())
    print(f"  {placed['placed']} of {placed['sites']} sites placed in {len(placed['files'])} files")
    venv = HERE / ".venv" / "bin" / "gigi-query"
    cflags = subprocess.run([str(venv), "probes", "cflags"], capture_output=True, text=True)
    libs = subprocess.run([str(venv), "probes", "libs"], capture_output=True, text=True)
    flags = f"CPPFLAGS={cflags.stdout.strip()}", f"LIBS={libs.stdout.strip()}"

    def make() -> None:
        shutil.rmtree(inst, ignore_errors=True)
        run(
            ["./configure", *CONFIGURE, f"--prefix={inst}", *flags],
            probed,
            work / f"configure-probed{suffix}.log",
        )
        run(["make", f"-j{jobs}", "-s"], probed, work / f"make{suffix}.log")
        run(["make", "-s", "install"], probed, work / f"install{suffix}.log")

    t = time.perf_counter()
    said = f"{(probed / 'gigi-instrument.json').stat().st_mtime_ns}\n"
    if once(work / f"built{suffix}", said, make):
        warnings = (work / f"make{suffix}.log").read_text(errors="replace").count("warning:")
        print(f"built and installed in {time.perf_counter() - t:.0f} s ({warnings} warnings)")
    return inst / "bin"


def _scanner() -> str:
    """What the scanner's code is, so that a changed scanner scans again."""
    import hashlib

    digest = hashlib.sha256()
    for f in sorted((HERE / "gigi" / "scan").rglob("*.py")):
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def _said(report: dict) -> str:
    """The scan's report in a line: resources, and verified sites by kind."""
    names = sorted(r["name"] for r in report["resources"])
    kinds = ", ".join(f"{k} {v['verified']}" for k, v in report["kinds"].items())
    return f"{len(names)} resources ({', '.join(names)}); verified sites: {kinds}"


class Sampler(threading.Thread):
    """pg_stat_activity every 20 ms: the wait events of the active client backends."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.conn, self.stop = server.connect(), threading.Event()
        self.samples: Counter = Counter()

    def run(self) -> None:
        sql = (
            "SELECT coalesce(wait_event, 'CPU') FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()"
        )
        while not self.stop.wait(0.02):
            for (event,) in self.conn.execute(sql).fetchall():
                self.samples[event] += 1

    def finish(self) -> Counter:
        self.stop.set()
        self.join()
        self.conn.close()
        return self.samples


def traced(
    bins: Path, trace: Path | None, settings: dict, seconds: int, clients: int, work: Path
) -> tuple:
    """A run of the bulk inserts on a private cluster with SETTINGS, every backend traced
    into TRACE (None: not traced): pgbench's result, the wait events sampled, and
    pg_stat_wal's wal_buffers_full."""
    env = {}
    if trace is not None:
        shutil.rmtree(trace, ignore_errors=True)
        trace.mkdir()
        if os.geteuid() == 0:  # the server runs as its own user, which writes the trace
            user = pwd.getpwnam(USER)
            os.chown(trace, user.pw_uid, user.pw_gid)
        env = {"GIGI_TRACE": str(trace)}
    script = work / "bulk.sql"
    script.write_text(SCRIPT)
    with Server(settings, bins=bins, env=env) as server:
        with server.connect() as conn:
            for i in range(clients):
                conn.execute(f"CREATE TABLE bulk_{i} (id bigserial PRIMARY KEY, pad text)")
            conn.execute("SELECT pg_stat_reset_shared('wal')")
        sampler = Sampler(server)
        sampler.start()
        bench = subprocess.run(
            [
                str(bins / "pgbench"),
                "-n",
                "-f",
                str(script),
                "-c",
                str(clients),
                "-j",
                "2",
                "-T",
                str(seconds),
                "-h",
                "127.0.0.1",
                "-p",
                str(server.port),
                "-U",
                USER,
                "postgres",
            ],
            capture_output=True,
            text=True,
        )
        samples = sampler.finish()
        if bench.returncode != 0:
            sys.exit(f"pgbench failed:\n{bench.stdout[-2000:]}{bench.stderr[-2000:]}")
        with server.connect() as conn:
            full = conn.execute("SELECT wal_buffers_full FROM pg_stat_wal").fetchone()[0]
    return bench, samples, full


def plain_build(tree: Path, work: Path, jobs: int) -> Path:
    """The bin folder of TREE as it is, no probes: copied, built and installed once into
    --work/inst-plain, the baseline the instrumented runs are measured against."""
    plain, inst = work / "plain", work / "inst-plain"

    def make() -> None:
        shutil.rmtree(plain, ignore_errors=True)
        shutil.rmtree(inst, ignore_errors=True)
        shutil.copytree(tree, plain, symlinks=True)
        run(["./configure", *CONFIGURE, f"--prefix={inst}"], plain, work / "configure-plain.log")
        run(["make", f"-j{jobs}", "-s"], plain, work / "make-plain.log")
        run(["make", "-s", "install"], plain, work / "install-plain.log")

    t = time.perf_counter()
    if once(work / "built-plain", f"{tree}\n{' '.join(CONFIGURE)}\n", make):
        print(f"plain build made and installed in {time.perf_counter() - t:.0f} s")
    return inst / "bin"


def server_figures(
    bins: Path, work: Path, wal_buffers: str, seconds: int, clients: int, name: str
) -> dict:
    """A run's figures as the server gives them (pgbench's TPS, pg_stat_wal, sampled wait
    events), printed on one line under NAME; its trace, if the build traces, in
    --work/trace-WAL_BUFFERS."""
    trace = work / f"trace-{wal_buffers}"
    out: dict = {"wal_buffers": wal_buffers}
    settings = {**SETTINGS, "wal_buffers": wal_buffers}
    bench, samples, out["buffers_full"] = traced(bins, trace, settings, seconds, clients, work)
    out["tps"] = _tps(bench)
    total = sum(samples.values())
    out["wal_lock_share"] = sum(n for e, n in samples.items() if e in WAL_LOCKS) / max(total, 1)
    out["samples"] = samples
    print(
        f"\n{name}, wal_buffers {wal_buffers}: {out['tps']:,.0f} TPS, wal_buffers_full "
        f"{out['buffers_full']:,}, WAL locks {out['wal_lock_share']:.0%} of {total:,} samples "
        f"of active backends ({', '.join(f'{e} {n}' for e, n in samples.most_common(5))})"
    )
    return out


def one_run(
    bins: Path, work: Path, wal_buffers: str, seconds: int, clients: int, timeout: int
) -> dict:
    """One traced run: the server's figures, then gigi's diagnosis of its trace."""
    trace = work / f"trace-{wal_buffers}"
    out = server_figures(bins, work, wal_buffers, seconds, clients, "probed")
    size = sum(f.stat().st_size for f in trace.iterdir())
    store = work / f"store-{wal_buffers}"
    shutil.rmtree(store, ignore_errors=True)
    t = time.perf_counter()
    gigi("ingest", str(trace), "--store", str(store), log=work / f"ingest-{wal_buffers}.log")
    out["ingest_s"] = time.perf_counter() - t
    print(f"  trace {size / 2**20:,.0f} MiB, ingested in {out['ingest_s']:.1f} s")
    summary(store)
    t = time.perf_counter()
    diagnosis = work / f"diagnosis-{wal_buffers}.json"
    cmd = [str(GIGI), "diagnose", str(store), "--format", "json", "--output", str(diagnosis)]
    with (work / f"diagnose-{wal_buffers}.log").open("w") as log:
        try:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=True)
        except subprocess.TimeoutExpired:
            print(f"  diagnose did not finish in {timeout} s")
            out["findings"] = None
            return out
        except subprocess.CalledProcessError as e:
            sys.exit(f"diagnose failed ({e.returncode}); log {log.name}")
    out["diagnose_s"] = time.perf_counter() - t
    d = json.loads(diagnosis.read_text())
    out["findings"] = d["findings"]
    print(f"  diagnosed in {out['diagnose_s']:.1f} s")
    for f in d["findings"][:5]:
        waits = [s for s in f["sites"] if s["kind"] == "WAIT" and s["role"] == "victim"]
        where = ", ".join(f"{s['file']}:{s['line']} {s['function']}" for s in waits[:3])
        print(f"  #{f['rank']} {f['resource']} {f['failure_mode']} {f['score']}: {where or '-'}")
    if not d["findings"]:
        print("  no findings")
    return out


def _tps(bench: subprocess.CompletedProcess) -> float:
    tps = [ln for ln in bench.stdout.splitlines() if ln.startswith("tps")]
    return float(tps[0].split("=")[1].split()[0]) if tps else float("nan")


def overhead(
    plain: Path, probed: Path, work: Path, wal_buffers: str, seconds: int, clients: int, rounds: int
) -> dict:
    """The probes' cost: ROUNDS rounds, each running the build with no probes, the probed
    build with tracing off (GIGI_TRACE unset: every probe one load and one branch) and on,
    one after the other, so that a change in the machine's load falls on all three; TPS
    medians, and probed / plain for each round and for the medians. Where the machine has
    a memory file system (/dev/shm), the probed build also traces into it: the share of the
    cost that is the trace's writing to the disk the server writes to."""
    trace = work / "trace-overhead"
    settings = {**SETTINGS, "wal_buffers": wal_buffers}
    ways = {"plain": (plain, None), "probed, off": (probed, None), "probed": (probed, trace)}
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        ways["probed, shm"] = (probed, shm / f"gigi-overhead-{os.getpid()}")
    tps: dict[str, list[float]] = {name: [] for name in ways}
    size = []
    load = os.getloadavg()[0]  # before: what else runs on the machine
    for _ in range(rounds):
        for name, (bins, into) in ways.items():
            bench, _, _ = traced(bins, into, settings, seconds, clients, work)
            tps[name].append(_tps(bench))
            if into is not None:
                size.append(sum(f.stat().st_size for f in into.iterdir()))
                shutil.rmtree(into, ignore_errors=True)
    med = {name: statistics.median(v) for name, v in tps.items()}
    print(
        f"\noverhead, wal_buffers {wal_buffers}, {rounds} rounds of {seconds} s "
        f"(load average {load:.1f} on {os.cpu_count()} cores before):"
    )
    for name, v in tps.items():
        each = ", ".join(f"{x:,.0f}" for x in v)
        print(
            f"  {name:13s} TPS median {med[name]:8,.0f} ({each}); "
            f"/ plain {med[name] / med['plain']:.2f}"
        )
    rates = [p / b for p, b in zip(tps["probed"], tps["plain"], strict=True)]
    print(
        f"  probed / plain per round: {', '.join(f'{r:.2f}' for r in rates)}; trace "
        f"{statistics.median(size) / 2**20 / seconds:,.0f} MiB a second (median)"
    )
    return {"wal_buffers": wal_buffers, "tps": tps, "ratio": med["probed"] / med["plain"]}


def summary(store: Path) -> None:
    """What the trace holds: events by resource, and its waits (how many, how long in all,
    how many under a microsecond)."""
    import duckdb

    entry = next(store.glob("*/manifest.json")).parent
    manifest = json.loads((entry / "manifest.json").read_text())
    print(
        f"  {manifest['events']:,} events, {manifest['dropped']:,} dropped, "
        f"{manifest['tasks']} tasks, {manifest['resources']} resources"
    )
    rows = duckdb.sql(
        f"""SELECT resource, count(*), count(*) FILTER (WHERE kind = 0),
                   coalesce(sum(dur) FILTER (WHERE kind = 0), 0) / 1e9,
                   count(*) FILTER (WHERE kind = 0 AND dur < 1000)
            FROM read_parquet('{entry}/events/*.parquet') GROUP BY ALL ORDER BY 2 DESC"""
    ).fetchall()
    print(f"  {'resource':<24}{'events':>12}{'waits':>10}{'waited s':>10}{'< 1 us':>10}")
    for r, n, waits, waited, tiny in rows[:12]:
        print(f"  {r:<24}{n:>12,}{waits:>10,}{waited:>10.2f}{tiny:>10,}")


def wal(finding: dict) -> bool:
    """A finding on the WAL's buffers or the locks that guard their insertion and write-out."""
    return any(Path(s["file"]).name == "xlog.c" for s in finding["sites"] if s["role"] == "victim")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="kept between runs (default: a new temp dir)")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--wal-buffers", default="32kB,512MB")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a diagnosis may take")
    ap.add_argument("--validate-seconds", type=int, default=5, help="the validation run (0: none)")
    ap.add_argument("--validate-rounds", type=int, default=2, help="validations at most")
    ap.add_argument(
        "--validate-min-share", type=float, help="validate's --min-share (default: its own)"
    )
    ap.add_argument(
        "--overhead-rounds",
        type=int,
        default=3,
        help="rounds of plain, probed-off and probed runs for the probes' cost (0: none)",
    )
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="gigi-pgloop-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)  # the server's user reads the build and writes the traces
    print(f"work: {work}")
    first = args.wal_buffers.split(",")[0]
    bins = scan_and_build(
        work,
        args.jobs,
        args.validate_seconds,
        args.validate_rounds,
        args.clients,
        first,
        args.validate_min_share,
    )
    # the baseline first: the same runs on the tree with no probes
    plain_bins = plain_build(source_tree(PACKAGE, MARKER), work, args.jobs)
    plain = [
        server_figures(plain_bins, work, w, args.seconds, args.clients, "plain")
        for w in args.wal_buffers.split(",")
    ]
    runs = [
        one_run(bins, work, w, args.seconds, args.clients, args.timeout)
        for w in args.wal_buffers.split(",")
    ]
    small, large = runs[0], runs[-1]
    both = len(runs) > 1  # a small and a large value to set side by side
    print()
    sides = (("plain", (plain[0], plain[-1])), ("probed", (small, large))) if both else ()
    for name, (a, b) in sides:
        print(
            f"{name:6s} TPS {a['wal_buffers']} / {b['wal_buffers']}: {a['tps'] / b['tps']:.2f}; "
            f"wal_buffers_full {a['buffers_full']:,} against {b['buffers_full']:,}; WAL locks "
            f"{a['wal_lock_share']:.0%} against {b['wal_lock_share']:.0%} of wait samples"
        )
    for p, r in zip(plain, runs, strict=True):
        print(f"probed / plain TPS, wal_buffers {r['wal_buffers']}: {r['tps'] / p['tps']:.2f}")
    if args.overhead_rounds:
        costs = [
            overhead(plain_bins, bins, work, w, args.seconds, args.clients, args.overhead_rounds)
            for w in args.wal_buffers.split(",")
        ]
        for c in costs:
            print(
                f"goal, the probes' cost at wal_buffers {c['wal_buffers']}: under 3% of TPS: "
                f"{'met' if c['ratio'] >= 0.97 else 'NOT met'} ({1 - c['ratio']:.0%} lost)"
            )
    if small["findings"] is None or large["findings"] is None:
        print("goals: not known, a diagnosis did not finish")
        return
    top = small["findings"][:1]
    print(
        f"goal, {small['wal_buffers']}: a WAL resource ranked 1 with a wait site in xlog.c: "
        f"{'met' if top and wal(top[0]) else 'NOT met'}"
    )
    if not both:
        return
    on_wal = [f for f in large["findings"] if wal(f)]
    print(
        f"goal, {large['wal_buffers']}: no finding on the WAL: "
        f"{'met' if not on_wal else f'NOT met ({len(on_wal)})'}"
    )


if __name__ == "__main__":
    main()
