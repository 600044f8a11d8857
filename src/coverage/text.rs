//! The coverage report as text, for `stormwatch coverage`.

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
    let _ = writeln!(s, "coverage of {from} .. {to}");
    if c.scopes.is_empty() {
        s.push_str("no tool calls in these days\n");
    }
    for sc in &c.scopes {
        let _ = writeln!(
            s,
            "\n{}  scope {} {}  ({})",
            sc.service,
            sc.scope.as_deref().unwrap_or("(none)"),
            sc.scope_version.as_deref().unwrap_or(""),
            sc.conventions.join(", ")
        );
        let layers = if sc.layers > 0 {
            format!(" ({} more spans as inner layers)", sc.layers)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {} calls{layers}; arguments {}, results {}, failures with a class {} of {}, session {}, agent turn {}, unknown shape {}",
            sc.calls,
            pct(sc.with_arguments, sc.calls),
            pct(sc.with_results, sc.calls),
            pct(sc.failed_with_class, sc.failed),
            sc.failed,
            pct(sc.with_session, sc.calls),
            pct(sc.in_agent_turn, sc.calls),
            sc.unknown_shape,
        );
        if sc.gaps.is_empty() {
            s.push_str("  no gap\n");
        }
        for g in &sc.gaps {
            let _ = writeln!(
                s,
                "  gap {} ({:.0}%): {}",
                g.what,
                g.share * 100.0,
                g.blinds
            );
            if !g.fix.is_empty() {
                let _ = writeln!(s, "    fix: {}", g.fix);
            }
        }
    }
    s
}
