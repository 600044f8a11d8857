-- duckdb_sweep.sql: what `stormwatch sweep` detects, written as one DuckDB
-- script over the Parquet parts, for the sweep benchmark
-- (shared/design/detection.md §2 turns, §4.1-4.6 findings; the Rust is
-- src/detect/*.rs and src/sweep.rs, the thresholds are the defaults of
-- src/config.rs: SpikeParams and StormParams).
--
-- Inputs: duckdb_sweep.py sets these with SET VARIABLE before running it:
--   spans_glob  VARCHAR  '<data-dir>/spans/date=*/part-*.parquet'
--   now_ns      BIGINT   the sweep's "now" (ns since the epoch)
--   since_days  INTEGER  findings are kept for UTC days in [today - since_days, today]
-- Output: the last statement returns one row, the number of findings of
-- each kind and the sorted tools that had a retry storm.
--
-- Known departures from the Rust rules are marked "DIFF:" below. None of
-- them changed a finding on the project's fixtures, nor on the synthetic
-- stores the script was checked against (a line-by-line Python port of the
-- Rust rules gave the same findings). They show with traces that run on
-- for more than an hour past the day their turn began, `agent:<id>` turns
-- spread over several traces, cycles in parent links, spans that end before
-- they start or calls that start at the same nanosecond.
--
-- Statements are separated by semicolons at the end of a line. Comments
-- never contain one.

-- ---------------------------------------------------------------------------
-- Thresholds: the defaults of src/config.rs
-- ---------------------------------------------------------------------------
SET VARIABLE ns_day = 86400000000000::BIGINT;
-- [detect.error_spike] (§4.1, §4.6)
SET VARIABLE spike_multiplier = 3.0::DOUBLE;
SET VARIABLE baseline_floor = 0.01::DOUBLE;
SET VARIABLE warmup_floor = 0.05::DOUBLE;
SET VARIABLE confidence = 0.95::DOUBLE;
SET VARIABLE spike_min_calls = 10;
SET VARIABLE spike_min_errors = 3;
SET VARIABLE baseline_days = 7;
SET VARIABLE reach_back_days = 28;
SET VARIABLE min_baseline_days = 3;
SET VARIABLE latency_multiplier = 3.0::DOUBLE;
-- [detect.retry_storm] (§4.2)
SET VARIABLE storm_min_calls = 5;
SET VARIABLE storm_min_failures = 2;
SET VARIABLE no_backoff_ms = 100.0::DOUBLE;
SET VARIABLE exponential_ratio = 1.5::DOUBLE;
SET VARIABLE fixed_variation = 0.3::DOUBLE;
SET VARIABLE settle_ns = 90 * 1000000000::BIGINT;
-- sweep.rs MARGIN_NS: a day's turns are read with an hour on either side
SET VARIABLE margin_ns = 3600 * 1000000000::BIGINT;

-- The window (sweep.rs run): today = UTC day of now; findings for days in
-- [since_day, today]; the per-turn rules read spans that start in
-- [since_day - 1 h, now) from the partitions since_day - 1 .. today + 1.
SET VARIABLE today = DATE '1970-01-01' + CAST(getvariable('now_ns') // getvariable('ns_day') AS INTEGER);
SET VARIABLE since_day = getvariable('today') - CAST(getvariable('since_days') AS INTEGER);
SET VARIABLE frame_lo_ns = (getvariable('since_day') - DATE '1970-01-01') * getvariable('ns_day') - getvariable('margin_ns');

-- wilson.rs: the z of a one-sided interval (Acklam's inverse normal CDF, as
-- the Rust computes it) and the lower bound of the Wilson score interval.
CREATE OR REPLACE TEMP MACRO acklam_tail(q) AS
    (((((-7.784894002430293e-03 * q + -3.223964580411365e-01) * q + -2.400758277161838e+00) * q
        + -2.549732539343734e+00) * q + 4.374664141464968e+00) * q + 2.938163982698783e+00)
    / ((((7.784695709041462e-03 * q + 3.224671290700398e-01) * q + 2.445134137142996e+00) * q
        + 3.754408661907416e+00) * q + 1.0);
CREATE OR REPLACE TEMP MACRO acklam_central(q, r) AS
    (((((-3.969683028665376e+01 * r + 2.209460984245205e+02) * r + -2.759285104469687e+02) * r
        + 1.383577518672690e+02) * r + -3.066479806614716e+01) * r + 2.506628277459239e+00) * q
    / (((((-5.447609879822406e+01 * r + 1.615858368580409e+02) * r + -1.556989798598866e+02) * r
        + 6.680131188771972e+01) * r + -1.328068155288572e+01) * r + 1.0);
CREATE OR REPLACE TEMP MACRO inverse_normal_cdf(p) AS
    CASE
        WHEN p < 0.02425 THEN acklam_tail(sqrt(-2.0 * ln(p)))
        WHEN p <= 1.0 - 0.02425 THEN acklam_central(p - 0.5, (p - 0.5) * (p - 0.5))
        ELSE -acklam_tail(sqrt(-2.0 * ln(1.0 - p)))
    END;
SET VARIABLE z = inverse_normal_cdf(least(greatest(getvariable('confidence'), 0.5), 0.999999));
CREATE OR REPLACE TEMP MACRO wilson_lower(errors, calls, z) AS
    CASE WHEN calls = 0 THEN 0.0 ELSE greatest(
        ((least(errors, calls) / calls + z * z / (2.0 * calls))
         - z * sqrt((least(errors, calls) / calls) * (1.0 - least(errors, calls) / calls) / calls
                    + z * z / (4.0 * calls * calls)))
        / (1.0 + z * z / calls),
        0.0) END;

-- ===========================================================================
-- Daily rollup (store/rollup.rs + queries/tool_daily.sql), over ALL history:
-- the baselines of §4.1 and §4.6 read every stored day.
-- DIFF: `stormwatch sweep` reads the precomputed rollups/tool_daily.parquet;
-- here it is recomputed from the span parts (same query, same day = the
-- partition's date, same MCP duplicate removal within a day's parts), so the
-- benchmark measures the real work. Only the columns the rules use are kept.
-- ===========================================================================

-- MCP `tools/call` spans (rollup.rs mcp_duplicates): few or none, so they are
-- collected first and joined against the other tool spans from their side.
CREATE OR REPLACE TEMP TABLE mcp_history AS
SELECT date AS day, trace_id, span_id, parent_span_id, tool_name
FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true)
WHERE is_tool_call AND tool_convention = 'mcp';

-- An MCP span that describes the same call as a non-MCP tool span of the
-- same day: that span is its parent or its child, with the same tool name
-- (a span without one pairs with nothing).
CREATE OR REPLACE TEMP TABLE mcp_history_dup AS
SELECT m.day, m.trace_id, m.span_id
FROM mcp_history m
JOIN read_parquet(getvariable('spans_glob'), hive_partitioning = true) n
  ON n.date = m.day AND n.trace_id = m.trace_id AND n.span_id = m.parent_span_id
 AND n.tool_name = m.tool_name
WHERE n.is_tool_call AND n.tool_convention IS DISTINCT FROM 'mcp'
UNION
SELECT m.day, m.trace_id, m.span_id
FROM mcp_history m
JOIN read_parquet(getvariable('spans_glob'), hive_partitioning = true) n
  ON n.date = m.day AND n.trace_id = m.trace_id AND n.parent_span_id = m.span_id
 AND n.tool_name = m.tool_name
WHERE n.is_tool_call AND n.tool_convention IS DISTINCT FROM 'mcp';

CREATE OR REPLACE TEMP TABLE tool_daily AS
WITH tool_rows AS (
    -- every non-MCP tool call: only the counted columns are read
    SELECT date AS day, tool_name, service_name, duration_ns, error_class
    FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true)
    WHERE is_tool_call AND tool_convention IS DISTINCT FROM 'mcp'
    UNION ALL
    -- MCP tool calls that are not a duplicate
    SELECT s.date, s.tool_name, s.service_name, s.duration_ns, s.error_class
    FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true) s
    WHERE s.is_tool_call AND s.tool_convention = 'mcp'
      AND NOT EXISTS (SELECT 1 FROM mcp_history_dup d
                      WHERE d.day = s.date AND d.trace_id = s.trace_id AND d.span_id = s.span_id)
)
SELECT
    tool_name,
    service_name,
    day,
    COUNT(*) AS calls,
    SUM(CASE WHEN error_class <> 'ok' THEN 1 ELSE 0 END) AS errors,
    QUANTILE_CONT(duration_ns, 0.95) AS p95_ns
