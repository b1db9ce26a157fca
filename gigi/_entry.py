"""The ``gigi-query`` process: Ctrl-C handled from its first moment, then ``gigi.cli.main``.

Importing the CLI (typer, and what the command needs after it) takes a few tenths of a second;
a Ctrl-C then would end the process with a traceback from whatever module was loading. So the
signals are taken over first, with nothing imported but ``gigi._interrupts``.
"""

from __future__ import annotations

import sys


def entry() -> None:
    import gc

    from gigi import _nopandas
    from gigi._interrupts import handling

    # a full collection after 100 younger ones, not 10: the three of a small diagnosis cost
    # it 0.1 s of its 1.5; cycles are still reclaimed, a little later. (numba, pyarrow and
    # DuckDB leave over a hundred thousand objects that live as long as the process, and every
    # full collection walks them all to find next to no garbage.)
    gc.set_threshold(700, 10, 100)
    _nopandas.keep_out()
    with handling() as received:
        try:
            from gigi.cli import main

            code = main()
        except KeyboardInterrupt:  # while the CLI itself was imported
            print("gigi-query: interrupted", file=sys.stderr)
            code = 128 + (received[0] if received else 2)
    if received:
        _exit(code)
    # The command is done and what it opened is closed (atexit still runs: temp stores,
    # scratch folders). The interpreter's teardown would collect again, over everything, for
    # 0.2 s more: frozen, nothing is walked.
    gc.freeze()
    sys.exit(code)


def _exit(code: int) -> None:
    """Exit with ``code`` after an interrupt, once the atexit work is done (temp stores,
    spill folders). Not through the interpreter's own exit: a KeyboardInterrupt that passed
    through C code which ran Python source (as some extension modules' imports do) leaves
    CPython marked as interrupted, and it then ends the process by SIGINT whatever the
    status asked for, so the status would depend on where Ctrl-C happened to land."""
    import atexit
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
