-- The tools with the most failed calls in the range.
SELECT tool_name AS tool, SUM(calls) AS calls, SUM(errors) AS errors,
       SUM(rate_limited) AS rate_limited, SUM(unavailable) AS unavailable,
       SUM(timeout) AS timeout, SUM(invalid_request) AS invalid_request
FROM tool_daily
GROUP BY tool_name
ORDER BY errors DESC, tool
LIMIT 10
