"""What `gigi-query record mariadb` costs the server: ms per poll and the server's CPU share
while it polls, idle and under a small workload, against the same without it.

    .venv/bin/python bench/record_mariadb.py [--seconds 5] [--interval 10ms] [--clients 4]

Starts a private MariaDB (tests/mariadb/mariadb_server.py; Debian's mariadb-server, installed
when missing), then runs four phases of --seconds each: idle, idle while recording, the workload
(clients running short transactions: a SELECT and an UPDATE of a random row), the workload
while recording. The server's CPU share is its user+system time from /proc over the phase's
wall time (1.0 = one core).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "mariadb"))

from mariadb_server import Server  # noqa: E402

from gigi.record._duration import parse_duration  # noqa: E402
from gigi.record.mariadb import record  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def workload(srv: Server, stop: threading.Event, counts: list[int], n: int) -> None:
    con = srv.connect()
    rng = random.Random(n)
    with con.cursor() as cur:
        while not stop.is_set():
            row = rng.randrange(1, 1001)
            cur.execute("BEGIN")
            cur.execute("SELECT v FROM w WHERE id = %s", (row,))
            cur.fetchall()
            cur.execute("UPDATE w SET v = v + 1 WHERE id = %s", (row,))
            cur.execute("COMMIT")
            counts[n] += 1
    con.close()


def phase(srv: Server, seconds: float, interval: float, clients: int, recording: bool, out: Path):
    stop = threading.Event()
    counts = [0] * clients
    threads = [
        threading.Thread(target=workload, args=(srv, stop, counts, n)) for n in range(clients)
    ]
    for t in threads:
        t.start()
    time.sleep(0.5 if clients else 0)  # connected and running
    rec_stop, rec_result, native = threading.Event(), {}, {}

    def run():
        native["tid"] = threading.get_native_id()
        rec_result["r"] = record(
            srv.dsn, out, duration=seconds + 5, interval=interval, stop=rec_stop
        )
        native["cpu"] = cpu_seconds(os.getpid(), native["tid"])

    recorder = threading.Thread(target=run)
    if recording:
        recorder.start()
        time.sleep(0.5)  # connected and polling
    done0, cpu0, wall0 = sum(counts), cpu_seconds(srv.proc.pid), time.monotonic()
    time.sleep(seconds)
    done1, cpu1, wall1 = sum(counts), cpu_seconds(srv.proc.pid), time.monotonic()
    rec_stop.set()
    stop.set()
    if recording:
        recorder.join()
    for t in threads:
        t.join()
    wall = wall1 - wall0
    figures = {"server_cpu": (cpu1 - cpu0) / wall, "tps": (done1 - done0) / wall}
    if recording:
        r = rec_result["r"]
        figures.update(r.figures())
        figures["polls_per_s"] = r.polls / r.seconds
        figures["recorder_cpu"] = native["cpu"] / r.seconds
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--interval", default="10ms")
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    interval = parse_duration(args.interval, "interval")
    with tempfile.TemporaryDirectory() as tmp, Server(Path(tmp) / "server") as srv:
        con = srv.connect()
        with con.cursor() as cur:
            cur.execute("CREATE TABLE w (id INT PRIMARY KEY, v INT)")
            cur.execute(
                "INSERT INTO w SELECT seq, 0 FROM seq_1_to_1000"
                if "MariaDB" in srv.connect().get_server_info()
                else "INSERT INTO w VALUES " + ",".join(f"({i},0)" for i in range(1, 1001))
            )
        con.close()
        print(
            f"server {srv.connect().get_server_info()}, {os.cpu_count()} cores, "
            f"interval {interval * 1000:g} ms, {args.seconds:g} s per phase"
        )
        rows = []
        for clients in (0, args.clients):
            for recording in (False, True):
                f = phase(
                    srv,
                    args.seconds,
                    interval,
                    clients,
                    recording,
                    Path(tmp) / f"trace-{clients}-{recording}",
                )
                rows.append((clients, recording, f))
        print(
            f"{'clients':>7} {'recording':>9} {'server CPU':>10} {'txn/s':>8} "
            f"{'poll ms mean':>12} {'p50':>6} {'p99':>6} {'polls/s':>8} {'recorder CPU':>12}"
        )
        for clients, recording, f in rows:
            extra = (
                f"{f['mean']:12.2f} {f['p50']:6.2f} {f['p99']:6.2f} {f['polls_per_s']:8.1f} "
                f"{f['recorder_cpu']:12.3f}"
                if recording
                else f"{'':12} {'':6} {'':6} {'':8} {'':12}"
            )
            print(
                f"{clients:7d} {'yes' if recording else 'no':>9} {f['server_cpu']:10.3f} "
                f"{f['tps']:8.0f} {extra}"
            )
        base = {c: f["server_cpu"] for c, r, f in rows if not r}
        for clients, recording, f in rows:
            if recording:
                print(
                    f"recording costs the server {f['server_cpu'] - base[clients]:+.3f} of a "
                    f"core with {clients} clients"
                )


if __name__ == "__main__":
    main()
