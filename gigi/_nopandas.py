"""Keep pyarrow from importing pandas in the ``gigi-query`` process.

On its first array, pyarrow asks whether the object it was given comes from pandas, and imports
pandas to find out wherever it is installed: some 400 modules, 0.2 s of a 1 s diagnosis. gigi
hands pyarrow no pandas objects. So ``gigi-query`` hides pandas from imports (``keep_out``)
until something that does use pandas starts (``let_in``: the Spark engine, whose pyspark
converts through pandas), and then tells pyarrow to look again. A library caller's process is
never touched.
"""

from __future__ import annotations

import sys


class _Hidden:
    """A meta path finder that finds pandas nowhere, as long as pyarrow can be told to look
    again later (a pyarrow that keeps its answer elsewhere gets pandas)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if (name == "pandas" or name.startswith("pandas.")) and _resettable():
            raise ModuleNotFoundError(f"No module named {name!r} (gigi-query)", name=name)
        return None


def keep_out() -> None:
    """Hide pandas from imports, unless it is already imported."""
    if "pandas" not in sys.modules and _Hidden not in sys.meta_path:
        sys.meta_path.insert(0, _Hidden)


def let_in() -> None:
    """Undo ``keep_out``: pandas imports again, and pyarrow forgets that it found none."""
    if _Hidden not in sys.meta_path:
        return
    sys.meta_path.remove(_Hidden)
    if "pyarrow.lib" in sys.modules:
        sys.modules["pyarrow.lib"]._pandas_api.__init__()  # ask again on the next array


def _resettable() -> bool:
    """Whether pyarrow, if loaded, keeps its answer where ``let_in`` can make it ask again."""
    lib = sys.modules.get("pyarrow.lib")
    if lib is None:
        return True
    shim = getattr(lib, "_pandas_api", None)
    return shim is not None and type(shim).__init__ is not object.__init__
