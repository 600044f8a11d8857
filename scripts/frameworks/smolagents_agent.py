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

import json
import sys
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan

import smolagents
from openinference.instrumentation import TraceConfig, using_session
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from openinference.instrumentation.smolagents.version import __version__ as oi_smolagents_version
from smolagents import ChatMessage, Model, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import LogLevel, TokenUsage

import harness
from harness import (
    Recording,
    Upstream,
    attrs,
    emit,
    finish,
    is_error,
    parse_args,
    span_row,
    tool_functions,
    trace_ids,
    tracer_provider,
)

# smolagents wants agent names that are identifiers.
SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {**harness.STORM, "agent": "travel_agent"},
    "healthy": {**harness.HEALTHY, "agent": "research_agent"},
}


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
    # What a tool wrapping an HTTP client does with an error status: a RuntimeError.
    upstream = Upstream(scenario, RuntimeError)
    return [tool(tool_functions(upstream)[scenario["tool"]])]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "smolagents", argv, genai_semconv=True)
    scenario = SCENARIOS[args.scenario]
    session = args.session

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, args.service)

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
    if not finish(provider, exporter, args.endpoint):
        return 1

    def kind(s: ReadableSpan) -> Any:
        return attrs(s).get("openinference.span.kind")

    spans = exporter.spans
    tool_spans = [s for s in spans if kind(s) == "TOOL"]
    # final_answer is a TOOL span too, but bookkeeping, not a call of the agent's tool.
    calls = [s for s in tool_spans if attrs(s).get("tool.name") == scenario["tool"]]
    rows = [span_row(s, attrs(s).get("tool.name") if s in calls else None, kind=kind(s)) for s in spans]
    doc = {
        "framework": "smolagents",
        "version": smolagents.__version__,
        "instrumentation": f"openinference-instrumentation-smolagents {oi_smolagents_version}",
        "scenario": args.scenario,
        "output": str(output),
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(calls),
        "failures": sum(1 for s in calls if is_error(s)),
        "service": args.service,
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
