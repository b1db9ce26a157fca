"""A private PostgreSQL server for the tests and the bench: binaries found on PATH, by
``pg_config --bindir`` or under /usr/lib/postgresql (Debian's ``postgresql`` installed when
there are none), run as the ``postgres`` user (initdb refuses root) with a data dir and socket
dir of its own, listening on 127.0.0.1 only, stopped by its own pid."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from debian import apt_install, free_port  # noqa: E402,F401

USER = "postgres"


class ServerError(RuntimeError):
    pass


def _bindir() -> Path | None:
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(os.path.realpath(initdb)).parent
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        d = Path(out.stdout.strip())
        if out.returncode == 0 and (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(versions[-1]).parent if versions else None


def bindir() -> Path:
    """The directory of initdb and pg_ctl, installing Debian's postgresql when there is none."""
    found = _bindir()
    if found is None:
        err = apt_install("postgresql")
        found = _bindir()
        if found is None:
            raise ServerError(f"cannot install postgresql:\n{err}")
    return found


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        done = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise ServerError(f"cannot create user {USER}: {done.stderr.strip()}") from None
        return pwd.getpwnam(USER)


class Server:
    """``with Server(settings) as srv:`` a running server; ``srv.dsn`` for the superuser
    ``postgres`` over TCP, database ``postgres``."""

    def __init__(
        self,
        settings: dict[str, str] | None = None,
        bins: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """BINS: a build's own bin folder instead of the one found; ENV: more environment
        for the server's processes, not initdb's (GIGI_TRACE for an instrumented build)."""
        self.settings = settings or {}
        self.bins, self.env = bins, env or {}
        self.port = free_port()
        self.base: Path | None = None
        self.pid: int | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    @property
    def log(self) -> Path:
        assert self.base is not None
        return self.base / "server.log"

    def _as_user(
        self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        run_as = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
        return subprocess.run(
            [*run_as, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.base,
            env={**os.environ, **(env or {})},
        )

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no server log)"

    def start(self, timeout: float = 60.0) -> Server:
        bins = self.bins or bindir()
        user = _user()
        # Under /tmp (world-traversable), not pytest's private tmp dir the user cannot enter.
        self.base = Path(tempfile.mkdtemp(prefix="gigi-pg-"))
        if os.geteuid() == 0:
            os.chown(self.base, user.pw_uid, user.pw_gid)
        data = self.base / "data"
        done = self._as_user(
            str(bins / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        if done.returncode != 0:
            raise ServerError(f"initdb failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.base),
            "fsync": "off",
            "full_page_writes": "off",
            "shared_buffers": "32MB",
            **self.settings,
        }
        with open(data / "postgresql.conf", "a") as conf:
            for name, value in options.items():
                conf.write(f"{name} = '{value}'\n")
        done = self._as_user(
            str(bins / "pg_ctl"),
            "start",
            "-D",
            str(data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(int(timeout)),
            timeout=timeout + 10,
            env=self.env,
        )
        pidfile = data / "postmaster.pid"
        if pidfile.exists():
            self.pid = int(pidfile.read_text().split()[0])
        if done.returncode != 0:
            log = self._log_tail()
            self.stop()
            raise ServerError(
                f"the server did not start (pg_ctl: {done.stdout.strip()} {done.stderr.strip()});"
                f" its log:\n{log}"
            )
        return self

    def connect(self, **kw):
        import psycopg

        return psycopg.connect(self.dsn, autocommit=kw.pop("autocommit", True), **kw)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT (fast shutdown) to the postmaster's own pid and wait for it to go; SIGKILL
        if it will not. The data dir goes with it."""
        if self.pid is not None:
            for sig, wait in ((signal.SIGINT, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and _alive(self.pid):
                    time.sleep(0.05)
                if not _alive(self.pid):
                    break
            self.pid = None
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def recorder(dsn: str, out: Path, duration: str, interval: str) -> subprocess.Popen:
    """`gigi-query record postgres` in a process of its own, as a user runs it (in the
    caller's process it would share the GIL with the caller's sessions); SIGTERM stops it."""
    return subprocess.Popen(
        [sys.executable, "-m", "gigi.cli", "record", "postgres", "--dsn", dsn]
        + ["--duration", duration, "--interval", interval, "--out", str(out)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(what: str, check, timeout: float = 20.0) -> None:
    """Poll ``check()`` every 20 ms until it is true; an AssertionError naming WHAT after
    TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def start_recorder(server: Server, trace: Path) -> subprocess.Popen:
    """`gigi-query record postgres` (10 ms polls) in a process of its own until SIGTERM,
    returned once its first poll has flushed a segment."""
    proc = recorder(server.dsn, trace, "120s", "10ms")
    wait_until(
        "the recorder's first segment",
        lambda: any(trace.glob("*.arrows")) or proc.poll() is not None,
        timeout=30,
    )
    assert proc.poll() is None, proc.communicate()
    return proc


def stop_recorder(proc: subprocess.Popen) -> str:
    """SIGTERM, and what the recorder printed; it must have stopped cleanly and quietly."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err == ""
    return out


def churn_table(server: Server, rows: int, vacuum_threshold: int) -> None:
    """A fresh table ``churn (id, v)`` of ROWS rows that autovacuum visits (with no cost
    delay) once VACUUM_THRESHOLD of its tuples are dead; the whole database vacuumed, so that
    the dead tuples earlier tests left in other tables (pgbench's) are not cleaned up while
    the next one records."""
    with server.connect() as setup:
        setup.execute("DROP TABLE IF EXISTS churn")
        setup.execute(
            "CREATE TABLE churn (id int PRIMARY KEY, v int) WITH (autovacuum_vacuum_threshold"
            f" = {vacuum_threshold}, autovacuum_vacuum_scale_factor = 0,"
            " autovacuum_vacuum_cost_delay = 0)"
        )
        setup.execute(f"INSERT INTO churn SELECT g, 0 FROM generate_series(1, {rows}) AS g")
        setup.execute("VACUUM")


def under_a_long_snapshot(
    server: Server,
    done,
    workers: list,
    seconds: float,
    *,
    snapshot: bool = True,
    settle: float = 0.0,
    measure=None,
) -> tuple[int, object]:
    """WORKERS (threads that run until DONE is set) started and left SECONDS while a
    REPEATABLE READ transaction keeps the snapshot of churn it took by
    ``SELECT count(*) FROM churn`` (none when not SNAPSHOT; SETTLE s before it is taken);
    then the transaction commits, the workers stop, churn is vacuumed and the statistics
    catch up. Returns the transaction's pid and what MEASURE returned at the end of SECONDS,
    before the commit (None without it)."""
    long_xact = server.connect(autocommit=False)
    long_pid = long_xact.info.backend_pid
    measured = None
    try:
        time.sleep(settle)
        if snapshot:
            long_xact.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            long_xact.execute("SELECT count(*) FROM churn").fetchone()
        for w in workers:
            w.start()
        time.sleep(seconds)
        if measure is not None:
            measured = measure()
        long_xact.commit()  # vacuum may now remove what piled up
        done.set()
        for w in workers:
            w.join(10)
        with server.connect() as conn:
            conn.execute("VACUUM churn")
        time.sleep(1.5)  # the statistics catch up
    finally:
        done.set()
        long_xact.close()
    return long_pid, measured
