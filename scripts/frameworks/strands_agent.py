"""Run one Strands Agents turn offline and send its own OpenTelemetry spans
to an OTLP/HTTP (protobuf) endpoint.

The model is a scripted subclass of `strands.models.Model` (no network, no
API key): its `stream()` yields the same StreamEvent dicts a real provider's
does (messageStart, contentBlockStart/Delta/Stop, messageStop, metadata),
deciding from the messages so far which tool call to make next and when to
give the final answer. The spans are Strands' own (`strands.telemetry`):
`StrandsTelemetry()` sets up the global TracerProvider that Strands' tracer
uses, and the real OTLP/HTTP protobuf exporter sends them. Scenarios (one
agent run = one turn = one trace):

  storm         the model calls `search_flights` with the same arguments 8
                times; the upstream is dead, so every call raises
                HTTPError("HTTP 503 Service Unavailable"); then the model
                gives up with a final answer.
  healthy       a research agent calls `web_search` 8 times with 8 different
                queries; calls 3 and 7 raise HTTPError("HTTP 404 Not Found"),
                the rest return a JSON result; final answer.
  storm-latest  storm, with OTEL_SEMCONV_STABILITY_OPT_IN=
                gen_ai_latest_experimental (set before strands is imported):
                Strands' "latest" GenAI conventions.
  healthy-latest  healthy, likewise (shows gen_ai.tool.call.result, which
                Strands sets only on successful calls).
  mcp-storm     the tool is `lookup_fare` on an MCP server
                (scripts/frameworks/mcp_fare_server.py, run with this same
                Python over stdio by Strands' own `MCPClient`, `--fail all`):
                8 calls with the same arguments, every one answered with an
                MCP result isError=true whose text is "Error executing tool
                lookup_fare: HTTP 503 Service Unavailable"; final answer. The
                server exports its own spans (the MCP SDK's, service
                `fare-mcp`) to the same endpoint; the MCP SDK 2.x client adds
                a CLIENT span per request (`MCP send tools/call lookup_fare`)
                and puts its traceparent in the request's `_meta`, so the
                server's `tools/call lookup_fare` SERVER span joins the
                agent's trace. The connection's own requests, made by
                `MCPClient.start()`/`list_tools_sync()` before the turn
                (`server/discover`, `tools/list`: a CLIENT and a SERVER span
                each), have no active span to join, so each is a trace of
                its own: this scenario sends 3 traces, the turn's and 2
                protocol ones. No MCP span carries session.id.

How Strands records a failing tool: an exception raised inside an @tool
function does not end the run; the decorator turns it into a toolResult with
status "error" and content "Error: HTTPError - <message>", which the model
sees. The `execute_tool <name>` span gets status ERROR (description = the
exception's message), an `exception` event, and `gen_ai.tool.status` =
"error". An MCP tool's isError result is no exception: the span gets status
ERROR with the result's first text as description, `gen_ai.tool.status` =
"error", and no `exception` event. The session is
`trace_attributes={"session.id": ...}` on the Agent, which Strands copies
onto every span it makes (invoke_agent, execute_event_loop_cycle, chat,
execute_tool).

Prints one JSON manifest line on stdout: the trace id, tool, the number of
tool calls and failures, and every exported span (for mcp-storm the MCP
server's too, from the file it writes with --spans-out: `tool_name` is the
tool's for the agent's `execute_tool` spans, the client's `MCP send
tools/call <tool>` spans and the server's `tools/call <tool>` spans).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness import (
    HEALTHY,
    MCP_STORM,
    STORM,
    Recording,
    Upstream,
    attrs,
    emit,
    finish,
    is_error,
    mcp_client_tool,
    mcp_server_args,
    mcp_server_env,
    parse_args,
    read_server_spans,
    server_rows,
    span_row,
    tool_functions,
    trace_ids,
)

# The MCP storm by the storm's agent, on the storm's route.
MCP_STORM_JFK: dict[str, Any] = {
    **MCP_STORM,
    "agent": STORM["agent"],
    "calls": [{"origin": "SFO", "destination": "JFK"}] * 8,
    "prompt": "What does a flight from SFO to JFK cost?",
    "mcp": True,
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {**STORM, "latest": False},
    "storm-latest": {**STORM, "latest": True},
    "healthy": {**HEALTHY, "latest": False},
    "healthy-latest": {**HEALTHY, "latest": True},
    "mcp-storm": {**MCP_STORM_JFK, "latest": False},
}


class HTTPError(Exception):
    """What an HTTP client raises for a non-2xx answer."""


def build_agent(scenario: dict[str, Any], session: str, mcp_tools: list[Any] | None = None) -> Any:
    from strands import Agent, tool
    from strands.models import Model

    calls: list[dict[str, Any]] = scenario["calls"]
    tool_name: str = scenario["tool"]

    class ScriptedModel(Model):
        """Replays a script: one toolUse per turn until the calls run out, then the answer."""

        def __init__(self) -> None:
            self.config: dict[str, Any] = {"model_id": "scripted"}

        def update_config(self, **model_config: Any) -> None:
            self.config.update(model_config)

        def get_config(self) -> Any:
            return self.config

        def structured_output(self, output_model: Any, prompt: Any, system_prompt: Any = None, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model has no structured output")

        async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any) -> Any:
            made = sum(1 for m in messages for block in m["content"] if "toolUse" in block)
            yield {"messageStart": {"role": "assistant"}}
            if made < len(calls):
                use = {"name": tool_name, "toolUseId": f"call_{made + 1:02d}"}
                yield {"contentBlockStart": {"start": {"toolUse": use}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(calls[made])}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
                out = 20
            else:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": scenario["answer"]}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
                out = 16
            inp = 60 + 40 * made
            yield {"metadata": {"usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
                                "metrics": {"latencyMs": 5}}}

    tools = mcp_tools
    if tools is None:
        tools = [tool(tool_functions(Upstream(scenario, HTTPError))[tool_name])]
    return Agent(
        model=ScriptedModel(),
        tools=tools,
        name=scenario["agent"],
        system_prompt="You are a helpful assistant.",
        callback_handler=None,  # the default one prints the streamed text to stdout
        trace_attributes={"session.id": session},
    )


def span_tool_name(span: ReadableSpan, tools: list[ReadableSpan]) -> str | None:
    """The tool's name for a span that is part of a tool call, else None."""
    if span in tools:
        return attrs(span).get("gen_ai.tool.name")
    return mcp_client_tool(span)


