"""An MCP tool server (MCP Python SDK 2.x, stdio) whose one tool fails on demand,
with the SDK's own OpenTelemetry spans exported over OTLP/HTTP (protobuf).

    <python> scripts/frameworks/mcp_fare_server.py [--fail all|none|N,M,...]
        [--error TEXT] [--fail-as tool-error|result|crash|protocol]
        [--spans-out FILE] [--tool-seconds S]

A framework harness starts it as a stdio MCP server (its stdout is the
JSON-RPC channel: nothing else is ever written there). `<python>` must have
`mcp` 2.x, opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http:
venv-oai-agents or venv-pydantic-mcp (scripts/py/requirements-oai-agents.txt,
requirements-pydantic-mcp.txt). It serves one tool, made with the SDK's
high-level `MCPServer` (`mcp.server.mcpserver`):

  lookup_fare(origin: str, destination: str) -> text
      Sleeps --tool-seconds (default 0.015), then either answers with a JSON
      text `{"origin", "destination", "fare_usd", "call"}` or fails.

Which calls fail (calls are numbered from 1, per server process):
  --fail all | none | a comma list such as 3,7     (env FARE_MCP_FAIL; default none)
  --error TEXT     the failure's words               (env FARE_MCP_ERROR;
                                                      default "HTTP 503 Service Unavailable")
How they fail (env FARE_MCP_FAIL_AS):
  tool-error  (default) the tool raises `mcp.server.mcpserver.exceptions.ToolError(TEXT)`,
              the SDK's way for an anticipated failure: the call returns a result
              with isError=true and one text block
              "Error executing tool lookup_fare: TEXT".
  result      the tool returns `CallToolResult(isError=True)` itself, with one
              text block that is exactly TEXT.
  crash       the tool raises RuntimeError(TEXT): isError=true, but the SDK
              withholds the words: the text is "Error executing tool lookup_fare".
  protocol    the tool raises `MCPError(-32603, TEXT)`: no result, a JSON-RPC
              error response instead (code -32603, message TEXT).

Tracing (all native to the MCP SDK: `mcp.server._otel.OpenTelemetryMiddleware`,
on by default in every 2.x `Server`): the process sets an SDK TracerProvider as
the global one, so every inbound message gets a SERVER span, scope
`mcp-python-sdk`, named `<method>[ <tool>]` (`tools/call lookup_fare`,
`tools/list`, `initialize`, `server/discover`, `notifications/initialized`, ...),
parented by the W3C `traceparent` the client put in the request's `params._meta`
(when there is one). A tools/call span carries `gen_ai.operation.name` =
execute_tool and `gen_ai.tool.name`; an isError result sets `error.type` =
tool_error and status ERROR (no description, no event); a JSON-RPC error sets
`error.type` = `rpc.response.status_code` = the code and status ERROR with the
message.

Environment:
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  full traces URL (http://127.0.0.1:PORT/v1/traces);
                                      unset: the spans are made but not exported.
  OTEL_SERVICE_NAME                   resource service.name (default fare-mcp).
  FARE_MCP_SPANS_OUT                  as --spans-out.
Note that MCP stdio clients start the server with a minimal environment (PATH,
HOME, ...), so pass these in the client's `env`.

--spans-out FILE: when the server exits (its stdin closed, or SIGTERM), it
flushes its exporter and writes FILE as one JSON object:
  {"service": ..., "export_failures": N, "tool_calls": N, "failures": N,
   "spans": [{"trace_id", "span_id", "name", "parent_span_id", "kind",
              "tool_name", "failed"}, ...]}
listing every span its exporter delivered, as the harnesses' manifest rows
(harness.py) with the parent and kind added (tool_name = `gen_ai.tool.name`
on tools/call spans, else null; failed = status ERROR), so a harness can put
the server's spans into its manifest. The process exits 1 if an export batch
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any, Callable

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness import MCP_SERVICE, TOOL_SECONDS, Recording, attrs, span_row

TOOL = "lookup_fare"
FAIL_AS = ("tool-error", "result", "crash", "protocol")


def parse_fail(text: str) -> set[int] | str:
    text = text.strip().lower()
    if text in ("all", "none", ""):
        return "all" if text == "all" else set()
    try:
        calls = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--fail: all, none or a comma list of call numbers, not {text!r}")
    if any(n < 1 for n in calls):
        raise argparse.ArgumentTypeError("--fail: calls are numbered from 1")
    return calls


def build_server(fail: set[int] | str, error: str, fail_as: str, tool_seconds: float, counts: dict[str, int]) -> Any:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import CallToolResult, TextContent

    server = MCPServer("fare-mcp", instructions="Fare lookups for flights.", log_level="WARNING")

    @server.tool(name=TOOL, structured_output=False)
    async def lookup_fare(origin: str, destination: str) -> Any:
        """Look up the cheapest economy fare from origin to destination (IATA airport codes)."""
        counts["calls"] += 1
        n = counts["calls"]
        await anyio.sleep(tool_seconds)
        if fail == "all" or (isinstance(fail, set) and n in fail):
            counts["failures"] += 1
            if fail_as == "tool-error":
                raise ToolError(error)
            if fail_as == "result":
                return CallToolResult(content=[TextContent(type="text", text=error)], is_error=True)
            if fail_as == "crash":
                raise RuntimeError(error)
            raise MCPError(code=-32603, message=error)
        fare = 180 + 37 * (sum(map(ord, origin + destination)) % 19)
        return json.dumps({"origin": origin, "destination": destination, "fare_usd": fare, "call": n})

    return server


def serve_stdio(build: Callable[[dict[str, int]], Any], default_service: str, spans_out: str | None, who: str) -> int:
    """Serve the MCPServer `build(counts)` makes over stdio, traced; the process's exit status.

    Sets an SDK TracerProvider (service OTEL_SERVICE_NAME, else
    default_service) as the global one, exporting over OTLP/HTTP when
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; serves until stdin closes (or
    SIGTERM); then flushes and, with spans_out, writes the spans that got
    through (the module docstring's --spans-out). `counts` ({"calls",
    "failures"}) is the tools' own tally; `who` names the script on stderr.
    1 if an export batch failed.
    """
    service = os.environ.get("OTEL_SERVICE_NAME") or default_service

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter: Recording | None = None
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        exporter = Recording(OTLPSpanExporter(timeout=10))  # the endpoint comes from the environment
        provider.add_span_processor(BatchSpanProcessor(exporter))
    # The MCP SDK's tracer is `opentelemetry.trace.get_tracer("mcp-python-sdk")`,
    # which follows the global provider.
    trace.set_tracer_provider(provider)

    counts = {"calls": 0, "failures": 0}
    finished = threading.Lock()

    def finish() -> int:
        if not finished.acquire(blocking=False):
            return 0
        provider.force_flush(5_000)
        provider.shutdown()
        spans = exporter.spans if exporter else []
        if spans_out:
            doc = {
                "service": service,
                "export_failures": exporter.failures if exporter else 0,
                "tool_calls": counts["calls"],
                "failures": counts["failures"],
                "spans": [
                    span_row(
                        s,
                        attrs(s).get("gen_ai.tool.name"),
                        parent_span_id=format(s.parent.span_id, "016x") if s.parent else None,
                        kind=s.kind.name,
                    )
                    for s in spans
                ],
            }
            tmp = spans_out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            os.replace(tmp, spans_out)
        if exporter and exporter.failures:
            print(f"{who}: {exporter.failures} export batch(es) failed", file=sys.stderr)
            return 1
        return 0

    def on_sigterm(_signum: int, _frame: Any) -> None:
        # A stdio client that runs out of patience terminates the server: keep the spans.
        os._exit(finish())

    signal.signal(signal.SIGTERM, on_sigterm)
    server = build(counts)
    try:
        server.run("stdio")  # returns when the client closes stdin
    except KeyboardInterrupt:
        pass
    return finish()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fail", type=parse_fail, default=parse_fail(os.environ.get("FARE_MCP_FAIL", "none")))
    ap.add_argument("--error", default=os.environ.get("FARE_MCP_ERROR", "HTTP 503 Service Unavailable"))
    ap.add_argument("--fail-as", choices=FAIL_AS, default=os.environ.get("FARE_MCP_FAIL_AS", "tool-error"))
    ap.add_argument("--spans-out", default=os.environ.get("FARE_MCP_SPANS_OUT") or None)
    ap.add_argument("--tool-seconds", type=float, default=TOOL_SECONDS)
    args = ap.parse_args(argv)
    return serve_stdio(
        lambda counts: build_server(args.fail, args.error, args.fail_as, args.tool_seconds, counts),
        MCP_SERVICE,
        args.spans_out,
        "mcp_fare_server.py",
    )


if __name__ == "__main__":
    sys.exit(main())
