"""Run pydantic-ai agent turns offline against one MCP server with four tools
over stdio, while that server is down or after it recovered, and send
pydantic-ai's, the MCP client's and the MCP server's own OpenTelemetry spans
to an OTLP/HTTP (protobuf) endpoint: an MCP dependency's outage, end to end.

The model is pydantic-ai's `FunctionModel` (no network, no API key), as in
pydantic_ai_mcp_agent.py, whose wiring this follows: the tools are on
mcp_quote_server.py (MCP Python SDK 2.x, service quote-mcp), reached through
pydantic-ai's `MCPToolset` (FastMCP's client on the MCP SDK's), the server a
child process exporting its own spans to the same endpoint. One server
process serves every turn of a run (`async with agent:` holds the toolset
open); each turn is one `agent.run` (its own trace, `invoke_agent
quote-agent`), all with one conversation id (the session). The agent sends
as the service `pydantic-ai-quotes` in both scenarios: the same deployment
sees the outage, then the recovery.

  mcp-outage     the server is down (`--down all`: every call fails with
                 "Error executing tool <tool>: HTTP 503 Service
                 Unavailable"); four turns, one per tool (get_quote,
                 get_fx_rate, convert_amount, list_rates), each calling its
                 tool 6 times with the same arguments before the model gives
                 up: a retry storm of 6 per tool, 24 failed calls.
  mcp-recovered  the server is healthy; the same four turns, each calling
                 its tool 3 times with 3 different arguments, all
                 succeeding: 12 calls, nothing to find.

How a failure surfaces (pydantic_ai_mcp_agent.py says more): MCPToolset
raises `ModelRetry(<the result's text>)`, its `max_retries` set to the calls
of a turn so every round is retried; the `execute_tool <tool>` span gets
status ERROR and the text as `gen_ai.tool.call.result`.

Prints one JSON manifest line on stdout (harness.py's manifest): the trace
ids, the session, the tools with their calls (pydantic-ai's execute_tool
spans) and failures (the server's failed tools/call spans) each, the totals,
the turns with their trace ids, and every exported span, the server's
included. Exits 1 if an export batch (of this process or the server) failed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from importlib.metadata import version
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
from mcp_quote_server import SCRIPT as QUOTE_SERVER
from mcp_quote_server import SERVICE as QUOTE_SERVICE
from mcp_quote_server import TOOLS

AGENT = "quote-agent"
SERVICE = "pydantic-ai-quotes"
STORM_CALLS = 6

# Each turn: (tool, the arguments of each call, the prompt, the model's final answer).
OUTAGE_TURNS: list[tuple[str, list[dict[str, Any]], str]] = [
    ("get_quote", [{"symbol": "ACME"}] * STORM_CALLS, "What is ACME trading at?"),
    ("get_fx_rate", [{"base": "USD", "quote": "EUR"}] * STORM_CALLS, "What is the dollar worth in euros?"),
    (
        "convert_amount",
        [{"amount": 250.0, "base": "USD", "quote": "JPY"}] * STORM_CALLS,
        "How many yen is 250 dollars?",
    ),
    ("list_rates", [{"base": "USD"}] * STORM_CALLS, "List today's rates against the dollar."),
]
RECOVERED_TURNS: list[tuple[str, list[dict[str, Any]], str]] = [
    ("get_quote", [{"symbol": s} for s in ["ACME", "GLOBEX", "INITECH"]], "Quote ACME, GLOBEX and INITECH."),
    (
        "get_fx_rate",
        [{"base": "USD", "quote": q} for q in ["EUR", "GBP", "CHF"]],
        "What is the dollar worth in euros, pounds and francs?",
    ),
    (
        "convert_amount",
        [{"amount": a, "base": "USD", "quote": "JPY"} for a in [250.0, 400.0, 75.5]],
        "Convert 250, 400 and 75.50 dollars to yen.",
    ),
    ("list_rates", [{"base": b} for b in ["USD", "EUR", "GBP"]], "List the rates against USD, EUR and GBP."),
]

SCENARIOS: dict[str, dict[str, Any]] = {
    "mcp-outage": {
        "turns": OUTAGE_TURNS,
        "server_args": ["--down", "all", "--error", "HTTP 503 Service Unavailable"],
        "answer": "Sorry, the quote service is down right now. Please try again later.",
    },
    "mcp-recovered": {
        "turns": RECOVERED_TURNS,
        "server_args": ["--down", "none"],
        "answer": "Here is what the quote service says.",
    },
}


def build_agent(scenario: dict[str, Any], provider: TracerProvider, endpoint: str, spans_out: str) -> tuple[Agent, list[Any]]:
    """The agent, and the turn it is in (a one-item list the caller sets before each run)."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    turn: list[Any] = [None]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool, calls, _prompt = turn[0]
        made = sum(1 for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart))
        if made < len(calls):
            return ModelResponse(parts=[ToolCallPart(tool, calls[made], tool_call_id=f"call_{made + 1:02d}")])
        return ModelResponse(parts=[TextPart(scenario["answer"])])

    transport = StdioTransport(
        command=sys.executable,
        args=mcp_server_args(scenario["server_args"], spans_out, script=QUOTE_SERVER),
        env=mcp_server_env(endpoint, service=QUOTE_SERVICE),
        # Stop the server when the runs let go of the toolset, so it flushes its spans.
        keep_alive=False,
    )
    # Every failing round of a turn is retried: the budget is a turn's calls.
    toolset = MCPToolset(transport, id=QUOTE_SERVICE, max_retries=max(len(c) for _, c, _ in scenario["turns"]))
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = Agent(
        FunctionModel(model, model_name="scripted"),
        name=AGENT,
        toolsets=[toolset],
        capabilities=[instrumentation],
    )
    return agent, turn


