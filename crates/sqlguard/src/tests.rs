//! The allowlist on the attacks that broke the name check, on what a
//! reader of the tables writes, and on generated statements against the
//! token oracle.

use proptest::prelude::*;

use super::*;

fn refused(sql: &str) -> String {
    match check(sql) {
        Ok(read) => panic!("accepted {sql:?} (reads {read:?})"),
        Err(r) => r.to_string(),
    }
}

#[test]
fn a_cte_named_like_a_file_function_cannot_open_a_file() {
    // The attack: the CTE made the name "allowed", polars then ran it as
    // its table function on another store's files.
    let why = refused(
        "WITH read_parquet AS (SELECT 1 AS x) SELECT name, trace_id FROM read_parquet('/some/other/store/spans/*/*.parquet')",
    );
    assert!(why.contains("read_parquet"), "{why}");
    // Any name called with arguments in FROM is a table function to polars.
    let why = refused("WITH x AS (SELECT 1 AS a) SELECT * FROM x('/etc/passwd')");
    assert!(why.contains("table function"), "{why}");
    let why = refused("SELECT * FROM spans('/etc/passwd')");
    assert!(why.contains("table function"), "{why}");
    for f in [
        "read_csv",
        "read_ipc",
        "read_json",
        "READ_PARQUET",
        "scan_parquet",
    ] {
        let why = refused(&format!("WITH {f} AS (SELECT 1) SELECT * FROM {f}"));
        assert!(why.contains("file functions"), "{f}: {why}");
        refused(&format!("SELECT * FROM {f}('/x')"));
    }
}

#[test]
fn the_message_says_nothing_of_the_file_system() {
    // The same refusal for a path that exists and one that does not.
    let a = refused("SELECT * FROM read_parquet('/etc/passwd')");
    let b = refused("SELECT * FROM read_parquet('/no/such/file.parquet')");
    assert_eq!(a, b);
    assert!(!a.contains("PAR1") && !a.contains("No such file"), "{a}");
}

#[test]
fn only_the_tables_and_defined_ctes_are_read() {
    assert!(check("SELECT tool, sum(calls) FROM tool_daily GROUP BY tool").is_ok());
    assert!(check(
        "WITH t AS (SELECT tool_name, count(*) AS n FROM spans GROUP BY tool_name) SELECT * FROM t ORDER BY n DESC LIMIT 5"
    )
    .is_ok());
    assert!(check(
        "SELECT s.trace_id FROM spans s JOIN turn_summary t ON s.trace_id = t.trace_id WHERE s.is_tool_call"
    )
    .is_ok());
    assert!(check("SELECT * FROM (SELECT * FROM spans) AS x").is_ok());
    assert!(check("SELECT 1 UNION ALL SELECT 2").is_ok());
    assert!(refused("SELECT * FROM other").contains("\"other\""));
    assert!(refused("SELECT * FROM main.spans").contains("one plain name"));
    assert!(refused("WITH spans AS (SELECT 1) SELECT * FROM spans").contains("one of the tables"));
}

#[test]
fn writes_and_other_statements_are_refused() {
    assert!(refused("DROP TABLE spans").contains("only SELECT"));
    assert!(refused("CREATE TABLE x AS SELECT * FROM spans").contains("only SELECT"));
    assert!(refused("SELECT 1; SELECT 2").contains("exactly one"));
    assert!(refused("SELECT * INTO t FROM spans").contains("INTO"));
    assert!(refused("EXPLAIN SELECT * FROM spans").contains("only SELECT"));
    assert!(refused("COPY spans TO '/tmp/x'").contains("only SELECT"));
    assert!(refused("SHOW TABLES").contains("only SELECT"));
}

#[test]
fn cross_joins_and_string_growers_are_refused_before_they_run() {
    assert!(refused("SELECT count(*) FROM spans a CROSS JOIN spans b").contains("CROSS JOIN"));
    assert!(refused("SELECT count(*) FROM spans a, spans b").contains("comma"));
    assert!(refused("SELECT count(*) FROM spans a JOIN spans b").contains("without ON"));
    assert!(refused("SELECT lpad('x', 1000000000, 'y')").contains("at most 10000"));
    assert!(refused("SELECT rpad(name, 20000, 'y') FROM spans").contains("at most 10000"));
    assert!(refused("SELECT lpad(name, length(name) * 1000, 'y') FROM spans").contains("literal"));
    assert!(check("SELECT lpad(tool, 20, ' ') FROM tool_daily").is_ok());
    assert!(refused(&format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES))).contains("bytes"));
}

