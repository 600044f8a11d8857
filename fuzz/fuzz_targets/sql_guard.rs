//! Statements for the MCP `query` guard: raw text, and statements built
//! from hostile and benign fragments chosen by the input. The guard must
//! never panic, and no statement it accepts may call a file function, read
//! a relation named like one, or call a function outside the allowlist (by
//! the token oracle, which does not share the guard's AST walk).
#![no_main]
use libfuzzer_sys::fuzz_target;
use stormwatch_sqlguard::{check, tokens_oracle};

const RELATIONS: &[&str] = &[
    "spans", "tool_daily", "turn_summary", "t", "read_parquet", "read_parquet('/etc/passwd')",
    "t('/x')", "spans('/x')", "READ_CSV('/x')", "\"read_parquet\"('/x')", "main.spans",
    "UNNEST([1]) AS u(x)", "(SELECT * FROM spans) AS d", "TABLE(read_json('/x'))",
    "LATERAL (SELECT 1) AS l", "read_ipc", "(spans JOIN tool_daily ON 1 = 1)",
];
const EXPRS: &[&str] = &[
    "*", "count(*)", "lower(name)", "read_parquet('/x')", "lpad('x', 1000000000, 'y')",
    "lpad('x', 9, 'y')", "my_udf(1)", "(SELECT count(*) FROM read_csv('/x'))", "unnest(x)", "1",
    "\"read_json\"('/x')", "columns('.*')", "CAST(x AS TEXT)",
];
const JOINS: &[&str] = &["", " JOIN ", " CROSS JOIN ", ", ", " LEFT JOIN ", " NATURAL JOIN "];
const CTES: &[&str] = &["t", "read_parquet", "spans", "Read_Json", "scan_csv", "x"];

fn pick<'a>(list: &[&'a str], b: Option<&u8>) -> &'a str {
    list[usize::from(*b.unwrap_or(&0)) % list.len()]
}

fuzz_target!(|data: &[u8]| {
    // Raw text.
    if let Ok(text) = std::str::from_utf8(data) {
        if check(text).is_ok() {
            tokens_oracle(text).unwrap_or_else(|e| panic!("accepted {text:?}: {e}"));
        }
    }
    // A statement from fragments, then the rest of the input as a suffix.
    let mut it = data.iter();
    let mut sql = String::new();
    if it.next().is_some_and(|b| b % 2 == 0) {
        sql.push_str(&format!(
            "WITH {} AS (SELECT {} FROM {}) ",
            pick(CTES, it.next()),
            pick(EXPRS, it.next()),
            pick(RELATIONS, it.next())
        ));
    }
    sql.push_str(&format!("SELECT {} FROM {}", pick(EXPRS, it.next()), pick(RELATIONS, it.next())));
    let join = pick(JOINS, it.next());
    if !join.is_empty() {
        sql.push_str(join);
        sql.push_str(pick(RELATIONS, it.next()));
        if it.next().is_some_and(|b| b % 2 == 0) {
            sql.push_str(" ON a = b");
        }
    }
    let rest: Vec<u8> = it.copied().collect();
    if let Ok(tail) = std::str::from_utf8(&rest) {
        sql.push(' ');
        sql.push_str(tail);
    }
    // (Text past `--` is a comment: the oracle reads tokens, not text.)
    if check(&sql).is_ok() {
        tokens_oracle(&sql).unwrap_or_else(|e| panic!("accepted {sql:?}: {e}"));
    }
});
