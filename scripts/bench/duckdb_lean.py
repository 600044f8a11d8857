#!/usr/bin/env python3
"""Run a lean DuckDB query of the error-rate spike and retry-storm rules alone.

    python duckdb_lean.py --data-dir DIR --now 2026-08-06T00:00:00Z \
        --since-days 30 [--threads 2] [--memory-limit 1GB] [--rollup store] [--profile]

The yardstick the sweep benchmark (sweep_bench.py) sets beside the full
detection in SQL (duckdb_sweep.py): duckdb_lean.sql, next to this file, is
the query a user fluent in SQL would write for spikes and storms, made to be
fast rather than complete (its "LEAN:" comments say what it leaves out). It
reads the live parts of a stormwatch data directory (each day's
`_parts.json`, else the day's `part-*.parquet`) and prints ONE JSON line:

    {"engine": "duckdb-lean", "findings": {"error_rate_spike": N, "retry_storm": M},
     "seconds": wall}

`seconds` is the wall time from opening the (in-memory) database to having
the result, Parquet reading included; not Python's start-up nor the import
of duckdb. `--profile` prints each statement's seconds on stderr.

The spike rule's daily counts per (tool, service, day) cover all history
(a baseline reaches back to a tool's first day). By default they are
counted from the span parts, as duckdb_sweep.sql counts them (the work a
cold read does); `--rollup store` reads them from the store's daily rollup
instead (`rollups/current.json`'s `tool_daily` file, which `stormwatch
sweep` reads), so that a sweep of one new day reads only that day's spans
(and the day before's, for the turns that cross midnight).
"""

import argparse
import datetime as dt
import json
import os
import sys
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from duckdb_sweep import NS_PER_DAY, parse_now, split_statements  # noqa: E402

SQL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "duckdb_lean.sql")


def live_parts(spans_dir):
    """{day: [live part paths]}: the parts each day's `_parts.json` names,
    or, for a day written before manifests, its `part-*.parquet` files."""
    days = {}
    for name in sorted(os.listdir(spans_dir)):
        if not name.startswith("date="):
            continue
        try:
            day = dt.date.fromisoformat(name[len("date="):])
        except ValueError:
            continue
        d = os.path.join(spans_dir, name)
        try:
            with open(os.path.join(d, "_parts.json"), encoding="utf-8") as f:
                parts = json.load(f)["parts"]
        except FileNotFoundError:
            parts = [n for n in os.listdir(d) if n.startswith("part-") and n.endswith(".parquet")]
        if parts:
            days[day] = [os.path.join(d, n) for n in sorted(parts)]
    return days


# --rollup store: the daily counts from the store's rollup file instead.
DAILY_FROM_STORE = """
CREATE OR REPLACE TEMP TABLE daily AS
SELECT tool_name, service_name, CAST(day AS DATE) AS day, calls::BIGINT AS calls, errors::BIGINT AS errors
FROM read_parquet(getvariable('rollup_file'));
"""


def rollup_file(data_dir):
    """The store's current daily rollup (rollups/current.json names it)."""
    rollups = os.path.join(data_dir, "rollups")
    try:
        with open(os.path.join(rollups, "current.json"), encoding="utf-8") as f:
            return os.path.join(rollups, json.load(f)["tool_daily"])
    except FileNotFoundError:
        return os.path.join(rollups, "tool_daily.parquet")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="a stormwatch data directory")
    ap.add_argument("--now", required=True, type=parse_now, help="the sweep's now: RFC 3339 or a date")
    ap.add_argument("--since-days", type=int, default=30, help="days of findings (default 30)")
    ap.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    ap.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 1GB (default: DuckDB's)")
    ap.add_argument("--rollup", choices=["spans", "store"], default="spans",
                    help="the spike rule's daily counts: from the span parts (default) or the store's rollup")
    ap.add_argument("--profile", action="store_true", help="print each statement's seconds on stderr")
    args = ap.parse_args()

    spans_dir = os.path.join(args.data_dir, "spans")
    if not os.path.isdir(spans_dir):
        sys.exit(f"{args.data_dir} holds no spans/ directory")
    statements = split_statements(open(SQL_PATH, encoding="utf-8").read())
    if args.rollup == "store":
        daily = [i for i, st in enumerate(statements) if "CREATE OR REPLACE TEMP TABLE daily AS" in st]
        assert len(daily) == 1, "duckdb_lean.sql makes `daily` in one statement"
        statements[daily[0]] = DAILY_FROM_STORE.strip()

    started = time.perf_counter()
    days = live_parts(spans_dir)
    today = dt.date(1970, 1, 1) + dt.timedelta(days=args.now // NS_PER_DAY)
    first = today - dt.timedelta(days=args.since_days + 1)
    all_files = [p for d in sorted(days) for p in days[d]]
    window_files = [p for d in sorted(days) if first <= d <= today for p in days[d]]
    if not all_files or not window_files:
        # read_parquet takes no empty list: nothing to read, nothing found
        print(json.dumps({"engine": "duckdb-lean", "findings": {"error_rate_spike": 0, "retry_storm": 0},
                          "seconds": round(time.perf_counter() - started, 3)}))
        return

    con = duckdb.connect(":memory:")
    if args.threads:
        con.execute(f"SET threads = {int(args.threads)}")
    if args.memory_limit:
        con.execute("SET memory_limit = ?", [args.memory_limit])
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET VARIABLE all_files = ?::VARCHAR[]", [all_files])
    con.execute("SET VARIABLE window_files = ?::VARCHAR[]", [window_files])
    con.execute("SET VARIABLE rollup_file = ?::VARCHAR", [rollup_file(args.data_dir)])
    con.execute("SET VARIABLE now_ns = ?::BIGINT", [args.now])
    con.execute("SET VARIABLE since_days = ?::INTEGER", [args.since_days])
    result = None
    for stmt in statements:
        t = time.perf_counter()
        result = con.execute(stmt)
        if args.profile:
            label = next(l for l in stmt.splitlines() if l.strip() and not l.strip().startswith("--"))
            print(f"{time.perf_counter() - t:8.2f} s  {label[:90]}", file=sys.stderr)
    spikes, storms = result.fetchone()
    seconds = time.perf_counter() - started
    con.close()
    print(json.dumps({"engine": "duckdb-lean",
                      "findings": {"error_rate_spike": int(spikes), "retry_storm": int(storms)},
                      "seconds": round(seconds, 3)}))


if __name__ == "__main__":
    main()
