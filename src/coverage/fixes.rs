//! What each gap of the coverage report blinds, and the switch that fixes
//! it, by the instrumentation scope that made the spans: each framework's
//! own documented setting (docs/detection.md §7 lists them with the
//! framework versions they were read from).

use crate::ingest::conventions::under;

/// What each gap blinds.
const BLINDS: &[(&str, &str)] = &[
    (
        "arguments",
        "no arguments recorded: retry-after-success and tool loops cannot run for these tools, and a retry storm cannot tell one request repeated from different requests",
    ),
    (
        "results",
        "no results recorded: a failure that lives only in the result (an error dict, an MCP isError handed to the model) is invisible, and tool loops cannot tell a repeat from progress",
    ),
    (
        "failures",
        "no call failed and no results were recorded: a failure the framework handled and handed the model as output (a retry plugin, an error callback, an error dict, an MCP isError) leaves no mark on the span, so none can be seen here: not a storm, not a spike",
    ),
    (
        "failure_detail",
        "failures without their words: their class is unknown, so retries wasted on errors that can never succeed cannot be told from retryable ones",
    ),
    (
        "session",
        "no session id: signals cannot name the conversation a storm happened in",
    ),
    (
        "agent_turn",
        "no agent span: a turn is the trace's root, which may hold several user requests (read as one turn) or only part of one (a server's span alone: each request its own turn, so no retry storm across them can be seen)",
    ),
    (
        "unknown_shape",
        "tool spans of no known convention: read as OpenTelemetry GenAI by their tool name; their arguments, results and failures may be misread",
    ),
];

