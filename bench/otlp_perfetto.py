"""OpenTelemetry in and Perfetto out: spans per second read, and the export's time and size.

    python bench/otlp_perfetto.py [--seconds 60] [--store STORE]

Generates the connection-pool service of tests/otlp_service.py for ``--seconds`` of traffic
(about 1,350 spans a second), writes it as OTLP/JSON and as OTLP protobuf, and times for each:
reading and converting the spans (``write_otlp_trace``) and the whole ``ingest --otlp``. Then
times ``export --perfetto`` of that store, and of ``--store`` too when given (the demo's, say),
with the file's size and trace events.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def export(target: Path, out: Path) -> None:
    from gigi.export import export_perfetto
    from gigi.ingest import locate

    entry = locate(target)
    s, took = timed(lambda: export_perfetto(entry, out))
    print(
        f"export --perfetto {entry.manifest.trace_id}: {entry.manifest.events:,} events -> "
        f"{s.trace_events:,} trace events, {s.bytes / 1e6:.1f} MB in {took:.2f} s "
        f"(diagnosis included; {s.wait_slices:,} waits, {s.hold_slices:,} holds, "
        f"{s.outstanding_samples:,} outstanding samples, {s.findings} findings)"
    )


def main() -> None:
    from gigi.ingest import ingest_otlp
    from gigi.ingest._otlp import write_otlp_trace
    from tests.otlp_service import service_spans, to_otlp_json, to_otlp_proto

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--store", type=Path)
    args = ap.parse_args()
    svc = service_spans(seconds=args.seconds)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        files = {
            "OTLP/JSON lines": work / "shop.jsonl",
            "OTLP protobuf": work / "shop.pb",
        }
        files["OTLP/JSON lines"].write_text(
            "".join(json.dumps(doc) + "\n" for doc in to_otlp_json(svc.spans, 512))
        )
        files["OTLP protobuf"].write_bytes(
            b"".join(len(m).to_bytes(4, "big") + m for m in to_otlp_proto(svc.spans, 512))
        )
        n = len(svc.spans)
        for name, path in files.items():
            trace = work / f"trace-{path.suffix[1:]}"
            trace.mkdir()
            summary, read_s = timed(lambda p=path, t=trace: write_otlp_trace(p, t))
            (_, _), ingest_s = timed(lambda p=path: ingest_otlp(p, work / "store"))
            print(
                f"{name}: {n:,} spans, {path.stat().st_size / 1e6:.1f} MB -> "
                f"{summary.events:,} events; read and convert {read_s:.2f} s "
                f"({n / read_s:,.0f} spans/s), whole ingest {ingest_s:.2f} s "
                f"({n / ingest_s:,.0f} spans/s)"
            )
        export(work / "store" / "shop", work / "shop.perfetto.json")
        if args.store is not None:
            export(args.store, work / "store.perfetto.json")


if __name__ == "__main__":
    main()
