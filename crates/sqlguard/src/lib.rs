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

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint, JoinOperator,
    ObjectName, Query, Select, SetExpr, Statement, TableFactor, TableWithJoins, Value, Visit,
    Visitor,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserOptions};

mod functions;
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
    let mut walk = Allowlist {
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

struct Allowlist<'a> {
    allowed: &'a BTreeSet<String>,
    read: BTreeSet<String>,
    /// How deep the walk is inside expressions now.
    depth: usize,
}

const TABLES_HINT: &str =
    "the tables are tool_daily, turn_summary and spans (describe_tables gives their columns)";

impl Allowlist<'_> {
    fn relation(&mut self, name: &ObjectName) -> ControlFlow<String> {
        let shown = name.to_string();
        let ident = match name.0.as_slice() {
            [part] => part.as_ident(),
            _ => None,
        };
        let Some(ident) = ident else {
            return ControlFlow::Break(format!(
                "it reads {shown:?}: a table is named by one plain name; {TABLES_HINT}"
            ));
        };
        let n = ident.value.to_lowercase();
        if !self.allowed.contains(&n) {
            let hint = if is_file_function_name(&n) {
                " (file functions are not allowed: the tables are already loaded)"
            } else {
                ""
            };
            return ControlFlow::Break(format!("it reads {n:?}{hint}; {TABLES_HINT}"));
        }
        self.read.insert(n);
        ControlFlow::Continue(())
    }

    fn joins(&self, from: &[TableWithJoins]) -> ControlFlow<String> {
        if from.len() > 1 {
            return ControlFlow::Break(
                "a comma-separated FROM list is a cross join, which is not allowed; join with ON or USING".into(),
            );
        }
        for twj in from {
            for join in &twj.joins {
                let constraint = match &join.join_operator {
                    JoinOperator::Join(c)
                    | JoinOperator::Inner(c)
                    | JoinOperator::Left(c)
                    | JoinOperator::LeftOuter(c)
                    | JoinOperator::Right(c)
                    | JoinOperator::RightOuter(c)
                    | JoinOperator::FullOuter(c)
                    | JoinOperator::Semi(c)
                    | JoinOperator::LeftSemi(c)
                    | JoinOperator::RightSemi(c)
                    | JoinOperator::Anti(c)
                    | JoinOperator::LeftAnti(c)
                    | JoinOperator::RightAnti(c) => c,
                    JoinOperator::CrossJoin(_) => {
                        return ControlFlow::Break(
                            "CROSS JOIN is not allowed (every row times every row); join with ON or USING".into(),
                        )
                    }
                    other => {
                        return ControlFlow::Break(format!(
                            "this join is not allowed: {}",
                            other_join_text(other)
                        ))
                    }
                };
                match constraint {
                    JoinConstraint::None => {
                        return ControlFlow::Break(
                            "a join without ON or USING is a cross join, which is not allowed"
                                .into(),
                        )
                    }
                    JoinConstraint::On(on) if !has_equi_key(on) => {
                        return ControlFlow::Break(format!(
                            "the join ON {} equates no column of one side with a column of the other, so it is a cross join, which is not allowed; join on a key, e.g. ON a.trace_id = b.trace_id",
                            first_words(&on.to_string())
                        ))
                    }
                    _ => {}
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn function(&self, f: &sqlparser::ast::Function) -> ControlFlow<String> {
        let name = match f.name.0.as_slice() {
            [part] => part.as_ident().map(|i| i.value.to_lowercase()),
            _ => None,
        };
        let Some(name) = name.filter(|n| FUNCTIONS.contains(&n.as_str())) else {
            let shown = f.name.to_string().to_lowercase();
            let hint = if is_file_function_name(&shown) {
                " (file functions are not allowed: the tables are already loaded)"
            } else {
                ""
            };
            return ControlFlow::Break(format!(
                "the function {shown:?} is not allowed{hint}; allowed: the usual math, string, date, aggregate and window functions (lower, length, date_part, count, avg, quantile_cont, row_number, …; the whole list is describe_tables' `functions`)"
            ));
        };
        if !matches!(f.parameters, FunctionArguments::None) {
            return ControlFlow::Break(format!("{name}: parametric calls are not allowed"));
        }
        if name == "lpad" || name == "rpad" {
            let length = match &f.args {
                FunctionArguments::List(list) => list.args.get(1),
                _ => None,
            };
            let literal = match length {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                    match &v.value {
                        Value::Number(n, _) => n.parse::<i64>().ok(),
                        _ => None,
                    }
                }
                _ => None,
            };
            match literal {
                Some(n) if (0..=MAX_PAD).contains(&n) => {}
                Some(n) => {
                    return ControlFlow::Break(format!(
                        "{name} to {n} characters is refused: at most {MAX_PAD}"
                    ))
                }
                None => {
                    return ControlFlow::Break(format!(
                        "{name} takes its length as a number literal of at most {MAX_PAD}"
                    ))
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn other_join_text(op: &JoinOperator) -> &'static str {
    match op {
        JoinOperator::CrossApply => "CROSS APPLY",
        JoinOperator::OuterApply => "OUTER APPLY",
        JoinOperator::AsOf { .. } => "ASOF JOIN",
        JoinOperator::StraightJoin(_) => "STRAIGHT_JOIN",
        _ => "ARRAY JOIN",
    }
}

/// Whether a join's `ON` has a key: one of its `AND`-ed terms equates two
/// different column references (`a.x = b.y`, `x = y`), never two names of
/// one side (`a.x = a.y`). polars joins on those terms and filters by the
/// rest; without one it joins every row with every row.
fn has_equi_key(on: &Expr) -> bool {
    use sqlparser::ast::BinaryOperator;
    match on {
        Expr::Nested(inner) => has_equi_key(inner),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => has_equi_key(left) || has_equi_key(right),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column(left), column(right)) {
            (Some(l), Some(r)) => match (&l.0, &r.0) {
                (Some(lq), Some(rq)) => lq != rq,
                _ => l != r,
            },
            _ => false,
        },
        _ => false,
    }
}

/// A column reference as (its qualifier, its name), lowercased.
fn column(e: &Expr) -> Option<(Option<String>, String)> {
    match e {
        Expr::Nested(inner) => column(inner),
        Expr::Identifier(i) => Some((None, i.value.to_lowercase())),
        Expr::CompoundIdentifier(parts) => {
            let (last, rest) = parts.split_last()?;
            let qualifier = rest
                .iter()
                .map(|p| p.value.to_lowercase())
                .collect::<Vec<_>>()
                .join(".");
            Some((Some(qualifier), last.value.to_lowercase()))
        }
        _ => None,
    }
}

fn first_words(s: &str) -> String {
    s.chars().take(60).collect()
}

impl Visitor for Allowlist<'_> {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        set_expr(&query.body)
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<String> {
        if select.into.is_some() {
            return ControlFlow::Break("SELECT … INTO is not allowed (read-only)".into());
        }
        if !select.lateral_views.is_empty() {
            return ControlFlow::Break("LATERAL VIEW is not allowed".into());
        }
        self.joins(&select.from)
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table {
                name,
                args,
                with_hints,
                version,
                partitions,
                json_path,
                index_hints,
                with_ordinality,
                ..
            } => {
                if args.is_some() {
                    return ControlFlow::Break(format!(
                        "it calls {:?} as a table function: file functions are not allowed (read_parquet, read_csv, …, or any name called with arguments in FROM, whatever it is defined as); {TABLES_HINT}",
                        name.to_string()
                    ));
                }
                if !with_hints.is_empty()
                    || version.is_some()
                    || !partitions.is_empty()
                    || json_path.is_some()
                    || !index_hints.is_empty()
                    || *with_ordinality
                {
                    return ControlFlow::Break(format!(
                        "{:?}: table hints, versions and partitions are not allowed",
                        name.to_string()
                    ));
                }
                self.relation(name)
            }
            TableFactor::Derived { lateral: true, .. } => {
                ControlFlow::Break("LATERAL subqueries are not allowed".into())
            }
            TableFactor::Derived { .. } => ControlFlow::Continue(()),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.joins(std::slice::from_ref(table_with_joins)),
            other => {
                let text = other.to_string();
                ControlFlow::Break(format!(
                    "this FROM item is not allowed: {:?} (only the tables, CTEs, subqueries and joins)",
                    first_words(&text)
                ))
            }
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            return ControlFlow::Break(format!(
                "an expression nests more than {MAX_EXPR_DEPTH} levels deep (a long chain of + or AND nests one level a term); write it shorter, e.g. with IN (…) or sum(…)"
            ));
        }
        match expr {
            Expr::Function(f) => self.function(f),
            _ => ControlFlow::Continue(()),
        }
    }

    fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// A query body: SELECT, a nested query, a set operation of those, or
/// VALUES; never a write or `TABLE name`.
fn set_expr(body: &SetExpr) -> ControlFlow<String> {
    match body {
        SetExpr::Select(_) | SetExpr::Query(_) | SetExpr::Values(_) => ControlFlow::Continue(()),
        SetExpr::SetOperation { left, right, .. } => {
            set_expr(left)?;
            set_expr(right)
        }
        SetExpr::Table(_) => ControlFlow::Break("TABLE … is not allowed; use SELECT".into()),
        _ => ControlFlow::Break("only SELECT is allowed (read-only)".into()),
    }
}

#[cfg(test)]
mod tests;
