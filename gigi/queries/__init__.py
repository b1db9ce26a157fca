"""SQL over a trace: ``connect(target)`` gives a DuckDB connection with the trace's views.

Views (each documented column by column in ``gigi/queries/views/<name>.sql``): ``events``,
``tasks``, ``resources``, ``sites``, ``holds``, ``waits``, ``outstanding``, ``drops``,
``trace_info``, ``hold_pairs``, and for perf samples ``samples``, ``task_threads`` and
``samples_by_task``. Named queries live in ``gigi/queries/named/<name>.sql``.

>>> import tempfile, gigi.probes as gp
>>> pool = gp.resource("doctest.pool")
>>> with tempfile.TemporaryDirectory() as d:
...     _ = gp.enable(d)
...     pool.acquire(object=1); pool.release(object=1)
...     _ = gp.disable()
...     con = connect(d)
...     run(con, "SELECT resource, open FROM holds").fetchall()
[('doctest.pool', False)]
"""

from gigi.queries._connect import (
    NAMED_DIR,
    VIEWS_DIR,
    connect,
    named_queries,
    run,
    run_named,
    set_variables,
    views,
)
from gigi.queries._invariants import self_check

__all__ = [
    "NAMED_DIR",
    "VIEWS_DIR",
    "connect",
    "named_queries",
    "run",
    "run_named",
    "self_check",
    "set_variables",
    "views",
]
