//! The walk that checks a statement against the allowlist: relations,
//! `FROM` items, joins, functions, expression depth and string growers,
//! each refusal a sentence made from the statement alone.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint, JoinOperator,
    ObjectName, Query, Select, SetExpr, TableFactor, TableWithJoins, Value, Visitor,
};

use crate::joins::{has_equi_key, other_join_text};
use crate::{is_file_function_name, FUNCTIONS, MAX_EXPR_DEPTH, MAX_PAD};

pub(crate) struct Allowlist<'a> {
    pub allowed: &'a BTreeSet<String>,
    pub read: BTreeSet<String>,
    /// How deep the walk is inside expressions now.
    pub depth: usize,
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
