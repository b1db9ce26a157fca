"""numba's kernels compile once, into its cache, and every later process loads them from there.

A kernel numba cannot find in its cache compiles again in every process: seconds of CPU on
each `gigi-query diagnose`, whatever the trace's size. A kernel defined inside a function is
one (numba keys it by its closure too, and a closure over another kernel pickles differently
in every process); a kernel without ``cache=True`` is another.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import events, write_stream, write_tasks

PKG = Path(__file__).resolve().parents[1] / "gigi"
NUMBA_DECORATOR = re.compile(r"^(numba\.)?(njit|jit|vectorize|guvectorize|cfunc|stencil)\b")


class _Kernels(ast.NodeVisitor):
    """(node, its numba decorator or call, at module level) of every function numba compiles."""

    def __init__(self) -> None:
        self.depth = 0  # functions and classes around the node
        self.found: list[tuple[ast.AST, ast.AST, bool]] = []

    def visit_FunctionDef(self, node) -> None:
        for d in node.decorator_list:
            if NUMBA_DECORATOR.search(ast.unparse(d)):
                self.found.append((node, d, self.depth == 0))
            else:
                self.visit(d)
        self.depth += 1
        for stmt in node.body:
            self.visit(stmt)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_Call(self, node) -> None:  # numba.njit(cache=True)(f)
        if NUMBA_DECORATOR.search(ast.unparse(node.func)):
            self.found.append((node, node, self.depth == 0))
        else:
            self.generic_visit(node)


def test_every_kernel_is_cached_and_at_module_level():
    found = 0
    for path in sorted(PKG.rglob("*.py")):
        kernels = _Kernels()
        kernels.visit(ast.parse(path.read_text()))
        for node, decorator, top in kernels.found:
            where = f"{path.relative_to(PKG.parent)}:{node.lineno}"
            assert top, f"{where}: a kernel inside a function or class compiles on every run"
            assert "cache=True" in ast.unparse(decorator), f"{where}: a kernel without cache=True"
            found += 1
    assert found >= 20  # the pairing, attribution, totals, hold-time and task-share kernels


def _trace(d: Path) -> Path:
    """A lock that 300 short tasks wait for, each once, for between 10 us and 3 ms: every
    kernel of ingest and of the diagnosis runs, the hold-time one by both its paths (few
    groups: by counting; one per task: by sorting)."""
    ts, kind, task, dur = [], [], [], []
    t = 0
    for i in range(300):
        waited = 10_000 + (i * 7919) % 3_000_000
        ts += [t, t + waited, t + waited + 1000, t + waited + 5000]
        kind += ["WAIT", "ACQUIRE", "USE", "RELEASE"]
        task += [i + 1] * 4
        dur += [waited, 0, 0, 0]
        t += waited + 6000
    d.mkdir()
    write_stream(
        d / "e.arrows",
        events(
            ts=ts,
            kind=kind,
            resource=["app.lock"] * len(ts),
            task=task,
            thread=task,
            dur=pa.array(dur, pa.int64()),
        ),
    )
    write_tasks(d / "t.arrows", [(i + 1, f"request {i}", 0, t) for i in range(300)])
    return d


def _files(cache: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(cache)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in cache.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow  # the first run compiles every kernel: tens of seconds of CPU
def test_a_second_process_compiles_no_kernel(tmp_path):
    trace = _trace(tmp_path / "trace")
    cache = tmp_path / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    diagnose = [sys.executable, "-m", "gigi.cli", "diagnose", str(trace), "--format", "json"]
    subprocess.run(diagnose, env=env, check=True, capture_output=True)
    compiled = _files(cache)
    assert sum(name.endswith(".nbi") for name in compiled) >= 10, sorted(compiled)
    subprocess.run(diagnose, env=env, check=True, capture_output=True)
    again = _files(cache)
    added = sorted(again.keys() - compiled.keys())
    rewritten = sorted(k for k in compiled.keys() & again.keys() if compiled[k] != again[k])
    assert not added and not rewritten, f"compiled again: {added + rewritten}"
