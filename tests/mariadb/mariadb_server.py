"""A private MariaDB (or MySQL) server for the tests and the bench: installed from Debian's
packages when missing, started on loopback with a data dir and socket of its own, stopped by
its own pid."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from debian import apt_install, free_port  # noqa: E402,F401


class ServerError(RuntimeError):
    pass


def binaries() -> tuple[str, str]:
    """(server, install-db), installing Debian's mariadb-server when neither is on PATH."""

    def find() -> tuple[str | None, str | None]:
        server = shutil.which("mariadbd") or shutil.which("mysqld")
        for d in ("/usr/sbin", "/usr/libexec"):
            for name in ("mariadbd", "mysqld"):
                if server is None and os.path.exists(f"{d}/{name}"):
                    server = f"{d}/{name}"
        return server, shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")

    server, install = find()
    if server is None or install is None:
        err = apt_install("mariadb-server")
        server, install = find()
        if server is None or install is None:
            raise ServerError(f"cannot install mariadb-server:\n{err}")
    return server, install


class Server:
    """``with Server(tmp) as srv:`` a running server; ``srv.dsn`` for root over TCP."""

    def __init__(self, base: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.base = Path(base)
        self.datadir = self.base / "data"
        self.socket = self.base / "mysqld.sock"
        self.log = self.base / "error.log"
        self.port = free_port()
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None

    @property
    def dsn(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/test"

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no error log)"

    def start(self, timeout: float = 60.0) -> Server:
        server, install = binaries()
        self.base.mkdir(parents=True, exist_ok=True)
        if not self.datadir.exists():
            done = subprocess.run(
                [
                    install,
                    "--no-defaults",
                    f"--datadir={self.datadir}",
                    "--user=root",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise ServerError(f"{install} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.proc = subprocess.Popen(
            [
                server,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--socket={self.socket}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                "--performance-schema=ON",
                "--user=root",
                f"--log-error={self.log}",
                f"--pid-file={self.base / 'mysqld.pid'}",
                "--innodb-buffer-pool-size=32M",
                "--skip-log-bin",
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        import pymysql

        while True:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"the server exited with status {self.proc.returncode}; its log:\n"
                    + self._log_tail()
                )
            try:
                con = pymysql.connect(
                    host="127.0.0.1", port=self.port, user="root", connect_timeout=2
                )
                with con.cursor() as cur:
                    cur.execute("CREATE DATABASE IF NOT EXISTS test")
                con.close()
                return self
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerError(
                        f"the server did not accept connections in {timeout:g} s; its log:\n"
                        + self._log_tail()
                    ) from None
                time.sleep(0.2)

    def connect(self, **kw):
        import pymysql

        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", database="test", autocommit=True, **kw
        )

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the server's own pid, and wait; SIGKILL if it will not go."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