def server_summary(doc: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": doc["tool_calls"], "failures": doc["failures"], "spans": len(doc["spans"])}


def run_mcp(scenario: dict[str, Any], session: str, endpoint: str) -> tuple[Any, dict[str, Any] | None]:
    """One turn with the tool on an MCP server over stdio; returns the result and the server's span file."""
    import tempfile

    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client
    from strands.tools.mcp import MCPClient

    with tempfile.TemporaryDirectory(prefix="strands-mcp-") as tmp:
        spans_out = os.path.join(tmp, "server-spans.json")
        params = StdioServerParameters(
            command=sys.executable,
            args=mcp_server_args(scenario["server_args"], spans_out),
            env=mcp_server_env(endpoint),
        )
        client = MCPClient(lambda: stdio_client(params))
        with client:
            agent = build_agent(scenario, session, mcp_tools=client.list_tools_sync())
            result = agent(scenario["prompt"])
        # Leaving the block closed the server's stdin; it flushes its exporter and
        # writes spans_out as it exits (MCPClient does not wait for that).
        return result, read_server_spans(spans_out, wait=20)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "strands", argv)
    scenario = SCENARIOS[args.scenario]
    session = args.session

    # Both are read when strands is imported / its tracer is first made.
    if scenario["latest"]:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    else:
        os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ["OTEL_SERVICE_NAME"] = args.service
    import strands  # noqa: F401
    from importlib.metadata import version
    from strands.telemetry import StrandsTelemetry

    # StrandsTelemetry() makes an SDK TracerProvider (resource: service.name from
    # OTEL_SERVICE_NAME, service.version = strands-agents') and sets it as the
    # global one, which strands' tracer picks up. Its setup_otlp_exporter() would
    # add a plain BatchSpanProcessor(OTLPSpanExporter); we add our own so the
    # exporter's results are seen.
    telemetry = StrandsTelemetry()
    provider = telemetry.tracer_provider
    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider.add_span_processor(BatchSpanProcessor(exporter))

    server_doc: dict[str, Any] | None = None
    if scenario.get("mcp"):
        result, server_doc = run_mcp(scenario, session, args.endpoint)
        if server_doc is None:
            return 1
    else:
        agent = build_agent(scenario, session)
        result = agent(scenario["prompt"])
    if not finish(provider, exporter, args.endpoint, server_doc):
        return 1

    spans = exporter.spans
    tools = [s for s in spans if attrs(s).get("gen_ai.operation.name") == "execute_tool"]
    rows = [span_row(s, span_tool_name(s, tools)) for s in spans]
    if server_doc is not None:
        rows += server_rows(server_doc)
    doc = {
        "framework": "strands",
        "version": version("strands-agents"),
        "scenario": args.scenario,
        "semconv_opt_in": os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", ""),
        "output": str(result).strip(),
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(tools),
        "failures": sum(1 for s in tools if is_error(s)),
        "service": args.service,
        **({"mcp_service": server_doc["service"], "mcp_server": server_summary(server_doc)} if server_doc else {}),
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
