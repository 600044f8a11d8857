#!/usr/bin/env python3
"""An application as `opentelemetry-instrument` runs it: it only makes spans
through the global tracer provider and configures no exporter. Whatever
exports them is what the distro and the OTEL_* variables chose:

    OTEL_SERVICE_NAME=py-instrumented OTEL_TRACES_EXPORTER=otlp \\
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \\
        opentelemetry-instrument python instrumented_app.py --run-id RUN

With opentelemetry-distro installed and no OTEL_EXPORTER_OTLP_PROTOCOL, that
is the OTLP/gRPC exporter (the distro's default protocol is grpc).

stdout: one JSON manifest: the spans made (the scenario of export_spans.py)
and the exporter class the global provider's span processor holds, as
found, so the caller can see which protocol the distro picked. Exit 1 when
no SDK provider was installed (not run under opentelemetry-instrument) or
the final flush did not finish.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from export_spans import SCOPE_NAME, SCOPE_VERSION, TOTAL_SPANS, emit_manifest, emit_spans  # noqa: E402
from opentelemetry import trace  # noqa: E402


def exporters_of(provider) -> list[str]:
    """The classes of the exporters behind the provider's span processors
    (SDK internals, read only to report them)."""
    found = []
    multi = getattr(provider, "_active_span_processor", None)
    for processor in getattr(multi, "_span_processors", ()):
        exporter = getattr(processor, "span_exporter", None) or getattr(getattr(processor, "_batch_processor", None), "_exporter", None)
        if exporter is not None:
            found.append(f"{type(exporter).__module__}.{type(exporter).__qualname__}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--spans", type=int, default=TOTAL_SPANS)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    provider = trace.get_tracer_provider()
    if not hasattr(provider, "force_flush"):
        print(f"error: the global tracer provider is {type(provider).__name__}: run this under opentelemetry-instrument", file=sys.stderr)
        return 1
    tracer = trace.get_tracer(SCOPE_NAME, SCOPE_VERSION)
    expected = emit_spans(tracer, args.run_id, args.spans, gone=True)
    if not provider.force_flush(30_000):
        print("error: the global provider's flush did not finish in 30 s", file=sys.stderr)
        return 1
    emit_manifest(
        {
            "service": os.environ.get("OTEL_SERVICE_NAME"),
            "run_id": args.run_id,
            "exporters": exporters_of(provider),
            "spans": list(expected.values()),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
