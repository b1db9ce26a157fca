"""The ``metrics_*`` tables on one node for a trace too large to hold: the plan the Spark path
follows (``gigi.lake._spark_metrics``), run by DuckDB, so that memory follows a stretch of
time and not the trace.

- holds: the view computed once, into Parquet, for all that reads it (``StretchedEngine``);
- totals: the totals kernel over the events streamed in trace order, as for any trace, sorted
  a range of ``seq`` at a time (a sort of the whole trace grew faster than the trace);
- the blame and the task shares: the numba sweeps, one stretch of time at a time
  (``gigi.lake._stretches``), their intervals first written out as Parquet partitioned by
  stretch; their rows go to Parquet files, of which ``metrics_blame`` is a view (the rows of
  a wait cut by stretches summed);
- hold and wait distributions: the distribution kernel, as for any trace (two columns a hold
  or a wait);
- the per-task figures: SQL (``sql/task_metrics.sql``, the twin the tests hold to the
  kernels), a part of the tasks at a time, into Parquet files of which ``metrics_tasks`` is
  a view.

The figures are those of ``gigi.diagnosis._metrics.compute`` (blame to within rounding, as on
Spark); a trace of fewer than ``AT_SCALE`` events keeps that in-memory path.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gigi.diagnosis._diagnose import DuckDBEngine
from gigi.diagnosis._metrics import (
    _distribution,
    _totals,
    outstanding_table,
    resource_table,
    seq_ranges,
)
from gigi.lake import _stretches as stretch

AT_SCALE = 1 << 24  # events from which a lake is diagnosed a stretch of time at a time
TASK_PART_EVENTS = 1 << 23  # events per part of the tasks whose metrics are computed at once
SEQ_STEP = 1 << 23  # events in trace order sorted (totals) or joined (holds) at once

BLAME_KEYS = "wait_seq, resource, object, victim, culprit, culprit_resource, depth"
BLAME_ARROW = pa.schema(
    [(k, pa.string() if "resource" in k else pa.int64()) for k in BLAME_KEYS.split(", ")]
    + [("blame_ns", pa.float64()), ("cut", pa.bool_())]
)
SHARES_ARROW = pa.schema(
    [("resource", pa.string()), ("task", pa.int64()), ("held", pa.int64()), ("used", pa.int64())]
)


def compute(con, stages, folder: str, chunks: int | None = None) -> None:
    """Register the ``metrics_*`` tables on ``con`` (a lake's views), stretch by stretch.
    ``metrics_blame`` and ``metrics_tasks``, whose rows grow with the trace, are views of
    Parquet files in ``folder``, which must outlive the queries on them: as DuckDB tables they
    filled its memory at scale, and every later stage spilled."""
    resources = con.sql("SELECT resource, capacity, sharing FROM resources ORDER BY resource")
    resources = resources.to_arrow_table()
    names = resources.column("resource").to_pylist()
    start, end, events = con.sql('SELECT start, "end", events FROM trace_info').fetchall()[0]
    span = max(end - start, 1)
    chunks = chunks or stretch.chunk_count(events)
    cut = (start, span, chunks)
    with stages("totals: events, outstanding, rates"):
        totals, level, rate, square = _totals(con, names, start, end, seq_step=SEQ_STEP)
    with stages("blame: attribution over waits and holds"):
        blame = f"{folder}/blame"
        sweep = _marking_cut(stretch.blame_sweep(names, *cut, events), *cut)
        _by_stretch(con, stretch.BLAME_UNION, sweep, BLAME_ARROW, blame, *cut, merged=True)
        # a wait within one stretch has its rows from that stretch alone; the rows of the
        # others are summed over the stretches; then rounded half to even, as Spark's bround
        parts = f"read_parquet('{blame}/*.parquet')"
        con.execute(f"""
            CREATE OR REPLACE TABLE gigi_blame_cut AS
            SELECT {BLAME_KEYS}, CAST(round_even(sum(blame_ns), 0) AS BIGINT) AS blame_ns
            FROM {parts} WHERE cut GROUP BY ALL HAVING sum(blame_ns) > 0""")
        con.execute(f"""
            CREATE OR REPLACE VIEW metrics_blame AS
            SELECT {BLAME_KEYS}, CAST(round_even(blame_ns, 0) AS BIGINT) AS blame_ns
            FROM {parts} WHERE NOT cut AND blame_ns > 0
            UNION ALL
            SELECT * FROM gigi_blame_cut""")
        per_res = {
            r[0]: {"blame_ns_sum": r[1], "victim_count_distinct": r[2]}
            for r in con.sql(
                "SELECT resource, sum(blame_ns), count(DISTINCT victim) FROM metrics_blame "
                "GROUP BY resource"
            ).fetchall()
        }
    tables = {
        "metrics_resources": resource_table(
            resources, start, end, totals, level, rate, square, per_res
        ),
        "metrics_outstanding": outstanding_table(names, start, end, level, rate),
    }
    with stages("holds: hold-time distribution"):
        tables["metrics_holds"] = _distribution(con, names, "holds", "hold_ns")
    with stages("waits: wait-time distribution"):
        tables["metrics_waits"] = _distribution(con, names, "waits", "dur")
    for name, table in tables.items():
        con.register(name, table)
    with stages("tasks: per-task shares"):
        with tempfile.TemporaryDirectory(prefix="shares-", dir=_spill(con)) as shares:
            sweep = stretch.shares_sweep(names, *cut)
            _by_stretch(con, stretch.SHARES_UNION, sweep, SHARES_ARROW, shares, *cut)
            _per_task(con, f"read_parquet('{shares}/*.parquet')", events, f"{folder}/tasks")


def _per_task(con, shares: str, events: int, folder: str) -> None:
    """``metrics_tasks``, a view of ``folder``: its rows by ``sql/task_metrics.sql``, a file
    for each part of the tasks (by a hash of the task). A pair's figures need all its rows,
    and one part at a time is what bounds the memory. The columns it reads are first written
    out once, as Parquet partitioned by part, so that each part reads its own rows and not
    every part all of them."""
    parts = events // TASK_PART_EVENTS + 1
    inputs = {
        "waits": "SELECT resource, task, dur FROM waits",
        "holds": "SELECT resource, task, hold_ns FROM holds WHERE task IS NOT NULL",
        "events": "SELECT resource, task, kind, amount FROM events WHERE kind IN (1, 2)",
        "shares": f"SELECT * FROM {shares}",
    }
    Path(folder).mkdir()
    with tempfile.TemporaryDirectory(prefix="tasks-", dir=_spill(con)) as inputs_folder:
        for name, query in inputs.items():
            con.execute(
                f"COPY (SELECT *, hash(task) % {parts} AS part FROM ({query})) "
                f"TO '{inputs_folder}/{name}' (FORMAT parquet, PARTITION_BY (part))"
            )
        by_part = {  # a view with no rows wrote no files: its query stands in, with no rows
            name: f"read_parquet('{inputs_folder}/{name}/*/*.parquet', hive_partitioning = true)"
            if any(Path(inputs_folder, name).glob("*/*.parquet"))
            else f"(SELECT *, 0 AS part FROM ({query}) LIMIT 0)"
            for name, query in inputs.items()
        }
        con.execute(
            "CREATE OR REPLACE TEMP TABLE gigi_task_totals AS SELECT resource, "
            f"sum(held) AS held, sum(used) AS used FROM {shares} GROUP BY resource"
        )
        try:
            for part in range(parts):
                text = stretch.lake_sql(
                    "task_metrics",
                    tasks=f"part = {part}",
                    all_shares="gigi_task_totals",
                    **by_part,
                )
                con.execute(f"COPY ({_bigint(con, text)}) TO '{folder}/{part}.parquet'")
        finally:
            con.execute("DROP TABLE IF EXISTS gigi_task_totals")
    con.execute(
        f"CREATE OR REPLACE VIEW metrics_tasks AS SELECT * FROM read_parquet('{folder}/*.parquet')"
    )


def _bigint(con, query: str) -> str:
    """``query`` with its HUGEINT columns (DuckDB's sums of BIGINTs) cast to BIGINT, as the
    kernels give them: Parquet would hold them as DOUBLE."""
    columns = con.execute(f"DESCRIBE {query}").fetchall()
    casts = [f'CAST("{c[0]}" AS BIGINT) AS "{c[0]}"' for c in columns if c[1] == "HUGEINT"]
    return f"SELECT * REPLACE ({', '.join(casts)}) FROM ({query})" if casts else query


def _spill(con) -> str:
    """DuckDB's temp directory, where it spills and the scratch files of the diagnosis go
    (reads are confined to it and the trace's folder)."""
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    Path(spill).mkdir(parents=True, exist_ok=True)
    return spill


def _by_stretch(
    con, union_sql: str, sweep, schema: pa.Schema, folder: str, start, span, chunks, merged=False
):
    """``sweep`` over each stretch's rows of ``union_sql``, its results (of ``schema``) written
    to ``folder``, a Parquet file a stretch (one with none if no stretch has rows). MERGED:
    the holders covering a stretch whole are merged (``chunked_holders_merged``).

    The rows are first written out as Parquet partitioned by stretch, which DuckDB streams
    (one sort of them all by stretch spilled and grew faster than the trace); then each
    stretch's own files are read and swept."""
    Path(folder).mkdir(exist_ok=True)
    cutting = stretch.chunked_holders_merged if merged else stretch.chunked
    with tempfile.TemporaryDirectory(prefix="stretches-", dir=_spill(con)) as rows_folder:
        con.execute(
            f"COPY ({cutting(union_sql, start, span, chunks)}) TO '{rows_folder}' "
            "(FORMAT parquet, PARTITION_BY (chunk))"
        )
        written = sorted(int(p.name.split("=", 1)[1]) for p in Path(rows_folder).glob("chunk=*"))
        for chunk in written:
            rows = con.sql(
                f"SELECT *, {chunk} AS chunk FROM "
                f"read_parquet('{rows_folder}/chunk={chunk}/*.parquet', hive_partitioning = false)"
            ).to_arrow_table()
            pq.write_table(sweep(rows).cast(schema), f"{folder}/{chunk}.parquet")
    if not written:
        pq.write_table(schema.empty_table(), f"{folder}/none.parquet")


def _marking_cut(sweep, start, span, chunks):
    """``sweep`` (the blame's), its rows marked ``cut`` when their wait runs over more than
    one stretch, and so has rows from others to add to."""

    def marked(rows: pa.Table) -> pa.Table:
        lo, hi = stretch.bounds(rows.column("chunk")[0].as_py(), start, span, chunks)
        col = lambda name: rows.column(name).to_numpy()  # noqa: E731
        s, e = col("s"), col("e")
        cut = (col("src") == 0) & ((s < lo) | (np.maximum(e - 1, s) >= hi))
        blame = sweep(rows)
        wait_seq = blame.column("wait_seq").to_numpy()
        return blame.append_column("cut", pa.array(np.isin(wait_seq, col("seq")[cut])))

    return marked


class StretchedEngine(DuckDBEngine):
    """``DuckDBEngine`` whose metrics are computed a stretch of time at a time (``compute``):
    for a lake whose trace would not fit in memory. ``chunks``: how many stretches (default:
    about one per ``CHUNK_EVENTS`` events)."""

    def __init__(self, con, chunks: int | None = None) -> None:
        super().__init__(con)
        self.chunks = chunks
        self._copy: str | None = None  # the folder of the holds' copy, while there is one

    def compute_metrics(self, stages) -> None:
        # the files of metrics_blame and metrics_tasks, there as long as the connection is
        folder = tempfile.mkdtemp(prefix="metrics-", dir=_spill(self.con))
        weakref.finalize(self.con, shutil.rmtree, folder, True)
        with stages("views: holds"):
            self._holds_on_disk()
        compute(self.con, stages, folder, self.chunks)

    def _holds_on_disk(self) -> None:
        """The ``holds`` view joins each hold pair to its two events, and a dozen of the
        diagnosis's queries read it (the sweeps, the distributions, the per-task figures,
        four detectors): at scale each join was minutes. It is computed once into Parquet
        beside DuckDB's spill, and ``holds`` reads that until ``finish``."""
        folder = tempfile.mkdtemp(prefix="holds-", dir=_spill(self.con))
        try:
            self._copy_holds(folder)
        except BaseException:  # the disk full, an interrupt: the lake's view is still there
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self.con.execute("ALTER VIEW holds RENAME TO gigi_lake_holds")
        self._copy = folder
        self.con.execute(f"CREATE VIEW holds AS SELECT * FROM read_parquet('{folder}/*.parquet')")

    def _copy_holds(self, folder: str) -> None:
        """The holds into ``folder``, a file per range of ``SEQ_STEP`` positions in trace
        order of the pairs' ACQUIREs, and one for the rest. The lake's pairs are sorted by
        their ACQUIRE, so a range reads only its own; its joins to the events build on those,
        whose bounds DuckDB pushes into the scans of the events: of the ACQUIREs, the range,
        and of the RELEASEs, at most one range past it. The pairs with no ACQUIRE, and those
        held longer than a range, go in the last file, in one pass over the events. (One join
        of all the pairs spilled, and took twice as long at 300M events.)"""
        short = f"(release_seq IS NULL OR release_seq - acquire_seq < {SEQ_STEP})"
        acquired = seq_ranges(self.con, "acquire_seq", "hold_pairs", SEQ_STEP)
        ranges = [f"{where} AND {short}" for where in acquired]
        rest = f"acquire_seq IS NULL OR NOT {short}"
        # (its joins would read all the events even with no such pairs); the one file there
        # is when there are no holds, for the view's columns
        if (
            not ranges
            or self.con.execute(f"SELECT count(*) FROM hold_pairs WHERE {rest}").fetchall()[0][0]
        ):
            ranges.append(rest)
        for i, where in enumerate(ranges):
            self.con.execute(
                f"COPY (SELECT * FROM holds WHERE {where}) TO '{folder}/{i}.parquet' "
                "(FORMAT parquet)"
            )

    def finish(self) -> None:
        """``holds`` the lake's view again (a person's queries after the diagnosis read the
        lake), and its copy gone."""
        if self._copy is None:
            return
        self.con.execute("DROP VIEW IF EXISTS holds")
        self.con.execute("ALTER VIEW gigi_lake_holds RENAME TO holds")
        shutil.rmtree(self._copy, ignore_errors=True)
        self._copy = None
