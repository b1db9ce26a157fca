import asyncio
import concurrent.futures
import contextvars
import threading

import pytest

import gigi.probes as gp
from gigi.errors import ProbeError
from gigi.queries import run
from tests.conftest import connect_checked


def _thread_work(res, index, n):
    with gp.task(f"worker-{index}"):
        for i in range(n):
            k = i % 4
            obj = index * 1_000_000 + i
            if k == 0:
                with res.wait(obj, 1, 5, i):
                    pass
            elif k == 1:
                res.acquire(obj, 2, 5, i)
            elif k == 2:
                res.use(obj, 2, 5, i)
            else:
                res.release(obj, 2, 5, i)


def test_eight_threads_round_trip_event_for_event(trace_dir):
    threads_n, per_thread = 8, 100_000
    res = gp.resource("t.round_trip", capacity=10, unit="slots", sharing="pool")
    gp.enable(trace_dir, interval=0.05, buffer_events=1 << 17, policy="block")
    threads = [
        threading.Thread(target=_thread_work, args=(res, i, per_thread)) for i in range(threads_n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = gp.disable()
    assert stats.dropped["t.round_trip"] == 0
    assert stats.written["t.round_trip"] == threads_n * per_thread

    con = connect_checked(trace_dir)
    rows = run(
        con,
        "SELECT e.kind, e.object, e.value, e.amount, e.site, t.name, e.seq, e.thread "
        "FROM events e JOIN tasks t USING (task) ORDER BY seq",
    ).fetchall()
    assert len(rows) == threads_n * per_thread
    seen = {}
    for kind, obj, value, amount, site, name, _seq, thread in rows:
        index, i = divmod(obj, 1_000_000)
        assert (kind, value, amount, site, name) == (
            i % 4,
            i,
            1 if i % 4 == 0 else 2,
            5,
            f"worker-{index}",
        )
        seen.setdefault(index, []).append(i)
        assert thread > 0
    # Every event arrived exactly once and each thread's events are in the order it made them.
    assert {k: v for k, v in seen.items()} == {k: list(range(per_thread)) for k in range(8)}


def test_overload_written_plus_dropped_equals_emitted(trace_dir):
    res = gp.resource("t.overload")
    gp.enable(trace_dir, interval=10, buffer_events=1000, backlog_events=2048)  # writer asleep
    emitted = 50_000

    def spin():
        for i in range(emitted):
            res.acquire(i)

    threads = [threading.Thread(target=spin) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = gp.disable()
    assert stats.dropped["t.overload"] > 0
    assert stats.written["t.overload"] + stats.dropped["t.overload"] == 2 * emitted
    con = connect_checked(trace_dir)
    recorded, dropped = run(
        con, "SELECT recorded, dropped FROM drops WHERE resource = 't.overload'"
    ).fetchall()[0]
    assert recorded == stats.written["t.overload"]
    assert dropped == stats.dropped["t.overload"]
    assert recorded + dropped == 2 * emitted


def test_asyncio_tasks_inherit_and_record_parents(trace_dir):
    res = gp.resource("t.async")
    gp.enable(trace_dir)

    async def child(n):
        with gp.task(f"child-{n}"):
            res.acquire(n)
            await asyncio.sleep(0)
            res.release(n)
        res.use(n)  # back in the request's task

    async def request():
        with gp.task("request") as t:
            await asyncio.gather(*(child(n) for n in range(3)))
            return t.id

    request_id = asyncio.run(request())
    gp.disable()
    con = connect_checked(trace_dir)
    tasks = dict(run(con, "SELECT name, parent FROM tasks WHERE name LIKE 'child-%'").fetchall())
    assert tasks == {f"child-{n}": request_id for n in range(3)}
    holds = run(
        con,
        "SELECT count(*) FROM holds h JOIN tasks t USING (task) "
        "WHERE t.name LIKE 'child-%' AND NOT open AND release_task = task",
    ).fetchall()[0]
    assert holds == (3,)
    uses = run(con, "SELECT DISTINCT task FROM events WHERE kind = 2").fetchall()
    assert uses == [(request_id,)]


def test_thread_pools_keep_task_ids_with_wrap_or_copied_context(trace_dir):
    res = gp.resource("t.pool")
    gp.enable(trace_dir)
    with gp.task("parent") as parent, concurrent.futures.ThreadPoolExecutor(2) as pool:
        for i in range(4):
            pool.submit(gp.wrap(res.acquire), i).result()
        ctx = contextvars.copy_context()
        pool.submit(ctx.run, res.release, 9).result()
        pool.submit(res.use, 10).result()  # no copied context: the pool thread's own task
    gp.disable()
    con = connect_checked(trace_dir)
    by_kind = dict(
        run(con, "SELECT kind, list(DISTINCT task) FROM events GROUP BY kind").fetchall()
    )
    assert by_kind[1] == [parent.id]
    assert by_kind[3] == [parent.id]
    assert by_kind[2] != [parent.id]
    name = run(
        con, "SELECT t.name FROM events e JOIN tasks t USING (task) WHERE e.kind = 2"
    ).fetchall()[0][0]
    assert name.startswith("ThreadPoolExecutor")


def test_waits_begin_end_and_open_at_exit(trace_dir):
    res = gp.resource("t.waits")
    gp.enable(trace_dir)
    token = res.wait_begin(7)
    done = threading.Event()
    threading.Thread(target=lambda: (token.end(), done.set())).start()
    done.wait(5)
    res.wait(8).__enter__()  # never ended: still waiting when the trace ends
    gp.disable()
    con = connect_checked(trace_dir)
    rows = run(
        con,
        'SELECT object, open, dur >= 0, end_ts = (SELECT "end" FROM trace_info) '
        "FROM waits ORDER BY object",
    ).fetchall()
    assert rows[0][:3] == (7, False, True)
    assert rows[1] == (8, True, True, True)
    raw = run(con, "SELECT dur IS NULL FROM events WHERE object = 8").fetchall()[0]
    assert raw == (True,)


def test_sampling_keeps_whole_lifecycles_and_says_so(trace_dir):
    res = gp.resource("t.sampled", sample_every=4)
    gp.enable(trace_dir)
    for i in range(1, 4001):
        res.acquire(i)
        res.release(i)
    stats = gp.disable()
    kept = stats.written["t.sampled"]
    assert 1400 < kept < 2600  # about one object in four, both of its events
    con = connect_checked(trace_dir)
    assert run(con, "SELECT count(*) FROM holds WHERE open").fetchall()[0] == (0,)
    assert run(con, "SELECT sample_every FROM resources WHERE resource = 't.sampled'").fetchall()[
        0
    ] == (4,)
    from gigi.ingest import locate

    assert locate(trace_dir).manifest.sample_every == {"t.sampled": 4}


def test_off_records_nothing(trace_dir, tmp_path):
    res = gp.resource("t.off")
    res.acquire(1)
    with res.wait(1):
        pass
    with gp.task("x"):
        res.release(1)
    assert not gp.is_enabled()
    assert gp.stats().written == {}
    assert list(trace_dir.iterdir()) == []


def test_bad_declarations_are_refused():
    with pytest.raises(ProbeError, match="sharing 'pooled' is not one of"):
        gp.resource("t.bad", sharing="pooled")
    with pytest.raises(ProbeError, match="sample_every must be >= 1"):
        gp.resource("t.bad2", sample_every=0)
    gp.resource("t.twice", capacity=3)
    with pytest.raises(ProbeError, match="declared twice"):
        gp.resource("t.twice", capacity=4)
    with pytest.raises(ProbeError, match="policy must be"):
        gp.enable("somewhere", policy="wait")


def test_unwritable_trace_dir_is_refused_at_enable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ProbeError, match="cannot write the trace there"):
        gp.enable(blocker / "trace")


def test_events_the_writer_cannot_write_are_counted_as_dropped(trace_dir):
    import shutil

    res = gp.resource("t.lost")
    gp.enable(trace_dir, interval=10)
    for i in range(100):
        res.acquire(i)
    shutil.rmtree(trace_dir)  # the directory disappears under the writer
    stats = gp.disable()
    assert stats.written["t.lost"] + stats.dropped["t.lost"] == 100
    assert stats.dropped["t.lost"] == 100
    assert stats.write_error is not None
