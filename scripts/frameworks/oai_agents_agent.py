"""Run one OpenAI Agents SDK turn offline, traced by OpenInference, and send the
spans to an OTLP/HTTP (protobuf) endpoint.

The model is a scripted `agents.models.interface.Model` (no network, no API
key): from the input items so far it decides which function call to make next
and when to answer, and returns what `OpenAIResponsesModel` would: a
`ModelResponse` whose items come from an `openai.types.responses.Response`,
recorded, as that model does, on a `response_span` (so OpenInference makes the
same LLM span it makes for a real Responses API call). The spans are
OpenInference's (`openinference-instrumentation-openai-agents`): its
`OpenAIAgentsInstrumentor().instrument(tracer_provider=...)` replaces the
SDK's trace processors (exclusive by default, so the SDK's own exporter to
OpenAI's backend is gone) with one that turns every SDK trace/span into an OTel
span; the real OTLP/HTTP protobuf exporter sends them. The session is
openinference's `using_session(...)` around `Runner.run`, which puts
`session.id` on every span OpenInference starts inside it. Scenarios (one
`Runner.run` = one turn):

  storm           the model calls `search_flights` with the same arguments 8
                  times; every call raises HTTPError("HTTP 503 Service
                  Unavailable"); then the model gives up with a final answer.
                  The tool's `failure_error_function` returns str(error), so the
                  model (and the trace) get the words.
  storm-redacted  storm with the SDK's default failure_error_function.
  healthy         a research agent calls `web_search` 8 times with 8 different
                  queries; calls 3 and 7 raise HTTPError("HTTP 404 Not Found"),
                  the rest return a JSON result; final answer.
  mcp-storm       the storm through MCP: `lookup_fare` (8 times, same
                  arguments) served over stdio by mcp_fare_server.py
                  (`MCPServerStdio`), which fails every call with an isError
                  result "Error executing tool lookup_fare: HTTP 503 Service
                  Unavailable" (its default --fail-as tool-error). The server is
                  a child process with its own spans (service fare-mcp) sent to
                  the same endpoint.

How the SDK records a failing function tool: an exception raised by the tool
does not end the run when the tool has a failure_error_function (the
default one included): its return value becomes the tool's output, which the
model sees, and the function span gets an error, SpanError(message="Error
running tool (non-fatal)", data={"tool_name", "error"}). OpenInference makes
that the TOOL span's status: ERROR, description "<message>: <data as a Python
dict repr>", with no exception event. With a failure_error_function of one's
own, data["error"] is str(exception) and output.value is what the function
returned; with the default one, the SDK redacts: data["error"] is "Tool
execution failed. Error details are redacted." and output.value is "An error
occurred while running the tool. Please try again." (the exception's words are
nowhere in the trace). An MCP tool whose result has isError=true is NOT an
error to the SDK: the TOOL span is status OK and its output.value is the
result's content as JSON, `{"type": "text", "text": "Error executing tool
lookup_fare: HTTP 503 Service Unavailable"}`; only the MCP server's span says
it failed.

The MCP spans are the MCP Python SDK's own (scope `mcp-python-sdk`, which
follows the global TracerProvider, so this sets one): a CLIENT span `MCP send
<method>[ <tool>]` per request (child of OpenInference's TOOL span for
tools/call, of the `mcp_tools` span for tools/list, since OpenInference makes
each span current while it is open), whose W3C context goes to the server in
`params._meta.traceparent`. The handshake is made when the server connects,
before the run and outside any span: `MCP send server/discover` and the
server's `server/discover` are a trace of their own (MCP 2.x's "auto" mode: no
`initialize`, no `notifications/initialized`).

Prints one JSON manifest line on stdout: trace ids, the tool, the number of
tool calls (the framework's TOOL spans of the scenario's tool) and failures (in
MCP runs: the server's failed tools/call spans), and every exported span, the
MCP server's included (read from the file its --spans-out writes when it
exits). Exits 1 if an export batch (of this process or the server) failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from harness import (
    HEALTHY,
    MCP_SERVICE,
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
    server_failures,
    server_rows,
    span_row,
    trace_ids,
    tracer_provider,
)

SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {**STORM, "mcp": False, "error_function": "message"},
    "storm-redacted": {**STORM, "mcp": False, "error_function": "default"},
    "healthy": {**HEALTHY, "mcp": False, "error_function": "message"},
    "mcp-storm": {**MCP_STORM, "mcp": True},
}


class HTTPError(Exception):
    """What an HTTP client raises for a non-2xx answer."""


def scripted_model(scenario: dict[str, Any]) -> Any:
    from agents import FunctionTool as AgentsFunctionTool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import response_span
    from agents.usage import Usage, model_usage_to_span_usage
    from openai.types.responses import (
        FunctionTool,
        Response,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseUsage,
    )
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    calls: list[dict[str, Any]] = scenario["calls"]

    class ScriptedModel(Model):
        """One function call per model call, in the scenario's order, then the answer."""

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            *,
            previous_response_id: Any = None,
            conversation_id: Any = None,
            prompt: Any = None,
        ) -> Any:
            items = input if isinstance(input, list) else []
            made = sum(1 for item in items if isinstance(item, dict) and item.get("type") == "function_call")
            # What a provider answers, in the Responses API's own types.
            with response_span(disabled=tracing.is_disabled()) as span:
                if made < len(calls):
                    output: list[Any] = [
                        ResponseFunctionToolCall(
                            type="function_call",
                            id=f"fc_{made + 1:02d}",
                            call_id=f"call_{made + 1:02d}",
                            name=scenario["tool"],
                            arguments=json.dumps(calls[made]),
                            status="completed",
                        )
                    ]
                    out_tokens = 20
                else:
                    output = [
                        ResponseOutputMessage(
                            type="message",
                            id="msg_final",
                            role="assistant",
                            status="completed",
                            content=[ResponseOutputText(type="output_text", text=scenario["answer"], annotations=[])],
                        )
                    ]
                    out_tokens = 16
                in_tokens = 60 + 40 * made
                response = Response(
                    id=f"resp_{made + 1:02d}",
                    object="response",
                    created_at=time.time(),
                    model="scripted",
                    instructions=system_instructions,
                    output=output,
                    parallel_tool_calls=False,
                    tool_choice="auto",
                    tools=[
                        FunctionTool(
                            type="function",
                            name=t.name,
                            description=t.description,
                            parameters=t.params_json_schema,
                            strict=t.strict_json_schema,
                        )
                        for t in tools
                        if isinstance(t, AgentsFunctionTool)
                    ],
                    status="completed",
                    usage=ResponseUsage(
                        input_tokens=in_tokens,
                        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                        output_tokens=out_tokens,
                        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
                        total_tokens=in_tokens + out_tokens,
                    ),
                )
                usage = Usage(
                    requests=1,
                    input_tokens=in_tokens,
                    output_tokens=out_tokens,
                    total_tokens=in_tokens + out_tokens,
                )
                span.span_data.usage = model_usage_to_span_usage(usage)
                if tracing.include_data():
                    span.span_data.response = response
                    span.span_data.input = input
            return ModelResponse(output=list(response.output), usage=usage, response_id=response.id)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return ScriptedModel()


