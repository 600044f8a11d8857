#!/usr/bin/env python3
"""Write the interop tool-call spans to an OTLP JSON-lines file with the real
FileSpanExporter from opentelemetry-exporter-otlp-json-file, then print the
manifest (same format as export_spans.py) on stdout.

Usage:
    export_jsonl.py --out FILE --run-id RUN [--batch-size 16] [--append]

Run it with the venv-json interpreter. Each export() call of FileSpanExporter
writes ONE line: a compact ExportTraceServiceRequest in OTLP/JSON
({"resourceSpans":[...]}, lowerCamelCase keys, hex trace/span ids, int64
timestamps as decimal strings, enums as integers) followed by "\n". With the
default batch size of 16 the 50 spans become 4 lines. FileSpanExporter opens
the path in append mode; this script truncates the file first unless --append.

stdout: exactly one JSON document (the manifest). Logs: stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ inside the repo's scripts/py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from export_spans import TOTAL_SPANS, batches, build_spans, emit_manifest  # noqa: E402

from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to write")
    ap.add_argument("--run-id", required=True, help="prefix of the session ids (<run-id>-s1..s3)")
    ap.add_argument("--batch-size", type=int, default=16, help="spans per export() call = per line")
    ap.add_argument("--spans", type=int, default=TOTAL_SPANS, help="total spans (at least 16 are always made)")
    ap.add_argument("--append", action="store_true", help="append to --out instead of truncating it")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.batch_size < 1:
        ap.error("--batch-size must be >= 1")

    try:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    except ImportError as exc:
        print(f"error: opentelemetry-exporter-otlp-json-file is not installed in {sys.executable}: {exc}", file=sys.stderr)
        return 1

    service = "py-interop-jsonl"
    spans, manifest = build_spans(service, args.run_id, args.spans)

    if not args.append:
        with open(args.out, "w", encoding="utf-8"):
            pass
    exporter = FileSpanExporter(args.out)
    chunks = batches(spans, args.batch_size)
    failed = False
    for i, batch in enumerate(chunks):
        if exporter.export(batch) is not SpanExportResult.SUCCESS:
            print(f"error: FileSpanExporter failed on batch {i} ({len(batch)} spans) writing {args.out}", file=sys.stderr)
            failed = True
            break
    exporter.shutdown()
    if failed:
        return 1

    emit_manifest(
        {
            "service": service,
            "protocol": "jsonl",
            "compression": "none",
            "run_id": args.run_id,
            "batches": len(chunks),
            "spans": manifest,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
