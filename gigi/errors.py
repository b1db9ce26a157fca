"""The one exception root of gigi and its few subclasses.

Library code raises these; only ``gigi.cli`` turns them into a line on stderr and an exit code.
Errors about bad input also subclass ``ValueError`` so generic callers can catch them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GigiError(Exception):
    """Root of every error gigi raises on purpose."""


class SchemaError(GigiError, ValueError):
    """A file breaks trace format v1.

    The message names the file, the column and, where they apply, the batch and the row, and
    says what was expected.
    """

    def __init__(
        self,
        what: str,
        *,
        path: str | None = None,
        column: str | None = None,
        batch: int | None = None,
        row: int | None = None,
    ) -> None:
        self.path, self.column, self.batch, self.row = path, column, batch, row
        where = []
        if path is not None:
            where.append(str(path))
        if column is not None:
            where.append(f"column {column!r}")
        if batch is not None:
            where.append(f"batch {batch}")
        if row is not None:
            where.append(f"row {row}")
        super().__init__(f"{', '.join(where)}: {what}" if where else what)


class IngestError(GigiError, ValueError):
    """A trace directory or store cannot be ingested or opened."""


class ProbeError(GigiError, ValueError):
    """The probe runtime was misused (bad resource declaration, bad option)."""


class QueryError(GigiError, ValueError):
    """A query is refused or fails."""


class DetectorError(GigiError, ValueError):
    """A detector file is malformed, or its query fails or returns the wrong shape."""


class RecordError(GigiError, ValueError):
    """A server cannot be recorded: it cannot be reached, a privilege or setting is missing,
    or the connection was lost (what was recorded up to then is kept)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""``.

    >>> did_you_mean("hods", ["holds", "waits"])
    " (did you mean 'holds'?)"
    >>> did_you_mean("zzz", ["holds"])
    ''
    """
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
