//! The MCP server's pure parts: the SQL guard.

use super::sql::check;

#[test]
fn the_sql_guard_takes_one_select_over_the_tables_and_refuses_the_rest() {
    for ok in [
        "SELECT tool_name, sum(calls) FROM tool_daily GROUP BY tool_name",
        "WITH t AS (SELECT * FROM spans WHERE is_tool_call) SELECT count(*) FROM t",
        "select d.tool_name from tool_daily d join turn_summary s on true limit 1",
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
        ("SELEKT 1", "does not parse"),
        ("", "exactly one"),
    ] {
        let e = check(bad).expect_err(bad).to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
