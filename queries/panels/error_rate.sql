-- The share of failed tool calls per day, in percent.
SELECT day, 100.0 * CAST(SUM(errors) AS DOUBLE) / SUM(calls) AS value
FROM tool_daily
GROUP BY day
ORDER BY day
