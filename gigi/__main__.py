"""``python -m gigi``: the ``gigi-query`` command."""

from gigi._entry import entry

entry()
