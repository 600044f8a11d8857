-- tool_error_names: per tool, UTC day and error class, the raw names the
-- failures carried (error.type, the status, the exception type) and how
-- often: the same 429 logged as "RateLimitError", "429", "rate_limited"…
-- shows as one class with its names listed; so are the names of the
-- control-flow classes (`interrupted`, `cancelled`: `GraphInterrupt`,
-- `CancelledError`), which are no failures. Input table `spans` as for
-- tool_daily.sql. Run by store::rollup through polars SQL.
SELECT
    tool_name,
    day,
    error_class,
    error_type,
    COUNT(*) AS calls
FROM spans
WHERE error_class <> 'ok'
GROUP BY tool_name, day, error_class, error_type
