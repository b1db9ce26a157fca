"""Decoding OTLP trace files into plain spans: OTLP/JSON (one ``ExportTraceServiceRequest`` or
``TracesData`` object, or JSON lines of them as the Collector's file exporter writes) and OTLP
protobuf (one message, or messages each prefixed by its length as a 4-byte big-endian integer,
the file exporter's ``format: proto``).

Only what gigi reads is kept of a span: its ids, name, kind, times, the attributes named
``gigi.*`` and ``thread.id``, and its events that carry ``gigi.kind``. See ``_otlp.py`` for what
becomes of them.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path

from gigi.errors import IngestError

KEPT = "gigi."
THREAD_ID = "thread.id"
# OTLP/JSON encodes enums as integers; some writers spell them out.
SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


@dataclass(slots=True)
class SpanEvent:
    """A span event that carries ``gigi.kind``."""

    ts: int  # ns since the Unix epoch
    name: str
    attrs: dict


@dataclass(slots=True)
class Span:
    trace_id: bytes  # 16 bytes
    span_id: bytes  # 8 bytes
    parent_id: bytes  # 8 bytes, or b"" for a root span
    name: str
    kind: int  # OTLP SpanKind: 2 SERVER, 5 CONSUMER, ...
    start: int  # ns since the Unix epoch
    end: int
    attrs: dict  # only gigi.* and thread.id
    events: list[SpanEvent] = field(default_factory=list)
    where: str = ""  # "line N" of a JSON lines file, "message N" of a framed protobuf file

    def describe(self) -> str:
        where = f"{self.where}, " if self.where else ""
        return f"{where}span {self.name!r} (trace {self.trace_id.hex()}, span {self.span_id.hex()})"


def read_spans(path: Path) -> tuple[list[Span], str]:
    """Every span of the OTLP file ``path``, and the encoding it was in."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise IngestError(f"{path}: cannot read ({e.strerror or e})") from None
    if data.lstrip()[:1] in (b"{", b"["):
        return _json_file(path, data)
    return _proto_file(path, data)


# --- OTLP/JSON -------------------------------------------------------------------------------


def _json_file(path: Path, data: bytes) -> tuple[list[Span], str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IngestError(f"{path}: not UTF-8 text at byte {e.start}") from None
    try:
        docs, encoding = [(json.loads(text), "")], "OTLP/JSON"
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise IngestError(
                f"{path}:{whole.lineno}:{whole.colno}: not valid JSON ({whole.msg})"
            ) from None
        docs, encoding = [], "OTLP/JSON lines"
        for n, line in lines:
            try:
                docs.append((json.loads(line), f"line {n}"))
            except json.JSONDecodeError as e:
                raise IngestError(f"{path}:{n}:{e.colno}: not valid JSON ({e.msg})") from None
    spans: list[Span] = []
    for doc, where in docs:
        for request in doc if isinstance(doc, list) else [doc]:
            _json_request(path, request, where, spans)
    return spans, encoding


def _get(obj: dict, camel: str, snake: str, default=None):
    """A field by its JSON name, or by its proto name (both are valid OTLP/JSON)."""
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake, default)
    return default if value is None else value


def _json_request(path: Path, request, where: str, spans: list[Span]) -> None:
    at = f"{path}:{where.removeprefix('line ')}" if where else str(path)
    if not isinstance(request, dict) or not (
        "resourceSpans" in request or "resource_spans" in request
    ):
        raise IngestError(
            f"{at}: not OTLP/JSON traces (an ExportTraceServiceRequest object with resourceSpans)"
        )
    try:
        for rs in _get(request, "resourceSpans", "resource_spans", []):
            for ss in _get(rs, "scopeSpans", "scope_spans", []):
                for s in ss.get("spans") or []:
                    spans.append(_json_span(s, where))
    except _Bad as e:
        raise IngestError(f"{at}: {e}") from None
    except (AttributeError, TypeError, ValueError) as e:
        raise IngestError(f"{at}: not OTLP/JSON traces ({type(e).__name__}: {e})") from None


class _Bad(Exception):
    pass


def _json_id(value, size: int, what: str, span_name: str) -> bytes:
    if not value:
        return b""
    try:  # OTLP/JSON: hex; protobuf's generic JSON mapping: base64
        raw = bytes.fromhex(value) if len(value) == 2 * size else base64.b64decode(value)
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != size:
        raise _Bad(f"span {span_name!r}: {what} {value!r} is not {size} bytes of hex")
    return raw


