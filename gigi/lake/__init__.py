"""Lakes: traces laid out as hive-partitioned Parquet (``gigi.ingest._lake`` documents the
layout), diagnosed where they lie, on DuckDB or on Spark, whole or narrowed to a trace, a time
window and resources.

``open_lake(lake, trace, since=, until=, resources=)`` checks and returns the scope;
``diagnose_lake(lake, ..., engine="duckdb" | "spark")`` the ``Diagnosis``.
"""

from gigi.lake._diagnose import ENGINES, diagnose_lake
from gigi.lake._scope import LakeScope, open_lake, parse_time

__all__ = ["ENGINES", "LakeScope", "diagnose_lake", "open_lake", "parse_time"]
