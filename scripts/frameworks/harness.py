"""What the framework harnesses (scripts/frameworks/*_agent.py) and the MCP fare
server share: the scenarios' data, the tool and its simulated upstream, the
exporter that records what it sent, the command line, and the manifest.

Each harness runs one agent turn of a real framework offline, with a scripted
model (no network, no API key), and sends the framework's own OpenTelemetry
spans to an OTLP/HTTP (protobuf) endpoint with the real exporter; its module
docstring says how that framework builds, runs and traces the turn. This
module needs only the standard library and opentelemetry-sdk, which every
venv has; a harness run as `python scripts/frameworks/<harness>.py` finds it
on sys.path (the script's own directory).

The scenarios (a harness takes the ones it runs, spells the agent's name as
its framework wants, e.g. an identifier for ADK and smolagents, and adds its
own variants):

  STORM      the agent `travel-agent` calls `search_flights` 8 times with
             the same arguments (SFO to JFK on 2026-07-29); the upstream is
             dead, so every call fails with "HTTP 503 Service Unavailable";
             then the model gives up with a final answer.
  HEALTHY    the agent `research-agent` calls `web_search` 8 times with 8
             different queries; calls 3 and 7 (never adjacent) fail with
             "HTTP 404 Not Found", the rest return a JSON result; final
             answer.
  MCP_STORM  the storm through MCP: the agent `fare-agent` calls
             `lookup_fare` (8 times, SFO to CDG) on mcp_fare_server.py,
             which `server_args` tell to fail every call with "HTTP 503
             Service Unavailable".

A scenario's keys: `agent`, `tool`, `calls` (the arguments of each call, in
order; the scripted model makes one call per model call until they run out,
then answers), `fail` (the indexes, from 0, of the calls that fail),
`error` (their words), `prompt`, `answer`; an MCP scenario has `server_args`
instead of `fail` and `error`.

The tool: `Upstream` is the simulated service behind it. Each call takes
TOOL_SECONDS, as a real one would; call i fails if i is in the scenario's
`fail`, by raising the scenario's `error` as the exception the harness names,
else it returns the JSON text `{"results": ["result <i+1> for <the arguments
as JSON>"]}`. Most harnesses raise an `HTTPError` (what an HTTP client raises
for a non-2xx answer) of their own: the spans record the exception's type
with its module, `__main__.HTTPError`. `tool_functions` makes `search_flights`
and `web_search` of it: plain functions with type hints and a Google-style
docstring, which each framework's own tool decorator reads.

Exporting: `Recording` wraps the real OTLP exporter, keeping the spans that
got through and counting the batches that did not; `tracer_provider` sends a
TracerProvider's spans to it in batches; `finish` flushes and shuts the
provider down, and says on stderr when a batch (of this process or of the MCP
server) failed, in which case the harness exits 1.

The command line (`parse_args`): `<harness> SCENARIO --endpoint URL
[--session ID]`; the session defaults to `<prefix>-<scenario>`, and the
harness sends as the service `<prefix>-<scenario>`. oai_agents_agent.py and
smolagents_agent.py also take `--genai-semconv`.

The manifest: one JSON line on stdout (`emit`), with the framework and its
version, the scenario, the turn's output, `trace_ids` (the sorted distinct
trace ids of the spans), `session_id`, `service` (but in
pydantic_ai_agent.py), the tool, `tool_calls` and `failures` as the harness
counts them, its own fields, and `spans`: every exported span as
a row `{"trace_id", "span_id", "name", ..., "tool_name", "failed"}`
(`span_row`), where `tool_name` is the tool's for a span that is part of a
call of it and null otherwise, and `failed` is status ERROR unless the
harness knows better.

MCP: a harness whose tool is on mcp_fare_server.py starts it with this same
Python over stdio (`mcp_server_args`; a stdio server gets only a minimal
environment, so `mcp_server_env` passes the endpoint and its service name,
`fare-mcp`). The server exports its own spans to the same endpoint and, when
it exits, writes the ones that got through to its --spans-out file, which the
harness reads (`read_server_spans`) and adds to the manifest's `spans`
(`server_rows`). The MCP SDK's client span `MCP send tools/call <tool>` names
the tool only in its name (`mcp_client_tool`). pydantic_ai_mcp_outage_agent.py
starts mcp_quote_server.py (four tools behind one upstream that can be down,
service `quote-mcp`) the same way, naming its script and service
(`mcp_server_args(..., script=)`, `mcp_server_env(..., service=)`); both
servers run on mcp_fare_server.py's `serve_stdio`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, Callable, Iterable, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

TOOL_SECONDS = 0.015  # each tool call takes a little time, as a real one would
MCP_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_fare_server.py")
MCP_SERVICE = "fare-mcp"
MCP_SEND = "MCP send tools/call "

STORM: dict[str, Any] = {
    "agent": "travel-agent",
    "tool": "search_flights",
    "calls": [{"origin": "SFO", "destination": "JFK", "date": "2026-07-29"}] * 8,
    "fail": set(range(8)),
    "error": "HTTP 503 Service Unavailable",
    "prompt": "Find me a flight from SFO to JFK on July 29.",
    "answer": "Sorry, the flight search is down right now. Please try again later.",
}

HEALTHY: dict[str, Any] = {
    "agent": "research-agent",
    "tool": "web_search",
    "calls": [
        {"query": q}
        for q in [
            "retry storm definition",
            "exponential backoff with jitter",
            "circuit breaker pattern",
            "HTTP 503 Retry-After header",
            "idempotency keys for payments",
            "OpenTelemetry GenAI semantic conventions",
            "token bucket rate limiting",
            "thundering herd problem",
        ]
    ],
    "fail": {2, 6},  # the 3rd and 7th calls; never adjacent
    "error": "HTTP 404 Not Found",
    "prompt": "Write a short brief on how services should retry.",
    "answer": "Here is a brief on retries, backoff and circuit breakers.",
}

MCP_STORM: dict[str, Any] = {
    "agent": "fare-agent",
    "tool": "lookup_fare",
    "calls": [{"origin": "SFO", "destination": "CDG"}] * 8,
    # What mcp_fare_server.py is told: which calls fail (numbered from 1) and how.
    "server_args": ["--fail", "all", "--error", "HTTP 503 Service Unavailable"],
    "prompt": "What does a flight from SFO to Paris cost?",
    "answer": "Sorry, the fare service is down right now. Please try again later.",
}


class Upstream:
    """The simulated service behind a scenario's tool: call it with the tool's arguments."""

    def __init__(self, scenario: dict[str, Any], error: Callable[[str], Exception]) -> None:
        self.scenario = scenario
        self.error = error
        self.made = 0

    def __call__(self, **kwargs: Any) -> str:
        i, self.made = self.made, self.made + 1
        time.sleep(TOOL_SECONDS)
        return self.answer(i, kwargs)

    async def call_async(self, **kwargs: Any) -> str:
        """The same call, sleeping without blocking the event loop."""
        i, self.made = self.made, self.made + 1
        await asyncio.sleep(TOOL_SECONDS)
        return self.answer(i, kwargs)

    def answer(self, i: int, kwargs: dict[str, Any]) -> str:
        if i in self.scenario["fail"]:
            raise self.error(self.scenario["error"])
        return json.dumps({"results": [f"result {i + 1} for {json.dumps(kwargs, sort_keys=True)}"]})


def tool_functions(call_upstream: Callable[..., Any]) -> dict[str, Callable[..., str]]:
    """The scenarios' tools by name, each handing its arguments to call_upstream."""

    def search_flights(origin: str, destination: str, date: str) -> str:
        """Search flights.

        Args:
            origin: IATA code of the departure airport.
            destination: IATA code of the arrival airport.
            date: Departure date, YYYY-MM-DD.
        """
        return call_upstream(origin=origin, destination=destination, date=date)

    def web_search(query: str) -> str:
        """Search the web.

        Args:
            query: What to search for.
        """
        return call_upstream(query=query)

    return {"search_flights": search_flights, "web_search": web_search}