FROM tool_rows
GROUP BY tool_name, service_name, day;

-- ===========================================================================
-- §4.1 Error-rate spike and §4.6 latency spike (error_spike.rs judge),
-- per (tool, service) series, every complete day before today in day order.
--
-- The baseline of a day leaves out the days already flagged for the series,
-- and whether a day is flagged depends on that baseline, so the days are
-- judged one after another: a recursive CTE steps through each series one
-- day per iteration, carrying the list of flagged days. This is the Rust
-- algorithm exactly (warm-up, trailing 7 days without flagged days, reach
-- back 28 days for 7 unflagged days, else every recent day; floor; Wilson
-- lower bound strictly above 3x baseline; min calls and errors). Series are
-- small (one row per tool and day), so this costs nothing next to the spans.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE series AS
SELECT
    row_number() OVER () AS sid,
    tool_name,
    service_name,
    list({'day': day, 'calls': calls, 'errors': errors, 'p95': p95_ns} ORDER BY day) AS hist
FROM tool_daily
GROUP BY tool_name, service_name;

CREATE OR REPLACE TEMP TABLE verdicts AS
WITH RECURSIVE judge(sid, i, flagged, day, calls, errors, basis, baseline, lower_bound,
                     is_spike, is_latency) AS (
    SELECT sid, 0, []::DATE[], NULL::DATE, NULL::BIGINT, NULL::BIGINT, NULL::VARCHAR,
           NULL::DOUBLE, NULL::DOUBLE, false, false
    FROM series
    UNION ALL
    SELECT sid, i,
           CASE WHEN is_spike THEN list_append(flagged, day) ELSE flagged END,
           day, calls, errors, basis, baseline, lower_bound, is_spike,
           -- §4.6: p95 above 3x the baseline days' median p95, with min
           -- calls, not on a warm-up baseline nor on a day flagged for errors
           NOT is_spike AND basis <> 'warmup' AND calls >= getvariable('spike_min_calls')
               AND pool_p95 > 0 AND p95 > getvariable('latency_multiplier') * pool_p95
    FROM (
        SELECT *,
               wilson_lower(errors, calls, getvariable('z')) AS lower_bound,
               calls >= getvariable('spike_min_calls') AND errors >= getvariable('spike_min_errors')
                   AND wilson_lower(errors, calls, getvariable('z'))
                       > getvariable('spike_multiplier') * baseline AS is_spike
        FROM (
            SELECT *,
                   CASE WHEN basis = 'warmup' THEN getvariable('warmup_floor')
                        ELSE greatest(
                            CASE WHEN list_sum(list_transform(pool, lambda x: x.calls)) = 0 THEN 0.0
                                 ELSE list_sum(list_transform(pool, lambda x: x.errors))::DOUBLE
                                      / list_sum(list_transform(pool, lambda x: x.calls)) END,
                            getvariable('baseline_floor')) END AS baseline,
                   list_median(list_transform(pool, lambda x: x.p95)) AS pool_p95
            FROM (
                SELECT *,
                       CASE WHEN basis = 'warmup' THEN []
                            WHEN basis = 'trailing' THEN unflagged
                            WHEN basis = 'reach_back' THEN reach
                            WHEN len(win) > 0 THEN win
                            ELSE list_slice(list_reverse(earlier), 1, getvariable('baseline_days')) END AS pool
                FROM (
                    SELECT *,
                           CASE WHEN len(earlier) < getvariable('min_baseline_days') THEN 'warmup'
                                WHEN len(unflagged) >= getvariable('min_baseline_days') THEN 'trailing'
                                WHEN len(reach) >= getvariable('min_baseline_days') THEN 'reach_back'
                                ELSE 'all_recent' END AS basis
                    FROM (
                        SELECT *,
                               -- unflagged days of the trailing window
                               list_filter(win, lambda x: NOT list_contains(flagged, x.day)) AS unflagged,
                               -- the most recent unflagged days within reach_back_days, at most baseline_days
                               list_slice(list_reverse(list_filter(earlier, lambda x:
                                   x.day >= day - getvariable('reach_back_days')
                                   AND NOT list_contains(flagged, x.day))),
                                   1, getvariable('baseline_days')) AS reach
                        FROM (
                            SELECT *,
                                   list_filter(earlier, lambda x: x.day >= day - getvariable('baseline_days')) AS win
                            FROM (
                                SELECT j.sid, j.i + 1 AS i, j.flagged,
                                       s.hist[j.i + 1].day AS day,
                                       s.hist[j.i + 1].calls AS calls,
                                       s.hist[j.i + 1].errors AS errors,
                                       s.hist[j.i + 1].p95 AS p95,
                                       -- days before this one (every row has calls > 0)
                                       list_slice(s.hist, 1, j.i) AS earlier
                                FROM judge j JOIN series s ON s.sid = j.sid
                                WHERE j.i < len(s.hist) AND s.hist[j.i + 1].day < getvariable('today')
                            )
                        )
                    )
                )
            )
        )
    )
)
SELECT s.tool_name, s.service_name, j.day, j.calls, j.errors, j.basis, j.baseline,
       j.lower_bound, j.is_spike, j.is_latency
