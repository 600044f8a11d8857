"""Run one LangGraph agent turn offline and send its OpenInference spans to an
OTLP/HTTP (protobuf) endpoint.

The agent is LangGraph's prebuilt ReAct agent (`create_react_agent`: an
"agent" node calling the chat model, a `ToolNode` "tools" node, and the
`tools_condition` loop between them); the model is a scripted subclass of
langchain-core's `BaseChatModel` (no network, no API key) whose `bind_tools`
binds OpenAI-format tool schemas the way a provider's chat model does and
whose `_generate` returns an `AIMessage` with one tool call per turn, deciding
from the messages so far which call to make next and when to give the final
answer. The spans are OpenInference's
(`openinference-instrumentation-langchain`: a langchain-core callback tracer
that turns every run — graph, node, chat model, tool — into a span), exported
by the OTel SDK's real OTLP/HTTP protobuf exporter. Scenarios (one agent run =
one turn = one trace):

  storm    the model calls `search_flights` 8 times with the same arguments;
           the upstream is dead, so every call raises
           HTTPError("HTTP 503 Service Unavailable"); then the model gives up
           with a final answer.
  healthy  a research agent calls `web_search` 8 times with 8 different
           queries; calls 3 and 7 raise HTTPError("HTTP 404 Not Found"), the
           rest return a JSON result; final answer.
  storm-toolexception
           storm, but the tool fails the way langchain-core offers to tools
           themselves: it raises `ToolException("HTTP 503 Service
           Unavailable")` and has `handle_tool_error=True`. Then `BaseTool.run`
           turns the exception into its result (a ToolMessage with
           status="error" and the exception's text as content) and reports
           `on_tool_end`, not `on_tool_error`: the TOOL span ends OK, and the
           failure is only in its `output.value` (the serialized ToolMessage,
           `"status": "error"`).
  storm-subagents
           the storm split between two sub-agents: a plain `StateGraph`
           "travel_supervisor" (no agent of its own) whose node "flights"
           runs the ReAct agent "flights_agent" and whose next node
           "flights_backup" then runs "flights_agent_backup" (the same
           agent under another name, as a fallback), each on the user's
           request alone. Each sub-agent calls `search_flights` 4 times with
           the same arguments, each call raising the 503 as in storm, then
           gives up with the final answer; the supervisor keeps each
           sub-agent's last message.

How LangGraph handles a failing tool: `ToolNode`'s default
`handle_tool_errors` (`_default_handle_tool_errors`) only turns argument
validation errors (`ToolInvocationError`) into a message for the model and
re-raises everything else, which would end the graph run at the first failed
call. An agent meant to survive tool failures says
`ToolNode(tools, handle_tool_errors=True)`, as this one does: the exception
becomes a `ToolMessage(status="error", content="Error: HTTPError('HTTP 503
Service Unavailable')\\n Please fix your mistakes.")` that the model sees, and
the run goes on. langchain-core's `BaseTool.run` has already reported the
exception to the callbacks (`on_tool_error`) before it propagates to the
`ToolNode`, so the OpenInference TOOL span ends with status ERROR and an
`exception` event, and has no `output.value`.

How OpenInference draws storm-subagents: the supervisor graph is the root
span, kind CHAIN ("travel_supervisor": the instrumentor calls a run AGENT
only when its name contains "agent", else a graph run is a CHAIN); each node
is a CHAIN span under it ("flights", "flights_backup"), and the sub-agent the
node invokes is an AGENT span under the node (a runnable invoked inside a
node inherits the node's callbacks, so its runs nest there), with its own
"agent" / "tools" node spans and, under each "tools", one TOOL span. One
trace: 4 TOOL spans under each sub-agent's AGENT span.

The session is openinference's `using_session(...)` context (`session.id` on
every span); it is also LangGraph's `thread_id` (the `configurable` key a
checkpointer keys conversations by), which LangGraph copies into the runs'
metadata, where the instrumentor reads it as the session id too.

Prints one JSON manifest line on stdout; exits 1 if an export batch failed.
A TOOL span counts as failed (`failed`, `failures`) when its status is ERROR
or its `output.value` is a ToolMessage with status "error" (storm-toolexception).
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version
from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from openinference.instrumentation import using_session
from openinference.instrumentation.langchain import LangChainInstrumentor

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

# The agents are named in snake_case, like the graphs' nodes.
SCENARIOS: dict[str, dict[str, Any]] = {
    "storm": {**harness.STORM, "agent": "travel_agent"},
    "healthy": {**harness.HEALTHY, "agent": "research_agent"},
}
SCENARIOS["storm-toolexception"] = {**SCENARIOS["storm"], "tool_exception": True}
# Each sub-agent replays `calls` (4 of the storm's); the tool fails all 8.
SCENARIOS["storm-subagents"] = {
    **SCENARIOS["storm"],
    "supervisor": "travel_supervisor",
    "agents": {"flights": "flights_agent", "flights_backup": "flights_agent_backup"},  # node: sub-agent, in order
    "calls": SCENARIOS["storm"]["calls"][:4],
}


class HTTPError(Exception):
    """What an HTTP client raises for a non-2xx answer."""


class ScriptedChatModel(BaseChatModel):
    """Replays a script: one tool call per turn until the calls run out, then the answer."""

    tool_name: str
    calls: list[dict[str, Any]]
    answer: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": "scripted"}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        # What a provider's chat model does: bind the tools' JSON schemas as the
        # `tools` request parameter.
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        made = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
        inp = 60 + 40 * made
        if made < len(self.calls):
            message = AIMessage(
                content="",
                tool_calls=[{"name": self.tool_name, "args": self.calls[made], "id": f"call_{made + 1:02d}", "type": "tool_call"}],
                usage_metadata={"input_tokens": inp, "output_tokens": 20, "total_tokens": inp + 20},
                response_metadata={"finish_reason": "tool_calls", "model_name": "scripted"},
            )
        else:
            message = AIMessage(
                content=self.answer,
                usage_metadata={"input_tokens": inp, "output_tokens": 16, "total_tokens": inp + 16},
                response_metadata={"finish_reason": "stop", "model_name": "scripted"},
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_tools(scenario: dict[str, Any]) -> list[Any]:
    upstream = Upstream(scenario, ToolException if scenario.get("tool_exception") else HTTPError)
    chosen = tool(tool_functions(upstream)[scenario["tool"]])
    if scenario.get("tool_exception"):
        chosen.handle_tool_error = True  # a ToolException becomes the tool's (error) result
    return [chosen]


def build_react_agent(scenario: dict[str, Any], name: str, tools: list[Any]) -> Any:
    # create_react_agent is deprecated since langgraph 1.0 in favour of
    # langchain.agents.create_agent (the `langchain` package), but still the
    # graph LangGraph itself ships; silence the warning so stderr stays clean.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(
            ScriptedChatModel(tool_name=scenario["tool"], calls=scenario["calls"], answer=scenario["answer"]),
            ToolNode(tools, handle_tool_errors=True),
            prompt="You are a helpful assistant.",
            name=name,
        )


def build_agent(scenario: dict[str, Any]) -> Any:
    tools = build_tools(scenario)
    if "supervisor" not in scenario:
        return build_react_agent(scenario, scenario["agent"], tools)

    from langgraph.graph import END, START, MessagesState, StateGraph

    def run(agent: Any) -> Any:
        def node(state: MessagesState) -> dict[str, Any]:
            # The sub-agent gets the user's request alone; the supervisor keeps its answer.
            result = agent.invoke({"messages": [state["messages"][0]]})
            return {"messages": [result["messages"][-1]]}

        return node

    graph = StateGraph(MessagesState)
    previous = START
    for node, name in scenario["agents"].items():
        graph.add_node(node, run(build_react_agent(scenario, name, tools)))
        graph.add_edge(previous, node)
        previous = node
    graph.add_edge(previous, END)
    return graph.compile(name=scenario["supervisor"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "langgraph", argv)
    scenario = SCENARIOS[args.scenario]
    session = args.session

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, args.service)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        agent = build_agent(scenario)
        with using_session(session):
            state = agent.invoke(
                {"messages": [("user", scenario["prompt"])]},
                # 8 tool calls take 17 supersteps (agent, then tools+agent per
                # call). No recursion_limit: LangGraph 1.2's default is 10007
                # (LANGGRAPH_DEFAULT_RECURSION_LIMIT; it was 25), so it is no
                # brake on a storm either.
                config={"configurable": {"thread_id": session}},
            )
    finally:
        instrumentor.uninstrument()
    if not finish(provider, exporter, args.endpoint):
        return 1

    def kind(s: ReadableSpan) -> Any:
        return attrs(s).get("openinference.span.kind")

    def failed(s: ReadableSpan) -> bool:
        if is_error(s):
            return True
        if kind(s) != "TOOL":
            return False
        try:
            out = json.loads(str(attrs(s).get("output.value", "")))
        except ValueError:
            return False
        return isinstance(out, dict) and out.get("type") == "tool" and out.get("data", {}).get("status") == "error"

    spans = exporter.spans
    tool_spans = [s for s in spans if kind(s) == "TOOL"]
    rows = [
        span_row(s, attrs(s).get("tool.name") if s in tool_spans else None, failed(s), kind=kind(s)) for s in spans
    ]
    doc = {
        "framework": "langgraph",
        "version": version("langgraph"),
        "instrumentation": f"openinference-instrumentation-langchain {version('openinference-instrumentation-langchain')}",
        "langchain_core": version("langchain-core"),
        "scenario": args.scenario,
        "output": str(state["messages"][-1].content),
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "tool": scenario["tool"],
        "tool_calls": len(tool_spans),
        "failures": sum(1 for s in tool_spans if failed(s)),
        "service": args.service,
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
