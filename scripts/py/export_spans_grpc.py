#!/usr/bin/env python3
"""Send AI-agent tool-call spans to an OTLP/gRPC endpoint with the real
OpenTelemetry Python SDK's gRPC exporter (OTLPSpanExporter from
opentelemetry-exporter-otlp-proto-grpc, run with the venv-grpc interpreter),
then print a manifest of what was sent.

Usage:
    export_spans_grpc.py --endpoint http://127.0.0.1:4317 --run-id RUN
        [--compression none|gzip] [--headers k=v,k2=v2] [--batch-size 16]
        [--timeout 10] [--keep-going]

The spans are the scenario of export_spans.py (the same sessions, tools,
statuses and GenAI attributes, plus one call answered 410 Gone), made by a
real TracerProvider and handed to the exporter in batches: one export() call,
one TraceService/Export RPC each, barring the exporter's own retries (it
retries RESOURCE_EXHAUSTED, UNAVAILABLE and a few more, honouring RetryInfo).
Without --headers the exporter reads OTEL_EXPORTER_OTLP_HEADERS itself.

Every batch must return SpanExportResult.SUCCESS, otherwise the script exits 1;
with --keep-going it goes on with the next batch, marks each manifest entry
with "exported": true/false and exits 0.

stdout: exactly one JSON document (the manifest). Logs (the exporter's
retries and failures among them): stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from export_spans import TOTAL_SPANS, batches, build_spans, emit_manifest, parse_headers  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402

LOG = logging.getLogger("export_spans_grpc")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="the receiver, e.g. http://127.0.0.1:4317")
    ap.add_argument("--compression", default="none", choices=["none", "gzip"])
    ap.add_argument("--run-id", required=True, help="prefix of the session ids (<run-id>-s1..s3)")
    ap.add_argument("--headers", default=None, help="metadata to send, k=v,k2=v2 (keys lower case, as gRPC wants)")
    ap.add_argument("--batch-size", type=int, default=16, help="spans per export() call / RPC")
    ap.add_argument("--spans", type=int, default=TOTAL_SPANS, help="total spans (at least 17 are always made)")
    ap.add_argument("--timeout", type=float, default=10.0, help="the exporter's deadline per batch, retries included, seconds")
    ap.add_argument("--keep-going", action="store_true", help="a failed batch is marked in the manifest, not fatal")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.batch_size < 1:
        ap.error("--batch-size must be >= 1")

    try:
        from grpc import Compression
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        print(f"error: the gRPC exporter is not installed in this interpreter ({sys.executable}): {exc}", file=sys.stderr)
        return 1

    compression = {"none": Compression.NoCompression, "gzip": Compression.Gzip}[args.compression]
    headers = parse_headers(args.headers)
    exporter = OTLPSpanExporter(
        endpoint=args.endpoint,
        insecure=True,
        headers=headers or None,
        timeout=args.timeout,
        compression=compression,
    )
    service = "py-interop-grpc"
    spans, manifest = build_spans(service, args.run_id, args.spans, gone=True)

    by_id = {entry["span_id"]: entry for entry in manifest}
    failed = 0
    chunks = batches(spans, args.batch_size)
    for i, batch in enumerate(chunks):
        result = exporter.export(batch)
        ok = result is SpanExportResult.SUCCESS
        for span in batch:
            by_id[format(span.context.span_id, "016x")]["exported"] = ok
        if ok:
            LOG.info("batch %d: %d spans exported", i, len(batch))
            continue
        failed += 1
        print(f"error: export of batch {i} ({len(batch)} spans) to {args.endpoint} returned {result.name}", file=sys.stderr)
        if not args.keep_going:
            exporter.shutdown()
            return 1
    exporter.shutdown()

    emit_manifest(
        {
            "service": service,
            "protocol": "grpc",
            "compression": args.compression,
            "run_id": args.run_id,
            "batches": len(chunks),
            "failed_batches": failed,
            "spans": manifest,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
