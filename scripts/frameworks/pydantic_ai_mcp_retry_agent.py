"""Run one pydantic-ai agent turn offline whose tool retries in code: the
model calls the pydantic-ai function tool `fetch_fare` once, and its body
calls `lookup_fare` on mcp_fare_server.py through FastMCP's MCP client, under
a retry decorator (`retry`, below: 6 attempts, a fixed 50 ms pause), the way
a hand-written client wrapper retries a flaky upstream. The server fails
every call ("Error executing tool lookup_fare: HTTP 503 Service
Unavailable"), so the decorator makes all 6 attempts with no model call
between them, then the tool returns the failure to the model as text, and
the model answers. A retry storm whose driver is code (docs/detection.md
§4.2, "Driver").

  mcp-retry  the scenario above.

Each attempt is traced by the MCP layers as in pydantic_ai_mcp_agent.py —
FastMCP's `tools/call lookup_fare` (CLIENT), the MCP SDK's `MCP send
tools/call lookup_fare` (CLIENT) and the server's `tools/call lookup_fare`
(SERVER, service fare-mcp): one call — all under pydantic-ai's one
`execute_tool fetch_fare` span, between the turn's two `chat scripted`
spans. The model is pydantic-ai's `FunctionModel` (no network, no key).

Prints one JSON manifest line on stdout (harness.py's manifest): trace ids,
the session, `tool` (lookup_fare) with `tool_calls` (the MCP SDK's client
spans: the attempts) and `failures` (the server's failed tools/call spans),
`model_calls` (pydantic-ai's chat spans) and every exported span, the
server's included. Exits 1 if an export batch failed.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import tempfile
from importlib.metadata import version
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

import pydantic_ai
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from harness import (
    Recording,
    attrs,
    emit,
    finish,
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

AGENT = "fare-agent"
TOOL = "lookup_fare"  # the MCP tool each attempt calls
WRAPPER = "fetch_fare"  # the pydantic-ai tool the model calls once
ATTEMPTS = 6
PAUSE_S = 0.05

SCENARIOS: dict[str, dict[str, Any]] = {
    "mcp-retry": {
        "server_args": ["--fail", "all", "--error", "HTTP 503 Service Unavailable"],
        "prompt": "What does a flight from SFO to Paris cost?",
        "answer": "Sorry, the fare service is down right now. Please try again later.",
    },
}


def retry(attempts: int, pause_s: float):
    """A retry decorator: call again on any exception, `attempts` times in all."""

    def wrap(f):
        @functools.wraps(f)
        async def inner(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(1, attempts + 1):
                try:
                    return await f(*args, **kwargs)
                except Exception:
                    if attempt == attempts:
                        raise
                    await asyncio.sleep(pause_s)

        return inner

    return wrap


def build_agent(scenario: dict[str, Any], provider: TracerProvider, endpoint: str, spans_out: str) -> Agent:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(1 for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart))
        if made == 0:
            return ModelResponse(parts=[ToolCallPart(WRAPPER, {"origin": "SFO", "destination": "CDG"}, tool_call_id="call_01")])
        return ModelResponse(parts=[TextPart(scenario["answer"])])

    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = Agent(FunctionModel(model, model_name="scripted"), name=AGENT, capabilities=[instrumentation])

    @agent.tool_plain
    async def fetch_fare(origin: str, destination: str) -> str:
        """Look up the cheapest fare between two airports.

        Args:
            origin: IATA code of the departure airport.
            destination: IATA code of the arrival airport.
        """
        transport = StdioTransport(
            command=sys.executable,
            args=mcp_server_args(scenario["server_args"], spans_out),
            env=mcp_server_env(endpoint),
            keep_alive=False,
        )
        async with Client(transport) as client:

            @retry(ATTEMPTS, PAUSE_S)
            async def lookup() -> str:
                result = await client.call_tool(TOOL, {"origin": origin, "destination": destination})
                return str(result.data if result.data is not None else result.content)

            try:
                return await lookup()
            except Exception as e:  # the decorator gave up: tell the model
                return f"fare lookup failed after {ATTEMPTS} attempts: {e}"

    return agent


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "pydantic-ai", argv, session="conversation id")
    scenario = SCENARIOS[args.scenario]
    session, service = args.session, args.service

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, service)
    # FastMCP's and the MCP SDK's tracers follow the global provider.
    trace.set_tracer_provider(provider)

    with tempfile.TemporaryDirectory(prefix="pydantic-ai-mcp-retry-") as tmp:
        spans_out = os.path.join(tmp, "mcp-spans.json")
        agent = build_agent(scenario, provider, args.endpoint, spans_out)
        result = asyncio.run(agent.run(scenario["prompt"], conversation_id=session))
        server_doc = read_server_spans(spans_out)
        if server_doc is None:
            return 1
    if not finish(provider, exporter, args.endpoint, server_doc):
        return 1

    spans = exporter.spans

    def scope(s) -> str | None:
        return s.instrumentation_scope.name if s.instrumentation_scope else None

    fastmcp = [s for s in spans if scope(s) == "fastmcp" and attrs(s).get("mcp.method.name") == "tools/call"
               and attrs(s).get("gen_ai.tool.name") == TOOL]
    sdk = [s for s in spans if mcp_client_tool(s) == TOOL]
    chats = [s for s in spans if scope(s) == "pydantic-ai" and attrs(s).get("gen_ai.operation.name") == "chat"]
    wrapper = [s for s in spans if scope(s) == "pydantic-ai" and attrs(s).get("gen_ai.tool.name") == WRAPPER]
    part_of_call = {id(s) for s in fastmcp + sdk}
    records = [span_row(s, TOOL if id(s) in part_of_call else (WRAPPER if s in wrapper else None), service=service)
               for s in spans]
    records += server_rows(server_doc, service=True)
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
        "tool": TOOL,
        "tool_calls": len(sdk),
        "failures": server_failures(server_doc, TOOL),
        "wrapper_calls": len(wrapper),
        "model_calls": len(chats),
        "spans": records,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
