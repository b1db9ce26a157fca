"""The C hot path and its pure-Python twin record exactly the same events."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gigi.probes import _accel

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent("""
    import json, sys, threading
    import gigi.probes as gp
    from gigi.queries import connect, run
    gp.enable(sys.argv[1], buffer_events=64, backlog_events=10_000)
    pool = gp.resource("twin.pool", capacity=4)
    lock = gp.resource("twin.lock", sharing="exclusive")
    s = gp.site("twin.py", 3, "work", "ACQUIRE", "twin.pool")

    def work(n):
        with gp.task(f"t{n}"):
            for i in range(300):
                pool.acquire(i, 2, s)
                pool.use(object=i, value=-(2**63), dur=7)
                pool.use(i, 1, s, 0)
                lock.acquire(amount=0, value=2**63 - 1)
                lock.release()
                pool.release(i, amount=2, site=s)
                with pool.wait(i, value=i):
                    pass
    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    [t.start() for t in threads]; [t.join() for t in threads]
    gp.disable()
    rows = run(connect(sys.argv[1]), '''
        SELECT t.name, e.kind, e.resource, e.amount, e.object, e.site, e.value,
               CASE WHEN e.kind = 0 THEN e.dur >= 0 ELSE e.dur END
        FROM events e JOIN tasks t USING (task) ORDER BY t.name, e.thread, e.seq''').fetchall()
    print(json.dumps(rows))
""")


def _record(tmp_path: Path, pure: bool) -> list:
    env = {**os.environ, "GIGI_PURE_PYTHON": "1" if pure else ""}
    trace = tmp_path / ("pure" if pure else "fast")
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(trace)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0 and not out.stderr, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(_accel.fastpath is None, reason="the C hot path was not built")
def test_c_hot_path_records_what_the_python_twin_records(tmp_path):
    fast, pure = _record(tmp_path, pure=False), _record(tmp_path, pure=True)
    assert len(fast) == 3 * 300 * 7
    assert fast == pure


@pytest.mark.skipif(_accel.fastpath is None, reason="the C hot path was not built")
def test_c_hot_path_refuses_bad_arguments(trace_dir):
    import gigi.probes as gp

    res = gp.resource("twin.args")
    gp.enable(trace_dir)
    with pytest.raises(TypeError, match="unexpected keyword argument 'objet'"):
        res.acquire(objet=3)
    with pytest.raises(TypeError, match="at most 4 arguments"):
        res.release(1, 2, 3, 4, 5)
    with pytest.raises(TypeError):
        res.acquire("page 3")
    with pytest.raises(TypeError):
        res.acquire(1, 1, None)
    res.use(1, 1, 0, 5, 9)  # USE takes dur as a fifth
    assert gp.disable().written["twin.args"] == 1
