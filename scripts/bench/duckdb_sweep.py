#!/usr/bin/env python3
"""Run stormwatch's sweep detection as SQL on DuckDB, for the sweep benchmark.

    python duckdb_sweep.py --data-dir DIR --now 2026-08-06T00:00:00Z \
        --since-days 30 [--threads 2] [--memory-limit 8GB] [--details]

Reads the span parts of a stormwatch data directory
(`DIR/spans/date=YYYY-MM-DD/part-*.parquet`) with read_parquet, runs
duckdb_sweep.sql (next to this file) and prints ONE JSON line on stdout:

    {"engine": "duckdb", "findings": {"error_rate_spike": N, ...},
     "tools": {"error_rate_spike": [...], ...}, "storm_tools": [...],
     "drivers": {"retry_storm/model": N, ...},
     "model_totals": {"retry_storm": {"model_calls": N, "input_tokens": N,
                                      "output_tokens": N}, ...},
     "seconds": wall}

`tools` lists, per kind, the sorted tools that had a finding of it
(`storm_tools` is `tools["retry_storm"]`, kept for older readers).
`drivers` counts the retry storms and wasted retries by driver (`code`,
`model`, `mixed`; docs/detection.md §4.2 "Driver"), and `model_totals`
sums, per kind, their model calls and those calls' tokens (the shape
reference_sweep.py prints).

`seconds` is the wall time from opening the (in-memory) database to having
the result: the whole detection, Parquet reading included; not Python's
start-up nor the import of duckdb. `--details` prints the findings
themselves on stderr, for comparing with `stormwatch sweep --format json`.
"""

import argparse
import datetime as dt
import json
import os
import sys
import time

import duckdb

NS_PER_DAY = 86_400 * 1_000_000_000
SQL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "duckdb_sweep.sql")
KINDS = [
    "error_rate_spike",
    "retry_storm",
    "wasted_retries",
    "retry_after_success",
    "stacked_retries",
    "latency_spike",
    "tool_loop",
    "tool_silent",
    "no_success",
    "ignored_retry_after",
]


def parse_now(text):
    """RFC 3339 (a `Z` or an offset), or a UTC date meaning its midnight,
    as `stormwatch sweep --now` takes it; nanoseconds since the epoch."""
    s = text.strip()
    try:
        day = dt.date.fromisoformat(s)
        return (day - dt.date(1970, 1, 1)).days * NS_PER_DAY
    except ValueError:
        pass
    frac_ns = 0
    head = s
    if s.endswith(("Z", "z")):
        head, tz = s[:-1], "+00:00"
    else:
        head, tz = s[:-6], s[-6:]
    if "." in head:  # keep nanoseconds, which datetime cannot hold
        head, frac = head.split(".", 1)
        frac_ns = int((frac + "000000000")[:9])
    try:
        t = dt.datetime.fromisoformat(head + tz)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time (2026-08-06T09:00:00Z) or a date (2026-08-06), got {text!r}"
        )
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    delta = t - epoch
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + frac_ns


def split_statements(sql):
    """The script's statements: it ends each with a semicolon at the end of
    a line and never puts one in a comment."""
    out, cur = [], []
    for line in sql.splitlines():
        cur.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(cur).strip()
            if any(l.strip() and not l.strip().startswith("--") for l in cur):
                out.append(stmt)
            cur = []
    if any(l.strip() and not l.strip().startswith("--") for l in cur):
        out.append("\n".join(cur).strip())
    return out


# --details: the findings themselves. Turns and tools are keyed by hashes in
# the script; their names are looked up again here (outside the timing).
NAMES_SQL = """
CREATE OR REPLACE TEMP TABLE finding_names AS
SELECT DISTINCT f.fd, f.t1, f.t2, s.trace_id || '/' || s.span_id AS turn_id
FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true, union_by_name = true) s
JOIN finding_turns f ON f.t2 <> 0 AND hash(s.trace_id) = f.t1 AND hash(s.span_id) = f.t2
WHERE s.date BETWEEN getvariable('since_day') - 1 AND getvariable('today')
UNION ALL
SELECT DISTINCT f.fd, f.t1, f.t2, 'agent:' || s.agent_call_id
FROM read_parquet(getvariable('spans_glob'), hive_partitioning = true, union_by_name = true) s
JOIN finding_turns f ON f.t2 = 0 AND hash(s.agent_call_id) = f.t1
WHERE s.date BETWEEN getvariable('since_day') - 1 AND getvariable('today') AND s.agent_call_id <> ''
"""
TURN = "x.fd AS day, coalesce(tn.turn_id, x.t1::VARCHAR || '/' || x.t2::VARCHAR) AS turn_id, n.tool_name"
JOIN = ("SEMI JOIN judged_turns j ON j.fd = x.fd AND j.t1 = x.t1 AND j.t2 = x.t2 "
        "LEFT JOIN finding_names tn ON tn.fd = x.fd AND tn.t1 = x.t1 AND tn.t2 = x.t2 "
        "LEFT JOIN tool_names n ON n.tool_h = x.tool_h")