async def run_turns(agent: Agent, turn: list[Any], scenario: dict[str, Any], session: str) -> list[str]:
    """Every turn of the scenario, one agent.run each, on one open toolset; their outputs."""
    outputs = []
    async with agent:  # one server process for every turn
        for t in scenario["turns"]:
            turn[0] = t
            result = await agent.run(t[2], conversation_id=session)
            outputs.append(result.output)
    return outputs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "pydantic-ai", argv, session="conversation id")
    scenario = SCENARIOS[args.scenario]
    session, service = args.session, SERVICE

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, service)
    # FastMCP's and the MCP SDK's tracers follow the global provider.
    trace.set_tracer_provider(provider)

    with tempfile.TemporaryDirectory(prefix="pydantic-ai-mcp-outage-") as tmp:
        spans_out = os.path.join(tmp, "mcp-spans.json")
        agent, turn = build_agent(scenario, provider, args.endpoint, spans_out)
        outputs = asyncio.run(run_turns(agent, turn, scenario, session))
        server_doc = read_server_spans(spans_out, wait=10.0)
        if server_doc is None:
            return 1
    if not finish(provider, exporter, args.endpoint, server_doc):
        return 1

    spans = exporter.spans

    def scope(s: ReadableSpan) -> str | None:
        return s.instrumentation_scope.name if s.instrumentation_scope else None

    # The span of each layer that is part of a call, by tool: pydantic-ai's
    # execute_tool, FastMCP's client span (gen_ai.tool.name), the MCP SDK's
    # client span (its name only).
    tool_of: dict[int, str] = {}
    executes: dict[str, list[ReadableSpan]] = {t: [] for t in TOOLS}
    for s in spans:
        a = attrs(s)
        name: str | None = None
        if scope(s) == "pydantic-ai" and a.get("gen_ai.operation.name") == "execute_tool":
            name = a.get("gen_ai.tool.name")
            if name in executes:
                executes[name].append(s)
        elif scope(s) == "fastmcp" and a.get("mcp.method.name") == "tools/call":
            name = a.get("gen_ai.tool.name")
        else:
            name = mcp_client_tool(s)
        if name in TOOLS:
            tool_of[id(s)] = name
    records = [span_row(s, tool_of.get(id(s)), service=service) for s in spans]
    records += server_rows(server_doc, service=True)

    agents = [s for s in spans if scope(s) == "pydantic-ai" and attrs(s).get("gen_ai.operation.name") == "invoke_agent"]
    turns = [
        {
            "tool": t[0],
            "trace_id": format(a.context.trace_id, "032x"),
            "tool_calls": sum(1 for s in executes[t[0]] if s.context.trace_id == a.context.trace_id),
        }
        for t, a in zip(scenario["turns"], sorted(agents, key=lambda s: s.start_time or 0))
    ]
    tools = {
        t: {
            "tool_calls": len(executes[t]),
            "failures": server_failures(server_doc, t),
            "framework_failures": sum(1 for s in executes[t] if is_error(s)),
        }
        for t in TOOLS
    }
    doc = {
        "framework": "pydantic-ai",
        "version": pydantic_ai.__version__,
        "mcp": version("mcp"),
        "fastmcp": version("fastmcp-slim"),
        "scenario": args.scenario,
        "output": outputs,
        "trace_ids": trace_ids(records),
        "session_id": session,
        "service": service,
        "mcp_service": server_doc["service"],
        "agent": AGENT,
        "turns": turns,
        "tools": tools,
        "tool_calls": sum(v["tool_calls"] for v in tools.values()),
        "failures": sum(v["failures"] for v in tools.values()),
        "spans": records,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
