"""What the tests that start real servers or read real code share: installing a Debian package
when a program is missing, a source package's tree, and a free port on loopback. Imported by
file path's folder (tests/), so that tests/postgres and tests/mariadb helpers and the bench
scripts all reach it."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SOURCES_DIR = Path("/etc/apt/sources.list.d")
OURS = SOURCES_DIR / "gigi-deb-src.sources"


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


def _add_deb_src() -> bool:
    """A deb-src entry beside the machine's own apt sources (same mirrors, same suites)."""
    if OURS.exists():
        return True
    stanzas = []
    for f in sorted(SOURCES_DIR.glob("*.sources")):
        if f == OURS:
            continue
        for block in f.read_text().split("\n\n"):
            if re.search(r"^Types:.*\bdeb\b", block, re.M) and "deb-src" not in block:
                stanzas.append(re.sub(r"^Types:.*$", "Types: deb-src", block.strip(), flags=re.M))
    if not stanzas:
        return False
    try:
        OURS.write_text("\n\n".join(stanzas) + "\n")
    except OSError:
        return False
    return subprocess.run(["apt-get", "update", "-qq"], capture_output=True).returncode == 0


def source_tree(package: str, marker: str, cache: Path | None = None) -> Path | None:
    """The unpacked original tarball of Debian's source package PACKAGE, fetched once into
    CACHE (default: a folder per package in the temp dir, or $GIGI_SRC_CACHE/PACKAGE): the
    folder that holds MARKER (a path relative to the tree, such as ``src/object.c``). None,
    with why on stderr, when apt cannot get it."""
    root = os.environ.get("GIGI_SRC_CACHE")
    cache = cache or (Path(root) if root else Path(tempfile.gettempdir())) / f"gigi-src-{package}"

    def found() -> Path | None:
        if not cache.exists():
            return None
        hit = next(iter(sorted(cache.glob(f"*/{marker}"))), None)
        return Path(str(hit)[: -len(marker)]).resolve() if hit else None

    if (tree := found()) is not None:
        return tree
    if not _add_deb_src():
        print("cannot add a deb-src entry to apt's sources", file=sys.stderr)
        return None
    cache.mkdir(parents=True, exist_ok=True)
    # the newest version first; an older one where a mirror lacks it (a security suite's
    # index can name files its pool no longer has)
    listed = subprocess.run(["apt-cache", "showsrc", package], capture_output=True, text=True)
    versions = sorted(set(re.findall(r"^Version: (\S+)", listed.stdout, re.M)), reverse=True)
    for spec in [package, *(f"{package}={v}" for v in versions)]:
        got = subprocess.run(
            ["apt-get", "source", "--download-only", "-qq", spec],
            cwd=cache,
            capture_output=True,
            text=True,
        )
        if got.returncode == 0:
            break
    else:
        print(got.stderr, file=sys.stderr)
        return None
    for orig in sorted(cache.glob(f"{package}_*.orig.tar.*")):
        if "orig-" in orig.name or orig.suffix == ".asc":  # docs, a website; a signature
            continue
        with tarfile.open(orig) as tar:
            tar.extractall(cache, filter="data")
    return found()


def sdist_tree(project: str, version: str, marker: str, cache: Path | None = None) -> Path | None:
    """The unpacked source distribution of PROJECT==VERSION from the Python package index
    (``llama-cpp-python``, which vendors llama.cpp), fetched once into CACHE (as for
    ``source_tree``: a folder named after the project): the folder that holds MARKER. None,
    with why on stderr, when pip cannot get it."""
    root = os.environ.get("GIGI_SRC_CACHE")
    cache = cache or (Path(root) if root else Path(tempfile.gettempdir())) / f"gigi-sdist-{project}"
    hit = next(iter(sorted(cache.glob(f"*/{marker}"))), None) if cache.exists() else None
    if hit is None:
        cache.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
            + ["--dest", str(cache), f"{project}=={version}"],
            capture_output=True,
            text=True,
        )
        if got.returncode != 0:
            print(got.stderr[-2000:], file=sys.stderr)
            return None
        for sdist in sorted(cache.glob("*.tar.gz")):
            with tarfile.open(sdist) as tar:
                tar.extractall(cache, filter="data")
        hit = next(iter(sorted(cache.glob(f"*/{marker}"))), None)
    return Path(str(hit)[: -len(marker)]).resolve() if hit else None


def unpacked(name: str, packages: list[str], cache: Path | None = None) -> Path | None:
    """Debian's binary PACKAGES unpacked together (not installed) into one folder, once, in
    CACHE (default: as for ``source_tree``, a folder named after NAME): the headers and
    libraries of what a scanned tree includes but does not hold. None, with why on stderr,
    when apt cannot get one."""
    root = os.environ.get("GIGI_SRC_CACHE")
    cache = cache or (Path(root) if root else Path(tempfile.gettempdir())) / f"gigi-deps-{name}"
    done = cache / "unpacked"
    if done.exists() and done.read_text().split() == packages:
        return cache / "root"
    cache.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(
        ["apt-get", "download", "-qq", *packages], cwd=cache, capture_output=True, text=True
    )
    if got.returncode != 0:
        print(got.stderr, file=sys.stderr)
        return None
    for package in packages:
        deb = sorted(cache.glob(f"{package}_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(cache / "root")], check=True)
    done.write_text(" ".join(packages))
    return cache / "root"
