-- turn_tool_calls: per turn and tool, how often the turn called the tool,
-- how many of those calls failed, and when the first and last began. The
-- per-turn rules (detection.md §4.2–4.5) look only at pairs with two calls
-- or more; pairs with no failure are the tool's healthy turns, the yardstick
-- a storm's evidence is compared with.
-- Input table `calls`: tool-call rows (MCP spans that duplicate a GenAI span
-- of the same call already removed) with a `turn` column: the turn each row
-- belongs to, resolved in Rust at sweep time (detection.md §2: nearest
-- agent ancestor, else the agent call id, else the trace root).
SELECT
    turn,
    tool_name,
    COUNT(*) AS calls,
    SUM(CASE WHEN error_class <> 'ok' THEN 1 ELSE 0 END) AS failures,
    MIN(start_ns) AS first_start_ns,
    MAX(start_ns) AS last_start_ns
FROM calls
GROUP BY turn, tool_name
