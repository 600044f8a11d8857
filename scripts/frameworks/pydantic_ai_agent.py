"""Run one pydantic-ai agent turn offline and send its own OpenTelemetry spans
to an OTLP/HTTP (protobuf) endpoint.

The model is pydantic-ai's `FunctionModel` (no network, no API key): a plain
function that decides, from the messages so far, which tool call to make next
and when to give the final answer. The tool spans are pydantic-ai's own
(`Instrumentation` capability), exported by the real OTLP/HTTP protobuf
exporter. Scenarios (one agent run = one turn = one trace):

  storm    the model calls `search_flights` with the same arguments 12 times;
           the upstream is dead, so every call raises ModelRetry("upstream 503
           Service Unavailable") (a plain exception would end the run: see
           below); then the model gives up with a final answer.
  healthy  a research agent calls `web_search` 10 times with 10 different
           queries; calls 3 and 7 fail the same way (a blip, then it moves on);
           final answer.

How pydantic-ai records a failing tool: a plain exception raised by a tool
ends the whole run (the tool span and the agent span get status ERROR and an
`exception` event, and `Agent.run` raises). A failure the model should see
is `ModelRetry` (counted against the tool's `retries` budget; the span gets
status ERROR, an exception event of type
`pydantic_ai.exceptions.ToolRetryError`, the message as
`gen_ai.tool.call.result`, and `pydantic_ai.tool.retry.*`) or `ToolFailed`
(no budget). The session is the run's `conversation_id`, which pydantic-ai
puts on every span as `gen_ai.conversation.id`.

Prints one JSON manifest line on stdout: the trace id, tool, the number of
tool calls and failures, and every exported span.
"""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

import pydantic_ai
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from harness import (
    HEALTHY,
    STORM,
    Recording,
    Upstream,
    attrs,
    emit,
    finish,
    is_error,
    parse_args,
    span_row,
    trace_ids,
    tracer_provider,
)

FAILURE = "upstream 503 Service Unavailable"

# Here the storm is 12 calls and the healthy turn 10 searches (2 more queries),
# every failure with the same words (see the docstring).
MORE_QUERIES = ["hedged requests tail latency", "bulkhead isolation pattern"]
SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {**STORM, "calls": STORM["calls"][:1] * 12, "fail": set(range(12)), "error": FAILURE},
    "healthy": {**HEALTHY, "calls": HEALTHY["calls"] + [{"query": q} for q in MORE_QUERIES], "error": FAILURE},
}


def build_agent(scenario: dict[str, Any], provider: TracerProvider) -> Agent:
    calls: list[dict[str, Any]] = scenario["calls"]
    tool_name: str = scenario["tool"]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(1 for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart))
        if made < len(calls):
            return ModelResponse(parts=[ToolCallPart(tool_name, calls[made], tool_call_id=f"call_{made + 1:02d}")])
        return ModelResponse(parts=[TextPart(scenario["answer"])])

    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = Agent(FunctionModel(model, model_name="scripted"), name=scenario["agent"], capabilities=[instrumentation])
    # What a tool wrapping an HTTP client does with a 503: tell the model.
    call_upstream = Upstream(scenario, ModelRetry)

    def search_flights(origin: str, destination: str, date: str) -> str:
        """Search flights."""
        return call_upstream(origin=origin, destination=destination, date=date)

    def web_search(query: str) -> str:
        """Search the web."""
        return call_upstream(query=query)

    # The retry budget is the tool's own (default 1): high enough for every
    # failing round of the storm, so the run ends with the model's answer.
    tool = {"search_flights": search_flights, "web_search": web_search}[tool_name]
    agent.tool_plain(retries=len(scenario["fail"]))(tool)
    return agent


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "pydantic-ai", argv, session="conversation id")
    scenario = SCENARIOS[args.scenario]
    session = args.session

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, args.service)
    agent = build_agent(scenario, provider)
    result = agent.run_sync(scenario["prompt"], conversation_id=session)
    if not finish(provider, exporter, args.endpoint):
        return 1

    spans = exporter.spans
    tools = [s for s in spans if attrs(s).get("gen_ai.operation.name") == "execute_tool"]
    rows = [span_row(s, attrs(s).get("gen_ai.tool.name") if s in tools else None) for s in spans]
    doc = {
        "framework": "pydantic-ai",
        "version": pydantic_ai.__version__,
        "scenario": args.scenario,
        "output": result.output,
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(tools),
        "failures": sum(1 for s in tools if is_error(s)),
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
