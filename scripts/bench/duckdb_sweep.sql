-- duckdb_sweep.sql: what `stormwatch sweep` detects, written as one DuckDB
-- script over the Parquet parts, for the sweep benchmark (docs/detection.md
-- §1 one call once, §2 turns, §4.1-4.8 findings; the Rust is src/detect/*.rs,
-- src/store/rollup.rs and src/sweep/, the thresholds are the defaults of
-- SpikeParams, StormParams, LoopParams and SilentParams).
--
-- Inputs: duckdb_sweep.py sets these with SET VARIABLE before running it:
--   spans_glob  VARCHAR  '<data-dir>/spans/date=*/part-*.parquet'
--   now_ns      BIGINT   the sweep's "now" (ns since the epoch)
--   since_days  INTEGER  findings are kept for UTC days in [today - since_days, today]
-- Output: the last statement returns one row, the number of findings of
-- each kind and, per kind, the sorted tools that had one, and `drivers`:
-- per (kind, driver) of the storms and wasted retries, their number, their
-- model calls and those calls' input and output tokens.
--
-- Known departures from the Rust rules are marked "DIFF:" below. One is
-- about what is read (the daily rollup is recomputed from the span parts,
-- so that the benchmark measures the work); the others change a finding
-- only on data that stormwatch's ingest does not write: a cycle in parent
-- links, a tool call without a tool name, or two different ids, names or
-- hashes whose 64-bit hash() values collide. The settings are the defaults
-- (a stormwatch.toml is not read): the thresholds below, and §4.4's
-- read_only_tools globs (get_*, list_*, search_*, read_*, fetch_*, lookup_*).
-- The rules are those of commit 95a2bbd: turns followed at most two days,
-- a turn's day its anchor's, polling by a state that stayed then changed,
-- no storm for varied arguments with mostly non-retryable failures, repeats
-- after success only with nothing state-changing in between and not for a
-- loop's steps, plain loops without results back to back, cycles over
-- distinct (tool, arguments), nested spans 1:1 only; and the silent-tool
-- rules of issue 28 (§4.8), and ignored Retry-After (§4.9); and the driver
-- of every storm and wasted retry (§1 "Model spans", §4.2 "Driver":
-- driver.rs, models.rs), with two refinements made here ahead of the Rust
-- (stormwatch at f0d0c84 differs where they apply): a model call lies in a
-- gap between two attempts when its START lies in [end of the earlier
-- - 1 ms, start of the later + 1 ms] (its end may be later: streaming), and
-- a model span with a model span anywhere up its parent chain is no call
-- of its own (the outermost is, its tokens its own when recorded, else the
-- largest recorded below it, input and output each). Model spans are read
-- apart from the frame and walked only in the traces of finding turns that
-- hold one: with none (the benchmark's data) the driver costs a scan of the
-- is_model column and a few empty tables. scripts/bench/check_sql.py
-- runs this script, `stormwatch sweep` and scripts/bench/reference_sweep.py
-- (a line-by-line Python port of the Rust rules) on small stores and fails
-- unless all three count the same findings of every kind, for the same
-- tools, and the same drivers, model calls and tokens.
--
-- What the script takes from ingest as given: `error_class` is the final
-- class of every span (classification happens at ingest; it is never
-- null), a span never ends before it starts (ingest stores such a span with
-- its start as end), and each (trace_id, span_id) is stored once.
--
-- Statements are separated by semicolons at the end of a line. Comments
-- never contain one.

-- ---------------------------------------------------------------------------
-- Thresholds: the defaults of src/detect (SpikeParams, StormParams, LoopParams, SilentParams)
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
-- [detect.retry_storm] (§4.2; exponential_ratio is also the polling growth of §4.4, §4.7)
SET VARIABLE storm_min_calls = 5;
SET VARIABLE storm_min_failures = 2;
SET VARIABLE no_backoff_ms = 100.0::DOUBLE;
SET VARIABLE exponential_ratio = 1.5::DOUBLE;
SET VARIABLE fixed_variation = 0.3::DOUBLE;
SET VARIABLE settle_ns = 90 * 1000000000::BIGINT;
-- chains.rs OVERLAP_SLACK_NS (a constant, not a setting): calls overlapping
-- by no more than this are not one round
SET VARIABLE overlap_slack_ns = 1000000::BIGINT;
-- [detect.tool_loop] (§4.7)
SET VARIABLE loop_min_calls = 5;
SET VARIABLE cycle_min_repeats = 3;
SET VARIABLE cycle_max_period = 4;
-- [detect.retry_after] (§4.9)
SET VARIABLE ra_min_early = 2;
SET VARIABLE ra_share = 0.5::DOUBLE;
SET VARIABLE ra_tolerance_ms = 1000.0::DOUBLE;
-- [detect.silent] (§4.8)
SET VARIABLE silent_baseline_days = 7;
SET VARIABLE silent_reach_back_days = 28;
SET VARIABLE silent_min_baseline_days = 3;
SET VARIABLE min_expected_calls = 20.0::DOUBLE;
SET VARIABLE silent_max_ratio = 0.2::DOUBLE;
SET VARIABLE silent_p_value = 0.001::DOUBLE;
SET VARIABLE no_success_days = 3;
SET VARIABLE no_success_min_calls = 10;

-- The window (sweep.rs run): today = UTC day of now; findings for days in
-- [since_day, today]. The per-turn rules read each day's turns whole
-- (sweep.rs turn_day): the partitions since_day - 1 .. today are read.
SET VARIABLE today = DATE '1970-01-01' + CAST(getvariable('now_ns') // getvariable('ns_day') AS INTEGER);
SET VARIABLE since_day = getvariable('today') - CAST(getvariable('since_days') AS INTEGER);
SET VARIABLE max_period = greatest(getvariable('cycle_max_period'), 2);
-- sweep.rs FOLLOW_DAYS: turns are followed at most this many days past the day
SET VARIABLE follow_days = 2;

-- The first nanosecond of a UTC day.
CREATE OR REPLACE TEMP MACRO day_ns(d) AS (d - DATE '1970-01-01')::BIGINT * getvariable('ns_day');

-- Every span part. `tool_result_hash`, `retry_after_ms` and `is_model` are newer columns: parts written
-- before it read it as null (union_by_name), and so does a store none of
-- whose parts has it (the empty branch of the union supplies the column).
-- `ro` is a span's place in the order the Rust reads it (the parts of a day
-- in name order, the rows of a part in order): file_index counts the glob's
-- files, which DuckDB sorts by path.
CREATE OR REPLACE TEMP MACRO spans() AS TABLE
    SELECT *, (file_index::BIGINT << 32) + file_row_number AS ro
    FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true, union_by_name = true)
    UNION ALL BY NAME
    SELECT NULL::VARCHAR AS tool_result_hash, NULL::BIGINT AS retry_after_ms, NULL::BOOLEAN AS is_model,
           NULL::BIGINT AS input_tokens, NULL::BIGINT AS output_tokens WHERE false;

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

-- detect::median over a sorted list: the middle value, or the mean of the
-- middle two ((a + b) / 2, as the Rust computes it, not an interpolation).
CREATE OR REPLACE TEMP MACRO median_sorted(s) AS
    CASE WHEN len(s) = 0 THEN NULL
         WHEN len(s) % 2 = 1 THEN s[len(s) // 2 + 1]
         ELSE (s[len(s) // 2] + s[len(s) // 2 + 1]) / 2.0 END;
CREATE OR REPLACE TEMP MACRO median_of(l) AS median_sorted(list_sort(l));
-- The ratios of successive values, where the first of the two is > 0
-- (storm.rs rhythm, chains.rs polling).
CREATE OR REPLACE TEMP MACRO growth_ratios(g) AS
    list_filter(list_transform(range(1, len(g)),
                               lambda k: CASE WHEN g[k] > 0 THEN g[k + 1] / g[k] END),
                lambda x: x IS NOT NULL);
-- chains.rs gaps between successive calls or rounds (ns, never negative),
-- of a list of {s: start, e: end} in order.
CREATE OR REPLACE TEMP MACRO gaps_ns(l) AS
    list_transform(range(1, len(l)), lambda k: greatest(l[k + 1].s - l[k].e, 0)::DOUBLE);
-- chains.rs polling over the calls of one request in order ({s, e, ok, r:
-- result hash}): three or more calls, and either the gaps between the
-- successful calls (three or more) grow (median ratio >= exponential_ratio),
-- or the results recorded (the calls that have one) are three or more, the
-- same twice in a row somewhere and the last unlike the first.
CREATE OR REPLACE TEMP MACRO recorded_results(l) AS
    list_filter(list_transform(l, lambda x: x.r), lambda r: r IS NOT NULL);
CREATE OR REPLACE TEMP MACRO results_polling(rs) AS
    list_bool_or(list_transform(range(1, len(rs)), lambda k: rs[k] = rs[k + 1])) AND rs[1] <> rs[len(rs)];
CREATE OR REPLACE TEMP MACRO is_polling(l) AS
    len(l) >= 3 AND (
        (len(recorded_results(l)) >= 3 AND results_polling(recorded_results(l)))
        OR (len(list_filter(l, lambda x: x.ok)) >= 3
            AND coalesce(median_of(growth_ratios(gaps_ns(list_filter(l, lambda x: x.ok))))
                         >= getvariable('exponential_ratio'), false)));

-- Error class codes in ErrorClass::ALL order: 0 ok, 1-5 retryable
-- (rate_limited, unavailable, timeout, network, server_error), 6-10
-- deterministic (auth, not_found, invalid_request, client_error, policy),
-- 11 unknown, then control flow, no failure (docs/detection.md §3): 12
-- interrupted, 13 cancelled. Like ErrorClass::parse, anything else is unknown.
CREATE OR REPLACE TEMP MACRO class_code(c) AS
    (CASE c WHEN 'ok' THEN 0 WHEN 'rate_limited' THEN 1 WHEN 'unavailable' THEN 2 WHEN 'timeout' THEN 3
            WHEN 'network' THEN 4 WHEN 'server_error' THEN 5 WHEN 'auth' THEN 6 WHEN 'not_found' THEN 7
            WHEN 'invalid_request' THEN 8 WHEN 'client_error' THEN 9 WHEN 'policy' THEN 10
            WHEN 'interrupted' THEN 12 WHEN 'cancelled' THEN 13
            ELSE 11 END)::UTINYINT;
CREATE OR REPLACE TEMP MACRO class_name(k) AS
    ['ok', 'rate_limited', 'unavailable', 'timeout', 'network', 'server_error',
     'auth', 'not_found', 'invalid_request', 'client_error', 'policy', 'unknown',
     'interrupted', 'cancelled'][k + 1];
CREATE OR REPLACE TEMP MACRO deterministic_code(k) AS k BETWEEN 6 AND 10;

-- ===========================================================================
-- Daily rollup (store/rollup.rs tool_rows + queries/tool_daily.sql), over
-- ALL history: the baselines of §4.1 and §4.6 read every stored day.
-- DIFF: `stormwatch sweep` reads the precomputed rollups/tool_daily.parquet;
-- here it is recomputed from the span parts (same query, same day = the
-- partition's date, same duplicate removal within a day's parts), so the
-- benchmark measures the real work. Only the columns the rules use are kept.
-- ===========================================================================

-- The days whose rollup looks for one call seen as two spans (rollup.rs
-- tool_rows): days whose tool calls hold an MCP span or more than one
-- convention (a missing convention counts as one, as polars' n_unique counts it).
CREATE OR REPLACE TEMP TABLE pair_days AS
SELECT date AS day
FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true, union_by_name = true)
WHERE is_tool_call
GROUP BY date
HAVING count(*) FILTER (WHERE tool_convention = 'mcp') > 0
    OR count(DISTINCT tool_convention) + max(CASE WHEN tool_convention IS NULL THEN 1 ELSE 0 END) > 1;

-- The tool calls of those days (none on most days).
CREATE OR REPLACE TEMP TABLE pair_day_tools AS
SELECT date AS day, hash(trace_id) AS th, hash(span_id) AS sh,
       CASE WHEN parent_span_id IS NOT NULL THEN hash(parent_span_id) END AS ph,
       tool_name, service_name, duration_ns, start_ns, end_ns, error_class, ro
FROM spans()
WHERE is_tool_call AND date IN (SELECT day FROM pair_days);

-- rollup.rs nested_duplicates: a tool span whose parent is a tool span of
-- the same (named) tool in the same trace and day, overlapping it in time
-- (or starting with it), is the same call seen twice ...
CREATE OR REPLACE TEMP TABLE pair_links AS
SELECT c.day, c.th, c.sh, p.sh AS parent_sh
FROM pair_day_tools c
JOIN pair_day_tools p ON p.day = c.day AND p.th = c.th AND p.sh = c.ph
WHERE c.tool_name IS NOT NULL AND p.tool_name = c.tool_name AND p.sh <> c.sh
  AND ((c.start_ns < p.end_ns AND p.start_ns < c.end_ns) OR c.start_ns = p.start_ns);

-- ... when it is its parent's only such child; a parent with two or more
-- is a wrapper around attempts (its children are the calls). `sole` marks
-- the links to a parent with one such child.
CREATE OR REPLACE TEMP TABLE pair_only AS
SELECT l.*, count(*) OVER (PARTITION BY l.day, l.th, l.parent_sh) = 1 AS sole
FROM pair_links l;

-- An only child maps to the outermost span of its nest: up through only
-- children, at most 16 links, never back to itself (bad data may loop).
CREATE OR REPLACE TEMP TABLE pair_up AS
WITH RECURSIVE up(day, th, sh, cur, depth) AS (
    SELECT day, th, sh, parent_sh, 1 FROM pair_only WHERE sole
    UNION ALL
    SELECT u.day, u.th, u.sh, l.parent_sh, u.depth + 1
    FROM up u JOIN pair_only l ON l.day = u.day AND l.th = u.th AND l.sh = u.cur
    WHERE l.sole AND u.depth < 16 AND l.parent_sh <> u.sh
)
SELECT day, th, sh, arg_max(cur, depth) AS outer_sh FROM up GROUP BY day, th, sh;

-- The spans that are no call: the only children (pair_up), every wrapper,
-- and the outermost span of the nest a wrapper was an only child in.
CREATE OR REPLACE TEMP TABLE pair_dups AS
SELECT day, th, sh FROM pair_up
UNION
SELECT day, th, parent_sh FROM pair_only WHERE NOT sole
UNION
SELECT u.day, u.th, u.outer_sh FROM pair_up u
SEMI JOIN (SELECT * FROM pair_only WHERE NOT sole) w ON w.day = u.day AND w.th = u.th AND w.parent_sh = u.sh;

-- rollup.rs once_per_call, takes_inner_class: an outer call takes the class
-- of an inner span that failed when it says ok, or when it says unknown and
-- the inner one knows better; in the day's order, so an ok outer call ends
-- with the first known failure class of its inner spans, else unknown if
-- one failed so.
CREATE OR REPLACE TEMP TABLE pair_classes AS
SELECT d.day, d.th, d.outer_sh,
       arg_min(t.error_class, t.ro) FILTER (WHERE t.error_class NOT IN ('ok', 'unknown')) AS known_class,
       bool_or(t.error_class = 'unknown') AS any_unknown
FROM pair_up d
JOIN pair_day_tools t ON t.day = d.day AND t.th = d.th AND t.sh = d.sh
WHERE t.error_class <> 'ok'
GROUP BY d.day, d.th, d.outer_sh;

CREATE OR REPLACE TEMP TABLE tool_daily AS
WITH tool_rows AS (
    -- the days without pairs: every tool call, only the counted columns read
    SELECT date AS day, tool_name, service_name, duration_ns, end_ns, error_class
    FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true, union_by_name = true)
    WHERE is_tool_call AND date NOT IN (SELECT day FROM pair_days)
    UNION ALL
    -- the days with pairs: each call once, as its outer span
    SELECT t.day, t.tool_name, t.service_name, t.duration_ns, t.end_ns,
           CASE WHEN c.outer_sh IS NULL THEN t.error_class
                WHEN t.error_class = 'ok'
                    THEN coalesce(c.known_class, CASE WHEN c.any_unknown THEN 'unknown' END, 'ok')
                WHEN t.error_class = 'unknown' THEN coalesce(c.known_class, 'unknown')
                ELSE t.error_class END
    FROM pair_day_tools t
    LEFT JOIN pair_classes c ON c.day = t.day AND c.th = t.th AND c.outer_sh = t.sh
    WHERE NOT EXISTS (SELECT 1 FROM pair_dups d WHERE d.day = t.day AND d.th = t.th AND d.sh = t.sh)
)
SELECT
    tool_name,
    service_name,
    day,
    COUNT(*) AS calls,
    -- queries/tool_daily.sql: control flow counts in calls, not in errors
    SUM(CASE WHEN error_class NOT IN ('ok', 'interrupted', 'cancelled') THEN 1 ELSE 0 END) AS errors,
    SUM(CASE WHEN error_class = 'ok' THEN 1 ELSE 0 END) AS successes,
    QUANTILE_CONT(duration_ns, 0.95) AS p95_ns,
    MAX(CASE WHEN error_class = 'ok' THEN end_ns END) AS last_ok_ns
FROM tool_rows
GROUP BY tool_name, service_name, day;

DROP TABLE pair_day_tools;
DROP TABLE pair_links;
DROP TABLE pair_only;
DROP TABLE pair_up;

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
                   median_of(list_transform(pool, lambda x: x.p95)) AS pool_p95
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
-- §2 Turns by their start (sweep.rs turn_day): the per-turn rules run once
-- per day D of the window over D's "frame": the spans that started on D
-- (before now); from the partition of D - 1, the spans of D's traces that
-- have no root span (null parent) among D's; and from each partition d
-- after D (up to today, spans before now), the spans of the frame's traces
-- that, in the frame read so far, have no root span or a span ending at or
-- after d's midnight, for as long as each such day adds spans. Every key
-- below carries the frame's day `fd`: a span may be read by several frames
-- (its own day's, and its neighbours' when its trace reaches them), and it
-- is resolved in each independently, as the Rust does. A frame's findings
-- are those of the turns that began on its day.
--
-- Identities are hashed once, as they are read: trace, span and parent ids,
-- tool names, argument and result hashes and agent call ids become 64-bit
-- hash() values, and error classes small codes, so that the joins,
-- groupings and sorts over tens of millions of calls move integers, not
-- 32-character strings.
-- DIFF: the Rust compares the strings. Here a span is found by the pair
-- (hash(trace_id), hash(span_id)); a wrong match needs two traces whose ids
-- collide in 64 bits and, within them, two colliding span ids (odds far
-- below 2^-64 per run). Groups are keyed by 64-bit tool / argument / result
-- hashes within one turn: two different values colliding inside one turn
-- has odds near 2^-64.
-- ===========================================================================

-- Every span of the partitions since_day - 1 .. today. `fd` is the span's
-- own day when it belongs to that day's frame (it started on that day,
-- before now); `seg` orders the parts of a frame as the Rust stacks them
-- (the day itself, the day before, the days after), `ro` within them.
CREATE OR REPLACE TEMP TABLE frame AS
SELECT date AS p,
       CASE WHEN date >= getvariable('since_day')
                 AND start_ns >= day_ns(date)
                 AND start_ns < least(day_ns(date) + getvariable('ns_day'), getvariable('now_ns'))
            THEN date END AS fd,
       0::USMALLINT AS seg,
       ro,
       hash(trace_id) AS th,
       hash(span_id) AS sh,
       CASE WHEN parent_span_id IS NOT NULL THEN hash(parent_span_id) END AS ph,
       coalesce(is_agent, false) AS is_agent,
       coalesce(is_tool_call, false) AS is_tool,
       start_ns,
       end_ns,
       CASE WHEN tool_name IS NOT NULL THEN hash(tool_name) END AS tool_h,
       CASE WHEN agent_call_id <> '' THEN hash(agent_call_id) END AS agent_h,
       CASE WHEN tool_args_hash IS NOT NULL THEN hash(tool_args_hash) END AS args_h,
       CASE WHEN tool_result_hash IS NOT NULL THEN hash(tool_result_hash) END AS res_h,
       class_code(error_class) AS cls,
       -- §4.9 the wait a failed span states (ms; ingest keeps only positive
       -- ones), only on a failure waiting can fix (calls.rs waitable:
       -- rate_limited, unavailable, timeout, network, server_error)
       CASE WHEN retry_after_ms > 0 AND class_code(error_class) BETWEEN 1 AND 5
            THEN retry_after_ms END AS wait_ms,
       -- the service, for the turns per service of §4.8 (dropped once they
       -- are counted; a hash costs less than an ENUM's cast, 8 bytes a span)
       hash(coalesce(service_name, '')) AS svc
FROM spans()
WHERE date BETWEEN getvariable('since_day') - 1 AND getvariable('today');

-- §1 model spans (driver.rs, §4.2 "Driver"): the few spans that are one
-- round trip to a model, with their tokens, keyed by their place (p, ro),
-- read apart from the frame, so that the frame carries no column for them
-- (the benchmark's data has none).
CREATE OR REPLACE TEMP TABLE model_rows AS
SELECT date AS p, ro, input_tokens AS tin, output_tokens AS tout
FROM spans()
WHERE is_model AND date BETWEEN getvariable('since_day') - 1 AND getvariable('today');

-- Traces with spans in more than one partition: the only ones a frame can
-- read beyond its own day (most traces lie within one day).
CREATE OR REPLACE TEMP TABLE multi_traces AS
SELECT th FROM frame GROUP BY th HAVING min(p) < max(p);

-- What such a trace holds in each partition: its spans of the day's own
-- (started that day, before now), all its spans (as the day before a frame
-- reads them), its spans started before now (as the days after read them):
-- whether one of them is a root, and their latest end.
CREATE OR REPLACE TEMP TABLE trace_days AS
SELECT f.th, f.p,
       bool_or(f.fd IS NOT NULL) AS own,
       bool_or(f.fd IS NOT NULL AND f.ph IS NULL) AS own_root,
       max(f.end_ns) FILTER (WHERE f.fd IS NOT NULL) AS own_end,
       bool_or(f.ph IS NULL) AS all_root,
       max(f.end_ns) AS all_end,
       bool_or(f.start_ns < getvariable('now_ns')) AS live,
       bool_or(f.start_ns < getvariable('now_ns') AND f.ph IS NULL) AS live_root,
       max(f.end_ns) FILTER (WHERE f.start_ns < getvariable('now_ns')) AS live_end
FROM frame f SEMI JOIN multi_traces m ON m.th = f.th
GROUP BY f.th, f.p;

-- sweep.rs traces_reaching, per trace of frame D: the day before is read
-- when the trace has no root among D's own spans; day d after D is read
-- when, in what the frame holds so far, the trace has no root or a span
-- ending at or after d's midnight (a trace that stops reaching never
-- reaches again: what it holds no longer changes). `reads` are the days
-- after D a trace has spans read on, as if every day were read ...
CREATE OR REPLACE TEMP TABLE trace_reads AS
WITH RECURSIVE walk(th, fd, d, root, last_end, reads) AS (
    SELECT o.th, o.p, o.p,
           o.own_root OR coalesce(b.all_root, false),
           CASE WHEN o.own_root THEN o.own_end ELSE greatest(o.own_end, b.all_end) END,
           false
    FROM trace_days o LEFT JOIN trace_days b ON b.th = o.th AND b.p = o.p - 1
    WHERE o.own AND o.p >= getvariable('since_day')
    UNION ALL
    SELECT w.th, w.fd, w.d + 1,
           w.root OR coalesce(n.live_root, false),
           greatest(w.last_end, n.live_end),
           coalesce(n.live, false)
    FROM walk w LEFT JOIN trace_days n ON n.th = w.th AND n.p = w.d + 1
    WHERE w.d + 1 <= least(getvariable('today'), w.fd + getvariable('follow_days'))
      AND (NOT w.root OR w.last_end >= day_ns(w.d + 1))
)
SELECT th, fd, d FROM walk WHERE reads;

-- ... and a frame reads day d only while every day from D + 1 to d added
-- spans (sweep.rs stops at the first day that adds none).
CREATE OR REPLACE TEMP TABLE frame_days AS
WITH days AS (
    SELECT DISTINCT fd, d FROM trace_reads
), runs AS (
    SELECT fd, d, d - CAST(row_number() OVER (PARTITION BY fd ORDER BY d) AS INTEGER) AS run FROM days
)
SELECT fd, d FROM runs WHERE run = fd;

-- The extra reads: the day before a frame (every span of a trace with no
-- root among the day's own), the days after it (spans before now).
INSERT INTO frame BY NAME
SELECT b.p, o.p AS fd, 1 AS seg, b.ro,
       b.th, b.sh, b.ph, b.is_agent, b.is_tool, b.start_ns, b.end_ns, b.tool_h, b.agent_h,
       b.args_h, b.res_h, b.cls, b.wait_ms, b.svc
FROM frame b
JOIN trace_days o ON o.th = b.th AND o.p = b.p + 1
WHERE o.own AND NOT o.own_root AND o.p >= getvariable('since_day')
UNION ALL
SELECT b.p, r.fd, 1 + (b.p - r.fd) AS seg, b.ro,
       b.th, b.sh, b.ph, b.is_agent, b.is_tool, b.start_ns, b.end_ns, b.tool_h, b.agent_h,
       b.args_h, b.res_h, b.cls, b.wait_ms, b.svc
FROM frame b
JOIN trace_reads r ON r.th = b.th AND r.d = b.p
SEMI JOIN frame_days f ON f.fd = r.fd AND f.d = r.d
WHERE b.start_ns < getvariable('now_ns');

DELETE FROM frame WHERE fd IS NULL;
DROP TABLE multi_traces;

-- The model spans of each frame (a span read by several frames is in each).
CREATE OR REPLACE TEMP TABLE frame_models AS
SELECT f.fd, f.th, f.sh, f.start_ns, m.tin, m.tout
FROM frame f JOIN model_rows m ON m.p = f.p AND m.ro = f.ro;
DROP TABLE model_rows;
DROP TABLE trace_days;
DROP TABLE trace_reads;
DROP TABLE frame_days;

-- A turn is judged once no span of its anchor's trace ended within
-- settle_seconds of now (calls.rs Turn::settled): the newest end per trace
-- is taken below, for the turns that hold a finding.

-- turns.rs anchors: a span's turn is its OUTERMOST agent ancestor (a
-- sub-agent a supervisor handed work to is part of the supervisor's turn).
-- Every agent span with an agent above it, and that outermost agent: a walk
-- up from the agent spans that have a parent (most agent spans are roots),
-- over the spans of their traces. The walks below stop at the nearest agent
-- and take its outermost from here.
CREATE OR REPLACE TEMP TABLE agent_links AS
SELECT f.fd, f.th, f.sh, f.ph, f.is_agent
FROM frame f
SEMI JOIN (SELECT DISTINCT fd, th FROM frame WHERE is_agent AND ph IS NOT NULL) a
       ON a.fd = f.fd AND a.th = f.th;

-- DIFF: on a parent cycle the walk stops before a span it has seen, so an
-- agent on the cycle takes the last agent met before it closes; the Rust
-- gives every row of a cycle its agent with the lowest span id.
CREATE OR REPLACE TEMP TABLE agent_top AS
WITH RECURSIVE up(fd, th, sh, cur_parent, outer_sh, depth, seen) AS (
    SELECT fd, th, sh, ph, sh, 0, [sh] FROM agent_links WHERE is_agent AND ph IS NOT NULL
    UNION ALL
    SELECT u.fd, u.th, u.sh, l.ph, CASE WHEN l.is_agent THEN l.sh ELSE u.outer_sh END, u.depth + 1,
           list_append(u.seen, l.sh)
    FROM up u
    JOIN agent_links l ON l.fd = u.fd AND l.th = u.th AND l.sh = u.cur_parent
    WHERE u.depth + 1 < 64 AND NOT list_contains(u.seen, l.sh)
), last AS (
    SELECT fd, th, sh, arg_max(outer_sh, depth) AS outer_sh FROM up GROUP BY fd, th, sh
)
SELECT * FROM last WHERE outer_sh <> sh;
DROP TABLE agent_links;

-- turns.rs anchors, first step, for every tool call: a call's turn is its
-- nearest agent ancestor, itself included (its outermost, from agent_top,
-- once the walk below is done); the turn key is (t1, t2) =
-- (trace, anchor span): the agent span, or when there is none the topmost
-- stored ancestor (the trace's root); an `agent:<id>` turn (no agent
-- ancestor, gen_ai.agent.call.id set on the call) is (hash(id), 0). The
-- parent is looked up among the frame's spans that are not tool calls
-- (agent, chat and other spans: a narrow build side); a call whose parent
-- is not found there (a tool span, or not stored) is an `orphan`, and a
-- call whose parent is not an agent span keeps a NULL key here and goes up
-- in the recursive walk below, which looks at every span.
CREATE OR REPLACE TEMP TABLE calls AS
SELECT c.fd, c.seg, c.ro, c.th, c.sh, c.ph, c.tool_h, c.agent_h, c.args_h, c.res_h,
       c.start_ns, c.end_ns, c.cls, c.wait_ms,
       -- §4.9 when the wait began: the end of the span that stated it (the
       -- call's own here; a child's below)
       CASE WHEN c.wait_ms IS NOT NULL THEN c.end_ns END AS wait_from,
       c.ph IS NOT NULL AND p.sh IS NULL AS orphan,
       CASE WHEN c.is_agent OR p.is_agent THEN c.th
            WHEN c.ph IS NULL THEN coalesce(c.agent_h, c.th) END AS t1,
       CASE WHEN c.is_agent THEN c.sh
            WHEN p.is_agent THEN p.sh
            WHEN c.ph IS NULL AND c.agent_h IS NOT NULL THEN 0
            WHEN c.ph IS NULL THEN c.sh END AS t2
FROM frame c
LEFT JOIN (SELECT fd, th, sh, is_agent FROM frame WHERE NOT is_tool) p
       ON p.fd = c.fd AND p.th = c.th AND p.sh = c.ph
WHERE c.is_tool;

-- §1 one call once (rollup.rs nested_duplicates over the frame, as
-- calls.rs collect calls it): a tool span whose parent is a tool span of the
-- same (named) tool, overlapping it in time or starting with it, is the
-- outer call seen again. Only orphans can be one (few or none: agents put
-- their tool calls under the agent).
CREATE OR REPLACE TEMP TABLE orphans AS
SELECT fd, th, sh, ph, tool_h, start_ns, end_ns FROM calls WHERE orphan;

CREATE OR REPLACE TEMP TABLE nest_links AS
SELECT o.fd, o.th, o.sh, t.sh AS parent_sh
FROM orphans o
JOIN calls t ON t.fd = o.fd AND t.th = o.th AND t.sh = o.ph
WHERE o.tool_h IS NOT NULL AND t.tool_h = o.tool_h AND t.sh <> o.sh
  AND ((o.start_ns < t.end_ns AND t.start_ns < o.end_ns) OR o.start_ns = t.start_ns);

-- Only a parent's only such child is one; a parent with two or more is a
-- wrapper around attempts (a client that retried inside one tool call):
-- its children are the calls.
CREATE OR REPLACE TEMP TABLE nest_only AS
SELECT l.*, count(*) OVER (PARTITION BY l.fd, l.th, l.parent_sh) = 1 AS sole
FROM nest_links l;

-- The outermost span of each only child's nest (up through only children,
-- at most 16 links, never back to the span itself).
CREATE OR REPLACE TEMP TABLE nest_up AS
WITH RECURSIVE up(fd, th, sh, cur, depth) AS (
    SELECT fd, th, sh, parent_sh, 1 FROM nest_only WHERE sole
    UNION ALL
    SELECT u.fd, u.th, u.sh, l.parent_sh, u.depth + 1
    FROM up u JOIN nest_only l ON l.fd = u.fd AND l.th = u.th AND l.sh = u.cur
    WHERE l.sole AND u.depth < 16 AND l.parent_sh <> u.sh
)
SELECT fd, th, sh, arg_max(cur, depth) AS outer_sh FROM up GROUP BY fd, th, sh;

-- The spans that are no call: only children, wrappers, and the outermost
-- span of the nest a wrapper was an only child in.
CREATE OR REPLACE TEMP TABLE nest_dups AS
SELECT fd, th, sh FROM nest_up
UNION
SELECT fd, th, parent_sh FROM nest_only WHERE NOT sole
UNION
SELECT u.fd, u.th, u.outer_sh FROM nest_up u
SEMI JOIN (SELECT * FROM nest_only WHERE NOT sole) w ON w.fd = u.fd AND w.th = u.th AND w.parent_sh = u.sh;

-- rollup.rs takes_inner_class, in the frame's order: an outer call that
-- says ok takes the first known failure class of its inner spans (else
-- unknown, if one failed so); one that says unknown, the first known one.
-- Then the inner spans go (they are spans of the turn, not calls).
CREATE OR REPLACE TEMP TABLE nest_classes AS
SELECT d.fd, d.th, d.outer_sh,
       arg_min(t.cls, (t.seg, t.ro)) FILTER (WHERE t.cls <> 11) AS known_cls,
       bool_or(t.cls = 11) AS any_unknown
FROM nest_up d
JOIN calls t ON t.fd = d.fd AND t.th = d.th AND t.sh = d.sh
WHERE t.cls <> 0
GROUP BY d.fd, d.th, d.outer_sh;

UPDATE calls SET cls = CASE WHEN calls.cls = 0
                            THEN coalesce(m.known_cls, CASE WHEN m.any_unknown THEN 11 END, 0)
                            ELSE coalesce(m.known_cls, 11) END
FROM nest_classes m
WHERE calls.fd = m.fd AND calls.th = m.th AND calls.sh = m.outer_sh AND calls.cls IN (0, 11);

DELETE FROM calls
WHERE EXISTS (SELECT 1 FROM nest_dups d WHERE d.fd = calls.fd AND d.th = calls.th AND d.sh = calls.sh);

-- calls.rs collect: a call stopped on purpose (interrupted, cancelled: its
-- class as the nest leaves it) is no call of the per-turn rules, only a
-- span of its turn.
DELETE FROM calls WHERE cls >= 12;

-- §4.9 calls.rs stated_waits: a call's wait is its own span's, else the
-- one of the latest-ending failed span below it (up through spans that are
-- no call, at most 64 steps) that ran inside it (1 ms slack either side):
-- the HTTP client span of the tool's request. The wait begins at the end
-- of the span that stated it.
CREATE OR REPLACE TEMP TABLE child_waits AS
WITH RECURSIVE up(fd, th, src_start, src_end, ms, cur, cur_parent, depth, at_call) AS (
    SELECT f.fd, f.th, f.start_ns, f.end_ns, f.wait_ms, f.sh, f.ph, 0, false
    FROM frame f
    ANTI JOIN calls c ON c.fd = f.fd AND c.th = f.th AND c.sh = f.sh
    WHERE f.fd IS NOT NULL AND f.wait_ms IS NOT NULL AND f.cls BETWEEN 1 AND 5
    UNION ALL
    SELECT u.fd, u.th, u.src_start, u.src_end, u.ms, p.sh, p.ph, u.depth + 1, c.sh IS NOT NULL
    FROM up u
    JOIN frame p ON p.fd = u.fd AND p.th = u.th AND p.sh = u.cur_parent
    LEFT JOIN calls c ON c.fd = u.fd AND c.th = u.th AND c.sh = p.sh
    WHERE NOT u.at_call AND u.depth < 64
)
SELECT u.fd, u.th, u.cur AS sh, arg_max(u.ms, u.src_end) AS ms, max(u.src_end) AS from_ns
FROM up u
JOIN calls c ON c.fd = u.fd AND c.th = u.th AND c.sh = u.cur
WHERE u.at_call
  AND u.src_start + getvariable('overlap_slack_ns') >= c.start_ns
  AND u.src_end <= c.end_ns + getvariable('overlap_slack_ns')
GROUP BY u.fd, u.th, u.cur;

UPDATE calls SET wait_ms = w.ms, wait_from = w.from_ns
FROM child_waits w
WHERE calls.wait_ms IS NULL AND calls.fd = w.fd AND calls.th = w.th AND calls.sh = w.sh;
DROP TABLE child_waits;

-- What the frame still serves (walks over parent links, the turns of the
-- findings) needs no tool columns: they go, to free memory.
ALTER TABLE frame DROP COLUMN p;
ALTER TABLE frame DROP COLUMN tool_h;
ALTER TABLE frame DROP COLUMN args_h;
ALTER TABLE frame DROP COLUMN res_h;
ALTER TABLE frame DROP COLUMN cls;
ALTER TABLE frame DROP COLUMN wait_ms;
DROP TABLE orphans;
DROP TABLE nest_links;
DROP TABLE nest_only;
DROP TABLE nest_up;
DROP TABLE nest_classes;

-- `tool_h` groups a call. DIFF: a call without a tool name joins no group
-- here; the Rust counts such calls under "" when the same turn holds two or
-- more calls of a tool named "" (and its daily series merges a missing tool
-- or service name with ""). Ingest always names a tool call, from its
-- attribute or its span name, and every span has a service name.

-- The spans the walk can step on: those of the (frame, trace)s it walks in
-- (none when every call's parent is an agent span or missing).
CREATE OR REPLACE TEMP TABLE walk_links AS
SELECT f.fd, f.th, f.sh, f.ph, f.is_agent
FROM frame f
SEMI JOIN (SELECT DISTINCT fd, th FROM calls WHERE t2 IS NULL) w ON w.fd = f.fd AND w.th = f.th;

-- turns.rs anchors, the rest of the way up: a recursive walk over
-- parent_span_id within the trace and frame, from the calls that still have
-- no turn (it starts again from the call, so its first step finds the
-- parent again), one hash join a level. Each step moves to the parent, or,
-- when the parent is not stored, stays and is marked done (the root); a
-- walk ends at an agent span or there. Only those last rows are kept.
-- DIFF: a cycle in parent links stops after 64 steps, not where the Rust
-- stops (it gives a cycle's rows the cycle's agent with the lowest span id,
-- and walks it frame-height times to find a "root"), so its root, and its
-- agent, can be another span of the cycle (here and in the turns of the
-- findings below).
CREATE OR REPLACE TEMP TABLE walked AS
WITH RECURSIVE walk(fd, th, sh, cur, cur_parent, cur_agent, depth, done) AS (
    SELECT fd, th, sh, sh, ph, false, 0, false
    FROM calls WHERE t2 IS NULL
    UNION ALL
    SELECT w.fd, w.th, w.sh,
           coalesce(l.sh, w.cur), l.ph, coalesce(l.is_agent, false),
           w.depth + 1,
           l.sh IS NULL OR w.depth + 1 >= 64
    FROM walk w
    LEFT JOIN walk_links l ON l.fd = w.fd AND l.th = w.th AND l.sh = w.cur_parent
    WHERE NOT w.cur_agent AND NOT w.done
)
SELECT fd, th, sh, cur, cur_agent FROM walk WHERE cur_agent OR done;

UPDATE calls SET
    t1 = CASE WHEN w.cur_agent OR calls.agent_h IS NULL THEN calls.th ELSE calls.agent_h END,
    t2 = CASE WHEN w.cur_agent OR calls.agent_h IS NULL THEN w.cur ELSE 0 END
FROM walked w
WHERE calls.fd = w.fd AND calls.th = w.th AND calls.sh = w.sh;

-- A nearest agent with an agent above it gives way to the outermost.
UPDATE calls SET t2 = a.outer_sh
FROM agent_top a
WHERE calls.fd = a.fd AND calls.t1 = a.th AND calls.t2 = a.sh;

-- ===========================================================================
-- §4.8 The turns begun per (service, day), of any spans, a tool called or
-- not (calls.rs collect_table_keeping `turns_by_service`): per frame, every
-- turn the frame's spans resolve to (turns.rs anchors), counted on the
-- frame's day when it began then (its `began_ns`: an anchor span's start;
-- an agent call id's, its earliest span's), under its anchor span's service
-- (an agent call id's: its first span's in the frame's order).
-- Most spans hang under an agent, and an agent span that has no agent
-- above it is always a turn of its own: those turns are the frame's agent
-- spans less agent_top's inner ones, counted without resolving a span
-- under them. Only the spans with no agent above them (none in most
-- traces) are resolved: they make the turns anchored at a trace's root
-- or at an agent call id. Services are compared by their 64-bit hash().
-- DIFF: a cycle in parent links is walked as in `walked` above.
-- ===========================================================================

-- The tool calls with no agent above: those the walk ended at a top, and
-- the roots (a root that is an agent span is counted with the agents:
-- its turn is left out below).
CREATE OR REPLACE TEMP TABLE free_rows AS
SELECT c.fd, c.th, c.sh, c.t1, c.t2, c.start_ns, c.seg, c.ro
FROM calls c
SEMI JOIN (SELECT fd, th, sh FROM walked WHERE NOT cur_agent) w ON w.fd = c.fd AND w.th = c.th AND w.sh = c.sh
UNION ALL
SELECT fd, th, sh, t1, t2, start_ns, seg, ro
FROM calls
WHERE ph IS NULL;

-- The other spans that are no agent: spans that are no tool call, and
-- the nested duplicates (tool spans that are no call, gone from `calls`).
CREATE OR REPLACE TEMP TABLE other_rows AS
SELECT fd, th, sh, ph, agent_h, start_ns, seg, ro
FROM frame
WHERE NOT is_agent AND NOT is_tool
UNION ALL
SELECT f.fd, f.th, f.sh, f.ph, f.agent_h, f.start_ns, f.seg, f.ro
FROM frame f
SEMI JOIN nest_dups d ON d.fd = f.fd AND d.th = f.th AND d.sh = f.sh
WHERE NOT f.is_agent;
DROP TABLE nest_dups;

-- Up their parents, as `walked` goes up from the calls: to an agent (a
-- turn counted with the agents) or to the top.
CREATE OR REPLACE TEMP TABLE other_links AS
SELECT f.fd, f.th, f.sh, f.ph, f.is_agent
FROM frame f
SEMI JOIN (SELECT DISTINCT fd, th FROM other_rows WHERE ph IS NOT NULL) o ON o.fd = f.fd AND o.th = f.th;

INSERT INTO free_rows BY NAME
WITH RECURSIVE walk(fd, th, sh, cur, cur_parent, cur_agent, depth, done) AS (
    SELECT fd, th, sh, sh, ph, false, 0, ph IS NULL
    FROM other_rows
    UNION ALL
    SELECT w.fd, w.th, w.sh,
           coalesce(l.sh, w.cur), l.ph, coalesce(l.is_agent, false),
           w.depth + 1,
           l.sh IS NULL OR w.depth + 1 >= 64
    FROM walk w
    LEFT JOIN other_links l ON l.fd = w.fd AND l.th = w.th AND l.sh = w.cur_parent
    WHERE NOT w.cur_agent AND NOT w.done
)
SELECT o.fd, o.th, o.sh,
       CASE WHEN o.agent_h IS NULL THEN o.th ELSE o.agent_h END AS t1,
       CASE WHEN o.agent_h IS NULL THEN w.cur ELSE 0 END AS t2,
       o.start_ns, o.seg, o.ro
FROM walk w
JOIN other_rows o ON o.fd = w.fd AND o.th = w.th AND o.sh = w.sh
WHERE w.done AND NOT w.cur_agent;
DROP TABLE other_links;
DROP TABLE other_rows;

-- The turns those spans make: a top's (began: the top's start), an agent
-- call id's (began: its earliest span's start; service: its first span's).
CREATE OR REPLACE TEMP TABLE free_turns AS
SELECT fd, t1 AS th, t2 AS sh, NULL::BIGINT AS began FROM free_rows WHERE t2 <> 0 GROUP BY fd, t1, t2
UNION ALL
SELECT fd, arg_min(th, (seg, ro)), arg_min(sh, (seg, ro)), min(start_ns) FROM free_rows WHERE t2 = 0 GROUP BY fd, t1;
DROP TABLE free_rows;

CREATE OR REPLACE TEMP TABLE service_turns AS
WITH began AS (
    -- an agent span with no agent above it
    SELECT f.fd, f.svc, f.start_ns AS began
    FROM frame f
    WHERE f.is_agent
      AND NOT EXISTS (SELECT 1 FROM agent_top a WHERE a.fd = f.fd AND a.th = f.th AND a.sh = f.sh)
    UNION ALL
    SELECT f.fd, f.svc, coalesce(t.began, f.start_ns)
    FROM frame f
    JOIN free_turns t ON t.fd = f.fd AND t.th = f.th AND t.sh = f.sh
    WHERE t.began IS NOT NULL OR NOT f.is_agent
)
SELECT svc, fd AS day, count(*) AS turns
FROM began
WHERE began >= day_ns(fd) AND began < day_ns(fd) + getvariable('ns_day')
GROUP BY svc, fd;
DROP TABLE free_turns;
ALTER TABLE frame DROP COLUMN svc;

DROP TABLE walk_links;
DROP TABLE walked;

-- ===========================================================================
-- Candidate groups: every per-turn rule needs several calls of one tool in
-- one turn (calls.rs: only (turn, tool) pairs called twice or more become
-- calls), so the groups that can hold a finding are picked by counting
-- first and only their calls are looked at further. A group's calls are in
-- start order, ties in the order the frame holds them (seg, ro).
-- ===========================================================================

-- §4.2, §4.5: the failed calls per (turn, tool). A storm is a chain of
-- rounds (rounds <= calls) with >= storm_min_failures failed calls, not all
-- deterministic; a stacked layer needs a failure under its parent. The
-- failures are counted over the failed calls alone (a few percent of all),
-- and only the groups with enough of them are counted in full.
CREATE OR REPLACE TEMP TABLE failing_groups AS
SELECT fd, t1, t2, tool_h,
       count(*) AS failures,
       bool_and(deterministic_code(cls)) AS deterministic_only,
       count(DISTINCT ph) AS failing_parents
FROM calls
WHERE cls <> 0 AND tool_h IS NOT NULL
GROUP BY fd, t1, t2, tool_h;

CREATE OR REPLACE TEMP TABLE storm_groups AS
SELECT c.fd, c.t1, c.t2, c.tool_h
FROM calls c
SEMI JOIN (SELECT * FROM failing_groups
           WHERE failures >= getvariable('storm_min_failures') AND NOT deterministic_only) f
  ON f.fd = c.fd AND f.t1 = c.t1 AND f.t2 = c.t2 AND f.tool_h = c.tool_h
GROUP BY c.fd, c.t1, c.t2, c.tool_h
HAVING count(*) >= getvariable('storm_min_calls');

-- §4.3, §4.4, §4.7: calls of one request (turn, tool, arguments hash),
-- arguments known, twice or more; `ok` counts its successful calls and
-- min/max its classes (every call of it the same class: min = max). Most
-- requests are made once, so the repeated ones are first found by one
-- hash of the five keys (a collision there only adds a candidate: the
-- groups are then formed by the keys themselves).
CREATE OR REPLACE TEMP TABLE request_groups AS
WITH repeated AS (
    SELECT hash(fd, t1, t2, tool_h, args_h) AS k
    FROM calls
    WHERE args_h IS NOT NULL AND tool_h IS NOT NULL
    GROUP BY 1
    HAVING count(*) >= 2
)
SELECT fd, t1, t2, tool_h, args_h,
       count(*) AS n,
       count(*) FILTER (WHERE cls = 0) AS ok,
       min(cls) AS min_cls,
       max(cls) AS max_cls
FROM calls
WHERE args_h IS NOT NULL AND tool_h IS NOT NULL
  AND hash(fd, t1, t2, tool_h, args_h) IN (SELECT k FROM repeated)
GROUP BY fd, t1, t2, tool_h, args_h
HAVING count(*) >= 2;

-- ===========================================================================
-- §4.2 Retry chains and storms (chains.rs rounds/chains, storm.rs
-- retry_storms), per (turn, tool)
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE storms AS
WITH c0 AS (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.start_ns, c.end_ns, c.cls, c.args_h,
           c.wait_ms, c.wait_from,
           row_number() OVER (PARTITION BY c.fd, c.t1, c.t2, c.tool_h
                              ORDER BY c.start_ns, c.seg, c.ro) AS ord
    FROM calls c
    SEMI JOIN storm_groups g ON g.fd = c.fd AND g.t1 = c.t1 AND g.t2 = c.t2 AND g.tool_h = c.tool_h
), c1 AS (
    SELECT *,
           max(end_ns) OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end,
           lag(start_ns) OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord) AS prev_start
    FROM c0
), c2 AS (
    -- calls whose time ranges overlap by more than 1 ms (chains.rs
    -- OVERLAP_SLACK_NS: the JS SDK writes start times in whole
    -- milliseconds), or that start together, are one round. A call opens a
    -- new round unless it starts more than the slack before the round's
    -- end, or with the call before it. (The round's end can be taken as the
    -- latest end of every call so far: a call that opened a round started
    -- no earlier than the slack before the end of every round before.)
    SELECT *,
           sum(CASE WHEN prev_end IS NULL
                         OR (start_ns + getvariable('overlap_slack_ns') >= prev_end AND start_ns <> prev_start) THEN 1 ELSE 0 END)
               OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord ROWS UNBOUNDED PRECEDING) AS round_no
    FROM c1
), rounds AS (
    SELECT fd, t1, t2, tool_h, round_no,
           min(start_ns) AS r_start,
           max(end_ns) AS r_end,
           count(*) AS r_calls,
           count(*) FILTER (WHERE cls <> 0) AS r_failures,
           count(*) FILTER (WHERE cls <> 0 AND NOT deterministic_code(cls)) AS r_not_deterministic,
           count(*) FILTER (WHERE cls BETWEEN 1 AND 5) AS r_retryable,
           -- the class that decided the round: its first failed call's
           arg_min(cls, ord) FILTER (WHERE cls <> 0) AS r_class,
           -- the arguments of its first call
           arg_min_null(args_h, ord) AS r_args,
           -- §4.9: the latest deadline its failed calls stated
           max(wait_from + wait_ms * 1000000) FILTER (WHERE cls <> 0) AS r_deadline
    FROM c2
    GROUP BY fd, t1, t2, tool_h, round_no
), marked AS (
    -- a chain starts at a failed round after one that did not fail; the
    -- next round extends it while the round before it failed; the first
    -- successful round ends it (and belongs to it)
    SELECT *,
           lag(r_class IS NOT NULL) OVER w AS prev_failed
    FROM rounds
    WINDOW w AS (PARTITION BY fd, t1, t2, tool_h ORDER BY round_no)
), numbered AS (
    SELECT *,
           sum(CASE WHEN r_class IS NOT NULL AND NOT coalesce(prev_failed, false) THEN 1 ELSE 0 END)
               OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY round_no ROWS UNBOUNDED PRECEDING) AS chain_no
    FROM marked
), chain_rounds AS (
    SELECT * FROM numbered
    WHERE r_class IS NOT NULL OR coalesce(prev_failed, false)
), chains AS (
    SELECT fd, t1, t2, tool_h, chain_no,
           count(*) AS n_rounds,
           sum(r_calls) AS n_calls,
           sum(r_failures) AS failures,
           sum(r_not_deterministic) AS not_deterministic,
           sum(r_retryable) AS n_retryable,
           arg_max(r_class IS NULL, round_no) AS recovered,
           list({'s': r_start, 'e': r_end, 'c': r_class, 'a': r_args, 'd': r_deadline}
                ORDER BY round_no) AS rs
    FROM chain_rounds
    GROUP BY fd, t1, t2, tool_h, chain_no
), judged AS (
    SELECT *,
           list_transform(gaps_ns(rs), lambda g: g / 1e6) AS gaps_ms
    FROM chains
    WHERE n_rounds >= getvariable('storm_min_calls') AND failures >= getvariable('storm_min_failures')
      AND not_deterministic > 0
), rhythm AS (
    -- storm.rs rhythm over the chain's gaps
    SELECT *,
           median_of(gaps_ms) AS median_gap_ms,
           CASE WHEN median_of(gaps_ms) IS NULL THEN 'irregular'
                WHEN median_of(gaps_ms) < getvariable('no_backoff_ms') THEN 'no_backoff'
                WHEN coalesce(median_of(growth_ratios(gaps_ms)) >= getvariable('exponential_ratio'), false)
                    THEN 'exponential'
                WHEN list_sum(gaps_ms) / len(gaps_ms) > 0
                     AND (list_max(gaps_ms) - list_min(gaps_ms)) / (list_sum(gaps_ms) / len(gaps_ms))
                         < getvariable('fixed_variation') THEN 'fixed'
                ELSE 'irregular' END AS rhythm
    FROM judged
)
SELECT fd, t1, t2, tool_h, chain_no, n_calls AS calls, n_rounds AS rounds, failures, rhythm,
       CASE WHEN recovered THEN 'recovered' ELSE 'gave_up' END AS outcome, median_gap_ms,
       -- storm.rs wasted_seconds: every retry of a chain that gave up; in one
       -- that recovered, retries repeating a deterministic failure with the
       -- same arguments (either unknown counts as the same), never the
       -- success that ended it (durations and the gaps before them)
       list_sum(list_transform(range(2, n_rounds + 1), lambda j:
           CASE WHEN NOT recovered
                     OR (deterministic_code(rs[j - 1].c) AND j < n_rounds
                         AND coalesce(rs[j].a = rs[j - 1].a, true))
                THEN greatest(rs[j].s - rs[j - 1].e, 0) + (rs[j].e - rs[j].s) ELSE 0 END)) / 1e9
           AS wasted_seconds,
       -- the gaps between its rounds (end of one, start of the next), for its driver
       list_transform(range(2, n_rounds + 1), lambda j: {'a': rs[j - 1].e, 'b': rs[j].s}) AS gaps