#[test]
fn a_join_on_no_key_is_a_cross_join_and_refused() {
    for on in [
        "1 = 1",
        "true",
        "(1 = 1)",
        "a.kind = a.kind",
        "a.kind = 'x'",
        "a.start_ns < b.start_ns",
        "a.kind <> b.kind",
        "a.kind = a.name OR b.kind = b.name",
    ] {
        let sql = format!("SELECT count(*) FROM spans a JOIN spans b ON {on}");
        assert!(refused(&sql).contains("cross join"), "{sql}");
    }
    for on in [
        "a.trace_id = b.trace_id",
        "(a.trace_id = b.trace_id)",
        "a.trace_id = b.trace_id AND a.start_ns < b.start_ns",
        "a.start_ns < b.start_ns AND (b.span_id = a.parent_span_id)",
        "trace_id = parent_span_id",
    ] {
        let sql = format!("SELECT count(*) FROM spans a JOIN spans b ON {on}");
        assert!(check(&sql).is_ok(), "{sql}: {:?}", check(&sql));
    }
}

#[test]
fn an_expression_nested_past_the_limit_is_refused_not_planned() {
    let chain = |n: usize| format!("SELECT {} AS x", vec!["1"; n].join(" + "));
    assert!(check(&chain(100)).is_ok());
    assert!(refused(&chain(MAX_EXPR_DEPTH + 1)).contains("nests more than"));
    // Just under the size cap: the check itself neither overflows nor slows.
    let long = format!("SELECT {} AS x", vec!["1"; 8150].join("+"));
    assert!(long.len() <= MAX_SQL_BYTES);
    let started = std::time::Instant::now();
    assert!(refused(&long).contains("nests more than"));
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    let ors = (0..200)
        .map(|i| format!("kind = 'k{i}'"))
        .collect::<Vec<_>>();
    assert!(check(&format!(
        "SELECT count(*) FROM spans WHERE {}",
        ors.join(" OR ")
    ))
    .is_ok());
}

#[test]
fn functions_outside_the_allowlist_are_refused() {
    assert!(refused("SELECT unnest(x) FROM spans").contains("\"unnest\""));
    assert!(refused("SELECT my_udf(1)").contains("\"my_udf\""));
    assert!(refused("SELECT read_parquet('/etc/passwd')").contains("file functions"));
    assert!(refused("SELECT x FROM UNNEST([1, 2]) AS t(x)").contains("FROM item"));
    assert!(refused("SELECT * FROM LATERAL (SELECT 1) AS t").contains("LATERAL"));
    assert!(check(
        "SELECT count(*), avg(duration_ns), quantile_cont(duration_ns, 0.95) FROM spans"
    )
    .is_ok());
    assert!(check(
        "SELECT row_number() OVER (PARTITION BY tool_name ORDER BY start_ns) FROM spans"
    )
    .is_ok());
    assert!(check("SELECT CAST(calls AS DOUBLE) / 2, lower(tool) FROM tool_daily").is_ok());
}

#[test]
fn the_oracle_catches_what_it_should() {
    assert!(tokens_oracle("SELECT * FROM read_parquet('/x')").is_err());
    assert!(tokens_oracle("SELECT my_udf(1)").is_err());
    assert!(tokens_oracle("WITH x (a) AS (SELECT 1) SELECT a FROM x").is_ok());
    assert!(tokens_oracle("SELECT count(*) FROM spans").is_ok());
    // Found by the fuzzer: a CTE written without AS, an alias with
    // columns and no AS, are no calls.
    for sql in [
        "WITH repa_d (SELECT 1 AS x) SELECT naWITH readqme, trace_id Spp,ppppapppp_",
        "SELECT * FROM spans  t( AS unnest) LIMIT T",
    ] {
        if check(sql).is_ok() {
            assert!(
                tokens_oracle(sql).is_ok(),
                "{sql}: {:?}",
                tokens_oracle(sql)
            );
        }
    }
}

