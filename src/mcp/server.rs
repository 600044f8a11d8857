//! The MCP server's handler for [`Stormwatch`]: `tools/list` (schemars'
//! numeric formats left out, made once), the server's instructions, and a
//! tool call (an unknown tool a tool error naming the tools; every answer
//! held to the budget on its way out).

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock};
use rmcp::{tool_handler, ServerHandler};

use super::tools::Stormwatch;

const INSTRUCTIONS: &str = "stormwatch watches what AI agents do with their tools. \
Asked what is broken, call list_incidents first: each incident is the open signals with one likely cause \
(what is down, since when, how), open ones first; get_incident gives its cause, members, timeline, impact, \
remedy and evidence traces. \
From 'something is wrong' to the trace that explains it: list_tools (which tool's error rate left its \
threshold, on which day) -> list_signals (the named problems, each with a one-line remedy; get_signal for \
its history and full remedy) -> list_signal_traces with that day -> get_trace (one turn's attempts: how \
many, how fast, what each retry achieved). find_retry_storms goes straight to the worst turns the sweeps \
kept; query runs read-only SQL (describe_tables first); get_coverage says what the spans leave stormwatch \
blind to, and the framework setting that fixes it. run_sweep (dry run by default), mute_signal and \
resolve_signal are the only tools that change anything. Windows end on the newest day with data, not today.";

/// The tools as `tools/list` gives them: schemars' numeric `format`s
/// (`uint`, `double`…), which are not JSON Schema formats and make
/// validators such as Ajv warn, left out. Made once.
fn listed() -> &'static [rmcp::model::Tool] {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                let numeric = m.get("format").and_then(|f| f.as_str()).is_some_and(|f| {
                    matches!(
                        f,
                        "uint"
                            | "uint8"
                            | "uint16"
                            | "uint32"
                            | "uint64"
                            | "int"
                            | "int8"
                            | "int16"
                            | "int32"
                            | "int64"
                            | "float"
                            | "double"
                    )
                });
                if numeric {
                    m.remove("format");
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    fn clean(o: &rmcp::model::JsonObject) -> Arc<rmcp::model::JsonObject> {
        let mut v = serde_json::Value::Object(o.clone());
        strip(&mut v);
        match v {
            serde_json::Value::Object(m) => Arc::new(m),
            _ => unreachable!("an object stays an object"),
        }
    }
    static LISTED: std::sync::OnceLock<Vec<rmcp::model::Tool>> = std::sync::OnceLock::new();
    LISTED.get_or_init(|| {
        Stormwatch::tool_router()
            .list_all()
            .into_iter()
            .map(|mut t| {
                t.input_schema = clean(&t.input_schema);
                t.output_schema = t.output_schema.as_deref().map(clean);
                t
            })
            .collect()
    })
}

#[tool_handler]
impl ServerHandler for Stormwatch {
    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let cache_hints = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        Ok(rmcp::model::ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools: listed().to_vec(),
            meta: None,
            next_cursor: None,
            ttl_ms: cache_hints.then_some(0),
            cache_scope: cache_hints.then_some(rmcp::model::CacheScope::Public),
        })
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        listed().iter().find(|t| t.name == name).cloned()
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "stormwatch",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        // An unknown tool is the agent's mistake to read and correct, not
        // a broken connection.
        if !self.tool_router.has_route(&request.name) {
            let names: Vec<String> = self
                .tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
                "no tool {:?}; the tools are: {}",
                request.name,
                names.join(", ")
            ))]);
            r.is_error = Some(true);
            let mut r = r.into();
            super::budget::hold(&mut r);
            return Ok(r);
        }
        let tcc = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        // Every answer leaves within the budget, whatever its tool put in
        // it (measured and cut on a blocking thread: it may be megabytes).
        let answer = self.tool_router.call(tcc).await?;
        tokio::task::spawn_blocking(move || {
            let mut answer = answer;
            super::budget::hold(&mut answer);
            answer
        })
        .await
        .map_err(|e| {
            rmcp::ErrorData::internal_error(format!("the budget's thread failed: {e}"), None)
        })
    }
}
