#!/usr/bin/env python3
"""Send AI-agent tool-call spans to an OTLP/HTTP endpoint with the real
OpenTelemetry Python SDK exporters, then print a manifest of what was sent.

Usage:
    export_spans.py --endpoint http://127.0.0.1:4318/v1/traces \
        --protocol proto|json [--compression none|gzip|deflate] \
        --run-id RUN [--headers k=v,k2=v2] [--batch-size 16] [--timeout 10]

--protocol proto uses OTLPSpanExporter from opentelemetry-exporter-otlp-proto-http
(run it with the venv-proto interpreter); --protocol json uses OTLPSpanExporter from
opentelemetry-exporter-otlp-json-http (venv-json). Both exporters support
none, gzip and deflate compression.

Spans are made by a real TracerProvider/tracer (real start/end, with explicit
timestamps laid out over the last ~10 minutes), collected with an
InMemorySpanExporter behind a SimpleSpanProcessor, and then handed to the OTLP
exporter in batches (default 16 spans per export() call = one HTTP request each,
barring the exporter's own retries on 429/502/503/504). Every batch must return
SpanExportResult.SUCCESS, otherwise the script exits 1.

stdout: exactly one JSON document (the manifest), nothing else. Logs: stderr.

This file is also imported by export_jsonl.py (build_spans/manifest), so it must
not import any exporter package at module level.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

LOG = logging.getLogger("export_spans")

SESSIONS = 3
TOTAL_SPANS = 50
SCOPE_NAME = "stormwatch.py-interop"
SCOPE_VERSION = "0.1.0"

MS = 1_000_000  # nanoseconds per millisecond

HTTP_CLASS = {503: "unavailable", 429: "rate_limited", 400: "invalid_request", 410: "not_found"}


class UpstreamHTTPError(Exception):
    """Exception type recorded as an exception event on one failing tool span.

    Its module is pinned so the recorded exception.type is always
    "flights_api.UpstreamHTTPError" (the SDK writes "<module>.<qualname>"),
    whether this file runs as __main__ or is imported by export_jsonl.py.
    """


UpstreamHTTPError.__module__ = "flights_api"


@dataclass
class Planned:
    """One span to create, with the values the receiver is expected to store."""

    name: str
    kind: SpanKind
    attributes: dict[str, Any]
    duration_ms: int
    is_tool_call: bool
    tool_name: str | None
    error_class: str  # ok | unavailable | rate_limited | invalid_request | not_found | timeout
    session_id: str | None
    http_status: int | None = None
    error_type: str | None = None  # only for the error.type-only failure
    exception: BaseException | None = None


def _tool_call(
    run_id: str,
    session: str,
    seq: int,
    *,
    http_status: int | None = None,
    error_type: str | None = None,
    with_exception: bool = False,
) -> Planned:
    """An execute_tool span in the OTel GenAI semantic conventions."""
    call_id = f"call_{run_id}_{seq:03d}"
    args = {"origin": "SFO", "destination": ["JFK", "LHR", "NRT", "CDG"][seq % 4], "date": f"2025-07-{1 + seq % 28:02d}", "passengers": 1 + seq % 3}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_flights",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": json.dumps(args, separators=(",", ":")),
        "session.id": session,
    }
    error_class = "ok"
    exception: BaseException | None = None
    duration = 180 + (seq * 37) % 400
    if http_status is not None:
        attrs["http.response.status_code"] = http_status
        error_class = HTTP_CLASS[http_status]
        if with_exception:
            exception = UpstreamHTTPError(f"flight search API answered HTTP {http_status}")
    elif error_type is not None:
        attrs["error.type"] = error_type
        error_class = "timeout"
        duration = 30_000
        if with_exception:
            exception = TimeoutError("search_flights did not answer within 30s")
    else:
        attrs["gen_ai.tool.call.result"] = json.dumps({"flights": [{"id": f"UA{100 + seq}", "price": 199 + seq}]}, separators=(",", ":"))
    return Planned(
        name="execute_tool search_flights",
        kind=SpanKind.INTERNAL,
        attributes=attrs,
        duration_ms=duration,
        is_tool_call=True,
        tool_name="search_flights",
        error_class=error_class,
        session_id=session,
        http_status=http_status,
        error_type=error_type,
        exception=exception,
    )


def plan_sessions(run_id: str, total_spans: int = TOTAL_SPANS, gone: bool = False) -> list[tuple[str, list[Planned]]]:
    """The fixed scenario: per session (session id, children), root excluded.
    With `gone`, session 2 also has a call answered 410 Gone (not_found)."""
    sids = [f"{run_id}-s{i}" for i in range(1, SESSIONS + 1)]
    seq = iter(range(1, 10_000))
    s1, s2, s3 = sids
    children: dict[str, list[Planned]] = {
        s1: [
            Planned(
                name="chat gpt-4o",
                kind=SpanKind.CLIENT,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 812,
                    "gen_ai.usage.output_tokens": 64,
                },
                duration_ms=950,
                is_tool_call=False,
                tool_name=None,
                error_class="ok",
                session_id=None,  # deliberately carries no session.id
            ),
            _tool_call(run_id, s1, next(seq)),
            _tool_call(run_id, s1, next(seq), http_status=503),
            _tool_call(run_id, s1, next(seq), http_status=503),
            _tool_call(run_id, s1, next(seq)),
            Planned(
                name="get_weather",
                kind=SpanKind.INTERNAL,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "get_weather",
                    "tool.description": "Current weather for a city",
                    "tool.parameters": json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}, separators=(",", ":")),
                    "input.value": json.dumps({"city": "New York"}, separators=(",", ":")),
                    "input.mime_type": "application/json",
                    "output.value": json.dumps({"temp_c": 21, "sky": "clear"}, separators=(",", ":")),
                    "output.mime_type": "application/json",
                    "session.id": s1,
                },
                duration_ms=120,
                is_tool_call=True,
                tool_name="get_weather",
                error_class="ok",
                session_id=s1,
            ),
        ],
        s2: [
            _tool_call(run_id, s2, next(seq), http_status=429),
            _tool_call(run_id, s2, next(seq)),
            _tool_call(run_id, s2, next(seq), http_status=400),
            _tool_call(run_id, s2, next(seq)),
        ],
        s3: [
            _tool_call(run_id, s3, next(seq), error_type="TimeoutError", with_exception=True),
            _tool_call(run_id, s3, next(seq), http_status=503, with_exception=True),
            _tool_call(run_id, s3, next(seq)),
        ],
    }
    if gone:
        children[s2].append(_tool_call(run_id, s2, next(seq), http_status=410))
    count = SESSIONS + sum(len(c) for c in children.values())
    extra = 0
    while count < total_spans:
        sid = sids[extra % SESSIONS]
        n = next(seq)
        # every 4th extra call fails with 503 (a small retry storm), the rest succeed
        children[sid].append(_tool_call(run_id, sid, n, http_status=503 if extra % 4 == 3 else None))
        extra += 1
        count += 1
    return [(sid, children[sid]) for sid in sids]


def storm_session(run_id: str, calls: int) -> tuple[str, list[Planned]]:
    """One turn that calls search_flights `calls` times with the same
    arguments, every call a 503, each starting as the last one gave up."""
    sid = f"{run_id}-storm"
    children = []
    for i in range(calls):
        plan = _tool_call(run_id, sid, 900 + i, http_status=503)
        plan.attributes["gen_ai.tool.call.arguments"] = '{"origin":"SFO","destination":"JFK","date":"2025-07-29"}'
        children.append(plan)
    return sid, children


def emit_spans(
    tracer: trace_api.Tracer, run_id: str, total_spans: int = TOTAL_SPANS, storm: int = 0, gone: bool = False
) -> dict[int, dict[str, Any]]:
    """Start and end the scenario's spans on `tracer` (any tracer: this
    module's own provider, or the global one `opentelemetry-instrument` set
    up). Returns the manifest entries by span id, in the order started."""
    expected: dict[int, dict[str, Any]] = {}  # span_id -> manifest entry

    def record(span: trace_api.Span, plan: Planned) -> None:
        ctx = span.get_span_context()
        expected[ctx.span_id] = {
            "trace_id": format(ctx.trace_id, "032x"),
            "span_id": format(ctx.span_id, "016x"),
            "name": plan.name,
            "is_tool_call": plan.is_tool_call,
            "tool_name": plan.tool_name,
            "error_class": plan.error_class,
            "session_id": plan.session_id,
        }

    now = time.time_ns()
    clock = now - 10 * 60 * 1000 * MS  # lay the sessions out over the last ~10 minutes
    sessions = list(plan_sessions(run_id, total_spans, gone=gone))
    if storm > 0:
        sessions.append(storm_session(run_id, storm))
    for sid, children in sessions:
        root_plan = Planned(
            name="invoke_agent travel-agent",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "travel-agent",
                "gen_ai.provider.name": "openai",
                "session.id": sid,
            },
            duration_ms=0,
            is_tool_call=False,
            tool_name=None,
            error_class="ok",
            session_id=sid,
        )
        root_start = clock
        root = tracer.start_span(root_plan.name, kind=root_plan.kind, attributes=root_plan.attributes, start_time=root_start)
        record(root, root_plan)
        parent_ctx = trace_api.set_span_in_context(root)
        clock += 5 * MS
        for plan in children:
            span = tracer.start_span(plan.name, context=parent_ctx, kind=plan.kind, attributes=plan.attributes, start_time=clock)
            record(span, plan)
            clock += plan.duration_ms * MS
            if plan.exception is not None:
                span.record_exception(plan.exception, timestamp=clock - MS, escaped=True)
            if plan.error_class != "ok":
                if plan.http_status is not None:
                    span.set_status(Status(StatusCode.ERROR, f"HTTP {plan.http_status}"))
                else:
                    span.set_status(Status(StatusCode.ERROR, f"{plan.error_type}: tool call timed out"))
            else:
                span.set_status(Status(StatusCode.OK))
            span.end(end_time=clock)
            clock += 20 * MS
        root.end(end_time=clock)
        clock += 2000 * MS
    if clock > now:
        LOG.warning("span timestamps run %d ms into the future", (clock - now) // MS)
    return expected


def build_spans(
    service: str, run_id: str, total_spans: int = TOTAL_SPANS, storm: int = 0, gone: bool = False
) -> tuple[list[ReadableSpan], list[dict[str, Any]]]:
    """Create the spans with the real SDK. Returns (finished spans, manifest entries).
    With `storm` > 0, one more turn is a retry storm of that many calls."""
    collector = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "stormwatch.interop.run_id": run_id}))
    provider.add_span_processor(SimpleSpanProcessor(collector))
    tracer = provider.get_tracer(SCOPE_NAME, SCOPE_VERSION)
    expected = emit_spans(tracer, run_id, total_spans, storm=storm, gone=gone)

    provider.force_flush()
    spans = list(collector.get_finished_spans())
    provider.shutdown()
    if len(spans) != len(expected):
        raise SystemExit(
            f"error: the SDK produced {len(spans)} spans but {len(expected)} were started "
            "(is OTEL_SDK_DISABLED set, or a sampler configured via OTEL_TRACES_SAMPLER?)"
        )
    # manifest in the order the spans are exported
    manifest = [expected[s.context.span_id] for s in spans]
    return spans, manifest


def batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def parse_headers(raw: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if not raw:
        return headers
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"error: bad --headers entry {part!r} (want k=v,k2=v2)")
        headers[key.strip()] = value.strip()
    return headers


def make_exporter(protocol: str, endpoint: str, compression: str, headers: dict[str, str], timeout: float):
    if protocol == "proto":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        comp = {"none": Compression.NoCompression, "gzip": Compression.Gzip, "deflate": Compression.Deflate}[compression]
    else:
        from opentelemetry.exporter.otlp.common.http import Compression
        from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter

        comp = Compression.from_str(compression)
    return OTLPSpanExporter(endpoint=endpoint, headers=headers or None, timeout=timeout, compression=comp)


def emit_manifest(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="full traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    ap.add_argument("--protocol", required=True, choices=["proto", "json"])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "deflate"])
    ap.add_argument("--run-id", required=True, help="prefix of the session ids (<run-id>-s1..s3)")
    ap.add_argument("--headers", default=None, help="extra request headers, k=v,k2=v2")
    ap.add_argument("--batch-size", type=int, default=16, help="spans per export() call / HTTP request")
    ap.add_argument("--spans", type=int, default=TOTAL_SPANS, help="total spans (at least 16 are always made)")
    ap.add_argument("--timeout", type=float, default=10.0, help="exporter timeout per batch, seconds")
    ap.add_argument("--storm", type=int, default=0, help="add one turn calling search_flights N times back to back, every call a 503")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.batch_size < 1:
        ap.error("--batch-size must be >= 1")

    service = f"py-interop-{args.protocol}"
    try:
        exporter = make_exporter(args.protocol, args.endpoint, args.compression, parse_headers(args.headers), args.timeout)
    except ImportError as exc:
        print(f"error: the {args.protocol} exporter is not installed in this interpreter ({sys.executable}): {exc}", file=sys.stderr)
        return 1
    spans, manifest = build_spans(service, args.run_id, args.spans, storm=args.storm)

    failed = False
    for i, batch in enumerate(batches(spans, args.batch_size)):
        result = exporter.export(batch)
        if result is not SpanExportResult.SUCCESS:
            print(f"error: export of batch {i} ({len(batch)} spans) to {args.endpoint} returned {result.name}", file=sys.stderr)
            failed = True
            break
        LOG.info("batch %d: %d spans exported", i, len(batch))
    exporter.shutdown()
    if failed:
        return 1

    emit_manifest(
        {
            "service": service,
            "protocol": args.protocol,
            "compression": args.compression,
            "run_id": args.run_id,
            "batches": len(batches(spans, args.batch_size)),
            "spans": manifest,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