FROM rhythm
-- growing backoff that ends ok is a healthy retry policy; so is waiting
-- out every wait the failures stated (§4.9: each round after one stated,
-- none early)
WHERE NOT ((rhythm = 'exponential'
            OR list_bool_and(list_transform(range(2, n_rounds + 1), lambda j:
                   rs[j - 1].d IS NOT NULL
                   AND NOT (rs[j].s + getvariable('ra_tolerance_ms') * 1e6 < rs[j - 1].d))))
           AND recovered)
  -- storm.rs same_args: a chain whose rounds mostly vary their arguments
  -- (share of successive rounds' first calls with the same arguments < 0.5,
  -- every round's known) whose failures are mostly not retryable is an
  -- agent trying one thing after another, not a storm
  AND NOT (list_bool_and(list_transform(rs, lambda r: r.a IS NOT NULL))
           AND len(list_filter(range(2, n_rounds + 1), lambda j: rs[j].a = rs[j - 1].a))::DOUBLE
               / (n_rounds - 1) < 0.5
           AND n_retryable * 2 < failures);

-- ===========================================================================
-- §4.9 Ignored Retry-After (detect/retry_after.rs ignored_retry_after), per
-- (turn, tool): the chains as above; after a failed round whose failed
-- calls stated a wait, the next round is early when it starts more than
-- tolerance_ms before the round's deadline: the latest of its failed
-- calls' (the end of the span that stated the wait, plus the wait). A chain is a finding when at least
-- min_early retries were early and more than `share` of those with a wait.
-- Only groups with min_early or more failed calls stating a wait can be one.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE ignored_retry_after AS
WITH g AS (
    SELECT fd, t1, t2, tool_h
    FROM calls
    WHERE cls <> 0 AND wait_ms IS NOT NULL AND tool_h IS NOT NULL
    GROUP BY fd, t1, t2, tool_h
    HAVING count(*) >= getvariable('ra_min_early')
), c0 AS (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.start_ns, c.end_ns, c.cls, c.wait_ms, c.wait_from,
           row_number() OVER (PARTITION BY c.fd, c.t1, c.t2, c.tool_h
                              ORDER BY c.start_ns, c.seg, c.ro) AS ord
    FROM calls c
    SEMI JOIN g ON g.fd = c.fd AND g.t1 = c.t1 AND g.t2 = c.t2 AND g.tool_h = c.tool_h
), c1 AS (
    SELECT *,
           max(end_ns) OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end,
           lag(start_ns) OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord) AS prev_start
    FROM c0
), c2 AS (
    SELECT *,
           sum(CASE WHEN prev_end IS NULL
                         OR (start_ns + getvariable('overlap_slack_ns') >= prev_end AND start_ns <> prev_start) THEN 1 ELSE 0 END)
               OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY ord ROWS UNBOUNDED PRECEDING) AS round_no
    FROM c1
), rounds AS (
    SELECT fd, t1, t2, tool_h, round_no,
           min(start_ns) AS r_start,
           max(end_ns) AS r_end,
           bool_or(cls <> 0) AS r_failed,
           max(wait_ms) FILTER (WHERE cls <> 0) AS r_wait,
           max(wait_from + wait_ms * 1000000) FILTER (WHERE cls <> 0) AS r_deadline
    FROM c2
    GROUP BY fd, t1, t2, tool_h, round_no
), marked AS (
    SELECT *, lag(r_failed) OVER w AS prev_failed
    FROM rounds
    WINDOW w AS (PARTITION BY fd, t1, t2, tool_h ORDER BY round_no)
), numbered AS (
    SELECT *,
           sum(CASE WHEN r_failed AND NOT coalesce(prev_failed, false) THEN 1 ELSE 0 END)
               OVER (PARTITION BY fd, t1, t2, tool_h ORDER BY round_no ROWS UNBOUNDED PRECEDING) AS chain_no
    FROM marked
), chains AS (
    SELECT fd, t1, t2, tool_h, chain_no,
           list({'s': r_start, 'e': r_end, 'w': r_wait, 'd': r_deadline} ORDER BY round_no) AS rs
    FROM numbered
    WHERE r_failed OR coalesce(prev_failed, false)
    GROUP BY fd, t1, t2, tool_h, chain_no
), waits AS (
    SELECT fd, t1, t2, tool_h, chain_no,
           list_transform(list_filter(range(2, len(rs) + 1), lambda j: rs[j - 1].w IS NOT NULL),
                          lambda j: rs[j].s + getvariable('ra_tolerance_ms') * 1e6
                                    < rs[j - 1].d) AS early
    FROM chains
)
SELECT fd, t1, t2, tool_h, chain_no,
       len(list_filter(early, lambda x: x)) AS early,
       len(early) AS stated
