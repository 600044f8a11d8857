//! The tools as MCP declares them: names, descriptions, argument types
//! (their `inputSchema`), answer types (their `outputSchema`) and
//! annotations; each runs its read on a blocking thread. An unknown tool or
//! a bad argument is a tool error the agent can read, not a protocol error.
//! The argument types, and the answers of `run_sweep`, `mute_signal` and
//! `resolve_signal`, are in `args.rs`; the read tools' answers are in
//! `reads`, `signal_reads`, `trace` and `sql`; the server's handler
//! (`tools/list`, the instructions, calling a tool) in `server`.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router, Json};

use super::args::{
    ChangeLine, CoverageArgs, IncidentArgs, IncidentsArgs, MuteArgs, QueryArgs, SignalArgs,
    SignalTracesArgs, SignalsArgs, StateAnswer, StormsArgs, SweepAnswer, SweepArgs, ToolDailyArgs,
    TraceArgs, WindowArgs,
};
use super::reads;
use super::signal_reads::{self, SignalFilter};
use super::sql;
use super::trace::{self, TraceAsk};
use super::{Context, McpError};

/// The server one client talks to (one per session, sharing the context).
#[derive(Clone)]
pub struct Stormwatch {
    ctx: Arc<Context>,
    pub(super) tool_router: ToolRouter<Stormwatch>,
}

