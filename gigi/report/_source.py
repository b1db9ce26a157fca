"""Code excerpts for the sites: the lines around a site, read under the source root only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_LINE = 240  # characters kept of one source line


@dataclass(frozen=True)
class Excerpt:
    lines: list[tuple[int, str]]  # (1-based number, text) around the site's line
    line: int  # the site's own line
    missing: str | None = None  # why there is no excerpt, for the page; None when lines are given


class SourceTree:
    """Reads sites' files relative to ``root``; a path that leaves the root (``../``, an
    absolute path elsewhere, a symlink out) is refused: the trace names the files, and a
    report must not copy arbitrary files of the machine into a page."""

    def __init__(self, root: Path | None, context: int = 3) -> None:
        self.root = root.resolve() if root is not None else None
        self.context = context
        self._files: dict[str, list[str] | str] = {}

    def _read(self, file: str) -> list[str] | str:
        if file in self._files:
            return self._files[file]
        assert self.root is not None
        path = (self.root / file).resolve()
        if not path.is_relative_to(self.root):
            found: list[str] | str = f"source not available: {file} is outside the source root"
        elif not path.is_file():
            found = f"source not available: no {file} under the source root"
        else:
            try:
                found = path.read_text(errors="replace").splitlines()
            except OSError as e:
                found = f"source not available: {file}: {e.strerror or e}"
        self._files[file] = found
        return found

    def excerpt(self, file: str | None, line: int | None) -> Excerpt:
        line = int(line or 0)
        if self.root is None:
            return Excerpt([], line, "source not available (give --source DIR, the sites' root)")
        if not file:
            return Excerpt([], line, "source not available: the site names no file")
        text = self._read(file)
        if isinstance(text, str):
            return Excerpt([], line, text)
        if not 1 <= line <= len(text):
            return Excerpt([], line, f"source not available: {file} has no line {line}")
        first = max(1, line - self.context)
        last = min(len(text), line + self.context)
        return Excerpt([(n, text[n - 1][:MAX_LINE]) for n in range(first, last + 1)], line)
