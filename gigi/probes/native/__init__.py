"""The native probe runtime for C and C++ programs: its header, its sources, and a static
library built from them with the machine's C compiler (no network, nothing but libc and
pthreads).

    cc $(gigi-query probes cflags) -c app.c
    cc app.o $(gigi-query probes libs) -o app
    GIGI_TRACE=./trace ./app
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from gigi.errors import ProbeError

HERE = Path(__file__).resolve().parent
HEADER = HERE / "gigi_probe.h"
SOURCES = (HERE / "gigi_probe.c", HERE / "arrow_ipc.c")
LIBRARY = "libgigiprobe.a"
C_FLAGS = ("-std=c11", "-O2", "-fPIC", "-Wall")


def include_dir() -> Path:
    return HERE


def cflags() -> list[str]:
    """Flags to compile code that includes gigi_probe.h."""
    return [f"-I{HERE}"]


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise ProbeError("no C compiler: set CC or install cc (gcc or clang)")
    return cc


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gigi" / "native"


def build_library(out_dir: str | os.PathLike | None = None) -> Path:
    """Build (once per version of the sources and compiler) the static library and return its
    path. ``out_dir``: where to put it (default: the user's cache directory)."""
    cc = compiler()
    digest = hashlib.sha256(cc.encode())
    for src in (HEADER, HERE / "arrow_ipc.h", *SOURCES):
        digest.update(src.read_bytes())
    digest.update(" ".join(C_FLAGS).encode())
    out = Path(out_dir) if out_dir else _cache_dir() / digest.hexdigest()[:16]
    lib = out / LIBRARY
    if lib.exists() and out_dir is None:
        return lib
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as work:
        objects = []
        for src in SOURCES:
            obj = Path(work) / (src.stem + ".o")
            _run([cc, *C_FLAGS, f"-I{HERE}", "-c", str(src), "-o", str(obj)])
            objects.append(str(obj))
        tmp = Path(work) / LIBRARY
        ar = shutil.which("ar") or shutil.which("gcc-ar")
        if not ar:
            raise ProbeError("no archiver: install binutils (ar)")
        _run([ar, "rcs", str(tmp), *objects])
        os.replace(tmp, lib)
    return lib


def libs(out_dir: str | os.PathLike | None = None) -> list[str]:
    """Flags to link a program with the runtime (building the library first if needed)."""
    return [str(build_library(out_dir)), "-lpthread"]


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["failed"])[0]
        raise ProbeError(f"{Path(cmd[0]).name}: building the native probes failed: {first}")
