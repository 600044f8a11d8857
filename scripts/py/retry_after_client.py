#!/usr/bin/env python3
"""An agent's tool that meets a rate limit, traced as an exporter really
traces it (docs/detection.md §4.9; tests/it/retry_after.rs).

A local HTTP server (http.server, in a thread) answers ``GET /fares`` with
``429 Too Many Requests`` and ``Retry-After: 30``. The tool ``fare_search``
calls it with ``requests``, instrumented by the real
opentelemetry-instrumentation-requests (pinned in scripts/py/requirements-proto.txt):
with ``OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE=retry-after``
it records the header on its HTTP CLIENT span as it records any captured
header (``http.response.header.retry_after = ["30"]``). Each attempt is a
GenAI ``execute_tool fare_search`` span (as an agent framework's tool span
is) that records the ``requests.HTTPError`` and ends ERROR; all of them run
under one ``invoke_agent fare-agent`` span (the turn). The real OTLP/HTTP
protobuf exporter sends them to ``--endpoint``.

Scenarios:

* ``ignore``: the server always answers 429; the client retries 200 ms after
  each 429, six attempts, then gives up;
* ``honour``: the server answers 429 twice, then 200; the client waits 30 s,
  then 60 s (Retry-After, then doubled), and succeeds.

Time. Waits of 30 s are too slow for a test, so the client's waits are
virtual: the SDK's span clock (``opentelemetry.sdk.trace.time_ns``, which
stamps every span's start and end when none is passed — the instrumentor's
too) is replaced by a clock that runs with the real one plus an offset, and
``sleep`` adds to the offset instead of sleeping. Every span keeps its real
duration and order; only the waits between attempts are not spent. Nothing
else is altered: the requests, the responses, the instrumentation and the
export are real.

stdout: one JSON manifest (scenario, trace id, attempts, statuses). Logs: stderr.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import sys
import threading
import time

import opentelemetry.sdk.trace as sdk_trace
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode


class VirtualClock:
    """The real clock plus the waits the client did not spend."""

    def __init__(self) -> None:
        self.offset_ns = 0

    def time_ns(self) -> int:
        return time.time_ns() + self.offset_ns

    def sleep(self, seconds: float) -> None:
        self.offset_ns += int(seconds * 1e9)


class Fares(http.server.BaseHTTPRequestHandler):
    """429 with Retry-After: 30 for the first ``limited`` requests, then 200."""

    limited = 10**9
    seen = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        cls = type(self)
        cls.seen += 1
        if cls.seen <= cls.limited:
            body = b'{"error": "rate limited"}'
            self.send_response(429)
            self.send_header("Retry-After", "30")
        else:
            body = b'{"fares": [{"to": "LIS", "eur": 92}]}'
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--scenario", choices=["ignore", "honour"], required=True)
    args = ap.parse_args()
    if "retry-after" not in os.environ.get("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE", ""):
        print("set OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE=retry-after", file=sys.stderr)
        return 2

    clock = VirtualClock()
    sdk_trace.time_ns = clock.time_ns

    Fares.limited = 10**9 if args.scenario == "ignore" else 2
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fares)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/fares?to=LIS"

    provider = TracerProvider(resource=Resource.create({"service.name": "fare-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=args.endpoint)))
    trace.set_tracer_provider(provider)
    RequestsInstrumentor().instrument(tracer_provider=provider)
    tracer = trace.get_tracer("fare-agent.tools", "0.1.0")

    statuses: list[int] = []
    session = f"retry-after-{args.scenario}"
    with tracer.start_as_current_span(
        "invoke_agent fare-agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fare-agent", "session.id": session},
    ) as agent:
        trace_id = format(agent.get_span_context().trace_id, "032x")
        waits = [0.2] * 5 if args.scenario == "ignore" else [30.0, 60.0]
        for attempt in range(len(waits) + 1):
            with tracer.start_as_current_span(
                "execute_tool fare_search",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "fare_search",
                    "gen_ai.tool.call.id": f"call_{attempt}",
                    "gen_ai.tool.call.arguments": '{"to": "LIS"}',
                },
                record_exception=False,
                set_status_on_exception=False,
            ) as tool:
                r = requests.get(url, timeout=5)
                statuses.append(r.status_code)
                try:
                    r.raise_for_status()
                    tool.set_attribute("gen_ai.tool.call.result", r.text)
                except requests.HTTPError as e:
                    tool.record_exception(e)
                    tool.set_status(Status(StatusCode.ERROR, str(e)))
            if r.ok:
                break
            if attempt < len(waits):
                clock.sleep(waits[attempt])
    RequestsInstrumentor().uninstrument()
    provider.force_flush()
    provider.shutdown()
    server.shutdown()
    print(json.dumps({
        "scenario": args.scenario,
        "trace_id": trace_id,
        "attempts": len(statuses),
        "statuses": statuses,
        "session_id": session,
        "end_ns": clock.time_ns(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