class Recording(SpanExporter):
    """The real exporter, keeping what it sent and whether every batch got through."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.spans: list[ReadableSpan] = []
        self.failures = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.spans.extend(spans)
        else:
            self.failures += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def tracer_provider(exporter: SpanExporter, service: str | None) -> TracerProvider:
    """An SDK TracerProvider whose spans go to exporter in batches; service None: OTEL_SERVICE_NAME's."""
    attributes = {"service.name": service} if service is not None else None
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def finish(provider: TracerProvider, exporter: Recording, endpoint: str, server: dict[str, Any] | None = None) -> bool:
    """Flush and shut down provider; False (said on stderr) if a batch, ours or the MCP server's, failed."""
    provider.force_flush()
    provider.shutdown()
    if exporter.failures:
        print(f"error: {exporter.failures} export batch(es) to {endpoint} failed", file=sys.stderr)
        return False
    if server is not None and server["export_failures"]:
        print(f"error: the MCP server's exporter failed {server['export_failures']} time(s)", file=sys.stderr)
        return False
    return True


def parse_args(
    doc: str,
    scenarios: Iterable[str],
    prefix: str,
    argv: list[str] | None,
    session: str = "session id",
    genai_semconv: bool = False,
) -> argparse.Namespace:
    """The harness's command line; `session` and `service` default to <prefix>-<scenario>."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("scenario", choices=sorted(scenarios))
    ap.add_argument("--endpoint", required=True, help="full traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    ap.add_argument("--session", default=None, help=f"{session} (default: {prefix}-<scenario>)")
    if genai_semconv:
        ap.add_argument(
            "--genai-semconv",
            action="store_true",
            help="also emit OTel gen_ai.* attributes (OpenInference's opt-in enable_genai_semconv; off by default)",
        )
    args = ap.parse_args(argv)
    args.session = args.session or f"{prefix}-{args.scenario}"
    args.service = f"{prefix}-{args.scenario}"
    return args


def attrs(s: ReadableSpan) -> Any:
    return s.attributes or {}


def is_error(s: ReadableSpan) -> bool:
    return s.status.status_code is StatusCode.ERROR


def span_row(s: ReadableSpan, tool_name: str | None, failed: bool | None = None, **extra: Any) -> dict[str, Any]:
    """A span as a manifest row; `extra` (e.g. service, kind) goes between its name and tool_name."""
    return {
        "trace_id": format(s.context.trace_id, "032x"),
        "span_id": format(s.context.span_id, "016x"),
        "name": s.name,
        **extra,
        "tool_name": tool_name,
        "failed": is_error(s) if failed is None else failed,
    }


def trace_ids(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({row["trace_id"] for row in rows})


def emit(doc: dict[str, Any]) -> None:
    """Print the manifest: one JSON line on stdout."""
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")


def mcp_server_args(server_args: list[str], spans_out: str, script: str = MCP_SERVER) -> list[str]:
    """The arguments that make this Python run an MCP server script (mcp_fare_server.py unless
    `script` says another, e.g. mcp_quote_server.py) as told, writing its spans to spans_out."""
    return [script, *server_args, "--tool-seconds", str(TOOL_SECONDS), "--spans-out", spans_out]


def mcp_server_env(endpoint: str, service: str = MCP_SERVICE) -> dict[str, str]:
    """What the server's tracing needs: a stdio server gets only a minimal environment unless told more."""
    return {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": service}


def read_server_spans(path: str, wait: float = 0.0) -> dict[str, Any] | None:
    """The MCP server's --spans-out file, waited for up to `wait` seconds; None (said on stderr) if it wrote none."""
    deadline = time.monotonic() + wait
    while not os.path.exists(path):  # the server writes it whole (os.replace) as it exits
        if time.monotonic() >= deadline:
            print(f"error: the MCP server wrote no --spans-out file {path} (did it exit cleanly?)", file=sys.stderr)
            return None
        time.sleep(0.05)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def server_rows(server: dict[str, Any], service: bool = False) -> list[dict[str, Any]]:
    """The MCP server's spans as manifest rows; with `service`, each names the server's service."""
    return [
        {k: r[k] for k in ("trace_id", "span_id", "name")}
        | ({"service": server["service"]} if service else {})
        | {"tool_name": r["tool_name"], "failed": r["failed"]}
        for r in server["spans"]
    ]


def server_failures(server: dict[str, Any], tool: str) -> int:
    """The MCP server's failed calls of tool (its failed `tools/call <tool>` spans)."""
    return sum(1 for r in server["spans"] if r["tool_name"] == tool and r["failed"])


def mcp_client_tool(s: ReadableSpan) -> str | None:
    """The tool an MCP SDK client span `MCP send tools/call <tool>` calls (it names it only there), else None."""
    if s.name.startswith(MCP_SEND) and attrs(s).get("mcp.method.name") == "tools/call":
        return s.name[len(MCP_SEND):]
    return None
