//! The coverage page (`/coverage`, linked from every page's header and the
//! overview) and `/api/coverage`: what the stored spans leave stormwatch
//! blind to, per service and instrumentation scope, and the framework's
//! own switch that fixes each gap ([`crate::coverage`]).

use std::collections::HashMap;
use std::fmt::Write;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use axum::Json;

use super::fail::{blocking, internal, Fail};
use super::html::{esc, page, pct};
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
    Span::ask(days, q.get("since").map(String::as_str), now).map_err(bad)
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
    let mut b = String::from("<h1>What stormwatch can see</h1>");
    let (Some(from), Some(to)) = (&c.from, &c.to) else {
        b.push_str(r#"<p class="muted">No spans stored yet.</p>"#);
        return page("Coverage", &b);
    };
    let read = match &c.since {
        Some(t) => format!("that started since {}", esc(t)),
        None => format!("of {} to {}", esc(from), esc(to)),
    };
    let _ = write!(
        b,
        r#"<p>The tool calls {read}, per service and instrumentation scope: how many of them carry what the rules read. A share under {} is a gap: the rules that need it cannot run there, and its fix is the framework's own setting. After changing a setting, read only what came since (<code>?since=</code> a time).</p><div class="range">Range: "#,
        pct(crate::coverage::GAP_BELOW)
    );
    for d in [1, 7, 30] {
        let on = if span == Span::Days(d) {
            r#" class="on""#
        } else {
            ""
        };
        let unit = if d == 1 { "day" } else { "days" };
        let _ = write!(b, r#"<a{on} href="/coverage?days={d}">{d} {unit}</a>"#);
    }
    b.push_str("</div>");
    if c.scopes.is_empty() {
        b.push_str(r#"<p class="muted">No tool calls in these days.</p>"#);
        return page("Coverage", &b);
    }
    b.push_str(r#"<table id="coverage"><tr><th>service</th><th>scope</th><th>conventions</th><th class="n">calls</th><th class="n">arguments</th><th class="n">results (of calls that did not fail)</th><th class="n">failures with a class</th><th class="n">session</th><th class="n">agent turn</th><th class="n">unknown shape</th><th class="n">gaps</th></tr>"#);
    for s in &c.scopes {
        let scope = s.scope_label();
        let gaps = if s.gaps.is_empty() { "" } else { " err" };
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{} of {}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n{gaps}">{}</td></tr>"#,
            esc(&s.service),
            esc(&scope),
            esc(&s.conventions.join(", ")),
            s.calls,
            share(s.with_arguments, s.calls),
            share(s.with_results, s.calls - s.failed),
            share(s.failed_with_class, s.failed),
            s.failed,
            share(s.with_session, s.calls),
            share(s.in_agent_turn, s.calls),
            s.unknown_shape,
            s.gaps.len()
        );
    }
    b.push_str("</table>");
    for s in c.scopes.iter().filter(|s| !s.gaps.is_empty()) {
        let _ = write!(
            b,
            r#"<h2>{} · {}</h2><ul class="gaps">"#,
            esc(&s.service),
            esc(s.scope.as_deref().unwrap_or("(no scope)"))
        );
        for g in &s.gaps {
            let _ = write!(
                b,
                r#"<li><b>{}</b> ({}): {}<br><span class="muted">Fix:</span> {}</li>"#,
                esc(&g.what),
                esc(&g.how_much()),
                esc(&g.blinds),
                esc(&g.fix)
            );
        }
        b.push_str("</ul>");
    }
    page("Coverage", &b)
}
