"""gigi-query keeps pyarrow from importing pandas (0.2 s of a small diagnosis), and lets it
back in, working, for the Spark engine."""

import importlib.util
import json
import subprocess
import sys

import pytest

from gigi.cli import main

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is None, reason="pandas is not installed here"
)


# gigi-query, as its script runs it; at exit, which of pyarrow, DuckDB and pandas it loaded
DIAGNOSE = """
import atexit, sys
atexit.register(lambda: print(*(m in sys.modules for m in ("pyarrow", "duckdb", "pandas"))))
sys.argv = ["gigi-query", "diagnose", "--format", "json", sys.argv[1]]
from gigi._entry import entry
entry()
"""


def test_a_diagnosis_imports_no_pandas(tmp_path):
    from gigi.scenarios import get

    get("pg-wal-buffers").run(tmp_path / "trace", seconds=0.5)
    trace, store = str(tmp_path / "trace"), str(tmp_path / "store")
    for target in ("trace", "store"):  # ingest included, then a store
        if target == "store":
            assert main(["ingest", trace, "--store", store]) == 0
        p = subprocess.run(
            [sys.executable, "-c", DIAGNOSE, str(tmp_path / target)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        out = p.stdout.splitlines()
        assert json.loads("\n".join(out[:-1]))["findings"], target
        assert out[-1] == "True True False", target


LET_IN = """
import datetime, sys
import pyarrow as pa
from gigi import _nopandas

_nopandas.keep_out()
pa.array([1, 2, 3])  # pyarrow asks for pandas here, and is told there is none
assert "pandas" not in sys.modules
sys.modules["pyspark.sql"] = None  # the engine starts, and stops at its missing pyspark
from gigi.errors import GigiError
from gigi.lake._spark import session
try:
    session()
except GigiError:
    pass
import pandas as pd  # back in: and pyarrow knows a pandas Series when it sees one
s = pd.Series([datetime.datetime(2026, 1, 1), None])
assert pa.array(s).type == pa.timestamp("ns"), pa.array(s).type
print("ok")
"""


def test_the_spark_engine_lets_pandas_back_in():
    p = subprocess.run([sys.executable, "-c", LET_IN], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]