async fn blocking<T: Send + 'static>(
    ctx: &Arc<Context>,
    f: impl FnOnce(&Context) -> Result<T, McpError> + Send + 'static,
) -> Result<Json<T>, String> {
    let ctx = Arc::clone(ctx);
    match tokio::task::spawn_blocking(move || f(&ctx)).await {
        Ok(Ok(v)) => Ok(Json(v)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the tool's thread failed: {e}")),
    }
}

#[tool_router(vis = "pub(super)")]
impl Stormwatch {
    pub fn new(ctx: Arc<Context>) -> Stormwatch {
        // Built once: a stateless request makes a server of its own, and
        // generating fifteen tools' schemas each time would cost more than
        // answering.
        static ROUTER: std::sync::OnceLock<ToolRouter<Stormwatch>> = std::sync::OnceLock::new();
        Stormwatch {
            ctx,
            tool_router: ROUTER.get_or_init(Self::tool_router).clone(),
        }
    }

    /// What is broken: call this first when asked what is wrong or failing.
    /// The incidents (open signals with one likely cause: the same tool, the
    /// same dependency, one error class across a service's tools), open
    /// ones first, the most severe first: id, title (what is down, since
    /// when, how), cause, tools, member signals, impact and the remedy in
    /// one line. `get_incident` gives one whole.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_incidents(
        &self,
        Parameters(a): Parameters<IncidentsArgs>,
    ) -> Result<Json<reads::IncidentsAnswer>, String> {
        blocking(&self.ctx, move |c| {
            reads::list_incidents(c, a.state.as_deref(), a.cursor.as_deref(), a.limit)
        })
        .await
    }

    /// One incident whole: its cause in words, each member signal and why
    /// it joined, the timeline, the impact (agent turns, sessions, calls,
    /// failed and wasted calls and seconds), the lead member's remedy (will
    /// waiting fix it, when to cut it off, what to change) and the other
    /// members', its evidence traces (for `get_trace`) and its state changes.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_incident(
        &self,
        Parameters(a): Parameters<IncidentArgs>,
    ) -> Result<Json<crate::read::incidents::IncidentAnswer>, String> {
        blocking(&self.ctx, move |c| reads::get_incident(c, &a.id)).await
    }

    /// Per tool over a window of days: calls, errors, error rate, the
    /// trailing-week baseline and the spike rule's threshold, p95 latency,
    /// open signals, the days whose error rate the rule flagged, and the
    /// calls stopped on purpose (interrupted, cancelled: never errors).
    /// Busiest tools first.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_tools(
        &self,
        Parameters(a): Parameters<WindowArgs>,
    ) -> Result<Json<reads::ToolsAnswer>, String> {
        blocking(&self.ctx, move |c| {
            reads::list_tools(c, a.days, a.cursor.as_deref(), a.limit)
        })
        .await
    }

    /// One tool's daily series: calls, errors, rate, and the spike rule's
    /// baseline, threshold and lower bound per day, with the flagged days;
    /// the calls stopped on purpose (interrupted, cancelled) apart.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_tool_daily(
        &self,
        Parameters(a): Parameters<ToolDailyArgs>,
    ) -> Result<Json<reads::DailyAnswer>, String> {
        blocking(&self.ctx, move |c| reads::tool_daily(c, &a.tool, a.days)).await
    }

    /// The signals (named problems) the sweeps found, newest first, with
    /// their state and a one-line remedy; filter by state, kind, tool, since.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_signals(
        &self,
        Parameters(a): Parameters<SignalsArgs>,
    ) -> Result<Json<signal_reads::SignalsAnswer>, String> {
        blocking(&self.ctx, move |c| {
            let f = SignalFilter {
                state: a.state.as_deref(),
                kind: a.kind.as_deref(),
                tool: a.tool.as_deref(),
                since: a.since.as_deref(),
            };
            signal_reads::list_signals(c, &f, a.cursor.as_deref(), a.limit)
        })
        .await
    }

    /// One signal: title, numbers, lifecycle history, and its remedy — will
    /// waiting fix it, when to cut it off, what to change before the next
    /// attempt — built by rule from its evidence.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_signal(
        &self,
        Parameters(a): Parameters<SignalArgs>,
    ) -> Result<Json<signal_reads::SignalAnswer>, String> {
        blocking(&self.ctx, move |c| signal_reads::get_signal(c, &a.id)).await
    }

    /// A signal's evidence turns, worst first (those of one day with `day`):
    /// calls, failures, rhythm, outcome, seconds wasted, and the tool's
    /// healthy turn for comparison.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_signal_traces(
        &self,
        Parameters(a): Parameters<SignalTracesArgs>,
    ) -> Result<Json<signal_reads::TracesAnswer>, String> {
        blocking(&self.ctx, move |c| {
            signal_reads::signal_traces(c, &a.id, a.day.as_deref(), a.cursor.as_deref(), a.limit)
        })
        .await
    }

    /// One trace (or one turn of it) as the trace view judges it: per tool
    /// loop its attempts, failures, rhythm and verdicts, then the spans with
    /// attempt number, verdict and gap. Attributes only when asked for.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_trace(
        &self,
        Parameters(a): Parameters<TraceArgs>,
    ) -> Result<Json<trace::TraceAnswer>, String> {
        blocking(&self.ctx, move |c| {
            trace::get_trace(
                c,
                &TraceAsk {
                    trace_id: &a.trace_id,
                    turn_id: a.turn_id.as_deref(),
                    day: a.day.as_deref(),
                    attributes: a.attributes,
                    cursor: a.cursor.as_deref(),
                    limit: a.limit,
                },
            )
        })
        .await
    }

    /// Retry storms the sweeps kept (turns that called one tool over and
    /// over), biggest first, over a window; by tool and minimum rounds.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn find_retry_storms(
        &self,
        Parameters(a): Parameters<StormsArgs>,
    ) -> Result<Json<reads::StormsAnswer>, String> {
        blocking(&self.ctx, move |c| {
            reads::retry_storms(
                c,
                a.days,
                a.tool.as_deref(),
                a.min_rounds,
                a.cursor.as_deref(),
                a.limit,
            )
        })
        .await
    }

    /// What the stored spans leave stormwatch blind to, per service and
    /// instrumentation scope: tool calls seen, the share with arguments,
    /// results, failure detail, a session, an agent turn; spans of unknown
    /// shape; each gap with what it blinds and the framework's own setting
    /// that fixes it. Ask it when the other tools find nothing you expected.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_coverage(
        &self,
        Parameters(a): Parameters<CoverageArgs>,
    ) -> Result<Json<crate::coverage::Coverage>, String> {
        blocking(&self.ctx, move |c| {
            let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
            let span = crate::coverage::Span::ask(a.days, a.since.as_deref(), now)
                .map_err(|e| McpError::Argument(e.to_string()))?;
            Ok(crate::coverage::report(&c.reader, span, &c.reads.coverage)?)
        })
        .await
    }

    /// The tables `query` reads (tool_daily, turn_summary, spans): their
    /// columns and types, the days they hold, and the query limits.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn describe_tables(&self) -> Result<Json<sql::TablesAnswer>, String> {
        blocking(&self.ctx, sql::describe).await
    }

    /// Read-only polars SQL: one SELECT over tool_daily, turn_summary and
    /// spans (a window of at most 7 days). At most 500 rows, 10 s and
    /// 1 GiB by default; no writes, no file functions, no cross joins (a
    /// join's ON equates a column of each side).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn query(
        &self,
        Parameters(a): Parameters<QueryArgs>,
    ) -> Result<Json<sql::QueryAnswer>, String> {
        let statement = a.sql.clone();
        tokio::task::spawn_blocking(move || sql::check(&statement))
            .await
            .map_err(|e| format!("the statement check's thread failed: {e}"))?
            .map_err(|e| e.to_string())?;
        let Some(permit) = self.ctx.queries_permit() else {
            return Err("query refused: another query is still running (one at a time); try again when it ends".into());
        };
        let sandbox = self.ctx.sandbox.clone();
        // The slot is held until the worker has exited (`Sandbox::run`
        // returns only then, past either limit by killing it).
        let run = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            sandbox.run(&a.sql, a.days)
        });
        match run.await {
            Ok(Ok(v)) => Ok(Json(v)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the query's thread failed: {e}")),
        }
    }

    /// Run a sweep: a dry run by default (what it would find and change,
    /// nothing changed); `dry_run: false` changes signals and queues alerts.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn run_sweep(
        &self,
        Parameters(a): Parameters<SweepArgs>,
    ) -> Result<Json<SweepAnswer>, String> {
        let dry_run = a.dry_run.unwrap_or(true);
        let report = self
            .ctx
            .sweeps
            .sweep(dry_run)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Json(match report {
            None => SweepAnswer {
                dry_run,
                outcome: "empty".into(),
                spans_scanned: 0,
                days_scanned: 0,
                days_reused: 0,
                days_from_summary: 0,
                days_sealed: 0,
                signals: Vec::new(),
                changes: Vec::new(),
                alerts_queued: 0,
            },
            Some(r) => SweepAnswer {
                dry_run,
                outcome: "ok".into(),
                spans_scanned: r.spans_scanned,
                days_scanned: r.days_scanned,
                days_reused: r.days_reused,
                days_from_summary: r.days_from_summary,
                days_sealed: r.days_summarized,
                signals: r.signals.iter().map(signal_reads::SignalLine::of).collect(),
                changes: r
                    .changes
                    .iter()
                    .map(|c| ChangeLine {
                        id: c.id.clone(),
                        from: c.from.map(|f| f.as_str().to_string()),
                        to: c.to.as_str().to_string(),
                    })
                    .collect(),
                alerts_queued: r.queued.len(),
            },
        }))
    }

    /// Mute a signal (no alerts while muted), until a time or until unmuted.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn mute_signal(
        &self,
        Parameters(a): Parameters<MuteArgs>,
    ) -> Result<Json<StateAnswer>, String> {
        blocking(&self.ctx, move |c| {
            let until = a
                .until
                .as_deref()
                .map(|u| {
                    crate::time::parse_now(u).map_err(|e| McpError::Argument(format!("until: {e}")))
                })
                .transpose()?;
            let now = now_ns();
            if let Some(u) = until.filter(|u| *u <= now) {
                return Err(McpError::Argument(format!(
                    "until: {} is in the past; give a later time, or none to mute until unmuted",
                    crate::time::rfc3339(u)
                )));
            }
            let mut db = c.state_to_change()?;
            let s = signal_reads::known_signal_in(&db, &a.id)?;
            // Muting again as it stands changes nothing (and writes no history).
            if !(s.state == crate::signal::Lifecycle::Muted && s.muted_until_ns == until) {
                db.mute(&a.id, until, false, now)?;
                c.reads.signals.invalidate();
            }
            Ok(StateAnswer {
                state: db.get(&a.id)?.state.as_str().to_string(),
                id: a.id,
            })
        })
        .await
    }

    /// Resolve a signal by hand (it regresses if the sweeps find it again).
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn resolve_signal(
        &self,
        Parameters(a): Parameters<SignalArgs>,
    ) -> Result<Json<StateAnswer>, String> {
        blocking(&self.ctx, move |c| {
            let mut db = c.state_to_change()?;
            let s = signal_reads::known_signal_in(&db, &a.id)?;
            if s.state != crate::signal::Lifecycle::Resolved {
                db.resolve(&a.id, now_ns())?;
                c.reads.signals.invalidate();
            }
            Ok(StateAnswer {
                state: db.get(&a.id)?.state.as_str().to_string(),
                id: a.id,
            })
        })
        .await
    }
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}
