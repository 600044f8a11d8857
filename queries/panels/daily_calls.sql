-- Daily tool calls and errors over the range, all tools together.
SELECT day, SUM(calls) AS total, SUM(errors) AS errors
FROM tool_daily
GROUP BY day
ORDER BY day
