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

import argparse
import json
import sys
import time
from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

import pydantic_ai
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

FAILURE = "upstream 503 Service Unavailable"
TOOL_SECONDS = 0.015  # each tool call takes a little time, as a real one would

SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {
        "agent": "travel-agent",
        "tool": "search_flights",
        "calls": [{"origin": "SFO", "destination": "JFK", "date": "2026-07-29"}] * 12,
        "fail": set(range(12)),
        "prompt": "Find me a flight from SFO to JFK on July 29.",
        "answer": "Sorry, the flight search is down right now. Please try again later.",
    },
    "healthy": {
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
                "hedged requests tail latency",
                "bulkhead isolation pattern",
            ]
        ],
        "fail": {2, 6},  # the 3rd and 7th calls; never adjacent
        "prompt": "Write a short brief on how services should retry.",
        "answer": "Here is a brief on retries, backoff and circuit breakers.",
    },
}


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
    made = 0

    def call_upstream(**kwargs: Any) -> str:
        nonlocal made
        i, made = made, made + 1
        time.sleep(TOOL_SECONDS)
        if i in scenario["fail"]:
            # What a tool wrapping an HTTP client does with a 503: tell the model.
            raise ModelRetry(FAILURE)
        return json.dumps({"results": [f"result {i + 1} for {json.dumps(kwargs, sort_keys=True)}"]})

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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--endpoint", required=True, help="full traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    ap.add_argument("--session", default=None, help="conversation id (default: pydantic-ai-<scenario>)")
    args = ap.parse_args(argv)
    scenario = SCENARIOS[args.scenario]
    session = args.session or f"pydantic-ai-{args.scenario}"

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = TracerProvider(resource=Resource.create({"service.name": f"pydantic-ai-{args.scenario}"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    agent = build_agent(scenario, provider)
    result = agent.run_sync(scenario["prompt"], conversation_id=session)
    provider.force_flush()
    provider.shutdown()
    if exporter.failures:
        print(f"error: {exporter.failures} export batch(es) to {args.endpoint} failed", file=sys.stderr)
        return 1

    spans = exporter.spans
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
    traces = sorted({format(s.context.trace_id, "032x") for s in spans})
    doc = {
        "framework": "pydantic-ai",
        "version": pydantic_ai.__version__,
        "scenario": args.scenario,
        "output": result.output,
        "trace_ids": traces,
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(tools),
        "failures": sum(1 for s in tools if s.status.status_code is StatusCode.ERROR),
        "spans": [
            {
                "trace_id": format(s.context.trace_id, "032x"),
                "span_id": format(s.context.span_id, "016x"),
                "name": s.name,
                "tool_name": (s.attributes or {}).get("gen_ai.tool.name") if s in tools else None,
                "failed": s.status.status_code is StatusCode.ERROR,
            }
            for s in spans
        ],
    }
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
