"""Run one smolagents agent turn offline and send its OpenInference spans to
an OTLP/HTTP (protobuf) endpoint.

The agent is a `ToolCallingAgent`; the model is a scripted subclass of
smolagents' `Model` (no network, no API key) whose `generate` returns a
`ChatMessage` with one tool call per step, and finally a call of smolagents'
built-in `final_answer` tool. The spans are OpenInference's
(`openinference-instrumentation-smolagents`, which wraps `MultiStepAgent.run`,
`ToolCallingAgent._step_stream`, `Tool.__call__` and `<Model>.generate`),
exported by the OTel SDK's real OTLP/HTTP protobuf exporter. Scenarios (one
agent run = one turn = one trace):

  storm    the model calls `search_flights` 8 times with the same arguments;
           the upstream is dead, so every call raises
           RuntimeError("HTTP 503 Service Unavailable"); then the model gives
           up with a final answer.
  healthy  a research agent calls `web_search` 8 times with 8 different
           queries; calls 3 and 7 raise RuntimeError("HTTP 404 Not Found"),
           the rest return a JSON result; final answer.

How smolagents handles a failing tool: `execute_tool_call` wraps the
exception in `AgentToolExecutionError` ("Error executing tool 'search_flights'
with arguments {...}: RuntimeError: HTTP 503 Service Unavailable\nPlease try
again or use another tool"), which propagates out of `_step_stream`; the run
loop (`_run_stream`) catches it as an `AgentError`, records it as
`step.error`, and the next model call sees it as a "tool-response" message
("Error:\n..."), so the run goes on. The TOOL span (named after the tool's
class, `SimpleTool` for a `@tool` function; the tool's name is `tool.name`)
is opened around `Tool.__call__` by `start_as_current_span`, so it ends with
status ERROR, description "RuntimeError: HTTP 503 Service Unavailable", an
`exception` event, and no `output.value`. The enclosing "Step N" CHAIN span
also ends ERROR (description "AgentToolExecutionError: Error executing tool
..."), with two identical `exception` events (the wrapper's own
`record_exception` and `start_as_current_span`'s): the instrumentor's
`agent.step_recovery` event path (status OK for expected tool errors) is only
taken when the step ends without raising, which smolagents 1.26 does not do
for tool errors.

smolagents reports its built-in `final_answer` tool as a TOOL span too
(`FinalAnswerTool`, `tool.name` = final_answer, output.value = the answer):
it is bookkeeping, not a call of the agent's tool, so the manifest lists it
with `tool_name` null and does not count it in `tool_calls`.

The instrumentor only wraps `generate` of the `Model` classes it finds in
the `smolagents` module's namespace, so a user's own `Model` subclass gets no
LLM span. To record what a real provider model (OpenAIModel, LiteLLMModel,
...) would, the scripted model is put into that namespace before
`instrument()`.

The session is openinference's `using_session(...)` context, which puts
`session.id` on every span started inside it.

Prints one JSON manifest line on stdout; exits 1 if an export batch failed.
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

import smolagents
from openinference.instrumentation import TraceConfig, using_session
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from openinference.instrumentation.smolagents.version import __version__ as oi_smolagents_version
from smolagents import ChatMessage, Model, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import LogLevel, TokenUsage

TOOL_SECONDS = 0.015  # each tool call takes a little time, as a real one would

SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {
        "agent": "travel_agent",
        "tool": "search_flights",
        "calls": [{"origin": "SFO", "destination": "JFK", "date": "2026-07-29"}] * 8,
        "fail": set(range(8)),
        "error": "HTTP 503 Service Unavailable",
        "prompt": "Find me a flight from SFO to JFK on July 29.",
        "answer": "Sorry, the flight search is down right now. Please try again later.",
    },
    "healthy": {
        "agent": "research_agent",
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


class ScriptedModel(Model):
    """One tool call per step, in the scenario's order, then `final_answer`."""

    def __init__(self, scenario: dict[str, Any]) -> None:
        super().__init__(model_id="scripted")
        self.scenario = scenario
        self.step = 0

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        i, self.step = self.step, self.step + 1
        calls = self.scenario["calls"]
        if i < len(calls):
            name, arguments = self.scenario["tool"], calls[i]
        else:
            name, arguments = "final_answer", {"answer": self.scenario["answer"]}
        call = ChatMessageToolCall(
            # A provider API sends the arguments as a JSON string; smolagents parses it.
            function=ChatMessageToolCallFunction(name=name, arguments=json.dumps(arguments)),
            id=f"call_{i + 1:02d}",
            type="function",
        )
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=None,
            tool_calls=[call],
            token_usage=TokenUsage(input_tokens=100 + 20 * i, output_tokens=20),
        )