DETAILS = {
    "error_rate_spike": "SELECT tool_name, service_name, day, calls, errors, basis, round(baseline, 4) AS baseline, "
    "round(lower_bound, 4) AS lower_bound FROM verdicts "
    "WHERE day >= getvariable('since_day') AND is_spike ORDER BY tool_name, service_name, day",
    "latency_spike": "SELECT tool_name, service_name, day, calls FROM verdicts "
    "WHERE day >= getvariable('since_day') AND NOT is_spike AND is_latency ORDER BY tool_name, service_name, day",
    "retry_storm": f"SELECT {TURN}, calls, rounds, failures, rhythm, outcome, round(median_gap_ms, 3), "
    f"round(wasted_seconds, 3) FROM storms x {JOIN} ORDER BY wasted_seconds DESC, turn_id",
    "wasted_retries": f"SELECT {TURN}, class, attempts FROM wasted_retries x {JOIN} ORDER BY turn_id, tool_name",
    "retry_after_success": f"SELECT {TURN}, repeats FROM retries_after_success x {JOIN} "
    "ORDER BY turn_id, tool_name",
    "stacked_retries": f"SELECT {TURN}, layers FROM stacked_retries x {JOIN} ORDER BY turn_id, tool_name",
    "tool_loop": f"SELECT {TURN}, steps, calls, repeats FROM tool_loops x {JOIN} ORDER BY turn_id, tool_name",
    "tool_silent": "SELECT tool_name, service_name, day, calls, round(expected, 3) AS expected "
    "FROM silent_verdicts ORDER BY tool_name, service_name, day",
    "ignored_retry_after": f"SELECT {TURN}, early, stated FROM ignored_retry_after x {JOIN} ORDER BY turn_id, tool_name",
    "no_success": "SELECT tool_name, service_name, day, calls, calls_since, "
    "round((end_ns - since_ns) / 86400e9, 3) AS days FROM no_success ORDER BY tool_name, service_name, day",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="a stormwatch data directory")
    ap.add_argument("--now", required=True, type=parse_now, help="the sweep's now: RFC 3339 or a date")
    ap.add_argument("--since-days", type=int, default=30, help="days of findings (default 30)")
    ap.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    ap.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 8GB (default: DuckDB's)")
    ap.add_argument("--details", action="store_true", help="print the findings on stderr")
    ap.add_argument("--profile", action="store_true",
                    help="print each statement's seconds and DuckDB's memory on stderr")
    args = ap.parse_args()

    spans_dir = os.path.join(args.data_dir, "spans")
    if not os.path.isdir(spans_dir):
        sys.exit(f"{args.data_dir} holds no spans/ directory")
    spans_glob = os.path.join(spans_dir, "date=*", "part-*.parquet")
    statements = split_statements(open(SQL_PATH, encoding="utf-8").read())

    started = time.perf_counter()
    con = duckdb.connect(":memory:")
    if args.threads:
        con.execute(f"SET threads = {int(args.threads)}")
    if args.memory_limit:
        con.execute("SET memory_limit = ?", [args.memory_limit])
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET VARIABLE spans_glob = ?::VARCHAR", [spans_glob])
    con.execute("SET VARIABLE now_ns = ?::BIGINT", [args.now])
    con.execute("SET VARIABLE since_days = ?::INTEGER", [args.since_days])
    result = None
    for stmt in statements:
        t = time.perf_counter()
        result = con.execute(stmt)
        if args.profile:
            mem = con.cursor().execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
            label = next(l for l in stmt.splitlines() if l.strip() and not l.strip().startswith("--"))
            print(f"{time.perf_counter() - t:8.2f} s {mem / 2**30:6.2f} GiB  {label[:90]}", file=sys.stderr)
    names = [d[0] for d in result.description]
    row = result.fetchall()[0]
    seconds = time.perf_counter() - started

    values = dict(zip(names, row))
    if args.details:
        for stmt in split_statements(NAMES_SQL + ";"):
            con.execute(stmt)
        for kind in KINDS:
            rel = con.sql(DETAILS[kind])
            print(f"== {kind}: {values[kind]}", file=sys.stderr)
            for r in rel.fetchall():
                print("   " + " | ".join(str(v) for v in r), file=sys.stderr)
    con.close()

    drivers, model_totals = {}, {}
    for d in values["drivers"] or []:
        drivers[f"{d['kind']}/{d['driver']}"] = int(d["findings"])
        t = model_totals.setdefault(d["kind"], {"model_calls": 0, "input_tokens": 0, "output_tokens": 0})
        for k in t:
            t[k] += int(d[k])

    print(
        json.dumps(
            {
                "engine": "duckdb",
                "findings": {k: int(values[k]) for k in KINDS},
                "tools": {k: sorted(values[k + "_tools"] or []) for k in KINDS},
                "storm_tools": sorted(values["retry_storm_tools"] or []),
                "drivers": dict(sorted(drivers.items())),
                "model_totals": dict(sorted(model_totals.items())),
                "seconds": round(seconds, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
