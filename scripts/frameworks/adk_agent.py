"""Run one Google ADK agent turn offline and send ADK's own OpenTelemetry spans
to an OTLP/HTTP (protobuf) endpoint.

The agent is an `LlmAgent` run by an `InMemoryRunner` (one
`runner.run_async` = one turn = one trace); the model is a scripted subclass
of ADK's `BaseLlm` (no network, no API key) whose `generate_content_async`
yields one `LlmResponse` per model call: a function call, decided from the
function calls already in the request's contents, and finally a text answer.
Every response carries finish_reason STOP and usage metadata, as Gemini's do
(ADK ends its `generate_content` span at the response that has a finish
reason). The function calls carry no id, as Gemini's usually do not, so ADK
gives them its own (`adk-<uuid>`). The spans are ADK's own (instrumentation
scope `gcp.vertex.agent`): ADK's tracer is the global one, so setting an SDK
TracerProvider as the global provider is all it takes; the real OTLP/HTTP
protobuf exporter sends them. ADK's default telemetry schema (v2,
`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN` unset) is used throughout. Scenarios:

  storm-reflect  content capture on; the model calls `search_flights` 8 times
                 with the same arguments; the upstream is dead, so every call
                 raises HTTPError("HTTP 503 Service Unavailable"), which
                 ADK's `ReflectAndRetryToolPlugin` answers with its reflection
                 dict; then the model gives up with a final answer.
  storm-dict     content capture on; the same 8 calls, but the tool returns
                 ADK's documented error dict {"status": "error",
                 "error_message": "HTTP 503 Service Unavailable"} instead of
                 raising (the plugin is installed too; it lets a returned
                 dict through untouched).
  storm-default  storm-reflect with content capture left at ADK's default
                 (no capture variable set): what a default user sends.
  storm-handoff  content capture on; the same 8 calls, made by a sub-agent:
                 the root agent `support_desk` (sub_agents=[billing_agent])
                 hands the request to `billing_agent` with ADK's own transfer
                 (its model calls `transfer_to_agent`, as Gemini does);
                 billing_agent calls `search_flights` 4 times, each raising
                 as in storm-reflect, then transfers back to support_desk,
                 which hands the request to billing_agent again; billing_agent
                 calls the tool 4 more times, then gives up with the final
                 answer.
  healthy        content capture on; a research agent calls `web_search` 8
                 times with 8 different queries; calls 3 and 7 raise
                 HTTPError("HTTP 404 Not Found"), answered by the plugin as in
                 storm-reflect; the rest return a JSON result; final answer.

"Content capture on" is OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=
SPAN_ONLY, the switch ADK's default schema v2 reads for content on its spans
(`gen_ai.tool.call.arguments` / `gen_ai.tool.call.result` on execute_tool,
`gen_ai.input.messages` / `gen_ai.output.messages` /
`gen_ai.system_instructions` on generate_content). With nothing set it
resolves to NO_CONTENT: no arguments, no results, no messages.
ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS (default on) governs only the legacy
schema v1 attributes (`gcp.vertex.agent.tool_call_args` /
`gcp.vertex.agent.tool_response`), which v2 does not emit. Every ADK and OTel
GenAI switch is cleared first so that the scenario alone decides.

How ADK records a failing tool: `record_tool_execution` opens `execute_tool
<name>` around the whole tool pipeline (before-tool callbacks, the tool,
on_tool_error callbacks, after-tool callbacks). An exception that an
`on_tool_error` callback answers never reaches the span: the span closes with
status UNSET, no `exception` event, no `error.type`, and the callback's dict
is the recorded result. ADK marks a span failed only when the exception
escapes (status ERROR, `error.type` = the exception's class name, `exception`
events; the description ends up "<class>: <message>", as the OTel SDK's
`start_as_current_span` overwrites ADK's "<class>"), or when the tool's
`_detect_error_in_response` hook names an error type for a returned value; a
plain FunctionTool has no such hook, so the error dict of storm-dict is not
marked either. In neither storm is there any failure mark on the span: the
failure is only in `gen_ai.tool.call.result`, and only with capture on.

ReflectAndRetryToolPlugin: each failure increments a per-invocation,
per-tool counter (a success resets it); while the count is <= max_retries
it answers with {"response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN",
"error_type": "HTTPError", "error_details": "HTTP 503 Service Unavailable",
"retry_count": n, "reflection_guidance": "..."}; past the limit it re-raises
the tool's exception (default throw_exception_if_retry_exceeded=True), which
ends the run with that exception (and that one span with status ERROR).
ADK's default max_retries is 3, so the 4th failing call would end the turn.
We set max_retries=8, the smallest limit that answers all 8 failures, and the
scripted model stops calling after the 8th; so every call is answered and
the run ends with the model's own final answer.

How ADK records a hand-off (storm-handoff): the turn is one
`invoke_workflow support_desk` span (the root agent's), and every stretch an
agent runs is an `invoke_agent <agent>` span directly under it, siblings in
the order they ran: support_desk, billing_agent, support_desk, billing_agent.
Each holds that stretch's `generate_content` and `execute_tool` spans. The
transfer itself is an ordinary `execute_tool transfer_to_agent` span
(`TransferToAgentTool`, a FunctionTool whose function sets
`actions.transfer_to_agent`), the last span of the agent that hands off; the
next `invoke_agent` starts after it. The plugin's counter is per invocation
and per tool, and a transfer stays in the invocation: the 8 failures count
1..8 across both stretches of billing_agent (the transfers' successes reset
only transfer_to_agent's own count), so max_retries=8 answers them all here
too. stormwatch takes transfer_to_agent (scope gcp.vertex.agent) for ADK's
bookkeeping, not a call of the agent's: the manifest lists those spans with
`tool_name` null and does not count them in `tool_calls`. Each agent's
scripted model sees its own function calls as function calls, and what the
other agent did as quoted "For context" text, so the calls it counts are its
own.

The session is the InMemoryRunner session (`--session`, default
adk-<scenario>); ADK writes it as `gen_ai.conversation.id` on the
`invoke_workflow` and `invoke_agent` spans and the `generate_content` spans,
not on `execute_tool`.

Prints one JSON manifest line on stdout; exits 1 if an export batch failed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, AsyncGenerator

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import harness
from harness import (
    Recording,
    Upstream,
    attrs,
    emit,
    finish,
    parse_args,
    span_row,
    tool_functions,
    trace_ids,
    tracer_provider,
)

TRANSFER = "transfer_to_agent"  # ADK's hand-off tool (TransferToAgentTool); bookkeeping, not a call
MAX_RETRIES = 8  # ReflectAndRetryToolPlugin's limit: answers all 8 failures (see the docstring)

# What ADK / OTel read for content capture and the schema; cleared before each run.
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SWITCHES = [
    CAPTURE,
    "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS",
    "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN",
    "ADK_TELEMETRY_IGNORE_RUN_CONFIG",
    "ADK_EXPERIMENTAL_TELEMETRY",
    "ADK_EXPERIMENTAL_TELEMETRY_FEATURES",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
]

# ADK wants agent names that are identifiers.
STORM: dict[str, Any] = {**harness.STORM, "agent": "travel_agent"}
HEALTHY: dict[str, Any] = {**harness.HEALTHY, "agent": "research_agent"}

SCENARIOS: dict[str, dict[str, Any]] = {
    "storm-reflect": {**STORM, "capture": True, "failure": "raise"},
    "storm-dict": {**STORM, "capture": True, "failure": "dict"},
    "storm-default": {**STORM, "capture": False, "failure": "raise"},
    # billing_agent makes the calls; support_desk (the root) hands the request
    # to it, and it hands back once after `handback` calls (see the docstring).
    "storm-handoff": {
        **STORM,
        "agent": "billing_agent",
        "desk": "support_desk",
        "handback": 4,
        "capture": True,
        "failure": "raise",
    },
    "healthy": {**HEALTHY, "capture": True, "failure": "raise"},
}


class HTTPError(Exception):
    """What an HTTP client raises for a non-2xx answer."""


def build_agent(scenario: dict[str, Any]) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    calls: list[dict[str, Any]] = scenario["calls"]
    tool_name: str = scenario["tool"]

    class ScriptedModel(BaseLlm):
        """Replays a script: one function call per model call until the calls run out, then the answer.

        A front desk (`delegate` set) instead transfers every request to that
        agent; a sub-agent with `parent` set transfers back to it once, after
        the scenario's `handback` calls.
        """

        delegate: str | None = None
        parent: str | None = None

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            # This agent's own calls (another agent's reach it as quoted text).
            own = [
                part.function_call
                for content in llm_request.contents
                for part in content.parts or []
                if part.function_call is not None
            ]
            made = sum(1 for fc in own if fc.name == tool_name)
            handed_back = any(fc.name == TRANSFER for fc in own)
            if self.delegate is not None:
                part = types.Part(function_call=types.FunctionCall(name=TRANSFER, args={"agent_name": self.delegate}))
                out = 12
            elif self.parent is not None and made == scenario["handback"] and not handed_back:
                part = types.Part(function_call=types.FunctionCall(name=TRANSFER, args={"agent_name": self.parent}))
                out = 12
            elif made < len(calls):
                part = types.Part(function_call=types.FunctionCall(name=tool_name, args=dict(calls[made])))
                out = 20
            else:
                part = types.Part(text=scenario["answer"])
                out = 16
            inp = 60 + 40 * len(own)
            yield LlmResponse(
                content=types.Content(role="model", parts=[part]),
                finish_reason=types.FinishReason.STOP,
                model_version=self.model,
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=inp, candidates_token_count=out, total_token_count=inp + out
                ),
            )

    upstream = Upstream(scenario, HTTPError)

    def call_upstream(**kwargs: Any) -> Any:
        try:
            return upstream(**kwargs)
        except HTTPError as error:
            if scenario["failure"] != "dict":
                raise
            # ADK's documented way for a tool to report an error without raising
            # (the tool function hands it back as its result).
            return {"status": "error", "error_message": str(error)}

    desk: str | None = scenario.get("desk")
    agent = LlmAgent(
        name=scenario["agent"],
        description="Answers with the help of one tool.",
        model=ScriptedModel(model="scripted", parent=desk),
        instruction="You are a helpful assistant.",
        tools=[tool_functions(call_upstream)[tool_name]],
    )
    if desk is None:
        return agent
    # The root: no tools of its own; ADK offers it transfer_to_agent because
    # it has a sub-agent (and the sub-agent, because it has a parent).
    return LlmAgent(
        name=desk,
        description="The front desk: hands each request to the agent best placed to answer it.",
        model=ScriptedModel(model="scripted", delegate=agent.name),
        instruction="You are the front desk of a travel agency.",
        sub_agents=[agent],
    )


async def run_turn(scenario: dict[str, Any], session: str) -> str:
    from google.adk.plugins.reflect_retry_tool_plugin import ReflectAndRetryToolPlugin
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    runner = InMemoryRunner(
        agent=build_agent(scenario),
        app_name="stormwatch_conformance",
        plugins=[ReflectAndRetryToolPlugin(max_retries=MAX_RETRIES)],
    )
    user = "user"
    await runner.session_service.create_session(app_name=runner.app_name, user_id=user, session_id=session)
    message = types.Content(role="user", parts=[types.Part(text=scenario["prompt"])])
    answer = ""
    async for event in runner.run_async(user_id=user, session_id=session, new_message=message):
        if event.content is not None:
            answer = "".join(p.text or "" for p in event.content.parts or []) or answer
    await runner.close()
    return answer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "adk", argv)
    scenario = SCENARIOS[args.scenario]
    session, service = args.session, args.service

    # ADK reads these when each run's TelemetryConfig is made; set them before.
    for name in SWITCHES:
        os.environ.pop(name, None)
    if scenario["capture"]:
        os.environ[CAPTURE] = "SPAN_ONLY"
    os.environ["OTEL_SERVICE_NAME"] = service

    # ADK's tracer (scope gcp.vertex.agent) comes from the global provider.
    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, None)  # service.name from OTEL_SERVICE_NAME
    trace.set_tracer_provider(provider)

    from google.adk import version as adk_version

    output = asyncio.run(run_turn(scenario, session))
    if not finish(provider, exporter, args.endpoint):
        return 1

    spans = sorted(exporter.spans, key=lambda s: s.start_time or 0)
    # transfer_to_agent's execute_tool spans are ADK's bookkeeping, no call.
    tool_spans = [
        s
        for s in spans
        if attrs(s).get("gen_ai.operation.name") == "execute_tool" and attrs(s).get("gen_ai.tool.name") != TRANSFER
    ]
    calls = [s for s in tool_spans if attrs(s).get("gen_ai.tool.name") == scenario["tool"]]
    # ADK leaves a call answered by a callback unmarked, so which calls failed
    # is the scenario's own knowledge: the i-th call (by start time) failed if
    # i is in the scenario's fail set.
    failed = {id(s) for i, s in enumerate(calls) if i in scenario["fail"]}
    rows = [
        span_row(s, attrs(s).get("gen_ai.tool.name") if s in tool_spans else None, id(s) in failed)
        for s in spans
    ]
    doc = {
        "framework": "google-adk",
        "version": adk_version.__version__,
        "scenario": args.scenario,
        "output": output,
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "service": service,
        "tool": scenario["tool"],
        "tool_calls": len(calls),
        "failures": len(failed),
        "content_capture": scenario["capture"],
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
