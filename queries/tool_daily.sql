-- tool_daily: per tool, service and UTC day, the numbers every later read
-- starts from (the error-rate baseline, the dashboard's daily chart).
-- Input table `spans`: the day's tool-call rows (MCP spans that duplicate a
-- GenAI span of the same call already removed) with a `day` column
-- ('YYYY-MM-DD') and each call's `dependency` (the server it talks to, as
-- store::rollup resolves it: the innermost span of an MCP nest, else a
-- client child's; NULL when none, and in parts written before the column).
-- `dependency` is the one the day's failed calls name, when they name one;
-- else the one all its calls name; else NULL (a tool that calls several
-- servers is not put on one of them by chance). The same on
-- every engine; calls without one are passed over). Control flow is no
-- failure (docs/detection.md §3): a call `interrupted` (a human-in-the-loop
-- interrupt, a hand-off) or `cancelled` (by its user) counts in `calls` and
-- in its own column, never in `errors` or `error_rate`. `successes` and
-- `last_ok_ns` (the end of the day's last successful call) are what the
-- silent-tool rules read (docs/detection.md §4.8). Run by store::rollup
-- through polars SQL; runs unchanged on DuckDB over the Parquet parts.
SELECT
    tool_name,
    service_name,
    day,
    COUNT(*) AS calls,
    SUM(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN 1 ELSE 0 END) AS errors,
    SUM(CASE WHEN error_class = 'ok' THEN 1 ELSE 0 END) AS successes,
    CAST(SUM(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN 1 ELSE 0 END) AS DOUBLE) / COUNT(*) AS error_rate,
    SUM(CASE WHEN retryable = TRUE THEN 1 ELSE 0 END) AS retryable_errors,
    SUM(CASE WHEN retryable = FALSE THEN 1 ELSE 0 END) AS deterministic_errors,
    SUM(CASE WHEN error_class = 'rate_limited' THEN 1 ELSE 0 END) AS rate_limited,
    SUM(CASE WHEN error_class = 'unavailable' THEN 1 ELSE 0 END) AS unavailable,
    SUM(CASE WHEN error_class = 'timeout' THEN 1 ELSE 0 END) AS timeout,
    SUM(CASE WHEN error_class = 'network' THEN 1 ELSE 0 END) AS network,
    SUM(CASE WHEN error_class = 'server_error' THEN 1 ELSE 0 END) AS server_error,
    SUM(CASE WHEN error_class = 'auth' THEN 1 ELSE 0 END) AS auth,
    SUM(CASE WHEN error_class = 'not_found' THEN 1 ELSE 0 END) AS not_found,
    SUM(CASE WHEN error_class = 'invalid_request' THEN 1 ELSE 0 END) AS invalid_request,
    SUM(CASE WHEN error_class = 'client_error' THEN 1 ELSE 0 END) AS client_error,
    SUM(CASE WHEN error_class = 'policy' THEN 1 ELSE 0 END) AS policy,
    SUM(CASE WHEN error_class = 'unknown' THEN 1 ELSE 0 END) AS unknown,
    SUM(CASE WHEN error_class = 'interrupted' THEN 1 ELSE 0 END) AS interrupted,
    SUM(CASE WHEN error_class = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    SUM(duration_ns) AS duration_sum_ns,
    QUANTILE_CONT(duration_ns, 0.5) AS p50_ns,
    QUANTILE_CONT(duration_ns, 0.95) AS p95_ns,
    MAX(duration_ns) AS max_ns,
    SUM(cost_usd) AS cost_usd,
    MAX(CASE WHEN error_class = 'ok' THEN end_ns END) AS last_ok_ns,
    CASE
        WHEN MIN(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN dependency END)
           = MAX(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN dependency END)
            THEN MAX(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN dependency END)
        WHEN MIN(dependency) = MAX(dependency) THEN MAX(dependency)
    END AS dependency
FROM spans
GROUP BY tool_name, service_name, day
ORDER BY day, tool_name, service_name
