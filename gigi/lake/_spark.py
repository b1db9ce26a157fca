"""The diagnosis on Spark: the lake read with partition and predicate pushdown, the trace views
and the detectors transpiled from DuckDB's dialect (``gigi.lake._transpile``), the metrics
by ``gigi.lake._spark_metrics``. Nothing the size of the trace is collected to the driver:
only per-resource figures and the detectors' findings are.

On a cluster (``master``), the executors' Python must have gigi installed (the kernels run
there) and the lake must be on storage every executor reads.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa

from gigi import _nopandas
from gigi.detectors import Detector, selected
from gigi.diagnosis._diagnose import Finding, check_columns
from gigi.errors import DetectorError, GigiError, QueryError
from gigi.lake._scope import EVENT_COLUMNS, PAIR_COLUMNS, LakeScope
from gigi.lake._transpile import gigi_printf, spark_text, to_spark
from gigi.queries import views

INSTALL_HINT = "the Spark engine needs pyspark and Java 17+: pip install 'gigi[spark]'"
# The views the diagnosis reads, in the order they can be created.
VIEWS = ("events", "hold_pairs", "tasks", "resources", "sites", "trace_info", "holds", "waits")
PARTITION_EVENTS = 1 << 20  # events of the trace per shuffle partition, at least about
# Settings a session must have for the transpiled SQL to mean what it means in DuckDB.
SQL_CONF = {
    "spark.sql.ansi.enabled": "false",  # DuckDB's NULL on a bad cast, not an error
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",  # trace ids as text
    "spark.sql.jsonGenerator.ignoreNullFields": "false",  # to_json keeps nulls, as DuckDB's
    "spark.sql.parquet.filterPushdown": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def session(master: str | None = None, memory: str | None = None):
    """A SparkSession: local mode on every core unless ``master`` names a cluster;
    ``memory`` caps the driver's heap (Spark's own syntax: 2g)."""
    _nopandas.let_in()  # pyspark converts through pandas
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise GigiError(INSTALL_HINT) from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName("gigi")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", memory or "2g")
        .config("spark.sql.shuffle.partitions", str(max(os.cpu_count() or 2, 2) * 2))
    )
    for key, value in SQL_CONF.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - no Java, a bad master URL: one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GigiError(f"cannot start Spark ({first}); {INSTALL_HINT}") from None
    import logging

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")  # errors reach the user as one line
    return spark


def materialize(df, eager: bool = True):
    """``df`` computed once and kept by the executors (on disk), its lineage cut.
    A cached view is not enough: every query that reads it still carries the plan that made
    it, and a detector whose CTEs Spark inlines reads the metrics views dozens of times, so
    its plan grew to thousands of stages and broadcasts, minutes and an out-of-memory driver
    for a trace of two thousand events."""
    from pyspark import StorageLevel

    # on disk only: a block kept in memory, or read back from disk, is one buffer on the heap
    # (a 300M-event trace's holds ran a 4 GiB heap out of memory so)
    return df.localCheckpoint(eager=eager, storageLevel=StorageLevel.DISK_ONLY)


def own_session(spark):
    """A new session on ``spark``'s context (its cluster, executors and cache), with its own
    temporary views, functions and SQL settings: those ``spark``'s owner changed at run time
    (shuffle partitions, credentials) are copied over, and go no further back."""
    mine = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            mine.conf.set(key, value)
    return mine


class SparkEngine:
    """``gigi.diagnosis._diagnose.DuckDBEngine``'s twin on a SparkSession."""

    name = "spark"

    def __init__(self, scope: LakeScope, *, spark=None, master=None, memory=None) -> None:
        self.scope = scope
        # a session of its own: the views, the function and the settings below are the
        # diagnosis's, and neither replace nor change those of the session it was given
        self.spark = own_session(spark or session(master, memory))
        for key, value in SQL_CONF.items():
            self.spark.conf.set(key, value)
        # Spark keeps a materialized partition as one block and reads it back whole, so the
        # partitions of a large trace must be many (adaptive execution merges small ones)
        shuffle = "spark.sql.shuffle.partitions"
        wanted = scope.manifest.events // PARTITION_EVENTS
        self.spark.conf.set(shuffle, str(max(int(self.spark.conf.get(shuffle)), wanted)))
        from pyspark.sql.types import StringType

        self.spark.udf.register("gigi_printf", gigi_printf, StringType())
        self.values: dict[str, float] = {}
        self.samples = None  # a DuckDB engine over the lake's perf samples, when it has some
        self._relations()
        self._views()

    # -- the lake's relations and the views over them

    def _scan(self, table: str, columns: list[str] | None, where: str) -> None:
        path = str(self.scope.lake / table)
        dated = table in ("events", "hold_pairs")
        df = self.spark.read.option("basePath", path).parquet(path)
        df = df.where(self.scope.partition_filter(dated)).where(where)
        df = df.select(*columns) if columns else df.drop("trace")
        df.createOrReplaceTempView(f"lake_{table}")

    def _relations(self) -> None:
        s = self.scope
        self._scan("events", EVENT_COLUMNS, s.event_filter())
        self._scan("hold_pairs", list(PAIR_COLUMNS), s.pair_filter())
        for table in ("tasks", "resources", "sites"):
            self._scan(table, None, "TRUE")

    def _views(self) -> None:
        bindings = self.scope.bindings(
            {t: f"lake_{t}" for t in ("events", "hold_pairs", "tasks", "resources", "sites")}
        )
        docs = views()
        for name in VIEWS:
            sql = docs[name].text
            for key, value in bindings.items():
                sql = sql.replace("{{" + key + "}}", value)
            body = sql[sql.upper().index(" AS\n", sql.upper().index("CREATE VIEW")) + 4 :]
            self.spark.sql(to_spark(body.rstrip().rstrip(";"), where=name)).createOrReplaceTempView(
                name
            )
        for name in ("holds", "waits"):  # read by most detectors: computed once
            materialize(self.spark.table(name), eager=False).createOrReplaceTempView(name)

    # -- the engine interface of the diagnosis

    def set_params(self, values: dict[str, float]) -> None:
        self.values = dict(values)

    def compute_metrics(self, stages) -> None:
        from gigi.lake._spark_metrics import compute

        with stages("views: holds and waits"):
            for name in ("holds", "waits"):
                self.spark.table(name).count()  # the cache filled now, not by whoever is first
        compute(self.spark, self.scope, stages)

    def finish(self) -> None:
        """Nothing to undo: the views and settings are those of this engine's own session."""

    def sql(self, sql: str, where: str = "query"):
        """A DataFrame of ``sql`` (DuckDB's dialect)."""
        return self.spark.sql(to_spark(sql, self.values, where))

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.sql(sql).collect()]

    def detector(self, det: Detector) -> list[tuple]:
        from pyspark.errors import PySparkException
        from sqlglot.errors import SqlglotError

        try:
            df = self.spark.sql(to_spark(spark_text(det.path), self.values, str(det.path)))
            check_columns(det, df.columns)
            rows = df.select(*selected(df.columns)).collect()
        except PySparkException as e:
            raise DetectorError(f"{det.path}: {_first_line(e)}") from None
        except SqlglotError as e:
            raise DetectorError(
                f"{det.path}: does not transpile to Spark SQL ({_first_line(e)}); write its "
                f"Spark form beside it as {det.path.stem}.spark.sql"
            ) from None
        return [tuple(r) for r in rows]

    def register_sites(self, table: pa.Table) -> str:
        self.spark.createDataFrame(table).createOrReplaceTempView("sites_given")
        return "sites_given"

    def has_samples(self) -> bool:
        return self.samples is not None and self.samples.has_samples()

    def executing(self, f: Finding) -> dict:
        """What the culprits executed, read by ``samples`` (a DuckDB engine over the same scope
        of the lake): a finding's tasks and their samples are small, and the samples_by_task
        view's ASOF JOIN has no Spark form."""
        if self.samples is None:
            raise QueryError("this diagnosis reads no perf samples")
        return self.samples.executing(f)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
