"""The direction of flow: recording knows nothing of analysis; heavy imports stay lazy."""

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "gigi"

# package -> packages (or modules) it must never import
FORBIDDEN = {
    "probes": {"duckdb", "gigi.ingest", "gigi.queries", "gigi.metrics", "polars", "numba"},
    "schema": {"gigi.probes", "gigi.ingest", "gigi.queries", "gigi.metrics", "duckdb"},
    "ingest": {"gigi.probes", "gigi.queries"},
    "record": {"duckdb", "gigi.ingest", "gigi.queries", "gigi.metrics", "polars", "numba"},
    "metrics": {"gigi.probes", "gigi.ingest", "gigi.queries", "duckdb"},
    # the report reads a diagnosis and the trace's views; it records, scans and prompts nothing
    "report": {"gigi.probes", "gigi.record", "gigi.scan", "gigi.cli", "typer"},
    # export reads a diagnosis and the trace's views, and writes a file for another tool
    "export": {"gigi.probes", "gigi.record", "gigi.scan", "gigi.cli", "typer"},
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_import_direction():
    for package, banned in FORBIDDEN.items():
        for path in (PKG / package).rglob("*.py"):
            for name in imports(path):
                assert not any(name == b or name.startswith(b + ".") for b in banned), (
                    f"{path.relative_to(PKG.parent)} imports {name}"
                )


def test_import_gigi_and_help_stay_light():
    code = (
        "import sys, gigi, gigi.cli, gigi.probes; "
        "print(sorted(m for m in ('duckdb', 'numba', 'polars', 'pyarrow.parquet') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
