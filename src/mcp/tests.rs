//! The MCP server's pure parts: the SQL guard.

use super::sql::check;

#[test]
fn the_sql_guard_takes_one_select_over_the_tables_and_refuses_the_rest() {
    for ok in [
        "SELECT tool_name, sum(calls) FROM tool_daily GROUP BY tool_name",
        "WITH t AS (SELECT * FROM spans WHERE is_tool_call) SELECT count(*) FROM t",
        "select d.tool_name from tool_daily d join turn_summary s on d.tool_name = s.tool_name limit 1",
        "SELECT 'read_parquet(''x'')' AS s FROM tool_daily",
    ] {
        check(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, says) in [
        ("DELETE FROM tool_daily", "only SELECT"),
        ("DROP TABLE spans", "only SELECT"),
        ("CREATE TABLE x AS SELECT * FROM spans", "only SELECT"),
        ("SELECT 1 FROM spans; DROP TABLE spans", "exactly one"),
        (
            "SELECT * FROM read_parquet('/etc/passwd')",
            "file functions",
        ),
        ("SELECT * FROM read_csv('/etc/passwd')", "file functions"),
        ("SELECT * FROM secrets", "\"secrets\""),
        (
            "select d.tool_name from tool_daily d join turn_summary s on true limit 1",
            "cross join",
        ),
        ("SELEKT 1", "does not parse"),
        ("", "exactly one"),
    ] {
        let e = check(bad).expect_err(bad).to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_deep_statement_is_refused_from_a_runtime_sized_thread_without_overflow() {
    // Each refusal below prints part of the parsed statement; each is
    // thousands of levels deep and under the 16 KiB cap. Checked from a
    // thread with a tokio worker's 2 MiB stack, as the server does.
    let sum = |n: usize| vec!["1"; n].join("+");
    let on = vec!["1=1"; 2000].join(" AND ");
    for (sql, says) in [
        (format!("EXPLAIN SELECT {}", sum(8000)), "only SELECT"),
        (
            format!("SELECT 1 FROM spans a JOIN spans b ON {on}"),
            "cross join",
        ),
        (
            format!("SELECT * FROM UNNEST([{}])", sum(8000)),
            "FROM item",
        ),
        (format!("SELECT {} AS x", sum(8150)), "nests more than"),
    ] {
        assert!(sql.len() <= 16 * 1024, "{} bytes", sql.len());
        let answer = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || check(&sql).map_err(|e| e.to_string()))
            .unwrap()
            .join()
            .expect("the check did not crash its caller");
        let e = answer.expect_err("refused");
        assert!(e.contains(says), "{e}");
    }
}
