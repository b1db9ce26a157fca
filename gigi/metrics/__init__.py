"""Metric kernels over the store's columns (numba), each with a plain twin for tests.

numba is imported only by the functions that need it, so ``import gigi`` stays fast: each
kernel lives at module level in a private ``_<name>_kernel.py`` that the function imports when
it runs. Never ``njit`` inside a function: numba keys its on-disk cache by the function's
closure too, and a closure over another kernel pickles differently in every process, so such
a kernel compiles again on every run (``tests/test_kernel_cache.py`` catches it). The
constants a kernel reads live in its module too: numba compiles them in, and stamps its cache
with the kernel's file alone.
"""

from gigi.metrics.pairing import HoldPairer, pair_holds_reference

__all__ = ["HoldPairer", "pair_holds_reference"]


# Twins that are another twin over other rows: the wait-time distribution is the hold-time
# one's query over the waits.
_OVER = {
    "wait_time": (
        "hold_time",
        {"FROM holds": "FROM waits", "hold_ns": "dur", "AS holds": "AS waits"},
    )
}


def sql_twin(name: str) -> str:
    """The text of the SQL twin ``gigi/metrics/sql/<name>.sql`` of a kernel."""
    from pathlib import Path

    base, swaps = _OVER.get(name, (name, {}))
    text = (Path(__file__).parent / "sql" / f"{base}.sql").read_text().rstrip().rstrip(";")
    for old, new in swaps.items():
        text = text.replace(old, new)
    return text
