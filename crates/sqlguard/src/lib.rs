//! The MCP `query` tool's statement check: an allowlist over the parsed
//! statement, not a check of names. A statement passes only if it is one
//! read-only query in which
//!
//! - every relation is one of the [`TABLES`] or a CTE the statement
//!   defines, named by one plain identifier, with no arguments (polars
//!   runs `name(...)` in `FROM` as a file-reading table function, whatever
//!   the name is defined as), no hints, no time travel;
//! - no CTE is named like a table or like a table function (`read_*`,
//!   `scan_*`), so a name can never mean a file function;
//! - every other `FROM` item is a subquery or a parenthesized join (no
//!   `UNNEST`, `TABLE(...)`, `LATERAL`, `PIVOT`, JSON or XML tables);
//! - every function called is in [`FUNCTIONS`], by one plain name;
//! - no join multiplies rows blindly: no comma list, no `CROSS JOIN`, no
//!   join without `ON`/`USING`/`NATURAL`, and an `ON` equates a column of
//!   one side with a column of the other (`ON 1 = 1`, `ON true` and
//!   inequalities alone are cross joins too);
//! - no expression nests deeper than [`MAX_EXPR_DEPTH`];
//! - string growers take a literal length of at most [`MAX_PAD`];
//! - the text is at most [`MAX_SQL_BYTES`].
//!
//! It parses exactly as polars-sql does (sqlparser 0.62, the generic
//! dialect, trailing commas), so the statement polars runs is the one
//! checked. Every refusal is a sentence made from the statement alone: the
//! file system is never consulted, so a refusal says nothing about it.
//! What a passing statement may still cost (a join on a key that matches
//! every row) is bounded where it runs: stormwatch runs it in a worker
//! process under a memory and time limit.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use sqlparser::ast::{Query, Statement, Visit, Visitor};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserOptions};

mod allowlist;
mod functions;
mod joins;
mod oracle;

pub use functions::FUNCTIONS;
pub use oracle::tokens_oracle;

/// The tables a statement may read.
pub const TABLES: [&str; 3] = ["tool_daily", "turn_summary", "spans"];

/// The longest statement accepted, in bytes.
pub const MAX_SQL_BYTES: usize = 16 * 1024;

/// The deepest an expression may nest (`1 + 1 + … + 1` nests one level a
/// term). polars plans an expression recursively: thousands of levels
/// overflow its stack, hundreds take seconds; a query a person writes
/// nests a few dozen at most.
pub const MAX_EXPR_DEPTH: usize = 256;

/// The longest literal length `lpad`/`rpad` may pad to.
pub const MAX_PAD: i64 = 10_000;

/// Why a statement was refused: one sentence, from the statement alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "query refused: {}", self.0)
    }
}

impl std::error::Error for Refusal {}

/// Parse as polars-sql does (`SQLContext::execute`).
pub fn parse(sql: &str) -> Result<Vec<Statement>, sqlparser::parser::ParserError> {
    Parser::new(&GenericDialect)
        .with_options(ParserOptions {
            trailing_commas: true,
            ..Default::default()
        })
        .try_with_sql(sql)?
        .parse_statements()
}

/// Whether a name reads as a table function's (polars has `read_csv`,
/// `read_parquet`, `read_ipc`, `read_json`; `scan_*` is kept out too).
pub fn is_file_function_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("read_") || n.starts_with("scan_")
}

/// The statement, checked (see the module doc). `Ok` holds the names of
/// the tables and CTEs it reads.
pub fn check(sql: &str) -> Result<BTreeSet<String>, Refusal> {
    let refuse = |why: String| Err(Refusal(why));
    if sql.len() > MAX_SQL_BYTES {
        return refuse(format!(
            "the statement is {} bytes; at most {MAX_SQL_BYTES} are accepted",
            sql.len()
        ));
    }
    let statements = parse(sql).map_err(|e| Refusal(format!("it does not parse as SQL ({e})")))?;
    let [statement] = statements.as_slice() else {
        return refuse(format!(
            "expected exactly one SELECT statement, got {}",
            statements.len()
        ));
    };
    let Statement::Query(query) = statement else {
        let text = statement.to_string();
        let word = text.split_whitespace().next().unwrap_or("?").to_uppercase();
        return refuse(format!(
            "only SELECT is allowed (read-only), got a {word} statement"
        ));
    };
    // First every CTE name (they may be referred to before their WITH is
    // reached in visiting order), then everything else.
    let mut names = CteNames::default();
    if let ControlFlow::Break(why) = query.visit(&mut names) {
        return refuse(why);
    }
    let mut allowed: BTreeSet<String> = TABLES.iter().map(|t| t.to_string()).collect();
    allowed.extend(names.0);
    let mut walk = allowlist::Allowlist {
        allowed: &allowed,
        read: BTreeSet::new(),
        depth: 0,
    };
    if let ControlFlow::Break(why) = query.visit(&mut walk) {
        return refuse(why);
    }
    Ok(walk.read)
}

/// Collects the CTE names, refusing one named like a table or a table
/// function.
#[derive(Default)]
struct CteNames(BTreeSet<String>);

impl Visitor for CteNames {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        let Some(with) = &query.with else {
            return ControlFlow::Continue(());
        };
        if with.recursive {
            return ControlFlow::Break("WITH RECURSIVE is not allowed".into());
        }
        for cte in &with.cte_tables {
            let name = cte.alias.name.value.to_lowercase();
            if is_file_function_name(&name) {
                return ControlFlow::Break(format!(
                    "a CTE may not be named {name:?}: names starting read_ or scan_ are file functions' names"
                ));
            }
            if TABLES.contains(&name.as_str()) {
                return ControlFlow::Break(format!(
                    "a CTE may not be named {name:?}, which is one of the tables (tool_daily, turn_summary, spans)"
                ));
            }
            self.0.insert(name);
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests;