/// Pieces of statements, benign and hostile, that the generator joins.
fn relation() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("spans".to_string()),
        Just("tool_daily".to_string()),
        Just("turn_summary".to_string()),
        Just("t".to_string()),
        Just("read_parquet".to_string()),
        Just("read_parquet('/etc/passwd')".to_string()),
        Just("t('/etc')".to_string()),
        Just("spans('/x')".to_string()),
        Just("READ_CSV('/x')".to_string()),
        Just("\"read_parquet\"('/x')".to_string()),
        Just("scan_parquet".to_string()),
        Just("main.spans".to_string()),
        Just("UNNEST([1,2]) AS u(x)".to_string()),
        Just("(SELECT * FROM spans) AS d".to_string()),
        Just("(SELECT * FROM read_json('/x')) AS d".to_string()),
        Just("TABLE(read_parquet('/x'))".to_string()),
        Just("LATERAL (SELECT 1) AS l".to_string()),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        Just("count(*)".to_string()),
        Just("lower(tool_name)".to_string()),
        Just("read_parquet('/x')".to_string()),
        Just("lpad('x', 1000000000, 'y')".to_string()),
        Just("lpad('x', 10, 'y')".to_string()),
        Just("my_udf(1)".to_string()),
        Just("(SELECT count(*) FROM read_csv('/x'))".to_string()),
        Just("(SELECT max(calls) FROM tool_daily)".to_string()),
        Just("unnest(x)".to_string()),
        Just("1".to_string()),
    ]
}

fn cte_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("t".to_string()),
        Just("read_parquet".to_string()),
        Just("spans".to_string()),
        Just("Read_Json".to_string()),
    ]
}

fn join() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        relation().prop_map(|r| format!(" JOIN {r} ON 1 = 1")),
        relation().prop_map(|r| format!(" CROSS JOIN {r}")),
        relation().prop_map(|r| format!(", {r}")),
        relation().prop_map(|r| format!(" LEFT JOIN {r} USING (trace_id)")),
    ]
}

fn statement() -> impl Strategy<Value = String> {
    (
        proptest::option::of((cte_name(), relation())),
        expr(),
        relation(),
        join(),
        proptest::option::of(expr()),
    )
        .prop_map(|(cte, e, r, j, w)| {
            let mut s = String::new();
            if let Some((n, body)) = cte {
                s.push_str(&format!("WITH {n} AS (SELECT * FROM {body}) "));
            }
            s.push_str(&format!("SELECT {e} FROM {r}{j}"));
            if let Some(w) = w {
                s.push_str(&format!(" WHERE {w} IS NOT NULL"));
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// No statement the check accepts names a file or calls a function
    /// outside the allowlist, by the token oracle.
    #[test]
    fn accepted_statements_pass_the_token_oracle(sql in statement()) {
        if check(&sql).is_ok() {
            prop_assert!(tokens_oracle(&sql).is_ok(), "{sql}: {:?}", tokens_oracle(&sql));
            prop_assert!(!sql.to_lowercase().contains("read_"), "{sql}");
            prop_assert!(!sql.to_lowercase().contains("cross join"), "{sql}");
            prop_assert!(!sql.contains("1000000000"), "{sql}");
        }
    }

    /// Arbitrary text never panics the check, and what it accepts passes
    /// the oracle.
    #[test]
    fn any_text_is_checked_without_panic(sql in "\\PC{0,200}") {
        if check(&sql).is_ok() {
            prop_assert!(tokens_oracle(&sql).is_ok(), "{sql}: {:?}", tokens_oracle(&sql));
        }
    }
}

#[test]
fn docs_list_exactly_the_allowed_functions() {
    let docs = include_str!("../../../docs/mcp.md");
    let start = docs
        .find("<!-- functions:")
        .expect("docs/mcp.md's functions list");
    let end = docs[start..]
        .find("<!-- end functions -->")
        .expect("its end")
        + start;
    let listed: BTreeSet<&str> = docs[start..end].split('`').skip(1).step_by(2).collect();
    let allowed: BTreeSet<&str> = FUNCTIONS.iter().copied().collect();
    assert_eq!(
        listed, allowed,
        "docs/mcp.md lists other functions than FUNCTIONS"
    );
    assert_eq!(
        FUNCTIONS.len(),
        allowed.len(),
        "FUNCTIONS holds a name twice"
    );
}
