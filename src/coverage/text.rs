//! The coverage report as text and as Markdown, for `stormwatch coverage`.

use std::fmt::Write;

use super::Coverage;

/// A share of `of` as a whole percentage; `-` when there is nothing to share.
fn pct(n: u64, of: u64) -> String {
    if of == 0 {
        "-".to_string()
    } else {
        format!("{:.0}%", 100.0 * n as f64 / of as f64)
    }
}

/// The report, one block per service and scope, each gap with its fix.
pub fn text(c: &Coverage) -> String {
    let mut s = String::new();
    let (Some(from), Some(to)) = (&c.from, &c.to) else {
        return "no spans stored yet: nothing to report\n".to_string();
    };
    match &c.since {
        Some(t) => {
            let _ = writeln!(s, "coverage of the spans that started since {t}");
        }
        None => {
            let _ = writeln!(s, "coverage of {from} .. {to}");
        }
    }
    if c.scopes.is_empty() {
        s.push_str("no tool calls in these days\n");
    }
    for sc in &c.scopes {
        let scope = sc.scope_label();
        let _ = writeln!(
            s,
            "\n{}  scope {scope}  ({})",
            sc.service,
            sc.conventions.join(", ")
        );
        let layers = if sc.layers > 0 {
            format!(" ({} more spans as inner layers)", sc.layers)
        } else {
            String::new()
        };
        let failures = match sc.failed {
            0 => "no failure".to_string(),
            n => format!("{} of {n} failures with a class", sc.failed_with_class),
        };
        let _ = writeln!(
            s,
            "  {} calls{layers}; arguments {}, results {} (of the calls that did not fail), {failures}, session {}, agent turn {}, unknown shape {}",
            sc.calls,
            pct(sc.with_arguments, sc.calls),
            pct(sc.with_results, sc.calls - sc.failed),
            pct(sc.with_session, sc.calls),
            pct(sc.in_agent_turn, sc.calls),
            sc.unknown_shape,
        );
        if sc.gaps.is_empty() {
            s.push_str("  no gap\n");
        }
        for g in &sc.gaps {
            let _ = writeln!(s, "  gap {} ({}): {}", g.what, g.how_much(), g.blinds);
            if !g.fix.is_empty() {
                let _ = writeln!(s, "    fix: {}", g.fix);
            }
        }
    }
    s
}

/// The report as Markdown: a table of the scopes, then each one's gaps.
pub fn markdown(c: &Coverage) -> String {
    let mut s = String::from("# What stormwatch can see\n\n");
    let (Some(from), Some(to)) = (&c.from, &c.to) else {
        s.push_str("No spans stored yet: nothing to report.\n");
        return s;
    };
    let _ = match &c.since {
        Some(t) => writeln!(s, "The tool calls of the spans that started since {t}.\n"),
        None => writeln!(s, "The tool calls of {from} .. {to}.\n"),
    };
    if c.scopes.is_empty() {
        s.push_str("No tool calls in these days.\n");
        return s;
    }
    s.push_str("| service | scope | calls | arguments | results | failures with a class | session | agent turn | unknown shape | gaps |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let cell = |t: &str| t.replace('|', "\\|");
    for sc in &c.scopes {
        let scope = sc.scope_label();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&sc.service),
            cell(&scope),
            sc.calls,
            pct(sc.with_arguments, sc.calls),
            pct(sc.with_results, sc.calls - sc.failed),
            pct(sc.failed_with_class, sc.failed),
            pct(sc.with_session, sc.calls),
            pct(sc.in_agent_turn, sc.calls),
            sc.unknown_shape,
            sc.gaps.len()
        );
    }
    for sc in c.scopes.iter().filter(|sc| !sc.gaps.is_empty()) {
        let _ = writeln!(
            s,
            "\n## {} · {}\n",
            sc.service,
            sc.scope.as_deref().unwrap_or("(no scope)")
        );
        for g in &sc.gaps {
            let _ = writeln!(
                s,
                "- **{}** ({}): {}\n  - fix: {}",
                g.what,
                g.how_much(),
                g.blinds,
                g.fix
            );
        }
    }
    s
}