FROM judge j JOIN series s ON s.sid = j.sid
WHERE j.i > 0;

-- ===========================================================================
-- §2 Turns, for the per-turn rules (§4.2-4.5), over the spans that start in
-- [since_day - 1 h, now).
-- DIFF: sweep.rs resolves turns one day at a time over a frame of that day
-- plus an hour either side, and keeps the findings of turns that began on
-- that day. Here the whole window is one frame. The same turns come out
-- unless a turn's spans reach more than an hour beyond the day it began
-- (then the Rust can split it in two and judge the late half again).
--
-- Identities are hashed once, as they are read: trace, span and parent ids,
-- tool names, argument hashes and agent call ids become 64-bit hash()
-- values, and error classes small codes, so that the joins, groupings and
-- sorts over tens of millions of calls move integers, not 32-character
-- strings. A span is found by the pair (hash(trace_id), hash(span_id)); a
-- wrong match needs two traces whose ids collide in 64 bits and, within
-- them, two colliding span ids (odds far below 2^-64 per run). Groups are
-- keyed by 64-bit tool / argument hashes within one turn: two different
-- values colliding inside one turn has odds near 2^-64.
-- ===========================================================================

-- Error class codes in ErrorClass::ALL order: 0 ok, 1-5 retryable
-- (rate_limited, unavailable, timeout, network, server_error), 6-10
-- deterministic (auth, not_found, invalid_request, client_error, policy),
-- 11 unknown. Like ErrorClass::parse, anything else (and NULL) is unknown.
CREATE OR REPLACE TEMP MACRO class_code(c) AS
    (CASE c WHEN 'ok' THEN 0 WHEN 'rate_limited' THEN 1 WHEN 'unavailable' THEN 2 WHEN 'timeout' THEN 3
            WHEN 'network' THEN 4 WHEN 'server_error' THEN 5 WHEN 'auth' THEN 6 WHEN 'not_found' THEN 7
            WHEN 'invalid_request' THEN 8 WHEN 'client_error' THEN 9 WHEN 'policy' THEN 10
            ELSE 11 END)::UTINYINT;
