"""What `gigi-query record postgres` costs the server: ms per poll, the CPU share of the
recorder's backend, and the workload's throughput with and without it.

    .venv/bin/python bench/record_postgres.py [--seconds 5] [--interval 10ms] [--clients 4]
                                              [--idle-sessions 20]

Starts a private PostgreSQL (tests/postgres/server.py), opens --idle-sessions sessions that
sit idle in transaction holding a lock each (rows for the views to return), then runs three
phases of --seconds each: the recorder alone (no workload), the workload alone (clients running
short transactions: a SELECT and an UPDATE of a random row), and the workload while recording.
The recorder runs as `gigi-query record postgres` in a process of its own. CPU shares are
user+system time from /proc over the phase's wall time (1.0 = one core): the recorder's
backend, the whole server (the postmaster and its children), and the recorder's own process.
ms/poll is the recorder's time per poll (its queries' round trips and turning rows into
events), as it reports it.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.postgres.server import Server, recorder  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, and the children's that were waited for (the postmaster's exited backends)
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the postmaster, its live children and its children that have exited."""
    total = cpu_seconds(postmaster)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                total += cpu_seconds(int(entry.name))
    return total


def workload(srv: Server, stop: threading.Event, counts: list[int], n: int) -> None:
    rng = random.Random(n)
    with srv.connect(autocommit=False) as conn:
        while not stop.is_set():
            row = rng.randrange(1, 10_001)
            conn.execute("SELECT v FROM w WHERE id = %s", (row,)).fetchall()
            conn.execute("UPDATE w SET v = v + 1 WHERE id = %s", (row,))
            conn.commit()
            counts[n] += 1


def recorder_backend(srv: Server) -> int | None:
    with srv.connect() as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'gigi record postgres'"
        ).fetchone()
    return row[0] if row else None


def phase(srv, seconds, interval, clients, recording, out):
    """One phase; the recorder runs as `gigi-query record postgres` in a process of its own,
    as a user runs it (in this process, it would share the GIL with the workload)."""
    stop = threading.Event()
    counts = [0] * clients
    threads = [
        threading.Thread(target=workload, args=(srv, stop, counts, n)) for n in range(clients)
    ]
    proc = backend = None
    if recording:
        proc = recorder(srv.dsn, out, "1h", interval)
        deadline = time.monotonic() + 30
        while (backend := recorder_backend(srv)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
    for t in threads:
        t.start()
    time.sleep(0.5)  # the workload's connections are up
    cpu0 = server_cpu(srv.pid)
    backend_cpu0 = cpu_seconds(backend) if backend else 0.0
    client_cpu0 = cpu_seconds(proc.pid) if proc else 0.0
    done0 = sum(counts)
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    done1 = sum(counts)
    cpu1 = server_cpu(srv.pid)
    backend_cpu1 = cpu_seconds(backend) if backend else 0.0
    client_cpu1 = cpu_seconds(proc.pid) if proc else 0.0
    stop.set()
    for t in threads:
        t.join()
    result = {
        "tps": (done1 - done0) / wall,
        "server_cpu": (cpu1 - cpu0) / wall,
        "backend_cpu": (backend_cpu1 - backend_cpu0) / wall,
        "client_cpu": (client_cpu1 - client_cpu0) / wall,
    }
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
        # "N polls in S s (M ms each), E events, ..."
        found = re.search(r"(\d+) polls in ([\d.]+) s \(([\d.]+) ms each\), (\d+) events", stdout)
        if found is None:
            raise SystemExit(f"the recorder failed: {stderr.strip() or stdout.strip()}")
        polls, secs, ms, events = found.groups()
        result |= {
            "ms_per_poll": float(ms),
            "polls_per_s": int(polls) / float(secs),
            "events_per_s": int(events) / float(secs),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--interval", default="10ms")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--idle-sessions", type=int, default=20)
    args = parser.parse_args()
    interval = args.interval
    with Server() as srv, tempfile.TemporaryDirectory() as tmp:
        with srv.connect() as conn:
            conn.execute("CREATE TABLE w (id int PRIMARY KEY, v int)")
            conn.execute("INSERT INTO w SELECT g, 0 FROM generate_series(1, 10000) AS g")
        idle = []
        for n in range(args.idle_sessions):
            conn = srv.connect(autocommit=False)
            conn.execute("SELECT v FROM w WHERE id = %s", (n + 1,)).fetchall()
            idle.append(conn)  # idle in transaction, holding its locks
        print(
            f"PostgreSQL on 127.0.0.1:{srv.port}; {args.idle_sessions} sessions idle in "
            f"transaction; interval {args.interval}, {args.seconds:g} s per phase"
        )
        rows = [
            ("recorder alone", phase(srv, args.seconds, interval, 0, True, Path(tmp) / "a")),
            ("workload alone", phase(srv, args.seconds, interval, args.clients, False, None)),
            (
                "workload + recorder",
                phase(srv, args.seconds, interval, args.clients, True, Path(tmp) / "b"),
            ),
        ]
        for conn in idle:
            conn.close()
    print(
        f"{'phase':22s} {'tx/s':>8s} {'server CPU':>11s} {'recorder backend':>17s} "
        f"{'recorder process':>17s} {'ms/poll':>8s} {'polls/s':>8s} {'events/s':>9s}"
    )
    nan = float("nan")
    for name, r in rows:
        print(
            f"{name:22s} {r['tps']:8.0f} {r['server_cpu']:11.3f} {r['backend_cpu']:17.3f} "
            f"{r['client_cpu']:17.3f} {r.get('ms_per_poll', nan):8.2f} "
            f"{r.get('polls_per_s', nan):8.1f} {r.get('events_per_s', nan):9.0f}"
        )
    alone, both = rows[1][1], rows[2][1]
    print(f"workload throughput while recording: {both['tps'] / alone['tps']:.1%} of without")


if __name__ == "__main__":
    main()
