//! What a join's `ON` must hold to be no cross join: a column of one side
//! equated with a column of the other.

use sqlparser::ast::{Expr, JoinOperator};

pub(crate) fn other_join_text(op: &JoinOperator) -> &'static str {
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
pub(crate) fn has_equi_key(on: &Expr) -> bool {
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