CREATE OR REPLACE TEMP MACRO class_name(k) AS
    ['ok', 'rate_limited', 'unavailable', 'timeout', 'network', 'server_error',
     'auth', 'not_found', 'invalid_request', 'client_error', 'policy', 'unknown'][k + 1];
CREATE OR REPLACE TEMP MACRO deterministic_code(k) AS k BETWEEN 6 AND 10;

-- Every span of the frame, with the columns the per-turn rules read.
CREATE OR REPLACE TEMP TABLE frame AS
SELECT hash(trace_id) AS th,
       hash(span_id) AS sh,
       CASE WHEN parent_span_id IS NOT NULL THEN hash(parent_span_id) END AS ph,
       coalesce(is_agent, false) AS is_agent,
       coalesce(is_tool_call, false) AS is_tool,
       start_ns,
       end_ns,
       CASE WHEN tool_name IS NOT NULL THEN hash(tool_name) END AS tool_h,
       tool_convention = 'mcp' AS is_mcp,
       CASE WHEN agent_call_id <> '' THEN hash(agent_call_id) END AS agent_h,
       CASE WHEN tool_args_hash IS NOT NULL THEN hash(tool_args_hash) END AS args_h,
       class_code(error_class) AS cls
FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true)
WHERE date BETWEEN getvariable('since_day') - 1 AND getvariable('today') + 1
  AND start_ns >= getvariable('frame_lo_ns') AND start_ns < getvariable('now_ns');

-- A turn is judged once no span of its trace ended within settle_seconds of
-- now (calls.rs Turn::settled): the traces that have such a span.
CREATE OR REPLACE TEMP TABLE unsettled_traces AS
SELECT DISTINCT th FROM frame
WHERE end_ns > getvariable('now_ns') - getvariable('settle_ns');

