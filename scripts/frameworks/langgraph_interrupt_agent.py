"""Run a LangGraph agent that stops for a human offline, resume it, and send its
OpenInference spans to an OTLP/HTTP (protobuf) endpoint.

Control flow is not failure (docs/detection.md §3): a human-in-the-loop
interrupt, or a user cancelling a run, ends a tool's span with an exception
that is no fault of the tool. This harness makes LangGraph do that for real.
The agent is LangGraph's prebuilt ReAct agent (`create_react_agent`, a
`ToolNode` "tools" node, an `InMemorySaver` checkpointer: an interrupt needs
one) named `booking_agent`, with two tools: `search_flights` (returns a JSON
result) and `book_flight`, which asks a human to approve each booking. The
model is a scripted subclass of langchain-core's `BaseChatModel` (no network,
no API key) that makes one tool call per model call from its script, then
answers. The spans are OpenInference's (`openinference-instrumentation-
langchain`), exported by the OTel SDK's real OTLP/HTTP protobuf exporter.
Scenarios (every `invoke` is one graph run = one turn = one trace):

  interrupt       the model calls `search_flights` once, then `book_flight`
                  for three passengers, one after another; `book_flight`
                  calls LangGraph's `interrupt({...})` for approval, which
                  raises `GraphInterrupt` out of the tool, the `ToolNode` (it
                  re-raises every `GraphBubbleUp`) and the graph: the run
                  returns with `__interrupt__`. The human approves with
                  `invoke(Command(resume={"approved": True}))`; the
                  `ToolNode` runs `book_flight` again from its start, where
                  `interrupt()` now returns the answer, and the booking goes
                  through; the model calls `book_flight` for the next
                  passenger, which interrupts again. Four runs: three
                  interrupted `book_flight` calls, three completed.
                  OpenInference records the interrupt on the TOOL span as
                  an `exception` event (`exception.type` `GraphInterrupt`)
                  but ends the span OK: its tracer's
                  `IGNORED_EXCEPTION_PATTERNS` (`^GraphInterrupt\\(`,
                  `^ParentCommand\\(`, `^Command\\(`) set status OK for a run
                  whose error is one of these.
  node-interrupt  the same with the interrupt LangGraph deprecated in 1.0:
                  `book_flight` raises `NodeInterrupt("approve booking …")`
                  until the human has approved (the harness's own flag,
                  set before it resumes with `invoke(None)`). Its run's error
                  is `NodeInterrupt(...)`, which no pattern matches: the
                  TOOL span ends ERROR with the `NodeInterrupt` exception
                  event, as a failure would.
  cancelled       the user gives up waiting: an async run (`ainvoke`) whose
                  first `search_flights` returns and whose second hangs on
                  its upstream is cancelled (`Task.cancel()`) while the tool
                  runs. langchain-core's `BaseTool.arun` reports the
                  `asyncio.CancelledError` to the callbacks (it catches
                  `BaseException`), so the TOOL span ends ERROR with a
                  `CancelledError` exception event; then the user asks again
                  and the search goes through (a second run).

Prints one JSON manifest line on stdout (as harness.py describes; `failed` is
status ERROR, `interrupted` / `cancelled` the TOOL spans that stopped so);
exits 1 if an export batch failed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import warnings
from importlib.metadata import version
from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from openinference.instrumentation import using_session
from openinference.instrumentation.langchain import LangChainInstrumentor

from harness import (
    TOOL_SECONDS,
    Recording,
    attrs,
    emit,
    finish,
    is_error,
    parse_args,
    span_row,
    trace_ids,
    tracer_provider,
)

SEARCH = {"origin": "SFO", "destination": "JFK", "date": "2026-07-29"}
PASSENGERS = ["Ada Lovelace", "Grace Hopper", "Alan Turing"]
SCENARIOS: dict[str, dict[str, Any]] = {
    "interrupt": {
        "calls": [("search_flights", SEARCH)]
        + [("book_flight", {"flight": "UA 1549", "passenger": p}) for p in PASSENGERS],
        "prompt": "Book UA 1549 from SFO to JFK on July 29 for Ada, Grace and Alan.",
        "answer": "All three are booked on UA 1549.",
    },
    "cancelled": {
        "calls": [("search_flights", SEARCH), ("search_flights", {**SEARCH, "date": "2026-07-30"})],
        "prompt": "Find me a flight from SFO to JFK on July 29, or else the 30th.",
        "answer": "UA 1549 leaves SFO at 08:00.",
    },
}
SCENARIOS["node-interrupt"] = SCENARIOS["interrupt"]
AGENT = "booking_agent"


class ScriptedChatModel(BaseChatModel):
    """Replays a script of (tool, arguments): one call per model call, then the answer."""

    calls: list[tuple[str, dict[str, Any]]]
    answer: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": "scripted"}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        made = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
        meta = {"model_name": "scripted"}
        if made < len(self.calls):
            name, args = self.calls[made]
            call = {"name": name, "args": args, "id": f"call_{made + 1:02d}", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call], response_metadata={**meta, "finish_reason": "tool_calls"})
        else:
            message = AIMessage(content=self.answer, response_metadata={**meta, "finish_reason": "stop"})
        return ChatResult(generations=[ChatGeneration(message=message)])


class Human:
    """Who approves bookings: `asked` is the passenger a NodeInterrupt asked about, `approved` those it allowed."""

    def __init__(self) -> None:
        self.approved: set[str] = set()
        self.asked = ""


def found(origin: str, destination: str, date: str) -> str:
    """What the flight search answers."""
    flight = {"flight": "UA 1549", "origin": origin, "destination": destination, "date": date, "departs": "08:00"}
    return json.dumps({"results": [flight]})


def build_tools(scenario_name: str, human: Human, hang: asyncio.Event | None) -> list[Any]:
    searches = {"made": 0}

    async def search_flights(origin: str, destination: str, date: str) -> str:
        """Search flights.

        Args:
            origin: IATA code of the departure airport.
            destination: IATA code of the arrival airport.
            date: Departure date, YYYY-MM-DD.
        """
        i, searches["made"] = searches["made"], searches["made"] + 1
        if hang is not None and i == 1:
            hang.set()  # the upstream never answers this one; the user cancels
            await asyncio.sleep(60)
        await asyncio.sleep(TOOL_SECONDS)
        return found(origin, destination, date)

    def book_flight(flight: str, passenger: str) -> str:
        """Book a seat on a flight; a human approves every booking.

        Args:
            flight: The flight, e.g. "UA 1549".
            passenger: The passenger's full name.
        """
        if scenario_name == "node-interrupt":
            if passenger not in human.approved:
                human.asked = passenger
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # NodeInterrupt is deprecated since 1.0
                    from langgraph.errors import NodeInterrupt

                    raise NodeInterrupt(f"approve booking {flight} for {passenger}?")
        else:
            answer = interrupt({"question": "Approve this booking?", "flight": flight, "passenger": passenger})
            if not answer.get("approved"):
                return json.dumps({"status": "declined", "passenger": passenger})
        time.sleep(TOOL_SECONDS)
        return json.dumps({"status": "booked", "flight": flight, "passenger": passenger, "seat": "12A"})

    if scenario_name == "cancelled":
        search = tool(search_flights)
    else:
        # The same tool, called synchronously: LangGraph's `invoke` runs a sync tool.
        def search_sync(origin: str, destination: str, date: str) -> str:
            time.sleep(TOOL_SECONDS)
            return found(origin, destination, date)

        search = tool("search_flights", description=search_flights.__doc__ or "")(search_sync)
    return [search, tool(book_flight)]


def build_agent(scenario_name: str, human: Human, hang: asyncio.Event | None = None) -> Any:
    scenario = SCENARIOS[scenario_name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated since langgraph 1.0
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(
            ScriptedChatModel(calls=scenario["calls"], answer=scenario["answer"]),
            ToolNode(build_tools(scenario_name, human, hang), handle_tool_errors=True),
            prompt="You are a helpful travel assistant.",
            checkpointer=InMemorySaver(),
            name=AGENT,
        )


def run_interrupts(scenario_name: str, session: str) -> tuple[Any, int]:
    """The interrupt scenarios: run, and resume after every interrupt; the last state and the runs made."""
    human = Human()
    agent = build_agent(scenario_name, human)
    config = {"configurable": {"thread_id": session}}
    state = agent.invoke({"messages": [("user", SCENARIOS[scenario_name]["prompt"])]}, config=config)
    runs = 1
    while state.get("__interrupt__"):
        if runs > 10:
            raise RuntimeError("the agent keeps interrupting")
        if scenario_name == "node-interrupt":
            human.approved.add(human.asked)  # the human approves the booking it was asked about
            state = agent.invoke(None, config=config)
        else:
            state = agent.invoke(Command(resume={"approved": True}), config=config)
        runs += 1
    return state, runs


def run_cancelled(session: str) -> tuple[Any, int]:
    """The cancelled scenario: a run cancelled while its second search hangs, then a run that answers."""
    human = Human()

    async def go() -> Any:
        hang = asyncio.Event()
        agent = build_agent("cancelled", human, hang)
        config = {"configurable": {"thread_id": session}}
        prompt = SCENARIOS["cancelled"]["prompt"]
        task = asyncio.create_task(agent.ainvoke({"messages": [("user", prompt)]}, config=config))
        await hang.wait()
        await asyncio.sleep(TOOL_SECONDS)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        # The user asks again, in a new conversation: the upstream answers now.
        again = build_agent("cancelled", human, None)
        return await again.ainvoke(
            {"messages": [("user", prompt)]}, config={"configurable": {"thread_id": session + "-again"}}
        )

    return asyncio.run(go()), 2


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, SCENARIOS, "langgraph", argv)
    session = args.session
    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=10))
    provider = tracer_provider(exporter, args.service)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with using_session(session):
            if args.scenario == "cancelled":
                state, runs = run_cancelled(session)
            else:
                state, runs = run_interrupts(args.scenario, session)
    finally:
        instrumentor.uninstrument()
    if not finish(provider, exporter, args.endpoint):
        return 1

    def kind(s: ReadableSpan) -> Any:
        return attrs(s).get("openinference.span.kind")

    def stopped(s: ReadableSpan, types: tuple[str, ...]) -> bool:
        return any(e.name == "exception" and (e.attributes or {}).get("exception.type", "").split(".")[-1] in types for e in s.events)

    def interrupted(s: ReadableSpan) -> bool:
        return stopped(s, ("GraphInterrupt", "NodeInterrupt"))

    def cancelled(s: ReadableSpan) -> bool:
        return stopped(s, ("CancelledError",))

    spans = exporter.spans
    tool_spans = [s for s in spans if kind(s) == "TOOL"]
    rows = [
        span_row(s, attrs(s).get("tool.name") if s in tool_spans else None, kind=kind(s), status=s.status.status_code.name)
        | {"interrupted": interrupted(s), "cancelled": cancelled(s)}
        for s in spans
    ]
    doc = {
        "framework": "langgraph",
        "version": version("langgraph"),
        "instrumentation": f"openinference-instrumentation-langchain {version('openinference-instrumentation-langchain')}",
        "langchain_core": version("langchain-core"),
        "scenario": args.scenario,
        "output": str(state["messages"][-1].content),
        "runs": runs,
        "trace_ids": trace_ids(rows),
        "session_id": session,
        "tools": sorted({str(attrs(s).get("tool.name")) for s in tool_spans}),
        "tool_calls": len(tool_spans),
        "failures": sum(1 for s in tool_spans if is_error(s) and not interrupted(s) and not cancelled(s)),
        "errored_spans": sum(1 for s in tool_spans if is_error(s)),
        "interrupted": sum(1 for s in tool_spans if interrupted(s)),
        "cancelled": sum(1 for s in tool_spans if cancelled(s)),
        "service": args.service,
        "spans": rows,
    }
    emit(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