def build_tools(scenario: dict[str, Any]) -> list[Any]:
    made = 0

    def call_upstream(**kwargs: Any) -> str:
        nonlocal made
        i, made = made, made + 1
        time.sleep(TOOL_SECONDS)
        if i in scenario["fail"]:
            # What a tool wrapping an HTTP client does with an error status.
            raise RuntimeError(scenario["error"])
        return json.dumps({"results": [f"result {i + 1} for {json.dumps(kwargs, sort_keys=True)}"]})

    @tool
    def search_flights(origin: str, destination: str, date: str) -> str:
        """Search flights.

        Args:
            origin: IATA code of the departure airport.
            destination: IATA code of the arrival airport.
            date: Departure date, YYYY-MM-DD.
        """
        return call_upstream(origin=origin, destination=destination, date=date)

    @tool
    def web_search(query: str) -> str:
        """Search the web.

        Args:
            query: What to search for.
        """
        return call_upstream(query=query)

    return [{"search_flights": search_flights, "web_search": web_search}[scenario["tool"]]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--endpoint", required=True, help="full traces URL, e.g. http://127.0.0.1:4318/v1/traces")
    ap.add_argument("--session", default=None, help="session id (default: smolagents-<scenario>)")
    ap.add_argument(
        "--genai-semconv",
        action="store_true",
        help="also emit OTel gen_ai.* attributes (OpenInference's opt-in enable_genai_semconv; off by default)",
    )
    args = ap.parse_args(argv)
    scenario = SCENARIOS[args.scenario]
    session = args.session or f"smolagents-{args.scenario}"

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = TracerProvider(resource=Resource.create({"service.name": f"smolagents-{args.scenario}"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))

    # See the module docstring: the instrumentor wraps `generate` only of the
    # Model classes in the smolagents namespace.
    smolagents.ScriptedModel = ScriptedModel  # type: ignore[attr-defined]
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider,
        config=TraceConfig(enable_genai_semconv=True) if args.genai_semconv else None,
    )
    try:
        agent = ToolCallingAgent(
            tools=build_tools(scenario),
            model=ScriptedModel(scenario),
            name=scenario["agent"],
            max_steps=len(scenario["calls"]) + 4,  # 8 tool steps + the final answer, with room to spare
            verbosity_level=LogLevel.OFF,  # smolagents logs to stdout; keep it for the manifest
        )
        with using_session(session):
            output = agent.run(scenario["prompt"])
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    provider.shutdown()
    if exporter.failures:
        print(f"error: {exporter.failures} export batch(es) to {args.endpoint} failed", file=sys.stderr)
        return 1

    def kind(s: ReadableSpan) -> Any:
        return (s.attributes or {}).get("openinference.span.kind")

    spans = exporter.spans
    tool_spans = [s for s in spans if kind(s) == "TOOL"]
    # final_answer is a TOOL span too, but bookkeeping, not a call of the agent's tool.
    calls = [s for s in tool_spans if (s.attributes or {}).get("tool.name") == scenario["tool"]]
    traces = sorted({format(s.context.trace_id, "032x") for s in spans})
    doc = {
        "framework": "smolagents",
        "version": smolagents.__version__,
        "instrumentation": f"openinference-instrumentation-smolagents {oi_smolagents_version}",
        "scenario": args.scenario,
        "output": str(output),
        "trace_ids": traces,
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(calls),
        "failures": sum(1 for s in calls if s.status.status_code is StatusCode.ERROR),
        "service": f"smolagents-{args.scenario}",
        "spans": [
            {
                "trace_id": format(s.context.trace_id, "032x"),
                "span_id": format(s.context.span_id, "016x"),
                "name": s.name,
                "kind": kind(s),
                "tool_name": (s.attributes or {}).get("tool.name") if s in calls else None,
                "failed": s.status.status_code is StatusCode.ERROR,
            }
            for s in spans
        ],
    }
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
