"""What the tests that start real servers share: installing a Debian package when a program
is missing, and a free port on loopback. Imported by file path's folder (tests/), so that
tests/postgres and tests/mariadb helpers and the bench scripts all reach it."""

from __future__ import annotations

import os
import socket
import subprocess


def apt_install(package: str) -> str:
    """Install PACKAGE with apt-get (after an update); returns apt's stderr for a message."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
    done = subprocess.run(
        ["apt-get", "install", "-y", "-qq", package], capture_output=True, text=True, env=env
    )
    return done.stderr[-2000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
