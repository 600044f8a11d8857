"""Run one pydantic-ai agent turn offline whose tool is served by an MCP server
over stdio, and send pydantic-ai's, the MCP client's and the MCP server's own
OpenTelemetry spans to an OTLP/HTTP (protobuf) endpoint.

The model is pydantic-ai's `FunctionModel` (no network, no API key): a plain
function that decides, from the messages so far, which tool call to make next
and when to give the final answer. The tool is `lookup_fare` on
mcp_fare_server.py (MCP Python SDK 2.x), reached through pydantic-ai's
`MCPToolset`, which is built on FastMCP's client (`fastmcp-slim[client]`, on
the MCP SDK's client). The server is a child process that exports its own
spans (service fare-mcp) to the same endpoint. Scenarios (one agent run = one
turn):

  mcp-storm    the model calls `lookup_fare` with the same arguments 8 times;
               the server fails every call with an isError result "Error
               executing tool lookup_fare: HTTP 503 Service Unavailable";
               then the model gives up with a final answer.
  mcp-healthy  `lookup_fare` 8 times with 8 different destinations; calls 3
               and 7 fail the same way with "HTTP 404 Not Found"; final answer.

How pydantic-ai surfaces an MCP isError result: with the toolset's default
tool_error_behavior='retry', `MCPToolset` raises `ModelRetry(<the result's
text>)`, counted against the toolset's `max_retries` (set here to the number of
failures, as pydantic_ai_agent.py does with the tool's `retries`); the model
sees a retry prompt and the run goes on. The `execute_tool lookup_fare` span
gets status ERROR, an `exception` event of type
`pydantic_ai.exceptions.ToolRetryError`, and the text as
`gen_ai.tool.call.result`.

Three layers trace each call, all parented in one trace:
  pydantic-ai  `execute_tool lookup_fare` (INTERNAL, scope pydantic-ai)
  FastMCP      `tools/call lookup_fare` (CLIENT, scope fastmcp): `mcp.method.name`,
               `gen_ai.tool.name`; an isError result sets `error.type` =
               tool_error and status ERROR with the result's text
  MCP SDK      `MCP send tools/call lookup_fare` (CLIENT, scope mcp-python-sdk):
               `mcp.method.name`, `jsonrpc.request.id`; puts its context in
               `params._meta.traceparent`
  server       `tools/call lookup_fare` (SERVER, scope mcp-python-sdk, service
               fare-mcp): `gen_ai.tool.name`, `error.type` = tool_error
FastMCP and the MCP SDK trace with the global TracerProvider, so this sets one.
The session is the run's `conversation_id` (`gen_ai.conversation.id`), on
pydantic-ai's spans only.

Prints one JSON manifest line on stdout: trace ids, the tool, the number of
tool calls (pydantic-ai's execute_tool spans) and failures (the server's
failed tools/call spans), and every exported span, the server's included (read
from the file its --spans-out writes when it exits). Exits 1 if an export
batch (of this process or the server) failed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

import pydantic_ai
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from harness import (
    MCP_SERVICE,
    MCP_STORM,
    Recording,
    attrs,
    emit,
    finish,
    is_error,
    mcp_client_tool,
    mcp_server_args,
    mcp_server_env,
    parse_args,
    read_server_spans,
    server_failures,
    server_rows,
    span_row,
    trace_ids,
    tracer_provider,
)

TOOL = MCP_STORM["tool"]

SCENARIOS: dict[str, dict[str, Any]] = {
    "mcp-storm": {**MCP_STORM, "failures": 8},
    "mcp-healthy": {
        "agent": "fare-agent",
        "calls": [
            {"origin": "SFO", "destination": d}
            for d in ["CDG", "LHR", "NRT", "FRA", "AMS", "MAD", "FCO", "DUB"]
        ],
        "failures": 2,
        "server_args": ["--fail", "3,7", "--error", "HTTP 404 Not Found"],  # never adjacent
        "prompt": "Compare fares from SFO to eight European and Asian hubs.",
        "answer": "Here are the fares I could find; two lookups failed.",
    },
}


def build_agent(scenario: dict[str, Any], provider: TracerProvider, endpoint: str, spans_out: str) -> Agent:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    calls: list[dict[str, Any]] = scenario["calls"]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(1 for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart))
        if made < len(calls):
            return ModelResponse(parts=[ToolCallPart(TOOL, calls[made], tool_call_id=f"call_{made + 1:02d}")])
        return ModelResponse(parts=[TextPart(scenario["answer"])])

    transport = StdioTransport(
        command=sys.executable,
        args=mcp_server_args(scenario["server_args"], spans_out),
        env=mcp_server_env(endpoint),
        # Stop the server when the run lets go of the toolset, so it flushes its spans.
        keep_alive=False,
    )
    # The retry budget is the toolset's (default: the agent's, 1): high enough for
    # every failing round, so the run ends with the model's answer.
    toolset = MCPToolset(transport, id=MCP_SERVICE, max_retries=scenario["failures"])
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    return Agent(
        FunctionModel(model, model_name="scripted"),
        name=scenario["agent"],
        toolsets=[toolset],
        capabilities=[instrumentation],
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "pydantic-ai", argv, session="conversation id")
    scenario = SCENARIOS[args.scenario]
    session, service = args.session, args.service

    from importlib.metadata import version

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, service)
    # FastMCP's and the MCP SDK's tracers follow the global provider.
    trace.set_tracer_provider(provider)

    with tempfile.TemporaryDirectory(prefix="pydantic-ai-mcp-") as tmp:
        spans_out = os.path.join(tmp, "mcp-spans.json")
        agent = build_agent(scenario, provider, args.endpoint, spans_out)
        result = asyncio.run(agent.run(scenario["prompt"], conversation_id=session))
        server_doc = read_server_spans(spans_out)
        if server_doc is None:
            return 1
    if not finish(provider, exporter, args.endpoint, server_doc):
        return 1

    spans = exporter.spans

    # pydantic-ai's execute_tool spans: one per call.
    tools = [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == "pydantic-ai"
             and attrs(s).get("gen_ai.operation.name") == "execute_tool" and attrs(s).get("gen_ai.tool.name") == TOOL]
    # FastMCP's client span (gen_ai.tool.name) and the MCP SDK's (the name only).
    fastmcp = [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == "fastmcp"
               and attrs(s).get("mcp.method.name") == "tools/call" and attrs(s).get("gen_ai.tool.name") == TOOL]
    sdk = [s for s in spans if mcp_client_tool(s) == TOOL]
    part_of_call = {id(s) for s in tools + fastmcp + sdk}
    records = [span_row(s, TOOL if id(s) in part_of_call else None, service=service) for s in spans]
    records += server_rows(server_doc, service=True)

    def failed(group: list[ReadableSpan]) -> int:
        return sum(1 for s in group if is_error(s))

    failures_by_layer = {
        "framework": failed(tools),
        "fastmcp_client": failed(fastmcp),
        "mcp_client": failed(sdk),
        "mcp_server": server_failures(server_doc, TOOL),
    }
    doc = {
        "framework": "pydantic-ai",
        "version": pydantic_ai.__version__,
        "mcp": version("mcp"),
        "fastmcp": version("fastmcp-slim"),
        "scenario": args.scenario,
        "output": result.output,
        "trace_ids": trace_ids(records),
        "session_id": session,
        "service": service,
        "mcp_service": server_doc["service"],
        "tool": TOOL,
        "tool_calls": len(tools),
        "failures": failures_by_layer["mcp_server"],
        "failures_by_layer": failures_by_layer,
        "spans": records,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
