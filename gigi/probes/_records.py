"""The fixed-width record the Python probes write into per-thread rings.

Eight little-endian int64 fields, 64 bytes a record. Thread ids are not in the record: a ring
belongs to one thread.
"""

from __future__ import annotations

import struct

import numpy as np

RECORD = struct.Struct("<8q")
RECORD_SIZE = RECORD.size  # 64 bytes

# Fields, in order. `code` packs the resource's number and the kind: rid * 4 + kind.
FIELDS = ("ts", "code", "task", "amount", "object", "site", "value", "dur")
RECORD_DTYPE = np.dtype([(f, "<i8") for f in FIELDS])

NULL_SITE = -1  # site ids are >= 0
NULL_VALUE = -(2**63)  # value may be any int64 but this one
NULL_DUR = -1  # dur is >= 0 when known
IMPLICIT_TASK = 0  # "no explicit task": the thread's own task, resolved when flushed
