-- duckdb_lean.sql: the error-rate spike (docs/detection.md §4.1) and retry
-- storms (§4.2) alone, written to be fast rather than complete: what a user
-- fluent in SQL would write over a stormwatch store's Parquet parts. The
-- sweep benchmark runs it beside duckdb_sweep.sql (the full detection) as
-- the lean yardstick for a cold sweep. duckdb_lean.py sets the inputs:
--   all_files     VARCHAR[]  every live part of every day (the daily rollup)
--   window_files  VARCHAR[]  the live parts of days since_day - 1 .. today
--   now_ns        BIGINT     the sweep's now (ns since the epoch)
--   since_days    INTEGER    findings for UTC days [today - since_days, today]
-- The last statement returns one row: error_rate_spike, retry_storm.
--
-- Simplifications against the full rules (duckdb_sweep.sql, the Rust), each
-- a "LEAN:" below: a turn is the whole trace (no walk up parent links, no
-- agent call id turns, no frame rules at midnight); each tool span is one
-- call (no MCP client/server pairing, no wrapper around attempts); stated
-- Retry-After waits are not read; z is the exact normal quantile. On the
-- benchmark's data (one agent span per trace, the tool calls under it, one
-- convention, no Retry-After) none applies: the same 9 spikes and 90 storms
-- as duckdb_sweep.sql. On check_sql.py's small stores (imported with
-- stormwatch at 19500a1) they change counts where their cases are:
--   frameworks   spikes 7 (full 3): MCP client and server spans count twice
--                (a tool of 6 calls reads as 12, over the 10-call minimum)
--   edge_cases   spikes 13 (full 10), the same (fetch_doc, fetch_doc2,
--                query_db); storms 31 (full 32): two turns in one trace are
--                one (summarize, render: -2), an agent call id turn over two
--                traces is split in two, neither a storm (lookup: -1), a
--                wrapper around attempts is a call (query_db2: +1), a root
--                that ended before midnight does not cut its turn (sync: +1)
--   retry_after_cases  storms 4 (full 3): a chain that waited out every
--                stated Retry-After and recovered is a storm here
-- and agree on the other nine (fixtures, silent cases, the generator's).
--
-- Statements end with a semicolon at the end of a line; comments hold none.

SET VARIABLE ns_day = 86400000000000::BIGINT;
SET VARIABLE today = DATE '1970-01-01' + CAST(getvariable('now_ns') // getvariable('ns_day') AS INTEGER);
SET VARIABLE since_day = getvariable('today') - getvariable('since_days');

-- ===========================================================================
-- §4.1 Error-rate spike, per (tool, service) and UTC day of the partition.
-- ===========================================================================

-- The daily rollup over all history (the baseline may reach back to the
-- tool's first day): four narrow columns of the tool spans. Control flow
-- (interrupted, cancelled) counts as a call, not an error.
-- LEAN: each tool span counts; the Rust counts an MCP client span and its
-- server span (a tool span nested in one of the same tool) as one call.
CREATE OR REPLACE TEMP TABLE daily AS
SELECT tool_name, service_name, date AS day, count(*) AS calls,
       count(*) FILTER (WHERE error_class NOT IN ('ok', 'interrupted', 'cancelled')) AS errors
FROM read_parquet(getvariable('all_files'), hive_partitioning = true)
WHERE is_tool_call
GROUP BY ALL;

-- Each series' days before today, oldest first.
CREATE OR REPLACE TEMP TABLE series AS
SELECT row_number() OVER () AS sid,
       list({'d': day, 'c': calls, 'e': errors} ORDER BY day) AS h
FROM daily
WHERE day < getvariable('today')
GROUP BY tool_name, service_name;

-- The days are judged in order because a flagged day leaves the baselines
-- of the days after it: one recursion step per day, over one row per
-- series (a few hundred rows: nothing next to the scans). `f` holds the
-- flags of the days judged so far. The baseline of day i is the error rate
-- of a pool of earlier days: warm-up (fewer than 3 earlier days: 5 %);
-- else the unflagged days of the trailing 7 when 3 or more; else the most
-- recent 7 unflagged days within 28 when 3 or more; else the trailing 7
-- days, flagged or not, or when none the 7 most recent; floored at 1 %.
-- A spike: 10+ calls, 3+ errors and the Wilson lower bound (95 %, one
-- sided) strictly above 3x the baseline.
-- LEAN: z is the exact quantile 1.6448536269514722; the Rust computes it
-- with Acklam's approximation (relative error about 1e-9).
SET VARIABLE z = 1.6448536269514722::DOUBLE;
CREATE OR REPLACE TEMP MACRO wilson_lower(e, c) AS
    greatest((e / c + getvariable('z') ^ 2 / (2 * c)
              - getvariable('z') * sqrt(e / c * (1 - e / c) / c + getvariable('z') ^ 2 / (4 * c * c)))
             / (1 + getvariable('z') ^ 2 / c), 0);
CREATE OR REPLACE TEMP TABLE spikes AS
WITH RECURSIVE j(sid, i, f, spike) AS (
    SELECT sid, 0, []::BOOLEAN[], false FROM series
    UNION ALL
    SELECT sid, i, list_append(f, spike), spike
    FROM (
        SELECT sid, i, f, c >= 10 AND e >= 3 AND wilson_lower(e, c)
               > 3 * CASE WHEN i <= 3 THEN 0.05
                          ELSE greatest(coalesce(list_sum([h[k].e for k in pool]) / nullif(list_sum([h[k].c for k in pool]), 0), 0), 0.01)
                     END AS spike
        FROM (
            SELECT *,
                   CASE WHEN len(unflagged) >= 3 THEN unflagged
                        WHEN len(reach) >= 3 THEN reach
                        WHEN len(win) > 0 THEN win
                        ELSE list_slice(list_reverse(range(1, i)), 1, 7) END AS pool
            FROM (
                SELECT *,
                       [k for k in win if NOT f[k]] AS unflagged,
                       list_slice([k for k in list_reverse(range(1, i)) if h[k].d >= d - 28 AND NOT f[k]], 1, 7) AS reach
                FROM (
                    SELECT j.sid, j.i + 1 AS i, j.f, s.h, s.h[j.i + 1].d AS d,
                           s.h[j.i + 1].c::DOUBLE AS c, s.h[j.i + 1].e::DOUBLE AS e,
                           [k for k in range(1, j.i + 1) if s.h[k].d >= s.h[j.i + 1].d - 7] AS win
                    FROM j JOIN series s USING (sid)
                    WHERE j.i < len(s.h)
                )
            )
        )
    )
)
SELECT j.sid, s.h[j.i].d AS day
FROM j JOIN series s USING (sid)
WHERE j.spike AND s.h[j.i].d >= getvariable('since_day');

-- ===========================================================================
-- §4.2 Retry storms. LEAN: a turn is the trace (the Rust anchors a turn on
-- the outermost agent span above a call, else the trace's root, else the
-- call's gen_ai.agent.call.id: the same where a trace holds one agent run,
-- as agent frameworks write them). Its day is the UTC day of its earliest
-- span; it is judged when that day is in the window and no span of the
-- trace ended within 90 s of now. Spans starting at or after now are not
-- yet seen. Calls stopped on purpose (interrupted, cancelled) are none.
-- ===========================================================================

-- Candidates from the failed calls alone (a few percent of the spans):
-- (trace, tool) with 2+ failures, not all deterministic. A superset (calls
-- after now count here, not below): the filter reads no time column.
CREATE OR REPLACE TEMP TABLE cand AS
SELECT hash(trace_id) AS th, tool_name
FROM read_parquet(getvariable('window_files'))
WHERE is_tool_call AND error_class NOT IN ('ok', 'interrupted', 'cancelled') AND tool_name IS NOT NULL
GROUP BY ALL
HAVING count(*) >= 2
   AND bool_or(error_class NOT IN ('auth', 'not_found', 'invalid_request', 'client_error', 'policy'));

-- Every span of the candidate traces (before now): the tool calls of the
-- candidate groups, and the trace's first start and last end.
CREATE OR REPLACE TEMP TABLE rows AS
SELECT hash(trace_id) AS th, is_tool_call, tool_name, start_ns, end_ns, error_class, tool_args_hash
FROM read_parquet(getvariable('window_files'))
WHERE start_ns < getvariable('now_ns') AND hash(trace_id) IN (SELECT th FROM cand);

CREATE OR REPLACE TEMP TABLE turns AS
SELECT th FROM rows
GROUP BY th
HAVING DATE '1970-01-01' + CAST(min(start_ns) // getvariable('ns_day') AS INTEGER)
           BETWEEN getvariable('since_day') AND getvariable('today')
   AND getvariable('now_ns') - max(end_ns) >= 90000000000;

-- The calls of a candidate group in a judged turn, with class codes: 0 ok,
-- 1 retryable (rate_limited, unavailable, timeout, network, server_error),
-- 2 deterministic (auth, not_found, invalid_request, client_error, policy),
-- 3 unknown (anything else).
CREATE OR REPLACE TEMP TABLE calls AS
SELECT r.th, r.tool_name, r.start_ns, r.end_ns, r.tool_args_hash AS args,
       CASE WHEN r.error_class = 'ok' THEN 0
            WHEN r.error_class IN ('rate_limited', 'unavailable', 'timeout', 'network', 'server_error') THEN 1
            WHEN r.error_class IN ('auth', 'not_found', 'invalid_request', 'client_error', 'policy') THEN 2
            ELSE 3 END AS k
FROM rows r
SEMI JOIN cand c ON c.th = r.th AND c.tool_name = r.tool_name
SEMI JOIN turns t ON t.th = r.th
WHERE r.is_tool_call AND r.error_class NOT IN ('interrupted', 'cancelled');

-- Rounds: calls in start order; a call overlapping the calls before it by
-- more than 1 ms, or starting with the call before it, joins their round.
-- Chains: a failed round after one that did not fail opens a chain, every
-- round after a failed one extends it (so the success that ends it is in
-- it). A storm: 5+ rounds, 2+ failed calls, one of them not deterministic;
-- not a growing backoff (median growth of the gaps >= 1.5) that recovered;
-- not an agent trying one thing after another (every round's first call's
-- arguments known, under half of the rounds repeat the round before, and
-- fewer than half of the failures retryable).
-- LEAN: no round is exempt for waiting out a stated Retry-After (§4.9).
CREATE OR REPLACE TEMP TABLE storms AS
WITH o AS (
    SELECT *,
           max(end_ns) OVER w1 AS prev_end,
           lag(start_ns) OVER w AS prev_start
    FROM calls
    WINDOW w AS (PARTITION BY th, tool_name ORDER BY start_ns, end_ns),
           w1 AS (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), r AS (
    SELECT th, tool_name, rn,
           min(start_ns) AS s, max(end_ns) AS e,
           count(*) FILTER (WHERE k > 0) AS fails,
           count(*) FILTER (WHERE k = 1) AS retryable,
           count(*) FILTER (WHERE k IN (1, 3)) AS transient,
           arg_min_null(args, start_ns) AS a
    FROM (
        SELECT *, sum((prev_end IS NULL OR (start_ns + 1000000 >= prev_end AND start_ns <> prev_start))::INT)
                      OVER (PARTITION BY th, tool_name ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS rn
        FROM o
    )
    GROUP BY th, tool_name, rn
), c AS (
    SELECT *, sum((fails > 0 AND NOT coalesce(prev_failed, false))::INT)
                  OVER (PARTITION BY th, tool_name ORDER BY rn ROWS UNBOUNDED PRECEDING) AS chain
    FROM (SELECT *, lag(fails > 0) OVER (PARTITION BY th, tool_name ORDER BY rn) AS prev_failed FROM r)
), chains AS (
    SELECT th, tool_name, chain,
           count(*) AS rounds, sum(fails) AS fails, sum(retryable) AS retryable, sum(transient) AS transient,
           arg_max(fails = 0, rn) AS recovered,
           list(greatest(s - prev_e, 0)::DOUBLE ORDER BY rn) FILTER (WHERE prev_e IS NOT NULL) AS gaps,
           count(*) FILTER (WHERE a IS NULL) AS unknown_args,
           count(*) FILTER (WHERE a = prev_a) AS same_args
    FROM (SELECT *, lag(e) OVER w AS prev_e, lag(a) OVER w AS prev_a
          FROM c WHERE fails > 0 OR coalesce(prev_failed, false)
          WINDOW w AS (PARTITION BY th, tool_name, chain ORDER BY rn))
    GROUP BY th, tool_name, chain
    HAVING count(*) >= 5 AND sum(fails) >= 2 AND sum(transient) > 0
)
SELECT th, tool_name, chain
FROM chains
WHERE NOT (recovered AND coalesce(list_median([gaps[k + 1] / gaps[k] for k in range(1, len(gaps)) if gaps[k] > 0]) >= 1.5, false))
  AND NOT (unknown_args = 0 AND same_args < 0.5 * (rounds - 1) AND retryable * 2 < fails);

SELECT (SELECT count(*) FROM spikes) AS error_rate_spike,
       (SELECT count(*) FROM storms) AS retry_storm;
