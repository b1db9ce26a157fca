"""The fixed-width record the Python probes write into per-thread rings.

Eight native-order int64 fields, 64 bytes a record. Thread ids are not in the record: a ring
belongs to one thread.
"""

from __future__ import annotations

import struct

RECORD = struct.Struct("=8q")  # native byte order, as the C hot path writes it
RECORD_SIZE = RECORD.size  # 64 bytes

# Fields, in order. `code` packs the resource's number, whether `value` holds a value, and the
# kind: rid << 3 | HAS_VALUE | kind. (A flag, not a sentinel value: every int64 is a value.)
FIELDS = ("ts", "code", "task", "amount", "object", "site", "value", "dur")


NULL_SITE = -1  # site ids are >= 0
RID_SHIFT = 3
HAS_VALUE = 4
KIND_MASK = 3
NULL_DUR = -1  # dur is >= 0 when known
IMPLICIT_TASK = 0  # "no explicit task": the thread's own task, resolved when flushed
