"""A web service's OpenTelemetry spans, as its instrumentation would export them: requests
(SERVER spans) check a connection out of a small database pool (a checkout span that blocks
while the pool is empty), hold it while their queries run (CLIENT spans) and give it back. One
slow report request keeps both connections for a long time, and the other requests queue on
checkout behind it.

``service_spans()`` is the neutral description; ``to_otlp_json`` and ``to_otlp_proto`` encode it
the two ways OTLP files come: OTLP/JSON (hex ids, enums as integers, 64-bit integers as
strings) and protobuf. ``style="hold"`` marks the checkout as a WAIT span and the time the
connection is out as a HOLD span; ``style="acquire"`` marks the checkout as an ACQUIRE span and
the return as a RELEASE event of the request's span, which must come to the same events.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

T0 = 1_764_748_800_000_000_000  # ns since the epoch
MS = 1_000_000
POOL = "db.pool"
CAPACITY = 2
SERVER, CLIENT, INTERNAL = 2, 3, 1


@dataclass
class SpanSpec:
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    name: str
    kind: int
    start: int
    end: int
    attrs: dict = field(default_factory=dict)
    events: list[tuple[int, str, dict]] = field(default_factory=list)


@dataclass
class Service:
    spans: list[SpanSpec]
    report_span_id: bytes  # the slow request's SERVER span
    requests: int
    checkouts_waited: int  # checkouts that found the pool empty


def service_spans(seconds: float = 2.0, seed: int = 7, style: str = "hold") -> Service:
    """Requests arriving every ~3 ms, each holding a connection ~1.5 ms; the report arrives at
    0.4 s and holds both connections for 0.6 s. Connections are handed out first come,
    first served, as a pool's queue does."""
    rng = random.Random(seed)
    free_at = [(T0, 1), (T0, 2)]  # (when the connection is back, connection number)
    heapq.heapify(free_at)
    spans: list[SpanSpec] = []
    t = T0 + 5 * MS
    end = T0 + int(seconds * 1e9)
    report_at = T0 + 400 * MS
    report_id = b""
    waited = n = 0
    pool_attrs = {
        "gigi.resource": POOL,
        "gigi.capacity": CAPACITY,
        "gigi.unit": "connections",
        "gigi.sharing": "pool",
    }
    while t < end:
        is_report = report_id == b"" and t >= report_at
        n += 1
        trace_id, server_id = rng.randbytes(16), rng.randbytes(8)
        thread = 1000 + n % 8
        name = "GET /reports/quarterly" if is_report else f"GET /items/{rng.randrange(1000)}"
        if is_report:
            report_id = server_id
        server = SpanSpec(trace_id, server_id, b"", name, SERVER, t, 0, {"thread.id": thread})
        spans.append(server)
        # the report runs its two queries in parallel, on a connection each
        for _ in range(2 if is_report else 1):
            back, conn = heapq.heappop(free_at)
            got = max(t + 40_000, back)  # a checkout takes 40 µs when a connection is free
            waited += back > t + 40_000
            hold = 600 * MS if is_report else rng.randint(1 * MS, 2 * MS)
            returned = got + hold
            heapq.heappush(free_at, (returned, conn))
            server.end = max(server.end, returned + 100_000)
            held = {**pool_attrs, "gigi.object": f"conn-{conn}"}
            checkout_id, hold_id = rng.randbytes(8), rng.randbytes(8)
            checkout = SpanSpec(trace_id, checkout_id, server_id, "pool.checkout", INTERNAL, t, got)
            checkout.attrs = {"thread.id": thread}
            spans.append(checkout)
            if style == "hold":
                checkout.attrs.update(pool_attrs, **{"gigi.kind": "WAIT"})
                spans.append(
                    SpanSpec(
                        trace_id,
                        hold_id,
                        server_id,
                        "db.connection",
                        INTERNAL,
                        got,
                        returned,
                        {**held, "gigi.kind": "HOLD"},
                    )
                )
            else:  # no span while the connection is out: an event of the request returns it
                checkout.attrs.update(held, **{"gigi.kind": "ACQUIRE"})
                server.events.append(
                    (returned, "connection returned", {**held, "gigi.kind": "RELEASE"})
                )
                hold_id = server_id
            # the query runs on the connection: its CLIENT span marked as a USE of it
            sql = "SELECT sum(total) FROM orders" if is_report else "SELECT * FROM items"
            spans.append(
                SpanSpec(
                    trace_id,
                    rng.randbytes(8),
                    hold_id,
                    sql,
                    CLIENT,
                    got + 50_000,
                    returned - 50_000,
                    {"db.system": "postgresql", **held, "gigi.kind": "USE"},
                )
            )
        t += rng.randint(2 * MS, 4 * MS)
    return Service(spans, report_id, n, waited)


