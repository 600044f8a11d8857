//! The coverage page (`/coverage`, linked from every page's header and the
//! overview) and `/api/coverage`: what the stored spans leave stormwatch
//! blind to, per service and instrumentation scope, and the framework's
//! own switch that fixes each gap ([`crate::coverage`]).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::Json;

use maud::{html, Markup};

use super::fail::{blocking, internal, Fail};
use super::html::{page, pct};
use super::query::Q;
use super::Shared;
use crate::coverage::{Coverage, Span};

/// `days` (1 to 366, default 7), or `since` (a time, a date or a duration
/// back from now): [`Span::ask`].
fn span(q: &HashMap<String, String>) -> Result<Span, Fail> {
    let bad = |why: String| Fail(StatusCode::BAD_REQUEST, why);
    let days = q
        .get("days")
        .map(|v| {
            v.parse::<u32>().map_err(|_| {
                bad(format!(
                    "days: expected a number of days from 1 to 366, got {v:?}"
                ))
            })
        })
        .transpose()?;
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    Span::ask(days, q.get("since").map(String::as_str), now).map_err(|e| bad(e.to_string()))
}

fn read(d: &Shared, span: Span) -> Result<Coverage, Fail> {
    crate::coverage::report(&d.reads.reader, span, &d.reads.coverage).map_err(internal)
}

pub(super) async fn api_coverage(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Json<Coverage>, Fail> {
    let span = span(&q)?;
    blocking(move || read(&d, span).map(Json)).await
}

pub(super) async fn coverage_page(
    State(d): State<Shared>,
    Query(q): Q,
) -> Result<Html<String>, Fail> {
    let span = span(&q)?;
    blocking(move || read(&d, span).map(|c| Html(render(&c, span)))).await
}

/// A share as a percentage, `-` when there is nothing to share.
fn share(n: u64, of: u64) -> String {
    if of == 0 {
        "-".into()
    } else {
        pct(n as f64 / of as f64)
    }
}

/// The page: one table row per service and scope, then each one's gaps
/// with what they blind and the fix.
pub fn render(c: &Coverage, span: Span) -> String {
    let (Some(from), Some(to)) = (&c.from, &c.to) else {
        let b =
            html! { h1 { "What stormwatch can see" } p class="muted" { "No spans stored yet." } };
        return page("Coverage", b);
    };
    let b = html! {
        h1 { "What stormwatch can see" }
        p {
            "The tool calls "
            @match &c.since {
                Some(t) => { "that started since " (t) },
                None => { "of " (from) " to " (to) },
            }
            ", per service and instrumentation scope: how many of them carry what the rules read. A share under "
            (pct(crate::coverage::GAP_BELOW))
            " is a gap: the rules that need it cannot run there, and its fix is the framework's own setting. After changing a setting, read only what came since ("
            code { "?since=" } " a time)."
        }
        div class="range" {
            "Range: "
            @for d in [1, 7, 30] {
                a class=[(span == Span::Days(d)).then_some("on")] href={ "/coverage?days=" (d) } {
                    (d) " " @if d == 1 { "day" } @else { "days" }
                }
            }
        }
        @if c.scopes.is_empty() {
            p class="muted" { "No tool calls in these days." }
        } @else {
            (scopes(c))
        }
    };
    page("Coverage", b)
}

/// The table of scopes, then each one's gaps.
fn scopes(c: &Coverage) -> Markup {
    html! {
        table id="coverage" {
            tr {
                th { "service" } th { "scope" } th { "conventions" } th class="n" { "calls" }
                th class="n" { "arguments" } th class="n" { "results (of calls that did not fail)" }
                th class="n" { "failures with a class" } th class="n" { "session" }
                th class="n" { "agent turn" } th class="n" { "unknown shape" } th class="n" { "gaps" }
            }
            @for s in &c.scopes {
                tr {
                    td { (s.service) }
                    td { (s.scope_label()) }
                    td { (s.conventions.join(", ")) }
                    td class="n" { (s.calls) }
                    td class="n" { (share(s.with_arguments, s.calls)) }
                    td class="n" { (share(s.with_results, s.calls - s.failed)) }
                    td class="n" { (share(s.failed_with_class, s.failed)) " of " (s.failed) }
                    td class="n" { (share(s.with_session, s.calls)) }
                    td class="n" { (share(s.in_agent_turn, s.calls)) }
                    td class="n" { (s.unknown_shape) }
                    td class=(if s.gaps.is_empty() { "n" } else { "n err" }) { (s.gaps.len()) }
                }
            }
        }
        @for s in c.scopes.iter().filter(|s| !s.gaps.is_empty()) {
            h2 { (s.service) " · " (s.scope.as_deref().unwrap_or("(no scope)")) }
            ul class="gaps" {
                @for g in &s.gaps {
                    li {
                        b { (g.what) } " (" (g.how_much()) "): " (g.blinds) br;
                        span class="muted" { "Fix:" } " " (g.fix)
                    }
                }
            }
        }
    }
}
