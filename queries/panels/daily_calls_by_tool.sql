-- Daily tool calls and errors over the range, per tool (services added up).
-- The chart keeps the busiest tools of the range and sums the rest.
SELECT day, tool_name AS tool, SUM(calls) AS total, SUM(errors) AS errors
FROM tool_daily
GROUP BY day, tool_name
ORDER BY day, tool