def _json_value(v: dict):
    if not isinstance(v, dict):
        return None
    for key in ("stringValue", "string_value"):
        if key in v:
            return v[key]
    for key in ("intValue", "int_value"):
        if key in v:
            return int(v[key])
    for key in ("boolValue", "bool_value"):
        if key in v:
            return bool(v[key])
    for key in ("doubleValue", "double_value"):
        if key in v:
            return float(v[key])
    return None


def _json_attrs(items) -> dict:
    out = {}
    for kv in items or ():
        key = kv.get("key", "")
        if key.startswith(KEPT) or key == THREAD_ID:
            out[key] = _json_value(kv.get("value"))
    return out


def _json_span(s: dict, where: str) -> Span:
    name = s.get("name", "")
    kind = s.get("kind", 0)
    if isinstance(kind, str):
        kind = SPAN_KINDS.get(kind, 0)
    events = []
    for ev in s.get("events") or ():
        attrs = _json_attrs(ev.get("attributes"))
        if "gigi.kind" in attrs:
            ts = int(_get(ev, "timeUnixNano", "time_unix_nano", 0))
            events.append(SpanEvent(ts, ev.get("name", ""), attrs))
    return Span(
        trace_id=_json_id(_get(s, "traceId", "trace_id", ""), 16, "traceId", name),
        span_id=_json_id(_get(s, "spanId", "span_id", ""), 8, "spanId", name),
        parent_id=_json_id(_get(s, "parentSpanId", "parent_span_id", ""), 8, "parentSpanId", name),
        name=name,
        kind=int(kind),
        start=int(_get(s, "startTimeUnixNano", "start_time_unix_nano", 0)),
        end=int(_get(s, "endTimeUnixNano", "end_time_unix_nano", 0)),
        attrs=_json_attrs(s.get("attributes")),
        events=events,
        where=where,
    )


# --- OTLP protobuf ---------------------------------------------------------------------------


def _frames(data: bytes) -> list[tuple[int, bytes]] | None:
    """The messages of a file of length-prefixed messages, or None when the file is not one."""
    out, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        size = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 4 + size > len(data):
            return None
        out.append((pos, data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return out or None


def _proto_file(path: Path, data: bytes) -> tuple[list[Span], str]:
    try:
        from google.protobuf import unknown_fields
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise IngestError(
            "ingest --otlp needs the opentelemetry-proto package: pip install opentelemetry-proto"
        ) from None
    # A single message starts with its first field's tag (0x0a), which read as a length is far
    # larger than any file: the two layouts cannot be mistaken for each other.
    frames = _frames(data) if data[:1] != b"\x0a" else None
    messages = frames or [(None, data)]
    encoding = "OTLP protobuf, length-delimited" if frames else "OTLP protobuf"
    spans: list[Span] = []
    for n, (offset, raw) in enumerate(messages, 1):
        at = f"{path}: message {n} at byte {offset}" if offset is not None else str(path)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except DecodeError as e:
            why = str(e).rpartition("': ")[2] or str(e)  # past "Error parsing message with type"
            raise IngestError(
                f"{at}: neither OTLP/JSON nor OTLP protobuf (ExportTraceServiceRequest): {why}"
            ) from None
        if len(unknown_fields.UnknownFieldSet(request)) or (raw and not request.resource_spans):
            raise IngestError(
                f"{at}: not OTLP protobuf traces (an ExportTraceServiceRequest with resource_spans)"
            )
        where = f"message {n}" if offset is not None else ""
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(_proto_span(s, where, at))
    return spans, encoding


def _proto_value(v):
    which = v.WhichOneof("value")
    if which in ("string_value", "int_value", "bool_value", "double_value"):
        return getattr(v, which)
    return None


def _proto_attrs(items) -> dict:
    out = {}
    for kv in items:
        key = kv.key
        if key.startswith(KEPT) or key == THREAD_ID:
            out[key] = _proto_value(kv.value)
    return out


def _proto_span(s, where: str, at: str) -> Span:
    for value, size, what in (
        (s.trace_id, 16, "trace_id"),
        (s.span_id, 8, "span_id"),
        (s.parent_span_id, 8, "parent_span_id"),
    ):
        if value and len(value) != size:
            raise IngestError(f"{at}: span {s.name!r}: {what} is {len(value)} bytes, not {size}")
    events = []
    for ev in s.events:
        attrs = _proto_attrs(ev.attributes)
        if "gigi.kind" in attrs:
            events.append(SpanEvent(ev.time_unix_nano, ev.name, attrs))
    return Span(
        trace_id=s.trace_id,
        span_id=s.span_id,
        parent_id=s.parent_span_id,
        name=s.name,
        kind=s.kind,
        start=s.start_time_unix_nano,
        end=s.end_time_unix_nano,
        attrs=_proto_attrs(s.attributes),
        events=events,
        where=where,
    )