FROM waits
WHERE len(list_filter(early, lambda x: x)) >= getvariable('ra_min_early')
  AND len(list_filter(early, lambda x: x)) > getvariable('ra_share') * len(early);

-- ===========================================================================
-- §4.3 Wasted retries on a deterministic error (retries.rs wasted_retries):
-- the first call failed with a deterministic class and every retry failed
-- with the same class, i.e. every call of the request has that one class.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE wasted_retries AS
SELECT fd, t1, t2, tool_h, args_h, class_name(min_cls) AS class, n AS attempts
FROM request_groups
WHERE min_cls = max_cls AND deterministic_code(min_cls);

-- ===========================================================================
-- §4.4 Retry after success (retries.rs retries_after_success): calls of the
-- same request that start after the first successful one ended, taken in
-- order while every call between the one taken before (at first the
-- success) and it is of this request or of a read-only tool (and among the
-- turn's calls of repeated pairs: a tool called once in the turn blocks),
-- unless the request is polling (chains.rs polling). A request that is a
-- step of a tool loop of its turn is reported as the loop (below).
-- ===========================================================================

-- config/mod.rs AfterSuccessConfig::read_only with the default globs
-- (get_*, list_*, search_*, read_*, fetch_*, lookup_*), matched against the
-- name, its snake_case form and that form's last `__`-separated part.
CREATE OR REPLACE TEMP MACRO snake_case(s) AS
    translate(regexp_replace(regexp_replace(s, '([a-z0-9])([A-Z])', '\1_\2', 'g'), '[-. ]', '_', 'g'),
              'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
CREATE OR REPLACE TEMP MACRO read_only_glob(s) AS regexp_matches(s, '^(get|list|search|read|fetch|lookup)_');
CREATE OR REPLACE TEMP TABLE read_only_tools AS
SELECT DISTINCT hash(tool_name) AS tool_h
FROM tool_daily
WHERE tool_name IS NOT NULL
  AND (read_only_glob(tool_name) OR read_only_glob(snake_case(tool_name))
       OR read_only_glob(reverse(string_split(reverse(snake_case(tool_name)), '__')[1])));

-- The calls of the turns that hold a request with a success, with `seq`,
-- a call's place among ALL the turn's calls in start order (calls.rs seq),
-- `blk` whether it blocks a repeat of another request (it is no call of a
-- repeated (turn, tool) pair, or not of a read-only tool), and `cb` the
-- number of blocking calls up to it.
CREATE OR REPLACE TEMP TABLE turn_seq AS
WITH t AS (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.args_h, c.res_h, c.cls, c.start_ns, c.end_ns, c.seg, c.ro,
           count(c.tool_h) OVER (PARTITION BY c.fd, c.t1, c.t2, c.tool_h) AS pair_calls
    FROM calls c
    SEMI JOIN (SELECT DISTINCT fd, t1, t2 FROM request_groups WHERE ok > 0) g
      ON g.fd = c.fd AND g.t1 = c.t1 AND g.t2 = c.t2
), b AS (
    SELECT *,
           row_number() OVER (PARTITION BY fd, t1, t2 ORDER BY start_ns, seg, ro) - 1 AS seq,
           NOT (tool_h IS NOT NULL AND pair_calls >= 2
                AND tool_h IN (SELECT tool_h FROM read_only_tools)) AS blk
    FROM t
)
SELECT *, sum(blk::INTEGER) OVER (PARTITION BY fd, t1, t2 ORDER BY seq ROWS UNBOUNDED PRECEDING) AS cb
FROM b;

-- Per request: its calls in order (l), k the first success, cj the later
-- calls that start after it ended; each is taken when no call between it
-- and the one before (l[k] for the first) blocks: the blocking calls in
-- between, less this request's own calls there when they block, are none.
CREATE OR REPLACE TEMP TABLE retries_after_success AS
WITH r AS (
    SELECT s.fd, s.t1, s.t2, s.tool_h, s.args_h,
           list({'s': s.start_ns, 'e': s.end_ns, 'ok': s.cls = 0, 'r': s.res_h, 'cb': s.cb,
                 'b': s.blk::INTEGER} ORDER BY s.seq) AS l,
           bool_or(s.blk) AS own_blk
    FROM turn_seq s
    SEMI JOIN (SELECT * FROM request_groups WHERE ok > 0) g
      ON g.fd = s.fd AND g.t1 = s.t1 AND g.t2 = s.t2 AND g.tool_h = s.tool_h AND g.args_h = s.args_h
    GROUP BY s.fd, s.t1, s.t2, s.tool_h, s.args_h
), first_ok AS (
    SELECT *, list_position(list_transform(l, lambda x: x.ok), true) AS k FROM r
), cand AS (
    SELECT *, list_filter(range(k + 1, len(l) + 1), lambda j: l[j].s >= l[k].e) AS cj FROM first_ok
), quiet AS (
    SELECT *,
           list_transform(range(1, len(cj) + 1), lambda m:
               (l[cj[m]].cb - l[cj[m]].b)
               - l[CASE WHEN m = 1 THEN k ELSE cj[m - 1] END].cb
               - CASE WHEN own_blk THEN cj[m] - CASE WHEN m = 1 THEN k ELSE cj[m - 1] END - 1 ELSE 0 END
               = 0) AS q
    FROM cand
), counted AS (
    SELECT *,
           CASE WHEN list_contains(q, false) THEN list_position(q, false) - 1 ELSE len(q) END AS repeats
    FROM quiet
)
SELECT fd, t1, t2, tool_h, args_h, repeats
FROM counted
WHERE repeats > 0 AND NOT is_polling(l);

-- ===========================================================================
-- §4.5 Stacked retry layers (retries.rs stacked_retries): a tool's calls in
-- one turn under >= 2 parent spans that each hold >= 3 attempts, at least
-- one failed; so only groups whose failed calls sit under >= 2 parents are
-- looked at.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE stacked_retries AS
SELECT fd, t1, t2, tool_h, count(*) AS layers
FROM (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.ph
    FROM calls c
    SEMI JOIN (SELECT * FROM failing_groups WHERE failing_parents >= 2) f
      ON f.fd = c.fd AND f.t1 = c.t1 AND f.t2 = c.t2 AND f.tool_h = c.tool_h
    WHERE c.ph IS NOT NULL
    GROUP BY c.fd, c.t1, c.t2, c.tool_h, c.ph
    HAVING count(*) >= 3 AND bool_or(c.cls <> 0)
)
GROUP BY fd, t1, t2, tool_h
HAVING count(*) >= 2;

-- ===========================================================================
-- §4.7 Tool loops (loops.rs tool_loops), per turn, over the calls of the
-- turn's repeated (turn, tool) pairs in turn order.
-- ===========================================================================

-- Cycles (loops.rs cycles). A cycle of period p run r times needs p >= 2
-- steps, each a request with >= r successful calls: the turns whose
-- requests with >= cycle_min_repeats successful calls add up to at least
-- 2 x cycle_min_repeats of them are the only ones looked at.
CREATE OR REPLACE TEMP TABLE cycle_turns AS
SELECT fd, t1, t2
FROM request_groups
WHERE ok >= getvariable('cycle_min_repeats')
GROUP BY fd, t1, t2
HAVING sum(ok) >= 2 * getvariable('cycle_min_repeats');

-- Their calls in turn order: `seq` is a call's place among ALL the turn's
-- calls (any tool: two calls are adjacent when their places are), `k` its
-- place among the calls of repeated pairs, the ones the rule walks.
CREATE OR REPLACE TEMP TABLE cycle_calls AS
WITH t AS (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.args_h, c.res_h, c.cls <> 0 AS failed,
           c.start_ns, c.end_ns, c.seg, c.ro,
           row_number() OVER (PARTITION BY c.fd, c.t1, c.t2 ORDER BY c.start_ns, c.seg, c.ro) - 1 AS seq,
           count(c.tool_h) OVER (PARTITION BY c.fd, c.t1, c.t2, c.tool_h) AS pair_calls
    FROM calls c
    SEMI JOIN cycle_turns ct ON ct.fd = c.fd AND ct.t1 = c.t1 AND ct.t2 = c.t2
)
SELECT fd, t1, t2, tool_h, args_h, res_h, failed, seq,
       row_number() OVER (PARTITION BY fd, t1, t2 ORDER BY seq) - 1 AS k,
       count(*) OVER (PARTITION BY fd, t1, t2) AS n
FROM t
WHERE tool_h IS NOT NULL AND pair_calls >= 2;

-- loops.rs same(): the same tool and (known) arguments, neither failing,
-- the same result where both are recorded.
CREATE OR REPLACE TEMP MACRO same_step(a, b) AS
    coalesce(a.tool = b.tool AND a.args IS NOT NULL AND a.args = b.args AND NOT a.failed AND NOT b.failed
             AND (a.res IS NULL OR b.res IS NULL OR a.res = b.res), false);

-- Per call k: the calls k - max_period .. k (`back`) and k .. k + max_period - 1 (`ahead`).
CREATE OR REPLACE TEMP TABLE cycle_windows AS
SELECT fd, t1, t2, k, n,
       list({'seq': seq, 'tool': tool_h, 'args': args_h, 'res': res_h, 'failed': failed}) OVER (
           PARTITION BY fd, t1, t2 ORDER BY k
           ROWS BETWEEN getvariable('max_period') PRECEDING AND CURRENT ROW) AS back,
       list({'seq': seq, 'tool': tool_h, 'args': args_h, 'res': res_h, 'failed': failed}) OVER (
           PARTITION BY fd, t1, t2 ORDER BY k
           ROWS BETWEEN CURRENT ROW AND getvariable('max_period') - 1 FOLLOWING) AS ahead
FROM cycle_calls;

-- Per (call k, period p): `extends` — call k continues a run of period p
-- (it is adjacent to the call before it and repeats the call p before it);
-- `steps_ok` — calls k .. k + p - 1 can be the steps of a cycle (adjacent,
-- arguments known, none failing, no two of the same tool and arguments); `stop` — the first call
-- at or after k that does not extend a run of period p (n: none).
CREATE OR REPLACE TEMP TABLE cycle_periods AS
WITH kp AS (
    SELECT w.*, p,
           k >= p AND back[len(back)].seq = back[len(back) - 1].seq + 1
               AND same_step(back[len(back) - p], back[len(back)]) AS extends,
           len(ahead) >= p
               AND list_bool_and(list_transform(range(1, p), lambda j: ahead[j + 1].seq = ahead[j].seq + 1))
               AND list_bool_and(list_transform(range(1, p + 1),
                                                lambda j: ahead[j].args IS NOT NULL AND NOT ahead[j].failed))
               AND list_bool_and(list_transform(range(1, p + 1), lambda a:
                       list_bool_and(list_transform(range(a + 1, p + 1),
                                                    lambda b: NOT (ahead[a].tool = ahead[b].tool
                                                                   AND ahead[a].args IS NOT DISTINCT FROM ahead[b].args)))))
               AS steps_ok
    FROM cycle_windows w, (SELECT unnest(range(2, getvariable('max_period') + 1)) AS p)
)
SELECT fd, t1, t2, k, n, p, steps_ok,
       coalesce(min(CASE WHEN NOT extends THEN k END) OVER (
           PARTITION BY fd, t1, t2, p ORDER BY k ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), n) AS stop
FROM kp;

-- Per call i: the best cycle starting there. For each period in order, the
-- run goes from i to `run_end` (the first call after the steps that does
-- not extend it), holding `whole` whole cycles; it counts with >=
-- cycle_min_repeats of them, and a later period wins when its run_end is
-- past the end (i + whole cycles) of the one kept so far (loops.rs: the
-- longest, lowest-period run).
CREATE OR REPLACE TEMP TABLE cycle_starts AS
WITH runs AS (
    SELECT a.fd, a.t1, a.t2, a.k AS i, a.p, a.steps_ok,
           CASE WHEN a.k + a.p >= a.n THEN a.k + a.p ELSE b.stop END AS run_end
    FROM cycle_periods a
    LEFT JOIN cycle_periods b
      ON b.fd = a.fd AND b.t1 = a.t1 AND b.t2 = a.t2 AND b.p = a.p AND b.k = a.k + a.p
), scored AS (
    SELECT *, (run_end - i) // p AS whole FROM runs
), best AS (
    SELECT fd, t1, t2, i,
           list_reduce(list({'p': p, 'e': run_end, 't': i + whole * p,
                             'ok': steps_ok AND whole >= getvariable('cycle_min_repeats')} ORDER BY p),
                       lambda acc, x: CASE WHEN x.ok AND (NOT acc.ok OR x.e > acc.t) THEN x ELSE acc END) AS b
    FROM scored
    GROUP BY fd, t1, t2, i
)
SELECT fd, t1, t2, i, b.p AS p, b.t AS run_end FROM best WHERE b.ok;

-- The scan: from the first call, a cycle found at i is taken and the scan
-- goes on after it (runs do not overlap); elsewhere it moves one call on.
-- So the cycles taken are the first cycle start of the turn, then the
-- first start at or after the end of each one taken.
CREATE OR REPLACE TEMP TABLE cycles AS
WITH RECURSIVE nexts AS (
    SELECT a.fd, a.t1, a.t2, a.i AS from_i, b.i, b.p, b.run_end
    FROM cycle_starts a
    ASOF JOIN cycle_starts b ON b.fd = a.fd AND b.t1 = a.t1 AND b.t2 = a.t2 AND b.i >= a.run_end
), taken(fd, t1, t2, i, p, run_end) AS (
    SELECT fd, t1, t2, min(i), arg_min(p, i), arg_min(run_end, i)
    FROM cycle_starts GROUP BY fd, t1, t2
    UNION ALL
    SELECT n.fd, n.t1, n.t2, n.i, n.p, n.run_end
    FROM taken t JOIN nexts n ON n.fd = t.fd AND n.t1 = t.t1 AND n.t2 = t.t2 AND n.from_i = t.i
)
SELECT t.fd, t.t1, t.t2, t.i, t.p, t.run_end, c.tool_h, (t.run_end - t.i) AS calls
FROM taken t
JOIN cycle_calls c ON c.fd = t.fd AND c.t1 = t.t1 AND c.t2 = t.t2 AND c.k = t.i;

-- Repeats: the same tool with the same (known) arguments, succeeding,
-- >= loop_min_calls times in one turn, every recorded result the same, not
-- polling (over those calls in order), and the tool in no cycle of the
-- turn. When not every one of those calls recorded a result, only the
-- longest run of them back to back (consecutive seq) counts, and it needs
-- >= loop_min_calls calls.
CREATE OR REPLACE TEMP TABLE loop_repeats AS
WITH m AS (
    SELECT s.fd, s.t1, s.t2, s.tool_h, s.args_h, s.start_ns, s.end_ns, s.res_h, s.seq,
           s.seq - row_number() OVER (PARTITION BY s.fd, s.t1, s.t2, s.tool_h, s.args_h ORDER BY s.seq) AS run
    FROM turn_seq s
    SEMI JOIN (SELECT * FROM request_groups WHERE ok >= getvariable('loop_min_calls')) g
      ON g.fd = s.fd AND g.t1 = s.t1 AND g.t2 = s.t2 AND g.tool_h = s.tool_h AND g.args_h = s.args_h
    WHERE s.cls = 0
), runs AS (
    SELECT fd, t1, t2, tool_h, args_h, max(n) AS longest
    FROM (SELECT fd, t1, t2, tool_h, args_h, run, count(*) AS n FROM m GROUP BY fd, t1, t2, tool_h, args_h, run)
    GROUP BY fd, t1, t2, tool_h, args_h
), r AS (
    SELECT fd, t1, t2, tool_h, args_h,
           list({'s': start_ns, 'e': end_ns, 'ok': true, 'r': res_h} ORDER BY seq) AS l,
           count(DISTINCT res_h) AS results,
           count(res_h) AS recorded,
           count(*) AS n
    FROM m
    GROUP BY fd, t1, t2, tool_h, args_h
), sized AS (
    SELECT r.*, CASE WHEN r.recorded = r.n THEN r.n ELSE u.longest END AS calls
    FROM r JOIN runs u
      ON u.fd = r.fd AND u.t1 = r.t1 AND u.t2 = r.t2 AND u.tool_h = r.tool_h AND u.args_h = r.args_h
)
SELECT r.fd, r.t1, r.t2, r.tool_h, r.args_h, r.calls
FROM sized r
WHERE r.results <= 1 AND NOT is_polling(r.l) AND r.calls >= getvariable('loop_min_calls')
  AND NOT EXISTS (
      SELECT 1 FROM cycles y
      JOIN cycle_calls m ON m.fd = y.fd AND m.t1 = y.t1 AND m.t2 = y.t2 AND m.k >= y.i AND m.k < y.run_end
      WHERE y.fd = r.fd AND y.t1 = r.t1 AND y.t2 = r.t2 AND m.tool_h = r.tool_h);

CREATE OR REPLACE TEMP TABLE tool_loops AS
SELECT fd, t1, t2, tool_h, p AS steps, calls, calls // p AS repeats FROM cycles
UNION ALL
SELECT fd, t1, t2, tool_h, 1, calls, calls FROM loop_repeats;

-- sweep.rs: a request repeated in a loop is reported once, as the loop: no
-- retry after success for a (turn, tool) that is a step of a loop of the
-- turn (a cycle's steps are its first `p` calls; a repeat's, its tool).
DELETE FROM retries_after_success
WHERE EXISTS (
    SELECT 1 FROM loop_repeats l
    WHERE l.fd = retries_after_success.fd AND l.t1 = retries_after_success.t1
      AND l.t2 = retries_after_success.t2 AND l.tool_h = retries_after_success.tool_h)
   OR EXISTS (
    SELECT 1 FROM cycles y
    JOIN cycle_calls m ON m.fd = y.fd AND m.t1 = y.t1 AND m.t2 = y.t2 AND m.k >= y.i AND m.k < y.i + y.p
    WHERE y.fd = retries_after_success.fd AND y.t1 = retries_after_success.t1
      AND y.t2 = retries_after_success.t2 AND m.tool_h = retries_after_success.tool_h);

-- ===========================================================================
-- The turns of the findings, whole (calls.rs collect): a turn is judged
-- when it began on its frame's day (the earliest start of every span of the
-- frame resolved to it) and has settled (no span of its anchor's trace —
-- for an `agent:<id>` turn, the trace of its first span in the frame's
-- order — ended within settle_seconds of now). Every span of the traces
-- those turns live in is resolved, as above.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE finding_turns AS
SELECT fd, t1, t2 FROM storms
UNION SELECT fd, t1, t2 FROM wasted_retries
UNION SELECT fd, t1, t2 FROM retries_after_success
UNION SELECT fd, t1, t2 FROM stacked_retries
UNION SELECT fd, t1, t2 FROM tool_loops
UNION SELECT fd, t1, t2 FROM ignored_retry_after;

CREATE OR REPLACE TEMP TABLE turn_rows AS
WITH traces AS (
    SELECT fd, t1 AS th FROM finding_turns WHERE t2 <> 0
    UNION
    SELECT f.fd, f.th FROM frame f
    JOIN finding_turns t ON t.t2 = 0 AND t.fd = f.fd AND t.t1 = f.agent_h
)
SELECT f.fd, f.th, f.sh, f.ph, f.is_agent, f.agent_h, f.start_ns, f.end_ns, f.seg, f.ro
FROM frame f SEMI JOIN traces t ON t.fd = f.fd AND t.th = f.th;

CREATE OR REPLACE TEMP TABLE turn_info AS
WITH RECURSIVE walk(fd, th, sh, cur, cur_parent, cur_agent, depth, done) AS (
    SELECT fd, th, sh, sh, ph, is_agent, 0, false
    FROM turn_rows
    UNION ALL
    SELECT w.fd, w.th, w.sh,
           coalesce(l.sh, w.cur), l.ph, coalesce(l.is_agent, false),
           w.depth + 1,
           l.sh IS NULL OR w.depth + 1 >= 64
    FROM walk w
    LEFT JOIN turn_rows l ON l.fd = w.fd AND l.th = w.th AND l.sh = w.cur_parent
    WHERE NOT w.cur_agent AND NOT w.done
), anchored AS (
    SELECT r.fd, r.th, r.start_ns, r.seg, r.ro,
           CASE WHEN w.cur_agent OR r.agent_h IS NULL THEN r.th ELSE r.agent_h END AS t1,
           CASE WHEN w.cur_agent THEN coalesce(a.outer_sh, w.cur)
                WHEN r.agent_h IS NULL THEN w.cur ELSE 0 END AS t2
    FROM walk w
    JOIN turn_rows r ON r.fd = w.fd AND r.th = w.th AND r.sh = w.sh
    LEFT JOIN agent_top a ON w.cur_agent AND a.fd = w.fd AND a.th = w.th AND a.sh = w.cur
    WHERE w.cur_agent OR w.done
), trace_end AS (
    SELECT fd, th, max(end_ns) AS last_end FROM turn_rows GROUP BY fd, th
), turns AS (
    SELECT fd, t1, t2, min(start_ns) AS first_start, arg_min(th, (seg, ro)) AS anchor_th
    FROM anchored
    SEMI JOIN finding_turns USING (fd, t1, t2)
    GROUP BY fd, t1, t2
), began AS (
    -- calls.rs began_ns: a span anchor's own start; an agent call id's
    -- turn, its first span's
    SELECT t.*, CASE WHEN t.t2 = 0 THEN t.first_start ELSE coalesce(a.start_ns, t.first_start) END AS turn_start
    FROM turns t
    LEFT JOIN turn_rows a ON t.t2 <> 0 AND a.fd = t.fd AND a.th = t.t1 AND a.sh = t.t2
)
SELECT t.fd, t.t1, t.t2, t.turn_start, e.last_end,
       DATE '1970-01-01' + CAST(t.turn_start // getvariable('ns_day') AS INTEGER) = t.fd
           AND getvariable('now_ns') - e.last_end >= getvariable('settle_ns') AS judged
FROM began t JOIN trace_end e ON e.fd = t.fd AND e.th = t.anchor_th;

CREATE OR REPLACE TEMP TABLE judged_turns AS
SELECT fd, t1, t2 FROM turn_info WHERE judged;

-- ===========================================================================
-- §4.2 "Driver" (detect/driver.rs, models.rs): who made the retries of each
-- storm and wasted retry. A model call lies in a gap between two attempts
-- (end of the earlier, start of the later) when it STARTS within it, with
-- the 1 ms slack either side (its end may be later: a streamed answer),
-- the driver is `model` when every gap holds one, `code` when none does
-- (or there is no gap), else `mixed`; the model calls in any gap count
-- once, with their input and output tokens (a token count not recorded
-- counts none). A model span with a model span anywhere up its parent
-- chain (within the trace and frame) is no call of its own: the outermost
-- is the call, in its own turn (turns.rs anchors), its tokens its own when
-- recorded, else the largest recorded among the model spans below it
-- (input and output each). Only the traces of finding turns that hold a
-- model span are walked: nothing is, when no part has one.
-- DIFF: the walk up stops after 64 steps (and on a parent cycle, as the
-- walks above); the Rust walks the whole chain.
-- ===========================================================================
CREATE OR REPLACE TEMP TABLE model_links AS
SELECT r.fd, r.th, r.sh, r.ph, r.is_agent, r.agent_h, m.sh IS NOT NULL AS is_m, m.start_ns, m.tin, m.tout
FROM turn_rows r
SEMI JOIN (SELECT DISTINCT fd, th FROM frame_models) t ON t.fd = r.fd AND t.th = r.th
LEFT JOIN frame_models m ON m.fd = r.fd AND m.th = r.th AND m.sh = r.sh;
DROP TABLE frame_models;

-- Up from every model span to the top: the nearest agent above it (its
-- turn, as turn_info anchors) and the outermost model span above it.
CREATE OR REPLACE TEMP TABLE model_spans AS
WITH RECURSIVE walk(fd, th, sh, cur, cur_parent, agent, outer_m, depth, done) AS (
    SELECT fd, th, sh, sh, ph, NULL::UBIGINT, NULL::UBIGINT, 0, ph IS NULL
    FROM model_links WHERE is_m
    UNION ALL
    SELECT w.fd, w.th, w.sh,
           coalesce(l.sh, w.cur), l.ph,
           CASE WHEN w.agent IS NULL AND coalesce(l.is_agent, false) THEN l.sh ELSE w.agent END,
           CASE WHEN coalesce(l.is_m, false) THEN l.sh ELSE w.outer_m END,
           w.depth + 1,
           l.sh IS NULL OR l.ph IS NULL OR w.depth + 1 >= 64
    FROM walk w
    LEFT JOIN model_links l ON l.fd = w.fd AND l.th = w.th AND l.sh = w.cur_parent
    WHERE NOT w.done
)
SELECT w.fd, w.th, w.sh, w.outer_m, m.start_ns, m.tin, m.tout,
       CASE WHEN w.agent IS NOT NULL OR m.agent_h IS NULL THEN w.th ELSE m.agent_h END AS t1,
       CASE WHEN w.agent IS NOT NULL THEN coalesce(a.outer_sh, w.agent)
            WHEN m.agent_h IS NULL THEN w.cur ELSE 0 END AS t2
FROM walk w
JOIN model_links m ON m.fd = w.fd AND m.th = w.th AND m.sh = w.sh
LEFT JOIN agent_top a ON w.agent IS NOT NULL AND a.fd = w.fd AND a.th = w.th AND a.sh = w.agent
WHERE w.done;
DROP TABLE model_links;

-- The model calls: the outermost model spans, in their turns.
CREATE OR REPLACE TEMP TABLE model_calls AS
WITH below AS (
    SELECT fd, th, outer_m AS sh, max(tin) AS tin, max(tout) AS tout
    FROM model_spans WHERE outer_m IS NOT NULL
    GROUP BY fd, th, outer_m
)
SELECT c.fd, c.t1, c.t2, hash(c.th, c.sh) AS mid, c.start_ns AS s,
       coalesce(c.tin, b.tin) AS tin, coalesce(c.tout, b.tout) AS tout
FROM model_spans c
LEFT JOIN below b ON b.fd = c.fd AND b.th = c.th AND b.sh = c.sh
WHERE c.outer_m IS NULL;
DROP TABLE model_spans;

-- The gaps of the storms and wasted retries of turns with a model call
-- (`k`: a storm's chain, a wasted retry's arguments).
CREATE OR REPLACE TEMP TABLE finding_gaps AS
WITH turns AS (
    SELECT DISTINCT fd, t1, t2 FROM model_calls
), storm_gaps AS (
    SELECT fd, t1, t2, tool_h, chain_no::UBIGINT AS k, unnest(gaps) AS g
    FROM storms SEMI JOIN turns USING (fd, t1, t2)
), wasted_calls AS (
    SELECT c.fd, c.t1, c.t2, c.tool_h, c.args_h, c.start_ns,
           lag(c.end_ns) OVER (PARTITION BY c.fd, c.t1, c.t2, c.tool_h, c.args_h
                               ORDER BY c.start_ns, c.seg, c.ro) AS prev_end
    FROM calls c
    SEMI JOIN (SELECT * FROM wasted_retries SEMI JOIN turns USING (fd, t1, t2)) w
          ON w.fd = c.fd AND w.t1 = c.t1 AND w.t2 = c.t2 AND w.tool_h = c.tool_h AND w.args_h = c.args_h
)
SELECT 'retry_storm' AS kind, fd, t1, t2, tool_h, k, g.a, g.b FROM storm_gaps
UNION ALL
SELECT 'wasted_retries', fd, t1, t2, tool_h, args_h, prev_end, start_ns FROM wasted_calls WHERE prev_end IS NOT NULL;

CREATE OR REPLACE TEMP TABLE drives AS
WITH gaps AS (
    SELECT *, row_number() OVER () AS gi FROM finding_gaps
), hits AS (
    SELECT g.kind, g.fd, g.t1, g.t2, g.tool_h, g.k, g.gi, m.mid, m.tin, m.tout
    FROM gaps g
    JOIN model_calls m ON m.fd = g.fd AND m.t1 = g.t1 AND m.t2 = g.t2
     AND m.s >= g.a - getvariable('overlap_slack_ns') AND m.s <= g.b + getvariable('overlap_slack_ns')
), n AS (
    SELECT kind, fd, t1, t2, tool_h, k, count(*) AS n_gaps FROM gaps GROUP BY ALL
), w AS (
    SELECT kind, fd, t1, t2, tool_h, k, count(DISTINCT gi) AS with_model FROM hits GROUP BY ALL
), t AS (
    SELECT kind, fd, t1, t2, tool_h, k, count(*) AS model_calls,
           sum(greatest(coalesce(tin, 0), 0)) AS input_tokens, sum(greatest(coalesce(tout, 0), 0)) AS output_tokens
    FROM (SELECT DISTINCT kind, fd, t1, t2, tool_h, k, mid, tin, tout FROM hits)
    GROUP BY ALL
)
SELECT n.kind, n.fd, n.t1, n.t2, n.tool_h, n.k,
       CASE WHEN coalesce(w.with_model, 0) = 0 THEN 'code'
            WHEN w.with_model = n.n_gaps THEN 'model' ELSE 'mixed' END AS driver,
       coalesce(t.model_calls, 0) AS model_calls,
       coalesce(t.input_tokens, 0) AS input_tokens,
       coalesce(t.output_tokens, 0) AS output_tokens
FROM n
LEFT JOIN w USING (kind, fd, t1, t2, tool_h, k)
LEFT JOIN t USING (kind, fd, t1, t2, tool_h, k);
DROP TABLE finding_gaps;
DROP TABLE model_calls;

-- Every judged storm and wasted retry with its driver (`code`, no model
-- call, when its turn has none).
CREATE OR REPLACE TEMP TABLE finding_drivers AS
SELECT 'retry_storm' AS kind, coalesce(d.driver, 'code') AS driver,
       coalesce(d.model_calls, 0) AS model_calls, coalesce(d.input_tokens, 0) AS input_tokens,
       coalesce(d.output_tokens, 0) AS output_tokens
FROM storms x
SEMI JOIN judged_turns j ON j.fd = x.fd AND j.t1 = x.t1 AND j.t2 = x.t2
LEFT JOIN drives d ON d.kind = 'retry_storm' AND d.fd = x.fd AND d.t1 = x.t1 AND d.t2 = x.t2
                  AND d.tool_h = x.tool_h AND d.k = x.chain_no::UBIGINT
UNION ALL
SELECT 'wasted_retries', coalesce(d.driver, 'code'), coalesce(d.model_calls, 0),
       coalesce(d.input_tokens, 0), coalesce(d.output_tokens, 0)
FROM wasted_retries x
SEMI JOIN judged_turns j ON j.fd = x.fd AND j.t1 = x.t1 AND j.t2 = x.t2
LEFT JOIN drives d ON d.kind = 'wasted_retries' AND d.fd = x.fd AND d.t1 = x.t1 AND d.t2 = x.t2
                  AND d.tool_h = x.tool_h AND d.k = x.args_h;
DROP TABLE drives;

-- Tool names back from their hashes, for the output.
CREATE OR REPLACE TEMP TABLE tool_names AS
SELECT DISTINCT coalesce(tool_name, '') AS tool_name, hash(tool_name) AS tool_h
FROM tool_daily;

-- The findings of judged turns, per kind.
CREATE OR REPLACE TEMP TABLE turn_findings AS
SELECT 'retry_storm' AS kind, x.fd, x.t1, x.t2, x.tool_h FROM storms x SEMI JOIN judged_turns j USING (fd, t1, t2)
UNION ALL
SELECT 'wasted_retries', x.fd, x.t1, x.t2, x.tool_h FROM wasted_retries x SEMI JOIN judged_turns j USING (fd, t1, t2)
UNION ALL
SELECT 'retry_after_success', x.fd, x.t1, x.t2, x.tool_h FROM retries_after_success x SEMI JOIN judged_turns j USING (fd, t1, t2)
UNION ALL
SELECT 'stacked_retries', x.fd, x.t1, x.t2, x.tool_h FROM stacked_retries x SEMI JOIN judged_turns j USING (fd, t1, t2)
UNION ALL
SELECT 'tool_loop', x.fd, x.t1, x.t2, x.tool_h FROM tool_loops x SEMI JOIN judged_turns j USING (fd, t1, t2)
UNION ALL
SELECT 'ignored_retry_after', x.fd, x.t1, x.t2, x.tool_h FROM ignored_retry_after x SEMI JOIN judged_turns j USING (fd, t1, t2);

-- ===========================================================================
-- §4.8 Silent tools (detect/silent.rs silent_tools, no_success), over the
-- rollup (whole history) and service_turns (the window's days).
-- ===========================================================================

-- silent.rs poisson_cdf: P(X <= k) for X ~ Poisson(l), summed in log space.
CREATE OR REPLACE TEMP MACRO poisson_cdf(k, l) AS
    CASE WHEN l <= 0 THEN 1.0
         ELSE least(1.0, list_sum(list_transform(range(0, k + 1),
                                                 lambda i: exp(i * ln(l) - l - lgamma(i + 1))))) END;

-- Per (tool, service) of the rollup: its calls and its service's turns on
-- each day of the window (list index o + 1 for day since_day + o; days
-- before the window have no turns known: never a baseline day), and `fo`,
-- the offset of its first day in the rollup (whole history).
CREATE OR REPLACE TEMP TABLE silent_series AS
WITH pairs AS (
    SELECT tool_name, service_name, min(day) - getvariable('since_day') AS fo
    FROM tool_daily GROUP BY tool_name, service_name
), days AS (
    SELECT CAST(unnest(range(0, getvariable('since_days') + 1)) AS INTEGER) AS o
)
SELECT row_number() OVER () AS sid, p.tool_name, p.service_name, any_value(p.fo) AS fo,
       list(coalesce(d.calls, 0) ORDER BY x.o) AS c,
       list(coalesce(t.turns, 0) ORDER BY x.o) AS tn
FROM pairs p
CROSS JOIN days x
LEFT JOIN tool_daily d
       ON d.tool_name IS NOT DISTINCT FROM p.tool_name AND d.service_name IS NOT DISTINCT FROM p.service_name
      AND d.day = getvariable('since_day') + x.o
LEFT JOIN service_turns t
       ON t.svc = hash(coalesce(p.service_name, '')) AND t.day = getvariable('since_day') + x.o
GROUP BY p.tool_name, p.service_name;

-- tool_silent, each day of the window after the tool's first day, in
-- order (a flagged day is no baseline for the days after it): the
-- baseline is the most recent silent_baseline_days days within
-- silent_reach_back_days, from the tool's first day on, with turns and not
-- flagged; expected = the tool's calls per turn on them x the day's turns.
CREATE OR REPLACE TEMP TABLE silent_verdicts AS
WITH RECURSIVE judge(sid, i, flagged, hit, expected, observed) AS (
    SELECT sid, -1, []::INTEGER[], false, NULL::DOUBLE, NULL::BIGINT FROM silent_series
    UNION ALL
    SELECT sid, i, CASE WHEN hit THEN list_append(flagged, i) ELSE flagged END, hit, expected, observed
    FROM (
        SELECT *,
               -- (the Poisson tail only where the rest holds: its sum runs to `observed`)
               CASE WHEN judged AND expected >= getvariable('min_expected_calls')
                         AND observed <= getvariable('silent_max_ratio') * expected
                    THEN poisson_cdf(observed, expected) < getvariable('silent_p_value')
                    ELSE false END AS hit
        FROM (
            SELECT *,
                   i > fo AND td > 0 AND len(base) >= greatest(getvariable('silent_min_baseline_days'), 1)
                       AND base_calls > 0 AS judged,
                   CASE WHEN base_turns > 0 THEN base_calls::DOUBLE / base_turns::DOUBLE * td::DOUBLE END AS expected
            FROM (
                SELECT *,
                       coalesce(list_sum(list_transform(base, lambda b: c[b + 1])), 0) AS base_calls,
                       coalesce(list_sum(list_transform(base, lambda b: tn[b + 1])), 0) AS base_turns
                FROM (
                    SELECT j.sid, j.i + 1 AS i, j.flagged, s.c, s.tn, s.fo,
                           s.tn[j.i + 2] AS td,
                           s.c[j.i + 2] AS observed,
                           list_slice(list_filter(list_reverse(range(greatest(0, s.fo, j.i + 1 - getvariable('silent_reach_back_days')), j.i + 1)),
                                                  lambda b: s.tn[b + 1] > 0 AND NOT list_contains(j.flagged, b)),
                                      1, getvariable('silent_baseline_days')) AS base
                    FROM judge j JOIN silent_series s ON s.sid = j.sid
                    WHERE j.i + 1 < len(s.tn)
                )
            )
        )
    )
)
SELECT s.tool_name, s.service_name, getvariable('since_day') + j.i::INTEGER AS day, j.observed AS calls,
       j.expected
FROM judge j JOIN silent_series s ON s.sid = j.sid
-- complete days only: today is judged for the order, never flagged
WHERE j.i >= 0 AND j.hit AND getvariable('since_day') + j.i::INTEGER < getvariable('today');

-- no_success: a day of the window with calls and no success, when the
-- last success (on that day or before; else the start of the tool's first
-- day) is no_success_days or more before the day's end (or now), over
-- no_success_min_calls or more calls on the days after the last success's
-- day. (Rollups written before the new columns: successes = calls -
-- errors, last_ok_ns = the day's last ns when it had a success; the
-- rollup here is always recomputed, so they are never null.)
CREATE OR REPLACE TEMP TABLE no_success AS
WITH r AS (
    SELECT tool_name, service_name, day, calls, errors,
           coalesce(successes, greatest(calls - errors, 0)) AS ok,
           coalesce(last_ok_ns, CASE WHEN successes IS NULL AND calls - errors > 0
                                     THEN day_ns(day + 1) - 1 END) AS last_ok
    FROM tool_daily
), w AS (
    SELECT *,
           max(last_ok) OVER (PARTITION BY tool_name, service_name ORDER BY day
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS last_ok_upto,
           min(day) OVER (PARTITION BY tool_name, service_name) AS first_day
    FROM r
), c AS (
    SELECT *, coalesce(last_ok_upto, day_ns(first_day)) AS since_ns,
           least(getvariable('now_ns'), day_ns(day + 1)) AS end_ns
    FROM w
    WHERE day BETWEEN getvariable('since_day') AND getvariable('today') AND errors > 0 AND ok = 0
)
SELECT c.tool_name, c.service_name, c.day, c.calls, c.since_ns, c.end_ns,
       -- failed calls after the last success's day, on at least two days
       (SELECT sum(x.errors) FROM r x
        WHERE x.tool_name IS NOT DISTINCT FROM c.tool_name AND x.service_name IS NOT DISTINCT FROM c.service_name
          AND x.day <= c.day
          AND (c.last_ok_upto IS NULL
               OR (x.day - DATE '1970-01-01') > c.last_ok_upto // getvariable('ns_day'))) AS calls_since,
       (SELECT count(*) FILTER (WHERE x.errors > 0) FROM r x
        WHERE x.tool_name IS NOT DISTINCT FROM c.tool_name AND x.service_name IS NOT DISTINCT FROM c.service_name
          AND x.day <= c.day
          AND (c.last_ok_upto IS NULL
               OR (x.day - DATE '1970-01-01') > c.last_ok_upto // getvariable('ns_day'))) AS failing_days
FROM c
WHERE c.end_ns - c.since_ns >= getvariable('no_success_days') * getvariable('ns_day');
DELETE FROM no_success WHERE coalesce(calls_since, 0) < getvariable('no_success_min_calls')
                          OR failing_days < 2;

CREATE OR REPLACE TEMP TABLE all_findings AS
SELECT kind, n.tool_name
FROM turn_findings f LEFT JOIN tool_names n ON n.tool_h = f.tool_h
UNION ALL
SELECT 'error_rate_spike', coalesce(tool_name, '') FROM verdicts WHERE day >= getvariable('since_day') AND is_spike
UNION ALL
SELECT 'latency_spike', coalesce(tool_name, '') FROM verdicts
WHERE day >= getvariable('since_day') AND NOT is_spike AND is_latency
UNION ALL
SELECT 'tool_silent', coalesce(tool_name, '') FROM silent_verdicts
UNION ALL
SELECT 'no_success', coalesce(tool_name, '') FROM no_success;

-- ===========================================================================
-- Findings of the window, counted per kind (sweep.rs run: daily verdicts for
-- days >= since_day, per-turn findings of the judged turns)
-- ===========================================================================
SELECT
    count(*) FILTER (WHERE kind = 'error_rate_spike') AS error_rate_spike,
    count(*) FILTER (WHERE kind = 'retry_storm') AS retry_storm,
    count(*) FILTER (WHERE kind = 'wasted_retries') AS wasted_retries,
    count(*) FILTER (WHERE kind = 'retry_after_success') AS retry_after_success,
    count(*) FILTER (WHERE kind = 'stacked_retries') AS stacked_retries,
    count(*) FILTER (WHERE kind = 'latency_spike') AS latency_spike,
    count(*) FILTER (WHERE kind = 'tool_loop') AS tool_loop,
    count(*) FILTER (WHERE kind = 'tool_silent') AS tool_silent,
    count(*) FILTER (WHERE kind = 'no_success') AS no_success,
    count(*) FILTER (WHERE kind = 'ignored_retry_after') AS ignored_retry_after,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'error_rate_spike'), []) AS error_rate_spike_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'retry_storm'), []) AS retry_storm_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'wasted_retries'), []) AS wasted_retries_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'retry_after_success'), []) AS retry_after_success_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'stacked_retries'), []) AS stacked_retries_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'latency_spike'), []) AS latency_spike_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'tool_loop'), []) AS tool_loop_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'tool_silent'), []) AS tool_silent_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'no_success'), []) AS no_success_tools,
    coalesce(list(DISTINCT tool_name ORDER BY tool_name) FILTER (WHERE kind = 'ignored_retry_after'), []) AS ignored_retry_after_tools,
    -- per (kind, driver): the findings, their model calls and those calls' tokens
    (SELECT coalesce(list({'kind': kind, 'driver': driver, 'findings': n, 'model_calls': mc,
                           'input_tokens': tin, 'output_tokens': tout} ORDER BY kind, driver), [])
     FROM (SELECT kind, driver, count(*) AS n, sum(model_calls) AS mc, sum(input_tokens) AS tin,
                  sum(output_tokens) AS tout
           FROM finding_drivers GROUP BY kind, driver)) AS drivers
FROM all_findings;
