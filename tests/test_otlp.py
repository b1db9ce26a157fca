"""OpenTelemetry in: OTLP files (JSON, JSON lines, protobuf, length-delimited protobuf) of a web
service whose requests queue on a connection pool behind one slow report are ingested by the
attribute convention and diagnosed; the ids, tasks and errors follow gigi/ingest/_otlp.py."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gigi.diagnosis import diagnose
from gigi.errors import IngestError
from gigi.ingest import ingest_otlp
from gigi.queries import run
from tests.conftest import connect_checked
from tests.otlp_service import (
    CLIENT,
    INTERNAL,
    MS,
    POOL,
    SERVER,
    T0,
    SpanSpec,
    service_spans,
    to_otlp_json,
    to_otlp_proto,
)

ROOT = Path(__file__).resolve().parents[1]
MASK63 = (1 << 63) - 1


def task_of(span_id: bytes) -> int:
    return int.from_bytes(span_id, "big") & MASK63


def write_json(path: Path, spans, per_request: int = 0) -> Path:
    docs = to_otlp_json(spans, per_request)
    if per_request:  # JSON lines, as the Collector's file exporter writes
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    else:
        path.write_text(json.dumps(docs[0], indent=1))
    return path


def write_proto(path: Path, spans, per_request: int = 0) -> Path:
    messages = to_otlp_proto(spans, per_request)
    if per_request:  # each message prefixed by its length, 4 bytes big-endian
        path.write_bytes(b"".join(len(m).to_bytes(4, "big") + m for m in messages))
    else:
        path.write_bytes(messages[0])
    return path


def event_rows(entry) -> list[tuple]:
    con = connect_checked(entry)
    return run(
        con,
        "SELECT ts, kind, resource, task, thread, amount, dur, object FROM events "
        "ORDER BY ts, task, kind, object",
    ).fetchall()


def test_json_service_is_diagnosed(tmp_path):
    svc = service_spans()
    path = write_json(tmp_path / "shop.otlp.json", svc.spans)
    manifest, summary = ingest_otlp(path, tmp_path / "store")
    assert manifest.trace_id == "shop"
    assert summary.encoding == "OTLP/JSON" and summary.spans == len(svc.spans)
    assert summary.traces == svc.requests and summary.tasks == svc.requests
    assert summary.remapped == 0 and summary.duplicates == 0

    entry = tmp_path / "store" / "shop"
    con = connect_checked(entry)
    # one WAIT per checkout span, lasting as long as the span
    checkouts = [s for s in svc.spans if s.name == "pool.checkout"]
    waits = run(con, "SELECT count(*), sum(dur) FROM waits").fetchall()[0]
    assert waits == (len(checkouts), sum(s.end - s.start for s in checkouts))
    holds = run(con, "SELECT count(*), count(*) FILTER (open), max(hold_ns) FROM holds").fetchall()[
        0
    ]
    held = [s for s in svc.spans if s.name == "db.connection"]
    assert holds == (len(held), 0, max(s.end - s.start for s in held))
    # requests are the tasks: named by their spans, foreground (SERVER), no parent in the file
    tasks = run(con, 'SELECT task, name, kind, parent, start, "end" FROM tasks').fetchall()
    servers = {task_of(s.span_id): s for s in svc.spans if s.kind == SERVER}
    assert {t[0] for t in tasks} == set(servers)
    for task, name, kind, parent, start, end in tasks:
        s = servers[task]
        assert (name, kind, parent, start, end) == (s.name, "foreground", None, s.start, s.end)

    d = diagnose(entry).to_json()
    top = d["findings"][0]
    assert (top["resource"], top["failure_mode"]) == (POOL, "contention")
    report = task_of(svc.report_span_id)
    assert top["culprit_tasks"][0] == report
    name = run(con, f"SELECT name FROM tasks WHERE task = {report}").fetchall()[0][0]
    assert name == "GET /reports/quarterly"
    assert report not in top["victim_tasks"] and len(top["victim_tasks"]) > 50


def test_protobuf_and_acquire_spans_give_the_same_trace(tmp_path):
    """The same service as JSON lines (WAIT and HOLD spans), as one protobuf message and as
    length-delimited protobuf (ACQUIRE spans and RELEASE span events): the same events, and
    the same diagnosis."""
    hold = service_spans(style="hold")
    acquire = service_spans(style="acquire")
    files = {
        "jsonl": (write_json(tmp_path / "a.jsonl", hold.spans, per_request=150), "OTLP/JSON lines"),
        "pb": (write_proto(tmp_path / "b.pb", acquire.spans), "OTLP protobuf"),
        "framed": (
            write_proto(tmp_path / "c.binpb", acquire.spans, per_request=150),
            "OTLP protobuf, length-delimited",
        ),
    }
    rows, findings = {}, {}
    for name, (path, encoding) in files.items():
        manifest, summary = ingest_otlp(path, tmp_path / "store")
        assert summary.encoding == encoding
        entry = tmp_path / "store" / manifest.trace_id
        rows[name] = event_rows(entry)
        findings[name] = diagnose(entry).to_json()["findings"]
    assert len(rows["jsonl"]) == 4 * len([s for s in hold.spans if s.name == "db.connection"])
    assert rows["jsonl"] == rows["pb"] == rows["framed"]
    assert findings["jsonl"] == findings["pb"] == findings["framed"]
    assert findings["pb"][0]["culprit_tasks"][0] == task_of(acquire.report_span_id)


def _span(trace: int, span: str, parent: str, name: str, kind: int, start_ms: int, end_ms: int,
          **attrs) -> SpanSpec:  # fmt: skip
    return SpanSpec(
        trace.to_bytes(16, "big"),
        bytes.fromhex(span),
        bytes.fromhex(parent),
        name,
        kind,
        T0 + start_ms * MS,
        T0 + end_ms * MS,
        attrs,
    )


def test_task_ids_parents_and_kinds(tmp_path):
    lock = {"gigi.resource": "app.lock", "gigi.object": 7}
    spans = [
        # trace 1: a request, a query under it, a lock wait and hold under the query
        _span(1, "ffffffffffffffff", "", "POST /orders", SERVER, 0, 10),
        _span(1, "0000000000000011", "ffffffffffffffff", "INSERT", CLIENT, 1, 9),
        _span(
            1,
            "0000000000000012",
            "0000000000000011",
            "wait",
            INTERNAL,
            1,
            3,
            **lock,
            **{"gigi.kind": "wait"},
        ),  # fmt: skip
        _span(
            1,
            "0000000000000013",
            "0000000000000011",
            "locked",
            INTERNAL,
            3,
            8,
            **lock,
            **{"gigi.kind": "HOLD", "gigi.amount": 2},
        ),  # fmt: skip
        # trace 2: a cron job (root INTERNAL) whose span id meets trace 1's request's in 63 bits
        _span(2, "7fffffffffffffff", "", "cleanup", INTERNAL, 2, 12),
        _span(
            2,
            "0000000000000021",
            "7fffffffffffffff",
            "locked",
            INTERNAL,
            9,
            11,
            **lock,
            **{"gigi.kind": "HOLD"},
        ),  # fmt: skip
        # trace 3: a lock wait whose parent is not in the file is a task of its own, and a
        # consumer marked background
        _span(
            3,
            "0000000000000031",
            "00000000000000ff",
            "orphan wait",
            INTERNAL,
            4,
            5,
            **lock,
            **{"gigi.kind": "WAIT"},
        ),  # fmt: skip
        _span(3, "0000000000000032", "", "on message", 5, 0, 1, **{"gigi.task.kind": "background"}),
    ]
    spans.append(spans[1])  # a retried export repeats a span
    path = write_json(tmp_path / "ids.json", spans)
    manifest, summary = ingest_otlp(path, tmp_path / "store")
    assert (summary.spans, summary.duplicates, summary.remapped) == (8, 1, 1)
    con = connect_checked(tmp_path / "store" / manifest.trace_id)
    tasks = {
        name: (task, kind, parent)
        for task, name, kind, parent in run(
            con, "SELECT task, name, kind, parent FROM tasks"
        ).fetchall()
    }
    request, insert = tasks["POST /orders"][0], tasks["INSERT"][0]
    assert request == 0x7FFFFFFFFFFFFFFF and insert == 0x11
    assert tasks["INSERT"] == (0x11, "foreground", request)  # CLIENT child: its parent's kind
    cleanup = tasks["cleanup"][0]
    assert cleanup not in (request, insert) and tasks["cleanup"][1:] == ("background", None)
    assert tasks["orphan wait"] == (0x31, "background", None)
    assert tasks["on message"] == (0x32, "background", None)
    assert "wait" not in tasks and "locked" not in tasks  # resource spans are events
    events = run(
        con, "SELECT kind, task, amount, object, ts, dur FROM events ORDER BY ts, kind"
    ).fetchall()
    assert events == [
        (0, insert, 1, 7, T0 + 1 * MS, 2 * MS),
        (1, insert, 2, 7, T0 + 3 * MS, 0),
        (0, 0x31, 1, 7, T0 + 4 * MS, 1 * MS),
        (3, insert, 2, 7, T0 + 8 * MS, 0),
        (1, cleanup, 1, 7, T0 + 9 * MS, 0),
        (3, cleanup, 1, 7, T0 + 11 * MS, 0),
    ]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gigi.cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def store_state(store: Path) -> dict:
    return {str(p.relative_to(store)): p.stat().st_mtime_ns for p in sorted(store.rglob("*"))}


@pytest.fixture
def filled_store(tmp_path):
    svc = service_spans(seconds=0.3)
    path = write_json(tmp_path / "good.json", svc.spans)
    out = cli("ingest", "--otlp", str(path), "--store", str(tmp_path / "store"))
    assert out.returncode == 0, out.stderr
    assert f"OTLP/JSON: {len(svc.spans):,} spans of {svc.requests:,} traces" in out.stdout
    assert pq.read_table(tmp_path / "store" / "good" / "tasks.parquet").num_rows == svc.requests
    return tmp_path / "store"


def _no_resource(tmp_path: Path) -> Path:
    spans = [
        _span(1, "00000000000000aa", "", "GET /", SERVER, 0, 5),
        _span(
            1,
            "00000000000000ab",
            "00000000000000aa",
            "pool.checkout",
            INTERNAL,
            1,
            2,
            **{"gigi.kind": "WAIT"},
        ),  # fmt: skip
    ]
    return write_json(tmp_path / "nores.json", spans)


def _file(name: str, data: bytes):
    def make(d: Path) -> Path:
        (d / name).write_bytes(data)
        return d / name

    return make


def _truncated_proto(tmp_path: Path) -> Path:
    raw = to_otlp_proto(service_spans(seconds=0.1).spans)[0]
    path = tmp_path / "cut.pb"
    path.write_bytes(raw[: len(raw) // 2])
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            _file("bad.json", b'{"resourceSpans": [{"scopeSpans": [\n'),
            "bad.json:2:1: not valid JSON",
        ),
        (_truncated_proto, "cut.pb: neither OTLP/JSON nor OTLP protobuf"),
        # a valid protobuf, but of no field an ExportTraceServiceRequest has
        (_file("odd.pb", b"\x08\x96\x01"), "odd.pb: not OTLP protobuf traces"),
        (
            _no_resource,
            "nores.json: span 'pool.checkout' (trace 00000000000000000000000000000001, span "
            "00000000000000ab): gigi.kind WAIT without gigi.resource",
        ),
        (_file("m.json", b'{"resourceMetrics": []}'), "m.json: not OTLP/JSON traces"),
    ],
)
def test_bad_files_are_one_line_and_leave_the_store(tmp_path, filled_store, make, message):
    path = make(tmp_path)
    before = store_state(filled_store)
    out = cli("ingest", "--otlp", str(path), "--store", str(filled_store))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert store_state(filled_store) == before
    with pytest.raises(IngestError):
        ingest_otlp(path, filled_store)


def _sdk_service(seconds: float = 1.2) -> tuple[list, int]:
    """A threaded service instrumented with the OpenTelemetry SDK: four clients' requests
    check a connection out of a pool of two (a queue), query on it for 1 ms and give it back;
    a report request at 0.3 s takes both connections and keeps them 0.5 s. Returns the
    finished spans and the report's span id."""
    import queue
    import threading
    import time

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("shop")
    pool: queue.Queue = queue.Queue()
    for conn in ("conn-1", "conn-2"):
        pool.put(conn)
    pool_attrs = {"gigi.resource": "db.pool", "gigi.capacity": 2, "gigi.sharing": "pool"}
    report_id: list[int] = []

    def request(name: str, connections: int, hold_s: float) -> None:
        thread = {"thread.id": threading.get_native_id()}
        with tracer.start_as_current_span(name, kind=SpanKind.SERVER, attributes=thread) as span:
            if connections == 2:
                report_id.append(span.get_span_context().span_id)
            held = []
            for _ in range(connections):
                with tracer.start_as_current_span(
                    "pool.checkout", attributes={**pool_attrs, "gigi.kind": "WAIT", **thread}
                ):
                    held.append(pool.get())
            spans = [
                tracer.start_span(
                    "db.connection",
                    attributes={**pool_attrs, "gigi.kind": "HOLD", "gigi.object": conn},
                )
                for conn in held
            ]
            queries = [  # the queries run on the connections: uses of them
                tracer.start_span(
                    "SELECT * FROM items",
                    kind=SpanKind.CLIENT,
                    attributes={**pool_attrs, "gigi.kind": "USE", "gigi.object": conn},
                )
                for conn in held
            ]
            time.sleep(hold_s)
            for conn, q, s in zip(held, queries, spans, strict=True):
                q.end()
                pool.put(conn)
                s.end()

    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        i = 0
        while time.monotonic() < stop:
            i += 1
            request(f"GET /items/{n}.{i}", 1, 0.001)
            time.sleep(0.004)

    def report() -> None:
        time.sleep(0.3)
        request("GET /reports/quarterly", 2, 0.5)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    threads.append(threading.Thread(target=report))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    provider.shutdown()
    return list(exporter.get_finished_spans()), report_id[0]


def test_spans_of_the_opentelemetry_sdk(tmp_path):
    """Spans made by the OpenTelemetry SDK in real threads, encoded by its own OTLP encoder:
    as protobuf, and as protobuf's generic JSON mapping (base64 ids, as MessageToJson writes)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans, report_span = _sdk_service()
    request = encode_spans(spans)
    (tmp_path / "sdk.pb").write_bytes(request.SerializeToString())
    (tmp_path / "sdk-mapped.json").write_text(MessageToJson(request))
    waits = sum(1 for s in spans if s.name == "pool.checkout")
    report = report_span & MASK63
    for name in ("sdk.pb", "sdk-mapped.json"):
        manifest, summary = ingest_otlp(tmp_path / name, tmp_path / "store")
        assert summary.spans == len(spans)
        assert summary.tasks == sum(1 for s in spans if s.name.startswith("GET "))
        entry = tmp_path / "store" / manifest.trace_id
        con = connect_checked(entry)
        assert run(con, "SELECT count(*) FROM waits").fetchall()[0][0] == waits
        top = diagnose(entry).to_json()["findings"][0]
        assert (top["resource"], top["failure_mode"]) == ("db.pool", "contention")
        assert top["culprit_tasks"][0] == report