/// The fix per gap, by the scope's name: the first row whose name is the
/// scope's or a dotted prefix of it (`openinference` for
/// `openinference.instrumentation.smolagents`; `""` matches any scope, so
/// the general advice comes last).
const FIXES: &[(&str, &str, &str)] = &[
    ("gcp.vertex.agent", "arguments", "Google ADK records no tool arguments by default: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY in the agent's environment (gen_ai.tool.call.arguments on the execute_tool span)"),
    ("gcp.vertex.agent", "results", "Google ADK records no tool results by default, and a failure that ReflectAndRetryToolPlugin, an on_tool_error callback or an error dict returned by the tool handled lives only there: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"),
    ("gcp.vertex.agent", "failures", "Google ADK marks no span when ReflectAndRetryToolPlugin or an on_tool_error callback answers a tool's exception, or the tool returns an error dict; the failure is only in the result: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"),
    ("gcp.vertex.agent", "failure_detail", "Google ADK: set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY so the error dicts (status/error_message, error_type/error_details) reach gen_ai.tool.call.result"),
    ("openinference.instrumentation.openai_agents", "failure_detail", "the OpenAI Agents SDK's default failure_error_function redacts a failed tool's error (\"Tool execution failed. Error details are redacted.\"): give function_tool(..., failure_error_function=...) a function that returns the error's message"),
    ("openinference", "arguments", "OpenInference hides inputs when OPENINFERENCE_HIDE_INPUTS=true (TraceConfig(hide_inputs=True)): unset it so input.value carries the arguments"),
    ("openinference", "results", "OpenInference hides outputs when OPENINFERENCE_HIDE_OUTPUTS=true (TraceConfig(hide_outputs=True)): unset it so output.value carries the result"),
    ("openinference", "session", "wrap each conversation in openinference.instrumentation.using_session(session_id) so every span carries session.id"),
    ("strands", "arguments", "Strands Agents: set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental for gen_ai.tool.call.arguments on the tool span (stormwatch also reads the legacy gen_ai.tool.message event)"),
    ("strands", "session", "Strands Agents: Agent(trace_attributes={\"session.id\": ...}) puts the session on every span"),
    ("pydantic-ai", "arguments", "pydantic-ai: InstrumentationSettings(include_content=True) (the default) records gen_ai.tool.call.arguments"),
    ("pydantic-ai", "results", "pydantic-ai: InstrumentationSettings(include_content=True) (the default) records gen_ai.tool.call.result"),
    ("pydantic-ai", "session", "pydantic-ai: agent.run(..., conversation_id=...) puts gen_ai.conversation.id on every span"),
    ("ai", "arguments", "the Vercel AI SDK: experimental_telemetry: { isEnabled: true, recordInputs: true }"),
    ("ai", "results", "the Vercel AI SDK: experimental_telemetry: { isEnabled: true, recordOutputs: true }"),
    ("ai", "session", "the Vercel AI SDK: experimental_telemetry: { metadata: { sessionId } }"),
    ("mcp-python-sdk", "arguments", "these calls are the MCP SDK's own spans, with no agent span around them: the SDK records no arguments. Instrument the agent that calls the MCP tools (its framework's tracing): its tool span wraps the MCP client and server spans, which then count as one call with its arguments"),
    ("mcp-python-sdk", "results", "the MCP SDK records no results on its spans: instrument the agent that calls the MCP tools, whose tool span records what the tool answered"),
    ("mcp-python-sdk", "failure_detail", "the MCP SDK marks an isError result error.type=tool_error without its words: instrument the agent that calls the MCP tools, whose tool span records the error text (the MCP server's words)"),
    ("mcp-python-sdk", "session", "the MCP SDK's spans carry no session: instrument the agent that calls the MCP tools, whose tool span wraps the MCP client and server spans"),
    ("mcp-python-sdk", "agent_turn", "these MCP calls come with no agent span, so each client request is a trace (and a turn) of its own and no retry storm can be seen across them: instrument the agent that calls the MCP tools"),
    ("fastmcp", "session", "FastMCP's client spans carry no session: instrument the agent that calls the MCP tools"),
    ("", "arguments", "record the call's arguments on the tool span as gen_ai.tool.call.arguments (OpenTelemetry GenAI; opt-in content capture in most instrumentations)"),
    ("", "results", "record the result as gen_ai.tool.call.result, or fail the span (status ERROR, error.type) when the tool failed"),
    ("", "failures", "record the result (gen_ai.tool.call.result), or fail the span (status ERROR, error.type) when the tool failed, also when the framework hands the failure to the model"),
    ("", "failure_detail", "put the failure's words on the span: error.type, the status message or an exception event with exception.message (an HTTP status in them is enough)"),
    ("", "session", "set session.id (or gen_ai.conversation.id) on the spans or the resource"),
    ("", "agent_turn", "wrap each request to the agent in an invoke_agent span (OpenTelemetry GenAI) or an OpenInference AGENT span"),
    ("", "unknown_shape", "mark tool spans with gen_ai.operation.name = execute_tool and gen_ai.tool.name, or file an issue with one span of the framework so its convention can be read"),
];

/// The fix for gap `what` in spans of `scope`.
pub fn fix(scope: Option<&str>, what: &str) -> String {
    let scope = scope.unwrap_or("");
    FIXES
        .iter()
        .find(|(prefix, w, _)| *w == what && under(scope, prefix))
        .map(|(_, _, f)| f.to_string())
        .unwrap_or_default()
}

/// What gap `what` blinds.
pub fn blinds(what: &str) -> String {
    BLINDS
        .iter()
        .find(|(w, _)| *w == what)
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gap_has_words_and_a_general_fix() {
        for (what, _) in BLINDS {
            assert!(!blinds(what).is_empty());
            assert!(!fix(Some("some.unknown.scope"), what).is_empty(), "{what}");
        }
    }

    #[test]
    fn a_framework_scope_gets_its_own_switch() {
        assert!(fix(Some("gcp.vertex.agent"), "results").contains("SPAN_ONLY"));
        assert!(fix(
            Some("openinference.instrumentation.openai_agents"),
            "failure_detail"
        )
        .contains("failure_error_function"));
        assert!(fix(Some("strands.telemetry.tracer"), "arguments")
            .contains("gen_ai_latest_experimental"));
        // A scope that merely starts like another word is not that framework.
        assert!(!fix(Some("aiohttp"), "results").contains("Vercel"));
    }
}
