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
    """Every command, sub-commands of a group as "group command"."""
    from gigi.cli import app

    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    for group in app.registered_groups:
        names += [
            f"{group.name} {c.name or c.callback.__name__}"
            for c in group.typer_instance.registered_commands
        ]
    return names


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
        parts += ["", f"### `gigi-query {name}`", "", "```", help_text(name.split()), "```"]
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
    from gigi.detectors import load
    from gigi.diagnosis._metrics import METRICS_DOC

    parts += ["### Metrics tables (registered by `diagnose`, read by detectors)", ""]
    for table, columns in METRICS_DOC.items():
        parts.append(f"**`{table}`**")
        parts.append("")
        parts += [f"- `{col}`: {text}" for col, text in columns.items()]
        parts.append("")
    parts += ["### Built-in detectors", ""]
    for det in load():
        parts.append(f"**`{det.name}`** ({det.failure_mode}): {det.meaning}")
        parts.append("")
        parts += [
            f"- parameter `{p.name}` (default {p.default:g}): {p.doc}" for p in det.params.values()
        ]
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