def build_function_tool(scenario: dict[str, Any]) -> Any:
    from agents import function_tool

    # harness.tool_functions as coroutines: the SDK runs these on the event loop
    # (a plain function tool it would run in a worker thread, asyncio.to_thread).
    call_upstream = Upstream(scenario, HTTPError).call_async

    async def search_flights(origin: str, destination: str, date: str) -> str:
        """Search flights.

        Args:
            origin: IATA code of the departure airport.
            destination: IATA code of the arrival airport.
            date: Departure date, YYYY-MM-DD.
        """
        return await call_upstream(origin=origin, destination=destination, date=date)

    async def web_search(query: str) -> str:
        """Search the web.

        Args:
            query: What to search for.
        """
        return await call_upstream(query=query)

    def error_message(ctx: Any, error: Exception) -> str:
        """Tell the model what went wrong (the SDK's default says only that something did)."""
        return str(error)

    fn = {"search_flights": search_flights, "web_search": web_search}[scenario["tool"]]
    if scenario["error_function"] == "message":
        return function_tool(fn, failure_error_function=error_message)
    return function_tool(fn)  # the SDK's default_tool_error_function


async def run(scenario: dict[str, Any], session: str, endpoint: str, spans_out: str) -> Any:
    from agents import Agent, Runner
    from openinference.instrumentation import using_session

    model = scripted_model(scenario)
    if not scenario["mcp"]:
        agent = Agent(
            name=scenario["agent"],
            instructions="You are a helpful assistant.",
            model=model,
            tools=[build_function_tool(scenario)],
        )
        with using_session(session):
            return await Runner.run(agent, scenario["prompt"], max_turns=len(scenario["calls"]) + 4)

    from agents.mcp import MCPServerStdio

    params = {
        "command": sys.executable,
        "args": mcp_server_args(scenario["server_args"], spans_out),
        "env": mcp_server_env(endpoint),
    }
    # The SDK's defaults otherwise (cache_tools_list=False: tools/list every turn).
    async with MCPServerStdio(params=params, name=MCP_SERVICE, client_session_timeout_seconds=30) as server:
        agent = Agent(
            name=scenario["agent"],
            instructions="You are a helpful assistant.",
            model=model,
            mcp_servers=[server],
        )
        with using_session(session):
            return await Runner.run(agent, scenario["prompt"], max_turns=len(scenario["calls"]) + 4)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "oai-agents", argv, genai_semconv=True)
    scenario = SCENARIOS[args.scenario]
    session, service = args.session, args.service

    from importlib.metadata import version

    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, service)
    # The MCP SDK traces with the global provider (opentelemetry.trace.get_tracer).
    trace.set_tracer_provider(provider)
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider,
        config=TraceConfig(enable_genai_semconv=True) if args.genai_semconv else None,
    )

    with tempfile.TemporaryDirectory(prefix="oai-agents-") as tmp:
        spans_out = os.path.join(tmp, "mcp-spans.json")
        try:
            result = asyncio.run(run(scenario, session, args.endpoint, spans_out))
        finally:
            instrumentor.uninstrument()
        server_doc: dict[str, Any] | None = None
        if scenario["mcp"]:
            server_doc = read_server_spans(spans_out)
            if server_doc is None:
                return 1
    if not finish(provider, exporter, args.endpoint, server_doc):
        return 1

    tool = scenario["tool"]
    spans = exporter.spans

    # The framework's TOOL spans of the scenario's tool: one per call.
    tools = [s for s in spans if attrs(s).get("openinference.span.kind") == "TOOL" and attrs(s).get("tool.name") == tool]
    # The MCP SDK's client span names the tool only in its span name.
    clients = [s for s in spans if mcp_client_tool(s) == tool]
    records = [span_row(s, tool if (s in tools or s in clients) else None, service=service) for s in spans]
    failures_by_layer = {
        "framework": sum(1 for s in tools if is_error(s)),
    }
    if server_doc is not None:
        records += server_rows(server_doc, service=True)
        failures_by_layer["mcp_client"] = sum(1 for s in clients if is_error(s))
        failures_by_layer["mcp_server"] = server_failures(server_doc, tool)
    doc = {
        "framework": "openai-agents",
        "version": version("openai-agents"),
        "instrumentation": f"openinference-instrumentation-openai-agents {version('openinference-instrumentation-openai-agents')}",
        "mcp": version("mcp") if scenario["mcp"] else None,
        "scenario": args.scenario,
        "genai_semconv": args.genai_semconv,
        "output": str(result.final_output),
        "trace_ids": trace_ids(records),
        "session_id": session,
        "service": service,
        "mcp_service": MCP_SERVICE if scenario["mcp"] else None,
        "tool": tool,
        "tool_calls": len(tools),
        # A call failed if the framework says so, or (MCP) the server does:
        # the SDK's TOOL span stays OK for an isError result.
        "failures": failures_by_layer.get("mcp_server", failures_by_layer["framework"]),
        "failures_by_layer": failures_by_layer,
        "spans": records,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
