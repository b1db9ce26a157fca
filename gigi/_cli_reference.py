"""The CLI reference in README.md, generated from the commands' own help.

``python -m gigi._cli_reference`` prints it; ``--write`` puts it into README.md between the
markers. A test fails when README.md is out of date.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

START = "<!-- cli-reference:start -->"
END = "<!-- cli-reference:end -->"


def commands() -> list[str]:
    from gigi.cli import app

    return [c.name or c.callback.__name__ for c in app.registered_commands]


def help_text(args: list[str]) -> str:
    from gigi.cli import main

    out = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out):
            main([*args, "--help"])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(line.rstrip() for line in out.getvalue().strip().splitlines())


def reference() -> str:
    parts = [START, "", "```", help_text([]), "```"]
    for name in commands():
        parts += ["", f"### `gigi-query {name}`", "", "```", help_text([name]), "```"]
    parts += [
        "",
        "### Views and named queries",
        "",
        "Generated from the comments in `gigi/queries/views/*.sql` and `gigi/queries/named/*.sql`.",
        "",
    ]
    from gigi.queries import named_queries, views

    for kind, docs in (("view", views()), ("named query", named_queries())):
        for doc in docs.values():
            parts += [f"**`{doc.name}`** ({kind}): {doc.summary}", ""]
            for p in doc.params.values():
                parts.append(f"- parameter `{p.name}` (default {p.default}): {p.doc}")
            for col, text in doc.columns.items():
                parts.append(f"- `{col}`: {text}")
            parts.append("")
    parts += [END]
    return "\n".join(parts)


def update(readme: Path) -> bool:
    """Rewrite the reference section of ``readme``; return whether it changed."""
    text = readme.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    new = head + reference() + tail
    if new != text:
        readme.write_text(new)
    return new != text


if __name__ == "__main__":
    if "--write" in sys.argv:
        update(Path(__file__).resolve().parents[1] / "README.md")
    else:
        print(reference())