-- The earliest span carrying each gen_ai.agent.call.id, for the start of
-- `agent:<id>` turns.
-- DIFF: every span with the id counts, also one that has an agent ancestor
-- (and so belongs to that agent's turn in the Rust).
CREATE OR REPLACE TEMP TABLE agent_call_starts AS
SELECT agent_h, min(start_ns) AS start_ns
FROM frame WHERE agent_h IS NOT NULL
GROUP BY agent_h;

-- MCP duplicates within the frame (calls.rs collect / rollup.rs
-- mcp_duplicates): an MCP span whose parent or child is a non-MCP span of
-- the same tool describes that call again; it is a span of the turn, not a
-- second call. A span without a tool name pairs with nothing.
-- The MCP spans are few or none: they are collected first so the joins
-- build on them.
CREATE OR REPLACE TEMP TABLE mcp_spans AS
SELECT th, sh, ph, tool_h FROM frame WHERE is_mcp AND tool_h IS NOT NULL;

CREATE OR REPLACE TEMP TABLE mcp_dup AS
SELECT m.th, m.sh FROM frame n JOIN mcp_spans m ON n.th = m.th AND n.sh = m.ph AND n.tool_h = m.tool_h
WHERE n.is_mcp IS NOT TRUE
UNION
SELECT m.th, m.sh FROM frame n JOIN mcp_spans m ON n.th = m.th AND n.ph = m.sh AND n.tool_h = m.tool_h
WHERE n.is_mcp IS NOT TRUE;

-- turns.rs resolve, first step: every tool call with its parent. A call's
-- turn is its nearest agent ancestor, itself included; the turn key is
-- (t1, t2) = (trace, anchor span): the agent span, or when there is none the
-- topmost stored ancestor (the trace's root); an `agent:<id>` turn (no agent
-- ancestor, gen_ai.agent.call.id set) is (hash(id), 0). The parent is looked
-- up among the spans that are not tool calls (agent, chat and other spans:
-- a narrow build side); a call whose parent is not found there (a tool span,
-- or not stored) or is not an agent keeps a NULL key here and goes up in
-- the recursive walk below, which looks at every span. (Span keys are
-- assumed unique, as the store keeps each (trace_id, span_id) once.)
CREATE OR REPLACE TEMP TABLE calls AS
SELECT c.th, c.sh, c.ph,
       coalesce(c.tool_h, hash('')) AS tool_h,   -- a missing name groups as "" (calls.rs)
       c.cls, c.args_h, c.start_ns, c.end_ns, c.agent_h,
       CASE WHEN c.is_agent OR p.is_agent THEN c.th
            WHEN c.ph IS NULL THEN coalesce(c.agent_h, c.th) END AS t1,
       CASE WHEN c.is_agent THEN c.sh
            WHEN p.is_agent THEN p.sh
            WHEN c.ph IS NULL AND c.agent_h IS NOT NULL THEN 0
            WHEN c.ph IS NULL THEN c.sh END AS t2,
       -- the start of the span that anchors the turn (agent span or root)
       CASE WHEN c.is_agent THEN c.start_ns
            WHEN p.is_agent THEN p.start_ns
            WHEN c.ph IS NULL AND c.agent_h IS NULL THEN c.start_ns END AS anchor_start
FROM frame c
LEFT JOIN (SELECT th, sh, is_agent, start_ns FROM frame WHERE NOT is_tool) p
       ON p.th = c.th AND p.sh = c.ph
WHERE c.is_tool
  AND NOT EXISTS (SELECT 1 FROM mcp_dup d WHERE d.th = c.th AND d.sh = c.sh);

-- The spans the walk can step on: those of the traces it walks in (none
-- when every call has no parent or a stored agent span as its parent).
CREATE OR REPLACE TEMP TABLE walk_links AS
SELECT f.th, f.sh, f.ph, f.is_agent, f.start_ns
FROM frame f
SEMI JOIN (SELECT DISTINCT th FROM calls WHERE t2 IS NULL) w ON w.th = f.th;

-- turns.rs resolve, the rest of the way up: a recursive walk over
-- parent_span_id within the trace, from the calls that still have no turn
-- (it starts again from the call, so its first step finds the parent
-- again), one hash join a level. Each step moves to the parent, or, when
-- the parent is not stored, stays and is marked done (the root); a walk ends
-- at an agent span or there. Only those last rows are kept.
-- DIFF: a cycle in parent links stops after 64 steps, not at the first
-- repeated span, so its "root" can be another span of the cycle.
CREATE OR REPLACE TEMP TABLE walked AS
WITH RECURSIVE walk(th, sh, cur, cur_parent, cur_agent, cur_start, depth, done) AS (
    SELECT th, sh, sh, ph, false, start_ns, 0, false
    FROM calls WHERE t2 IS NULL
    UNION ALL
    SELECT w.th, w.sh,
           coalesce(l.sh, w.cur), l.ph, coalesce(l.is_agent, false), coalesce(l.start_ns, w.cur_start),
           w.depth + 1,
           l.sh IS NULL OR w.depth + 1 >= 64
    FROM walk w
    LEFT JOIN walk_links l ON l.th = w.th AND l.sh = w.cur_parent
    WHERE NOT w.cur_agent AND NOT w.done
)
SELECT th, sh, cur, cur_agent, cur_start FROM walk WHERE cur_agent OR done;

UPDATE calls SET
    t1 = CASE WHEN w.cur_agent OR calls.agent_h IS NULL THEN calls.th ELSE calls.agent_h END,
    t2 = CASE WHEN w.cur_agent OR calls.agent_h IS NULL THEN w.cur ELSE 0 END,
    anchor_start = CASE WHEN w.cur_agent OR calls.agent_h IS NULL THEN w.cur_start END
FROM walked w
WHERE calls.th = w.th AND calls.sh = w.sh;

DROP TABLE frame;
DROP TABLE walk_links;
DROP TABLE walked;

-- ===========================================================================
-- Candidate groups: every rule below needs several calls of one tool in one
-- turn, so the groups that can hold a finding are picked by counting first
-- and only their turns and calls are looked at further.
-- ===========================================================================

-- §4.2: rounds <= calls, so a storm needs >= storm_min_calls calls and
-- >= storm_min_failures failed ones; retries of nothing but deterministic
-- errors are §4.3's wasted retries, not a storm. The failures are counted
-- over the failed calls alone (a few percent of all), and only the groups
-- with enough of them are counted in full.
CREATE OR REPLACE TEMP TABLE failing_groups AS
SELECT t1, t2, tool_h,
       count(*) AS failures,
       bool_and(deterministic_code(cls)) AS deterministic_only,
       count(DISTINCT ph) FILTER (WHERE ph IS NOT NULL AND ph <> hash('')) AS failing_parents
FROM calls
WHERE cls <> 0
GROUP BY t1, t2, tool_h;

CREATE OR REPLACE TEMP TABLE storm_groups AS
SELECT c.t1, c.t2, c.tool_h, count(*) AS calls, any_value(f.failures) AS failures
FROM calls c
JOIN (SELECT * FROM failing_groups
      WHERE failures >= getvariable('storm_min_failures') AND NOT deterministic_only) f
  ON f.t1 = c.t1 AND f.t2 = c.t2 AND f.tool_h = c.tool_h
GROUP BY c.t1, c.t2, c.tool_h
HAVING count(*) >= getvariable('storm_min_calls');

-- §4.3 and §4.4: >= 2 calls of the same request (turn, tool and arguments hash)
CREATE OR REPLACE TEMP TABLE request_groups AS
SELECT t1, t2, tool_h, args_h
FROM calls
WHERE args_h IS NOT NULL
GROUP BY t1, t2, tool_h, args_h
HAVING count(*) >= 2;

-- §4.5 Stacked retry layers (retries.rs stacked_retries): a tool's calls in
-- one turn under >= 2 parent spans (a parent id, not empty) that each hold
-- >= 3 attempts, at least one failed; so only groups whose failed calls sit
-- under >= 2 parents are looked at.
CREATE OR REPLACE TEMP TABLE stacked_groups AS
SELECT t1, t2, tool_h, count(*) AS layers
FROM (
    SELECT c.t1, c.t2, c.tool_h, c.ph
    FROM calls c
    SEMI JOIN (SELECT * FROM failing_groups WHERE failing_parents >= 2) f
      ON f.t1 = c.t1 AND f.t2 = c.t2 AND f.tool_h = c.tool_h
    WHERE c.ph IS NOT NULL AND c.ph <> hash('')
    GROUP BY c.t1, c.t2, c.tool_h, c.ph
    HAVING count(*) >= 3 AND bool_or(c.cls <> 0)
)
GROUP BY t1, t2, tool_h
HAVING count(*) >= 2;

-- Turns whose findings this sweep keeps (sweep.rs turn_findings): settled,
-- and began on a day of the window.
-- DIFF: a turn's start is the earliest of its anchor span (agent span or
-- root), its tool calls and, for an `agent:<id>` turn, the spans carrying
-- the id; the Rust takes the earliest of every span resolved to the turn
-- (the same in well-formed traces, where a parent starts before its
-- children). An `agent:<id>` turn that spans several traces is unsettled if
-- any of them is; the Rust looks at the trace of its first stored span.
CREATE OR REPLACE TEMP TABLE judged_turns AS
WITH cand AS (
    SELECT t1, t2 FROM storm_groups
    UNION SELECT t1, t2 FROM request_groups
    UNION SELECT t1, t2 FROM stacked_groups
), info AS (
    SELECT c.t1, c.t2,
           least(min(c.start_ns), min(c.anchor_start), min(a.start_ns)) AS turn_start,
           bool_or(u.th IS NOT NULL) AS unsettled
    FROM calls c
    SEMI JOIN cand ON cand.t1 = c.t1 AND cand.t2 = c.t2
    LEFT JOIN agent_call_starts a ON c.t2 = 0 AND a.agent_h = c.agent_h
    LEFT JOIN unsettled_traces u ON u.th = c.th
    GROUP BY c.t1, c.t2
)
SELECT t1, t2 FROM info
WHERE NOT unsettled
  AND DATE '1970-01-01' + CAST(turn_start // getvariable('ns_day') AS INTEGER)
      BETWEEN getvariable('since_day') AND getvariable('today');

-- ===========================================================================
-- §4.2 Retry storm (storm.rs retry_storms), per (turn, tool)
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE storms AS
WITH g AS (
    SELECT s.* FROM storm_groups s SEMI JOIN judged_turns j ON j.t1 = s.t1 AND j.t2 = s.t2
), c0 AS (
    -- the group's calls in start order
    -- DIFF: ties on start time are broken by the hash of the span id (here
    -- and in §4.3/4.4 below); the Rust keeps the order the spans were stored in.
    SELECT c.t1, c.t2, c.tool_h, c.start_ns, c.end_ns, c.cls,
           row_number() OVER (PARTITION BY c.t1, c.t2, c.tool_h ORDER BY c.start_ns, c.sh) AS ord
    FROM calls c SEMI JOIN g ON g.t1 = c.t1 AND g.t2 = c.t2 AND g.tool_h = c.tool_h
), c1 AS (
    SELECT *,
           max(end_ns) OVER (PARTITION BY t1, t2, tool_h ORDER BY ord
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM c0
), c2 AS (
    -- calls whose time ranges overlap are one round: a call opens a new
    -- round when it starts at or after the end of every earlier call
    -- (storm.rs rounds; the same as long as no span ends before it starts)
    SELECT *,
           sum(CASE WHEN prev_end IS NULL OR start_ns >= prev_end THEN 1 ELSE 0 END)
               OVER (PARTITION BY t1, t2, tool_h ORDER BY ord ROWS UNBOUNDED PRECEDING) AS round_no
    FROM c1
), rounds AS (
    SELECT t1, t2, tool_h, round_no,
           min(start_ns) AS r_start,
           max(end_ns) AS r_end,
           bool_or(cls <> 0) AS r_failed,
           -- the class that decided the round: its first failed call's
           arg_min(cls, ord) FILTER (WHERE cls <> 0) AS r_class
    FROM c2
    GROUP BY t1, t2, tool_h, round_no
), gaps AS (
    SELECT *,
           -- gaps[i] = start[i+1] - end[i], in ms, floored at 0 (the last
           -- round has none: greatest() would turn its NULL into 0)
           CASE WHEN lead(r_start) OVER w IS NOT NULL
                THEN greatest(lead(r_start) OVER w - r_end, 0) / 1e6 END AS gap_ms,
           -- for wasted seconds: the gap before this round, the class of the previous one
           greatest(r_start - lag(r_end) OVER w, 0) AS gap_before_ns,
           lag(r_class) OVER w AS prev_r_class,
           min(round_no) FILTER (WHERE r_failed) OVER (PARTITION BY t1, t2, tool_h) AS first_failed_round
    FROM rounds
    WINDOW w AS (PARTITION BY t1, t2, tool_h ORDER BY round_no)
), ratios AS (
    -- ratios of successive gaps, where the first of the two is > 0
    SELECT *,
           CASE WHEN gap_ms > 0 THEN lead(gap_ms) OVER (PARTITION BY t1, t2, tool_h ORDER BY round_no) / gap_ms END
               AS ratio
    FROM gaps
), per_group AS (
    SELECT t1, t2, tool_h,
           count(*) AS n_rounds,
           median(gap_ms) AS median_gap_ms,
           median(ratio) AS median_ratio,
           avg(gap_ms) AS mean_gap_ms,
           max(gap_ms) - min(gap_ms) AS spread_ms,
           arg_max(r_failed, round_no) AS last_failed,
           -- wasted_seconds: after the first failed round, every round when
           -- the loop gave up; when it recovered, retries of a deterministic error
           sum(CASE WHEN round_no > first_failed_round THEN gap_before_ns + (r_end - r_start) END) AS after_first_ns,
           sum(CASE WHEN round_no > first_failed_round AND deterministic_code(prev_r_class)
                    THEN gap_before_ns + (r_end - r_start) END) AS after_deterministic_ns
    FROM ratios
    GROUP BY t1, t2, tool_h
), judged AS (
    SELECT g.t1, g.t2, g.tool_h, g.calls, g.failures, p.n_rounds, p.median_gap_ms,
           CASE WHEN p.median_gap_ms IS NULL THEN 'irregular'
                WHEN p.median_gap_ms < getvariable('no_backoff_ms') THEN 'no_backoff'
                WHEN p.median_ratio >= getvariable('exponential_ratio') THEN 'exponential'
                WHEN p.mean_gap_ms > 0 AND p.spread_ms / p.mean_gap_ms < getvariable('fixed_variation') THEN 'fixed'
                ELSE 'irregular' END AS rhythm,
           CASE WHEN p.last_failed THEN 'gave_up' ELSE 'recovered' END AS outcome,
           p.after_first_ns, p.after_deterministic_ns
    FROM g JOIN per_group p ON p.t1 = g.t1 AND p.t2 = g.t2 AND p.tool_h = g.tool_h
)
SELECT t1, t2, tool_h, calls, n_rounds AS rounds, failures, rhythm, outcome, median_gap_ms,
       coalesce(CASE WHEN outcome = 'gave_up' THEN after_first_ns ELSE after_deterministic_ns END, 0) / 1e9
           AS wasted_seconds
FROM judged
WHERE n_rounds >= getvariable('storm_min_calls')
  -- growing backoff that ends ok is polling or a healthy retry policy
  AND NOT (rhythm = 'exponential' AND outcome = 'recovered');

-- ===========================================================================
-- §4.3 Wasted retries on a deterministic error and §4.4 retry after success
-- (retries.rs), per (turn, tool, arguments hash), arguments known
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE same_requests AS
SELECT c.t1, c.t2, c.tool_h, c.args_h, c.start_ns, c.end_ns, c.cls,
       row_number() OVER w AS rn,
       first_value(c.cls) OVER w AS first_cls
FROM calls c
SEMI JOIN request_groups r ON r.t1 = c.t1 AND r.t2 = c.t2 AND r.tool_h = c.tool_h AND r.args_h = c.args_h
SEMI JOIN judged_turns j ON j.t1 = c.t1 AND j.t2 = c.t2
WINDOW w AS (PARTITION BY c.t1, c.t2, c.tool_h, c.args_h ORDER BY c.start_ns, c.sh);

-- §4.3: the first call failed with a deterministic class and every retry
-- failed with the same class
CREATE OR REPLACE TEMP TABLE wasted_retries AS
SELECT t1, t2, tool_h, args_h, class_name(any_value(first_cls)) AS class, count(*) AS attempts
FROM same_requests
GROUP BY t1, t2, tool_h, args_h
HAVING deterministic_code(any_value(first_cls)) AND bool_and(cls = first_cls);

-- §4.4: a call of the same request that starts after the first successful
-- one (in start order) ended
CREATE OR REPLACE TEMP TABLE retries_after_success AS
WITH first_ok AS (
    SELECT t1, t2, tool_h, args_h, min(rn) AS ok_rn, arg_min(end_ns, rn) AS ok_end
    FROM same_requests
    WHERE cls = 0
    GROUP BY t1, t2, tool_h, args_h
)
SELECT s.t1, s.t2, s.tool_h, s.args_h, count(*) AS repeats
FROM same_requests s
JOIN first_ok f ON f.t1 = s.t1 AND f.t2 = s.t2 AND f.tool_h = s.tool_h AND f.args_h = s.args_h
WHERE s.rn > f.ok_rn AND s.start_ns >= f.ok_end
GROUP BY s.t1, s.t2, s.tool_h, s.args_h;

-- §4.5: the stacked groups of judged turns
CREATE OR REPLACE TEMP TABLE stacked_retries AS
SELECT s.* FROM stacked_groups s SEMI JOIN judged_turns j ON j.t1 = s.t1 AND j.t2 = s.t2;

-- Tool names back from their hashes, for the output.
CREATE OR REPLACE TEMP TABLE tool_names AS
SELECT DISTINCT coalesce(tool_name, '') AS tool_name, hash(coalesce(tool_name, '')) AS tool_h
FROM tool_daily;

-- ===========================================================================
-- Findings of the window, counted per kind (sweep.rs run: daily verdicts for
-- days >= since_day, per-turn findings of the judged turns)
-- ===========================================================================
SELECT
    (SELECT count(*) FROM verdicts WHERE day >= getvariable('since_day') AND is_spike) AS error_rate_spike,
    (SELECT count(*) FROM storms) AS retry_storm,
    (SELECT count(*) FROM wasted_retries) AS wasted_retries,
    (SELECT count(*) FROM retries_after_success) AS retry_after_success,
    (SELECT count(*) FROM stacked_retries) AS stacked_retries,
    (SELECT count(*) FROM verdicts WHERE day >= getvariable('since_day') AND NOT is_spike AND is_latency) AS latency_spike,
    (SELECT coalesce(list(DISTINCT n.tool_name ORDER BY n.tool_name), [])
       FROM storms s JOIN tool_names n ON n.tool_h = s.tool_h) AS storm_tools;
