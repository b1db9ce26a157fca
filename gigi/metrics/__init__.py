"""Metric kernels over the store's columns (numba), each with a plain twin for tests.

numba is imported only by the functions that need it, so ``import gigi`` stays fast.
"""

from gigi.metrics.pairing import HoldPairer, pair_holds_reference

__all__ = ["HoldPairer", "pair_holds_reference"]


def sql_twin(name: str) -> str:
    """The text of the SQL twin ``gigi/metrics/sql/<name>.sql`` of a kernel."""
    from pathlib import Path

    return (Path(__file__).parent / "sql" / f"{name}.sql").read_text().rstrip().rstrip(";")