def _json_value(v) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _json_attrs(attrs: dict) -> list[dict]:
    return [{"key": k, "value": _json_value(v)} for k, v in attrs.items()]


def to_otlp_json(spans: list[SpanSpec], per_request: int = 0) -> list[dict]:
    """ExportTraceServiceRequest objects in OTLP/JSON; ``per_request`` spans each (0: one
    request holding all), the way a batching exporter sends them."""
    chunks = [spans]
    if per_request:
        chunks = [spans[i : i + per_request] for i in range(0, len(spans), per_request)]
    out = []
    for chunk in chunks:
        out.append(
            {
                "resourceSpans": [
                    {
                        "resource": {
                            "attributes": _json_attrs({"service.name": "shop"}),
                        },
                        "scopeSpans": [
                            {
                                "scope": {"name": "shop.instrumentation", "version": "1.0"},
                                "spans": [
                                    {
                                        "traceId": s.trace_id.hex(),
                                        "spanId": s.span_id.hex(),
                                        "parentSpanId": s.parent_id.hex(),
                                        "name": s.name,
                                        "kind": s.kind,
                                        "startTimeUnixNano": str(s.start),
                                        "endTimeUnixNano": str(s.end),
                                        "attributes": _json_attrs(s.attrs),
                                        "events": [
                                            {
                                                "timeUnixNano": str(ts),
                                                "name": name,
                                                "attributes": _json_attrs(attrs),
                                            }
                                            for ts, name, attrs in s.events
                                        ],
                                        "status": {},
                                    }
                                    for s in chunk
                                ],
                            }
                        ],
                    }
                ]
            }
        )
    return out


def to_otlp_proto(spans: list[SpanSpec], per_request: int = 0) -> list[bytes]:
    """The same as ``to_otlp_json``, as serialized protobuf ExportTraceServiceRequests."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    def value(v) -> AnyValue:
        if isinstance(v, bool):
            return AnyValue(bool_value=v)
        if isinstance(v, int):
            return AnyValue(int_value=v)
        if isinstance(v, float):
            return AnyValue(double_value=v)
        return AnyValue(string_value=str(v))

    def attrs(d: dict) -> list:
        return [KeyValue(key=k, value=value(v)) for k, v in d.items()]

    chunks = [spans]
    if per_request:
        chunks = [spans[i : i + per_request] for i in range(0, len(spans), per_request)]
    out = []
    for chunk in chunks:
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(attrs({"service.name": "shop"}))
        ss = rs.scope_spans.add()
        ss.scope.name = "shop.instrumentation"
        for s in chunk:
            ss.spans.append(
                Span(
                    trace_id=s.trace_id,
                    span_id=s.span_id,
                    parent_span_id=s.parent_id,
                    name=s.name,
                    kind=s.kind,
                    start_time_unix_nano=s.start,
                    end_time_unix_nano=s.end,
                    attributes=attrs(s.attrs),
                    events=[
                        Span.Event(time_unix_nano=ts, name=name, attributes=attrs(a))
                        for ts, name, a in s.events
                    ],
                )
            )
        out.append(req.SerializeToString())
    return out
