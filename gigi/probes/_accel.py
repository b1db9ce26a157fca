"""The C hot path (``_fastpath``) and segment writer (``_writer``), when they were built; else
their pure-Python twins.

``GIGI_PURE_PYTHON=1`` in the environment forces the Python twins (tests compare the two).
"""

from __future__ import annotations

import os

try:
    if os.environ.get("GIGI_PURE_PYTHON"):
        raise ImportError("GIGI_PURE_PYTHON is set")
    from gigi.probes import _fastpath as fastpath
except ImportError:
    fastpath = None
try:
    if os.environ.get("GIGI_PURE_PYTHON"):
        raise ImportError("GIGI_PURE_PYTHON is set")
    from gigi.probes import _writer as segment_writer
except ImportError:
    segment_writer = None

RingBase: type = fastpath.RingCore if fastpath is not None else object
ProbeBase: type = fastpath.ProbeBase if fastpath is not None else object
# Ring fields the C base already holds; a pure-Python ring declares them itself.
RING_SLOTS: tuple[str, ...] = (
    () if fastpath is not None else ("buf", "head", "tail", "limit", "cap", "mask")
)
