#!/usr/bin/env python3
"""The sweep's rules ported line by line from the Rust, in plain Python: the
cross-check that duckdb_sweep.sql is right, on small stores.

    python reference_sweep.py --data-dir DIR --now 2026-08-06T00:00:00Z --since-days 30

Reads the span parts of a stormwatch data directory with duckdb (only to
load rows, part by part in name order, rows in stored order, as the Rust
reads them) and computes, in Python, what `stormwatch sweep --rescan` finds
(the functions below are named after the Rust they port):

- the daily rollup (store/rollup.rs tool_rows, once_per_call,
  nested_duplicates; queries/tool_daily.sql), the error-rate spike and the
  latency spike (detect/error_spike.rs judge, wilson.rs);
- per day of the window, that day's turns read whole (sweep.rs turn_day,
  turn_findings): turn resolution (detect/turns.rs anchors), calls per
  (turn, tool) (detect/calls.rs collect), retry chains and storms
  (chains.rs, storm.rs), wasted retries, retries after success and stacked
  retries (retries.rs), tool loops (loops.rs), and the turns begun per
  (anchor's service, day) (calls.rs turns_by_service);
- over the rollup and those turns, silent tools and tools with no success
  (detect/silent.rs, docs/detection.md §4.8).

Prints ONE JSON line, the shape duckdb_sweep.py prints:

    {"engine": "reference", "findings": {"error_rate_spike": N, ...},
     "tools": {"retry_storm": [...], ...}, "storm_tools": [...],
     "drivers": {"retry_storm/model": N, ...}, "model_totals": {...},
     "seconds": wall}

`drivers` counts the retry storms and wasted retries by driver
(detect/driver.rs: `code`, `model`, `mixed`; docs/detection.md §4.2), and
`model_totals` sums, per kind, their model calls and those calls' input
and output tokens:

    "model_totals": {"retry_storm": {"model_calls": N, "input_tokens": N,
                                     "output_tokens": N}, ...}

Two refinements of the driver rule are ported ahead of the Rust: a model
call lies in a gap when its START does (within 1 ms either side; its end
may be later), and a model span under another model span is no call of its
own (the outermost is the call; its tokens its own, else the largest of
those below it).

`--details` prints the findings on stderr. Slow (pure Python): meant for
stores of tens of thousands of spans, not the benchmark's.
"""

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from duckdb_sweep import KINDS, parse_now  # noqa: E402

NS_DAY = 86_400 * 1_000_000_000


# ---------------------------------------------------------------------------
# Parameters: the defaults (detect/error_spike.rs SpikeParams, storm.rs
# StormParams, loops.rs LoopParams).
# ---------------------------------------------------------------------------
class SpikeParams:
    multiplier = 3.0
    baseline_floor = 0.01
    warmup_floor = 0.05
    confidence = 0.95
    min_calls = 10
    min_errors = 3
    baseline_days = 7
    reach_back_days = 28
    min_baseline_days = 3
    latency_multiplier = 3.0


class StormParams:
    storm_min_calls = 5
    min_failures = 2
    no_backoff_ms = 100.0
    exponential_ratio = 1.5
    fixed_variation = 0.3
    settle_seconds = 90


class LoopParams:
    loop_min_calls = 5
    cycle_min_repeats = 3
    cycle_max_period = 4


class SilentParams:
    baseline_days = 7
    reach_back_days = 28
    min_baseline_days = 3
    min_expected_calls = 20.0
    max_ratio = 0.2
    p_value = 0.001
    no_success_days = 3
    no_success_min_calls = 10


# model.rs ErrorClass
CLASSES = ["ok", "rate_limited", "unavailable", "timeout", "network", "server_error",
           "auth", "not_found", "invalid_request", "client_error", "policy", "unknown",
           "interrupted", "cancelled"]
# ErrorClass::is_control_flow: stopped on purpose, no failure (detection.md §3)
CONTROL_FLOW = {"interrupted", "cancelled"}
RETRYABLE = {"rate_limited", "unavailable", "timeout", "network", "server_error"}
DETERMINISTIC = {"auth", "not_found", "invalid_request", "client_error", "policy"}


def parse_class(s):
    """ErrorClass::parse, unwrap_or(Unknown)."""
    return s if s in CLASSES else "unknown"


def retryable(c):
    """ErrorClass::retryable: True, False, or None (ok, unknown, control flow)."""
    if c in RETRYABLE:
        return True
    if c in DETERMINISTIC:
        return False
    return None


def is_error(c):
    """ErrorClass::is_failure: neither ok nor control flow."""
    return c != "ok" and c not in CONTROL_FLOW


def day_of_ns(ns):
    return ns // NS_DAY  # div_euclid


def median(v):
    """detect::median: the middle value, or the mean of the middle two."""
    if not v:
        return None
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 == 1 else (v[n // 2 - 1] + v[n // 2]) / 2.0


# ---------------------------------------------------------------------------
# The store (store/layout.rs, read.rs): days are the `date=` directories,
# a day's parts are read in name order, rows in stored order.
# ---------------------------------------------------------------------------
COLUMNS = ["trace_id", "span_id", "parent_span_id", "is_agent", "agent_call_id", "start_ns",
           "end_ns", "is_tool_call", "tool_name", "service_name", "error_class", "tool_args_hash",
           "tool_result_hash", "session_id", "tool_convention", "duration_ns", "retry_after_ms",
           "is_model", "input_tokens", "output_tokens"]


class Rows:
    """Column lists of a frame (like a polars DataFrame)."""

    def __init__(self, cols=None):
        self.c = cols or {k: [] for k in COLUMNS}

    def __len__(self):
        return len(self.c["trace_id"])

    def filter(self, keep):
        return Rows({k: [x for x, m in zip(v, keep) if m] for k, v in self.c.items()})

    def extend(self, other):
        for k in self.c:
            self.c[k].extend(other.c[k])


class Store:
    def __init__(self, root):
        self.root = root
        self.con = duckdb.connect(":memory:")
        self.cache = {}

    def days(self):
        d = os.path.join(self.root, "spans")
        out = []
        for name in os.listdir(d):
            if name.startswith("date="):
                try:
                    out.append(day_from_str(name[5:]))
                except ValueError:
                    pass
        return sorted(out)

    def parts(self, day):
        d = os.path.join(self.root, "spans", "date=" + day_to_str(day))
        if not os.path.isdir(d):
            return []
        return sorted(os.path.join(d, n) for n in os.listdir(d)
                      if n.startswith("part-") and n.endswith(".parquet"))

    def forget_before(self, day):
        """Drop the cached rows of days before `day` (a store can be larger than memory)."""
        for d in [d for d in self.cache if d < day]:
            del self.cache[d]

    def rows(self, day):
        if day in self.cache:
            return self.cache[day]
        rows = Rows()
        for part in self.parts(day):
            names = [r[0] for r in self.con.execute(
                "SELECT name FROM parquet_schema(?) WHERE name <> 'duckdb_schema'", [part]).fetchall()]
            sel = ", ".join(c if c in names else f"NULL AS {c}" for c in COLUMNS)
            data = self.con.execute(
                f"SELECT {sel} FROM read_parquet(?) ORDER BY file_row_number", [part]).fetchall()
            for row in data:
                for k, v in zip(COLUMNS, row):
                    rows.c[k].append(v)
        self.cache[day] = rows
        return rows


def day_from_str(s):
    import datetime as dt
    return (dt.date.fromisoformat(s) - dt.date(1970, 1, 1)).days


def day_to_str(d):
    import datetime as dt
    return (dt.date(1970, 1, 1) + dt.timedelta(days=d)).isoformat()


# ---------------------------------------------------------------------------
# store/rollup.rs
# ---------------------------------------------------------------------------
def nested_duplicates(df, has_is_tool=True):
    """rollup.rs nested_duplicates: for each tool row, the row of the
    outermost span of its nest (a tool span whose parent is a tool span of
    the same tool in the same trace, overlapping it in time), else None."""
    trace, span, parent = df.c["trace_id"], df.c["span_id"], df.c["parent_span_id"]
    tool, start, end = df.c["tool_name"], df.c["start_ns"], df.c["end_ns"]
    is_tool = [b is True for b in df.c["is_tool_call"]] if has_is_tool else None

    def tool_row(i):
        return (is_tool is None or is_tool[i]) and tool[i] is not None

    rows = {}
    for i in range(len(df)):
        if tool_row(i) and trace[i] is not None and span[i] is not None:
            rows[(trace[i], span[i])] = i

    def outer(i):
        if trace[i] is None or parent[i] is None:
            return None
        p = rows.get((trace[i], parent[i]))
        if p is None:
            return None
        if start[i] is None or end[p] is None or start[p] is None or end[i] is None:
            return None
        overlaps = (start[i] < end[p] and start[p] < end[i]) or start[i] == start[p]
        return p if (p != i and tool[p] == tool[i] and overlaps) else None

    # Each tool row's same-tool, overlapping parent, and how many such
    # children each parent has.
    cand = [outer(i) if tool_row(i) else None for i in range(len(df))]
    children = [0] * len(df)
    for p in cand:
        if p is not None:
            children[p] += 1
    out = [None] * len(df)
    for i in range(len(df)):
        # Walk up through only children to the outermost span of the nest.
        cur = i
        for _ in range(16):
            p = cand[cur]
            if p is not None and children[p] == 1 and p != i:
                cur = p
            else:
                break
        if cur != i:
            out[i] = cur
    # Wrappers around several attempts are no call of their own, nor is
    # the span they were the only child of.
    for p in range(len(df)):
        if children[p] >= 2:
            q = out[p]
            if q is not None:
                out[q] = q
            out[p] = p
    return out


def takes_inner_class(outer, inner):
    """rollup.rs takes_inner_class."""
    def failed(c):
        return c is not None and c != "ok"
    if not failed(inner):
        return False
    if outer == "ok" or outer is None:
        return True
    if outer == "unknown":
        return inner != "unknown"
    return False


def once_per_call(df):
    """rollup.rs once_per_call: nested duplicates dropped, a failure seen
    only on an inner span moved onto the outer one."""
    dup = nested_duplicates(df, has_is_tool=False)
    if all(d is None for d in dup):
        return df
    cls = df.c["error_class"]
    classes = list(cls)
    for i, p in enumerate(dup):
        if p is None:
            continue
        if takes_inner_class(classes[p], cls[i]):
            classes[p] = cls[i]
    out = Rows(dict(df.c))
    out.c["error_class"] = classes
    return out.filter([d is None for d in dup])


def quantile_linear(values, q):
    """polars' QUANTILE_CONT (QuantileMethod::Linear) over the non-null values."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    if len(v) == 1:
        return float(v[0])
    float_idx = (len(v) - 1.0) * q
    idx = min(int(float_idx), len(v) - 1)
    top = math.ceil(float_idx)
    lower = float(v[idx])
    if idx == top:
        return lower
    upper = float(v[idx + 1])
    if lower == upper:
        return lower
    return (float_idx - idx) * (upper - lower) + lower


def tool_daily(store):
    """rollup.rs tool_rows per day + queries/tool_daily.sql, then
    daily.rs daily_rows: (tool, service, day, calls, errors, successes,
    last_ok_ns, p50, p95, classes)."""
    out = []
    for day in store.days():
        store.forget_before(day)
        parts = store.rows(day)
        if not store.parts(day):
            continue
        tools = parts.filter([b is True for b in parts.c["is_tool_call"]])
        conv = tools.c["tool_convention"]
        mcp = sum(1 for c in conv if c == "mcp")
        conventions = len(set(conv))  # polars n_unique counts null as a value
        if not (mcp == 0 and conventions <= 1):
            tools = once_per_call(tools)
        groups = defaultdict(list)
        for i in range(len(tools)):
            groups[(tools.c["tool_name"][i], tools.c["service_name"][i])].append(i)
        for (tool, service), idx in groups.items():
            classes = [tools.c["error_class"][i] for i in idx]
            durs = [tools.c["duration_ns"][i] for i in idx]
            ok_ends = [tools.c["end_ns"][i] for i in idx if tools.c["error_class"][i] == "ok"]
            hist = defaultdict(int)
            for c in classes:
                if c is not None and c != "ok" and c in CLASSES and c not in CONTROL_FLOW:
                    hist[c] += 1
            out.append({
                "tool": tool if tool is not None else "",
                "service": service if service is not None else "",
                "day": day,
                "calls": len(idx),
                # queries/tool_daily.sql: control flow counts in calls, not in errors
                "errors": sum(1 for c in classes if c is not None and c != "ok" and c not in CONTROL_FLOW),
                # SUM(CASE WHEN error_class = 'ok' ...), MAX(CASE WHEN error_class = 'ok' THEN end_ns END)
                "successes": sum(1 for c in classes if c == "ok"),
                "last_ok_ns": max((e for e in ok_ends if e is not None), default=None),
                "p50": quantile_linear(durs, 0.5) or 0.0,
                "p95": quantile_linear(durs, 0.95) or 0.0,
                "classes": dict(hist),
            })
    out.sort(key=lambda r: (r["tool"], r["service"], r["day"]))
    return out


# ---------------------------------------------------------------------------
# detect/wilson.rs, detect/error_spike.rs
# ---------------------------------------------------------------------------
def inverse_normal_cdf(p):
    a = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2,
         1.38357751867269e2, -3.066479806614716e1, 2.506628277459239]
    b = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2,
         6.680131188771972e1, -1.328068155288572e1]
    c = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838,
         -2.549732539343734, 4.374664141464968, 2.938163982698783]
    d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416]
    low = 0.02425
    if p < low:
        q = math.sqrt(-2.0 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    if p <= 1.0 - low:
        q = p - 0.5
        r = q * q
        return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)
    q = math.sqrt(-2.0 * math.log(1.0 - p))
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)


def z_one_sided(confidence):
    return inverse_normal_cdf(min(max(confidence, 0.5), 0.999_999))


def lower_bound(errors, calls, z):
    if calls == 0:
        return 0.0
    n = float(calls)
    p = min(errors, calls) / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = p + z2 / (2.0 * n)
    margin = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    return max((center - margin) / denom, 0.0)


def baseline(history, day, flagged, p):
    earlier = [r for r in history if r["day"] < day and r["calls"] > 0]
    if len(earlier) < p.min_baseline_days:
        return p.warmup_floor, "warmup", []
    window = [r for r in earlier if r["day"] >= day - p.baseline_days]
    unflagged = [r for r in window if r["day"] not in flagged]
    if len(unflagged) >= p.min_baseline_days:
        pool, basis = unflagged, "trailing"
    else:
        reach = [r for r in reversed(earlier)
                 if r["day"] >= day - p.reach_back_days and r["day"] not in flagged][:max(p.baseline_days, 1)]
        if len(reach) >= p.min_baseline_days:
            pool, basis = reach, "reach_back"
        elif window:
            pool, basis = window, "all_recent"
        else:
            pool, basis = list(reversed(earlier))[:max(p.baseline_days, 1)], "all_recent"
    calls = sum(r["calls"] for r in pool)
    errors = sum(r["errors"] for r in pool)
    rate = 0.0 if calls == 0 else errors / calls
    return max(rate, p.baseline_floor), basis, sorted(r["day"] for r in pool)


def judge(rows, today, p):
    series = defaultdict(list)
    for r in rows:
        series[(r["tool"], r["service"])].append(r)
    out = []
    z = z_one_sided(p.confidence)
    for (tool, service) in sorted(series):
        days = sorted(series[(tool, service)], key=lambda r: r["day"])
        flagged = set()
        for r in [r for r in days if r["day"] < today and r["calls"] > 0]:
            base, basis, pool_days = baseline(days, r["day"], flagged, p)
            lower = lower_bound(r["errors"], r["calls"], z)
            is_flagged = r["calls"] >= p.min_calls and r["errors"] >= p.min_errors and lower > p.multiplier * base
            if is_flagged:
                flagged.add(r["day"])
            pool = [d for d in days if d["day"] in pool_days]
            baseline_p95 = median([d["p95"] for d in pool])
            latency = (not is_flagged and basis != "warmup" and r["calls"] >= p.min_calls
                       and baseline_p95 is not None and baseline_p95 > 0.0
                       and r["p95"] > p.latency_multiplier * baseline_p95)
            out.append({"tool": tool, "service": service, "day": r["day"], "calls": r["calls"],
                        "errors": r["errors"], "basis": basis, "baseline": base, "lower_bound": lower,
                        "flagged": is_flagged, "latency_flagged": latency})
    return out


# ---------------------------------------------------------------------------
# detect/turns.rs anchors
# ---------------------------------------------------------------------------
def anchors(df):
    """The turn anchor of every row: ('row', r) — the outermost agent at or
    above it, else (no gen_ai.agent.call.id) the topmost stored ancestor —
    or ('call', id)."""
    trace, span, parent = df.c["trace_id"], df.c["span_id"], df.c["parent_span_id"]
    call_id = df.c["agent_call_id"]
    is_agent = [b is True for b in df.c["is_agent"]]
    n = len(df)
    index = {}
    for i in range(n):
        if trace[i] is not None and span[i] is not None:
            index[(trace[i], span[i])] = i

    def parent_row(i):
        if parent[i] is None:
            return None
        return index.get((trace[i] if trace[i] is not None else "", parent[i]))

    unset = object()
    agent_of = [unset] * n
    out = []
    for i in range(n):
        path = []
        cur = i
        above = None
        p = None
        while True:
            if agent_of[cur] is not unset:
                above = agent_of[cur]
                p = None
                break
            path.append(cur)
            p = parent_row(cur)
            if p is not None and len(path) <= n and p not in path:
                cur = p
            else:
                break
        walked = list(path)
        if p is not None and p in path:
            # A cycle (turns.rs): its rows take its agent with the lowest
            # span id, if any, and the rows below take it from there.
            j = path.index(p)
            cycle = path[j:]
            agents = [q for q in cycle if is_agent[q]]
            above = min(agents, key=lambda q: (span[q] or "", q)) if agents else None
            for q in cycle:
                agent_of[q] = above
            path = path[:j]
        # Down the path from its top: the first agent met is the outermost,
        # unless one sits above the path.
        found = above
        for q in reversed(path):
            if found is None and is_agent[q]:
                found = q
            agent_of[q] = found
        found = agent_of[i]
        if found is not None:
            out.append(("row", found))
            continue
        c = call_id[i]
        if c is not None and c != "":
            out.append(("call", c))
            continue
        r = walked[-1] if walked else i
        steps = 0
        while True:
            p = parent_row(r)
            if p is None or not steps <= n:
                break
            steps += 1
            r = p
        out.append(("row", r))
    return out


def turn_id(anchor, df):
    kind, v = anchor
    if kind == "row":
        t, s = df.c["trace_id"][v], df.c["span_id"][v]
        return f"{t or ''}/{s or ''}"
    return f"agent:{v}"


# ---------------------------------------------------------------------------
# detect/calls.rs collect
# ---------------------------------------------------------------------------
class Call:
    __slots__ = ("turn", "trace_id", "span_id", "parent_span_id", "tool", "service", "start_ns",
                 "end_ns", "cls", "args", "result", "seq", "wait", "wait_from")

    def failed(self):
        return is_error(self.cls)


class Turn:
    __slots__ = ("trace_id", "began_ns", "start_ns", "end_ns", "spans", "last_end_ns")

    def settled(self, now_ns, settle_seconds):
        return now_ns - self.last_end_ns >= settle_seconds * 1_000_000_000


def collect(df):
    """(calls of repeated (turn, tool) pairs sorted by (turn, tool, start), turns by id,
    turns per (service, day began), each kept turn's model calls (start, end) by turn id)."""
    anch = anchors(df)
    nested = nested_duplicates(df)
    class_col = df.c["error_class"]
    class_of = list(class_col)
    for i, p in enumerate(nested):
        if p is not None:
            if takes_inner_class(class_of[p], class_col[i]):
                class_of[p] = class_col[i]
    trace, span = df.c["trace_id"], df.c["span_id"]
    start = [s if s is not None else 0 for s in df.c["start_ns"]]
    end = [e if e is not None else 0 for e in df.c["end_ns"]]
    is_tool = df.c["is_tool_call"]
    n = len(df)

    slots = {}
    stats = []  # [row, start, end, spans, began]
    turn_of = []
    for i, a in enumerate(anch):
        s, e = start[i], end[i]
        k = slots.get(a)
        if k is None:
            k = len(stats)
            slots[a] = k
            # when the turn began: its anchor row's start (an agent call
            # id: its first span's)
            began = start[a[1]] if a[0] == "row" else s
            stats.append([i, s, e, 0, began])
        st = stats[k]
        st[1] = min(st[1], s)
        if a[0] == "call":
            st[4] = min(st[4], s)
        st[2] = max(st[2], e)
        st[3] += 1
        turn_of.append(k)
    # a call stopped on purpose (control flow) is no call, only a span of its turn
    is_call = [is_tool[i] is True and nested[i] is None and class_of[i] not in CONTROL_FLOW
               for i in range(n)]
    waits = stated_waits(df, is_call, start, end)

    # queries/turn_tool_calls.sql: calls per (turn, tool_name); a NULL name is a group, skipped
    pair_calls = defaultdict(int)
    for i in range(n):
        if is_call[i]:
            pair_calls[(turn_of[i], df.c["tool_name"][i])] += 1
    repeated = set()
    has_repeat = [False] * len(stats)
    for (k, tool), count in pair_calls.items():
        if tool is None:
            continue
        if count >= 2:
            repeated.add((k, tool))
            has_repeat[k] = True

    trace_end = {}
    for k, st in enumerate(stats):
        if has_repeat[k]:
            trace_end[trace[st[0]] or ""] = -(2 ** 63)
    for t, e in zip(trace, df.c["end_ns"]):
        if t is not None and t in trace_end:
            trace_end[t] = max(trace_end[t], e if e is not None else 0)

    order = sorted((turn_of[i], start[i], i) for i in range(n) if has_repeat[turn_of[i]] and is_call[i])
    seq_of = {}
    prev_turn, k_in = None, 0
    for (k, _, i) in order:
        if k != prev_turn:
            prev_turn, k_in = k, 0
        seq_of[i] = k_in
        k_in += 1

    ids = {}
    calls, turns = [], {}
    results = df.c["tool_result_hash"]
    for i in range(n):
        k = turn_of[i]
        if not has_repeat[k] or not is_call[i]:
            continue
        name = df.c["tool_name"][i] if df.c["tool_name"][i] is not None else ""
        if (k, name) not in repeated:
            continue
        tid = ids.get(k)
        if tid is None:
            tid = ids[k] = turn_id(anch[i], df)
        t = trace[i] or ""
        if tid not in turns:
            st = stats[k]
            anchor_trace = trace[st[0]] if trace[st[0]] is not None else t
            tu = Turn()
            tu.trace_id, tu.start_ns, tu.end_ns, tu.spans = anchor_trace, st[1], st[2], st[3]
            tu.began_ns = st[4]
            tu.last_end_ns = trace_end.get(anchor_trace, st[2])
            turns[tid] = tu
        c = Call()
        c.turn, c.trace_id, c.span_id = tid, t, span[i] or ""
        c.parent_span_id = df.c["parent_span_id"][i]
        c.tool, c.service = name, df.c["service_name"][i] or ""
        c.start_ns, c.end_ns = start[i], end[i]
        c.cls = parse_class(class_of[i])
        c.args, c.result = df.c["tool_args_hash"][i], results[i]
        c.seq = seq_of.get(i, 0)
        c.wait, c.wait_from = waits.get(i, (None, None))
        calls.append(c)
    calls.sort(key=lambda c: (c.turn, c.tool, c.start_ns))
    models = model_calls(df, turn_of, ids, start, end)
    # turns_by_service: every turn, a tool called or not, under its anchor
    # row's service (an agent call id's: its first row's), on the day it began
    services = df.c["service_name"]
    turns_by_service = defaultdict(int)
    for st in stats:
        a = anch[st[0]]
        row = a[1] if a[0] == "row" else st[0]
        turns_by_service[(services[row] or "", day_of_ns(st[4]))] += 1
    return calls, turns, turns_by_service, models


def model_calls(df, turn_of, ids, start, end):
    """detect/models.rs of_turns: per kept turn id, its model calls
    (start, end, input tokens, output tokens), by start. A model span with a
    model span anywhere above it (up its parent chain within the trace) is
    no call of its own: the outermost is the call, its tokens its own when
    recorded, else the largest recorded among the model spans below it
    (input and output each)."""
    is_model = df.c["is_model"]
    rows = [i for i in range(len(df)) if is_model[i] is True]
    if not rows:
        return defaultdict(list)
    trace, span, parent = df.c["trace_id"], df.c["span_id"], df.c["parent_span_id"]
    index = {}
    for i in range(len(df)):
        if trace[i] is not None and span[i] is not None:
            index[(trace[i], span[i])] = i
    outer = {}
    for i in rows:
        top, cur, seen = None, i, {i}
        while parent[cur] is not None:
            p = index.get((trace[cur] if trace[cur] is not None else "", parent[cur]))
            if p is None or p in seen:
                break
            seen.add(p)
            if is_model[p] is True:
                top = p
            cur = p
        outer[i] = top
    tokens_in, tokens_out = df.c["input_tokens"], df.c["output_tokens"]
    below = defaultdict(list)
    for i in rows:
        if outer[i] is not None:
            below[outer[i]].append(i)

    def tokens(col, i):
        if col[i] is not None:
            return col[i]
        recorded = [col[j] for j in below[i] if col[j] is not None]
        return max(recorded) if recorded else None

    models = defaultdict(list)
    for i in sorted((i for i in rows if outer[i] is None and turn_of[i] in ids),
                    key=lambda i: (start[i], end[i], i)):
        models[ids[turn_of[i]]].append((start[i], end[i], tokens(tokens_in, i), tokens(tokens_out, i)))
    return models


# calls.rs INSIDE_SLACK_NS
INSIDE_SLACK_NS = 1_000_000


def stated_waits(df, is_call, start, end):
    """calls.rs stated_waits: per call row, (ms, from ns): its own span's
    wait, else the one of the latest-ending failed span below it (up through
    spans that are no call, at most 64 steps) that ran inside it; `from` the
    end of the span that stated it. Only a span of a class waiting can fix
    (RETRYABLE) states one."""
    trace, span, parent = df.c["trace_id"], df.c["span_id"], df.c["parent_span_id"]
    waits = df.c["retry_after_ms"]
    classes = df.c["error_class"]
    n = len(df)
    index = {}
    for i in range(n):
        if trace[i] is not None and span[i] is not None:
            index[(trace[i], span[i])] = i
    own, best = {}, {}
    for i in range(n):
        ms = waits[i]
        if ms is None or ms <= 0:
            continue
        if parse_class(classes[i]) not in RETRYABLE:
            continue
        if is_call[i]:
            own[i] = (ms, end[i])
            continue
        r = i
        for _ in range(64):
            if parent[r] is None:
                break
            p = index.get((trace[r] if trace[r] is not None else "", parent[r]))
            if p is None:
                break
            if is_call[p]:
                if start[i] + INSIDE_SLACK_NS >= start[p] and end[i] <= end[p] + INSIDE_SLACK_NS:
                    if p not in best or end[i] > best[p][0]:
                        best[p] = (end[i], ms)
                break
            r = p
    out = {p: (ms, e) for p, (e, ms) in best.items()}
    out.update(own)
    return out


def by_turn_and_tool(calls):
    """Groups of calls by (turn, tool), in start order (calls are sorted)."""
    out = []
    for c in calls:
        if out and out[-1][0] == (c.turn, c.tool):
            out[-1][1].append(c)
        else:
            out.append(((c.turn, c.tool), [c]))
    return out


# ---------------------------------------------------------------------------
# detect/chains.rs
# ---------------------------------------------------------------------------
class Round:
    __slots__ = ("lo", "hi", "start_ns", "end_ns", "cls")

    def failed(self):
        return self.cls is not None


# chains.rs OVERLAP_SLACK_NS: the JS SDK writes start times in whole ms.
OVERLAP_SLACK_NS = 1_000_000


def rounds(attempts):
    out = []
    for i, a in enumerate(attempts):
        # overlapping by more than the slack, or starting together
        if out and (a.start_ns + OVERLAP_SLACK_NS < out[-1].end_ns or a.start_ns <= out[-1].start_ns):
            r = out[-1]
            r.end_ns = max(r.end_ns, a.end_ns)
            r.hi = i + 1
            if r.cls is None and a.failed():
                r.cls = a.cls
        else:
            r = Round()
            r.lo, r.hi, r.start_ns, r.end_ns = i, i + 1, a.start_ns, a.end_ns
            r.cls = a.cls if a.failed() else None
            out.append(r)
    return out


def chains(rs):
    """(first round, end round, recovered) of every chain."""
    out = []
    open_ = None
    for r, rnd in enumerate(rs):
        if open_ is None:
            if rnd.failed():
                open_ = r
        elif not rnd.failed():
            out.append((open_, r + 1, True))
            open_ = None
    if open_ is not None:
        out.append((open_, len(rs), False))
    return out


def gaps_ms(rs):
    return [max(rs[k + 1].start_ns - rs[k].end_ns, 0) / 1e6 for k in range(len(rs) - 1)]


def polling(calls, growth):
    if len(calls) < 3:
        return False
    results = [c.result for c in calls if c.result is not None]
    if len(results) >= 3:
        stayed = any(results[k] == results[k + 1] for k in range(len(results) - 1))
        if stayed and results[0] != results[-1]:
            return True
    ok = [c for c in calls if not c.failed()]
    if len(ok) < 3:
        return False
    gaps = [float(max(ok[k + 1].start_ns - ok[k].end_ns, 0)) for k in range(len(ok) - 1)]
    ratios = [gaps[k + 1] / gaps[k] for k in range(len(gaps) - 1) if gaps[k] > 0.0]
    m = median(ratios)
    return m is not None and m >= growth


# ---------------------------------------------------------------------------
# detect/driver.rs
# ---------------------------------------------------------------------------
def driver(gaps, models):
    """drive_gaps: `model` when a model call lies in every gap (end of one
    attempt, start of the next), `code` when in none (or no gap), else
    `mixed`; a model call lies in a gap when it STARTS within it, with the
    1 ms slack either side (its end may be later: a streamed answer). With
    the model calls counted (each once) and their tokens."""
    counted = set()
    with_model = 0
    for (a, b) in gaps:
        inside = [k for k, m in enumerate(models) if a - OVERLAP_SLACK_NS <= m[0] <= b + OVERLAP_SLACK_NS]
        counted.update(inside)
        with_model += bool(inside)
    if not gaps or with_model == 0:
        kind = "code"
    else:
        kind = "model" if with_model == len(gaps) else "mixed"
    return {"driver": kind, "model_calls": len(counted),
            "input_tokens": sum(max(models[k][2] or 0, 0) for k in counted),
            "output_tokens": sum(max(models[k][3] or 0, 0) for k in counted)}


# ---------------------------------------------------------------------------
# detect/storm.rs
# ---------------------------------------------------------------------------
def rhythm(gaps, p):
    med = median(gaps)
    if med is None:
        return "irregular"
    if med < p.no_backoff_ms:
        return "no_backoff"
    ratios = [gaps[k + 1] / gaps[k] for k in range(len(gaps) - 1) if gaps[k] > 0.0]
    m = median(ratios)
    if m is not None and m >= p.exponential_ratio:
        return "exponential"
    mean = sum(gaps) / len(gaps)
    spread = max(gaps) - min(gaps)
    if mean > 0.0 and spread / mean < p.fixed_variation:
        return "fixed"
    return "irregular"


def same_args_share(group, crs):
    """storm.rs same_args: the share of successive rounds whose first calls
    have the same arguments; None unless every round's are known."""
    args = [group[r.lo].args for r in crs]
    if any(a is None for a in args) or len(args) < 2:
        return None
    same = sum(1 for k in range(len(args) - 1) if args[k] == args[k + 1])
    return same / (len(args) - 1)


def retry_storms(calls, turns, now_ns, p, models=None):
    out = []
    for (tid, tool), group in by_turn_and_tool(calls):
        turn = turns.get(tid)
        if turn is None or not turn.settled(now_ns, p.settle_seconds):
            continue
        rs = rounds(group)
        for (lo, hi, recovered) in chains(rs):
            if hi - lo < p.storm_min_calls:
                continue
            crs = rs[lo:hi]
            members = group[crs[0].lo:crs[-1].hi]
            failures = sum(1 for c in members if c.failed())
            if failures < p.min_failures:
                continue
            g = gaps_ms(crs)
            rh = rhythm(g, p)
            deterministic_only = all(retryable(c.cls) is False for c in members if c.failed())
            # a chain that mostly varies its arguments, with mostly
            # non-retryable failures, is an agent working, not a storm
            share = same_args_share(group, crs)
            n_retryable = sum(1 for c in members if retryable(c.cls) is True)
            varied = share is not None and share < 0.5
            # every retry waited out the wait its failure stated, and ok
            # at the end: the server's pacing, healthy like growing backoff
            ws = chain_waits(group, rs, lo, hi, RetryAfterParams.tolerance_ms)
            honoured = len(ws) > 0 and len(ws) + 1 == len(crs) and not any(w[2] for w in ws)
            if ((rh == "exponential" or honoured) and recovered) or deterministic_only or \
                    (varied and n_retryable * 2 < failures):
                continue
            gaps = [(crs[k].end_ns, crs[k + 1].start_ns) for k in range(len(crs) - 1)]
            out.append({"tool": tool, "turn": tid, "calls": len(members), "rounds": len(crs),
                        "failures": failures, "rhythm": rh,
                        "outcome": "recovered" if recovered else "gave_up",
                        "driver": driver(gaps, (models or {}).get(tid, []))})
    return out


# ---------------------------------------------------------------------------
# detect/retry_after.rs
# ---------------------------------------------------------------------------
class RetryAfterParams:
    min_early = 2
    share = 0.5
    tolerance_ms = 1000.0


def chain_waits(group, rs, lo, hi, tolerance_ms):
    """retry_after.rs waits: (stated ms, gap ms, early) of every round after
    a failed round whose failed calls stated a wait: the one over last (its
    deadline: the end of the span that stated it plus the wait); early when
    the next round starts more than tolerance_ms before that deadline, the
    gap measured from that span's end."""
    out = []
    for r in range(lo + 1, hi):
        prev = rs[r - 1]
        stated = []
        for c in group[prev.lo:prev.hi]:
            if c.failed() and c.wait is not None:
                frm = c.wait_from if c.wait_from is not None else c.end_ns
                stated.append((frm + c.wait * 1_000_000, c.wait, frm))
        if not prev.failed() or not stated:
            continue
        deadline, w, frm = max(stated)
        gap = max(rs[r].start_ns - frm, 0) / 1e6
        out.append((w, gap, rs[r].start_ns + tolerance_ms * 1e6 < deadline))
    return out


def ignored_retry_after(calls, turns, now_ns, settle_seconds, p):
    out = []
    for (tid, tool), group in by_turn_and_tool(calls):
        turn = turns.get(tid)
        if turn is None or not turn.settled(now_ns, settle_seconds):
            continue
        if not any(c.wait is not None for c in group):
            continue
        rs = rounds(group)
        for (lo, hi, recovered) in chains(rs):
            ws = chain_waits(group, rs, lo, hi, p.tolerance_ms)
            early = sum(1 for w in ws if w[2])
            if early >= p.min_early and early > p.share * len(ws):
                out.append({"tool": tool, "turn": tid, "rounds": hi - lo, "early": early,
                            "stated": len(ws)})
    return out


# ---------------------------------------------------------------------------
# detect/retries.rs
# ---------------------------------------------------------------------------
def same_requests(calls):
    out = []
    for (tid, tool), group in by_turn_and_tool(calls):
        by_args = {}
        for c in group:
            if c.args is not None:
                by_args.setdefault(c.args, []).append(c)
        for args in sorted(by_args):
            out.append(((tid, tool, args), by_args[args]))
    return out


def wasted_retries(calls, models=None):
    out = []
    for (tid, tool, _), group in same_requests(calls):
        first = group[0]
        if len(group) < 2 or retryable(first.cls) is not False:
            continue
        if not all(c.cls == first.cls for c in group[1:]):
            continue
        gaps = [(group[k].end_ns, group[k + 1].start_ns) for k in range(len(group) - 1)]
        out.append({"tool": tool, "turn": tid, "class": first.cls, "attempts": len(group),
                    "driver": driver(gaps, (models or {}).get(tid, []))})
    return out


def snake_case(name):
    """config/mod.rs snake_case."""
    out = []
    prev_lower = False
    for ch in name:
        if "A" <= ch <= "Z":
            if prev_lower:
                out.append("_")
            out.append(ch.lower())
            prev_lower = False
        elif ch in "- .":
            out.append("_")
            prev_lower = False
        else:
            out.append(ch)
            prev_lower = ("a" <= ch <= "z") or ("0" <= ch <= "9")
    return "".join(out)


# config/mod.rs AfterSuccessConfig default read_only_tools (globs, all `prefix*`)
READ_ONLY_PREFIXES = ("get_", "list_", "search_", "read_", "fetch_", "lookup_")


def read_only(tool):
    """config/mod.rs AfterSuccessConfig::read_only."""
    snake = snake_case(tool)
    last = snake.rsplit("__", 1)[-1]
    return any(x.startswith(g) for g in READ_ONLY_PREFIXES for x in (tool, snake, last))


def retries_after_success(calls, growth, read_only):
    # each turn's known calls by their place in it
    places = {}
    for c in calls:
        places[(c.turn, c.seq)] = c

    def quiet_between(ok, repeat):
        for seq in range(ok.seq + 1, repeat.seq):
            c = places.get((ok.turn, seq))
            if c is None or not ((c.tool == ok.tool and c.args == ok.args) or read_only(c.tool)):
                return False
        return True

    out = []
    for (tid, tool, _), group in same_requests(calls):
        ok = next((k for k, c in enumerate(group) if not c.failed()), None)
        if ok is None:
            continue
        if polling(group, growth):
            continue
        repeats = []
        last = group[ok]
        for c in group[ok + 1:]:
            if c.start_ns < group[ok].end_ns:
                continue
            if not quiet_between(last, c):
                break
            repeats.append(c)
            last = c
        if not repeats:
            continue
        out.append({"tool": tool, "turn": tid, "repeats": len(repeats)})
    return out


def stacked_retries(calls):
    out = []
    for (tid, tool), group in by_turn_and_tool(calls):
        parents = []
        for c in group:
            p = c.parent_span_id if c.parent_span_id is not None else ""
            for q in parents:
                if q[0] == p:
                    q[1].append(c)
                    break
            else:
                parents.append((p, [c]))
        layers = [(p, v) for (p, v) in parents if p != "" and len(v) >= 3 and any(c.failed() for c in v)]
        if len(layers) < 2:
            continue
        out.append({"tool": tool, "turn": tid, "layers": [len(v) for _, v in layers]})
    return out


# ---------------------------------------------------------------------------
# detect/loops.rs
# ---------------------------------------------------------------------------
def same_step(a, b):
    return (a.tool == b.tool and a.args is not None and a.args == b.args and not a.failed()
            and not b.failed()
            and (a.result is None or b.result is None or a.result == b.result))


def cycles(calls, p):
    def adjacent(i):
        return calls[i + 1].seq == calls[i].seq + 1

    out = []
    i = 0
    n = len(calls)
    while i < n:
        best = None  # (period, end)
        for period in range(2, max(p.cycle_max_period, 2) + 1):
            if i + period > n or not all(adjacent(j) for j in range(i, i + period - 1)):
                continue
            steps = calls[i:i + period]
            # distinct steps by (tool, arguments)
            distinct = all((steps[a].tool, steps[a].args) != (steps[b].tool, steps[b].args)
                           for a in range(period) for b in range(a + 1, period))
            if not distinct or any(c.args is None or c.failed() for c in steps):
                continue
            end = i + period
            while end < n and adjacent(end - 1) and same_step(calls[end - period], calls[end]):
                end += 1
            whole = (end - i) // period
            if whole >= p.cycle_min_repeats and (best is None or end > best[1]):
                best = (period, i + whole * period)
        if best is not None:
            out.append((calls[i:best[1]], best[0]))
            i = best[1]
        else:
            i += 1
    return out


def tool_loops(calls, turns, now_ns, settle_seconds, growth, p):
    by_turn = {}
    for c in calls:
        by_turn.setdefault(c.turn, []).append(c)
    out = []
    for tid in sorted(by_turn):
        turn = turns.get(tid)
        if turn is None or not turn.settled(now_ns, settle_seconds):
            continue
        tcalls = sorted(by_turn[tid], key=lambda c: (c.seq, c.start_ns))
        found = []
        in_cycle = set()
        for members, period in cycles(tcalls, p):
            in_cycle.update(c.tool for c in members)
            found.append((members, period))
        requests = {}
        for c in tcalls:
            if not c.failed() and c.args is not None:
                requests.setdefault((c.tool, c.args), []).append(c)
        for (tool, _) in sorted(requests):
            members = requests[(tool, _)]
            if len(members) < p.loop_min_calls or tool in in_cycle:
                continue
            recorded = [c.result for c in members if c.result is not None]
            if any(recorded[k] != recorded[k + 1] for k in range(len(recorded) - 1)):
                continue
            if polling(members, growth):
                continue
            # without results, only back-to-back repeats are a loop
            if len(recorded) != len(members):
                best, run = [], []
                for c in members:
                    if run and c.seq == run[-1].seq + 1:
                        run.append(c)
                    else:
                        run = [c]
                    if len(run) > len(best):
                        best = list(run)
                members = best
            if len(members) < p.loop_min_calls:
                continue
            found.append((members, 1))
        for members, period in found:
            out.append({"tool": members[0].tool, "turn": tid, "calls": len(members),
                        "steps": [c.tool for c in members[:period]]})
    return out


# ---------------------------------------------------------------------------
# detect/silent.rs (docs/detection.md §4.8)
# ---------------------------------------------------------------------------
def poisson_cdf(k, lam):
    """P(X <= k) for X ~ Poisson(lam), summed in log space."""
    if lam <= 0.0:
        return 1.0
    term = -lam
    total = math.exp(term)
    for i in range(1, k + 1):
        term += math.log(lam) - math.log(i)
        total += math.exp(term)
        if total >= 1.0:
            return 1.0
    return total


def by_pair(rows):
    """Rows per (tool, service), each in day order."""
    pairs = defaultdict(list)
    for r in rows:
        pairs[(r["tool"], r["service"])].append(r)
    return [sorted(v, key=lambda r: r["day"]) for _, v in sorted(pairs.items())]


def silent_tools(rows, turns, since, today, p):
    """tool_silent on the complete days since..today-1 after the tool's first day: a day
    with turns whose calls are far below the tool's calls per turn on its
    baseline days (the most recent days with turns, not flagged, within
    reach, from its first day on) times the day's turns."""
    out = []
    for pair in by_pair(rows):
        tool, service = pair[0]["tool"], pair[0]["service"]
        calls = {r["day"]: r["calls"] for r in pair}
        first = pair[0]["day"]

        def turns_on(d):
            return turns.get((service, d), 0)

        flagged = set()
        for day in range(max(since, first + 1), today):
            turns_d = turns_on(day)
            if turns_d == 0:
                continue
            base = [b for b in (day - back for back in range(1, p.reach_back_days + 1))
                    if b >= first and turns_on(b) > 0 and b not in flagged][:p.baseline_days]
            if len(base) < max(p.min_baseline_days, 1):
                continue
            base_calls = sum(calls.get(b, 0) for b in base)
            base_turns = sum(turns_on(b) for b in base)
            if base_calls == 0 or base_turns == 0:
                continue
            expected = base_calls / base_turns * turns_d
            observed = calls.get(day, 0)
            if expected < p.min_expected_calls or observed > p.max_ratio * expected:
                continue
            prob = poisson_cdf(observed, expected)
            if prob >= p.p_value:
                continue
            flagged.add(day)
            out.append({"tool": tool, "service": service, "day": day, "calls": observed,
                        "expected": round(expected, 3), "turns": turns_d, "p": prob})
    return out


def no_success(rows, since, now_ns, p):
    """no_success on the days since..today: called, no success, and none for
    no_success_days (since the last success, else the start of the first day
    with calls) over no_success_min_calls calls after the last success's day."""
    out = []
    today = day_of_ns(now_ns)
    for pair in by_pair(rows):
        first = pair[0]["day"]
        for i, r in enumerate(pair):
            # rollups written before the columns: calls - errors, the day's last ns
            ok = r["successes"] if r.get("successes") is not None else max(r["calls"] - r["errors"], 0)
            # a day of interrupts or cancellations only failed nothing
            if r["day"] < since or r["day"] > today or r["errors"] == 0 or ok > 0:
                continue
            upto = pair[:i + 1]

            def last_ok(x):
                if x.get("successes") is None and x["calls"] - x["errors"] > 0 and x.get("last_ok_ns") is None:
                    return (x["day"] + 1) * NS_DAY - 1
                return x.get("last_ok_ns")

            oks = [last_ok(x) for x in upto if last_ok(x) is not None]
            last = max(oks) if oks else None
            since_ns = last if last is not None else first * NS_DAY
            ok_day = day_of_ns(last) if last is not None else None
            after = [x for x in upto if ok_day is None or x["day"] > ok_day]
            # failed calls, on at least two days
            calls_since = sum(x["errors"] for x in after)
            failing_days = sum(1 for x in after if x["errors"] > 0)
            end = min((r["day"] + 1) * NS_DAY, now_ns)
            if (end - since_ns < p.no_success_days * NS_DAY or calls_since < p.no_success_min_calls
                    or failing_days < 2):
                continue
            out.append({"tool": r["tool"], "service": r["service"], "day": r["day"], "calls": r["calls"],
                        "calls_since": calls_since, "days": round((end - since_ns) / NS_DAY, 3)})
    return out


# ---------------------------------------------------------------------------
# sweep.rs turn_day, turn_findings, run
# ---------------------------------------------------------------------------
def traces_reaching(df, open_at):
    """sweep.rs traces_reaching: the traces of `df` with no root span in it
    (parent_span_id null), and, when `open_at` is given, those with a span
    ending at or after it; None when there are none."""
    seen = {}
    for t, p, e in zip(df.c["trace_id"], df.c["parent_span_id"], df.c["end_ns"]):
        if t is None:
            continue
        root, last = seen.get(t, (False, -(2 ** 63)))
        seen[t] = (root or p is None, max(last, e if e is not None else 0))
    ids = {t for t, (root, last) in seen.items()
           if (not root if open_at is None else (not root or last >= open_at))}
    return ids or None


# sweep.rs: turns are followed at most this many days past the day they began.
FOLLOW_DAYS = 2


def turn_day(store, day, today, now):
    """sweep.rs turn_day: the spans that started on `day` (before now); the
    day before, the spans of the day's traces that have no root on it; the
    days after (up to today, spans before now), the spans of the traces read
    so far that have no root or a span still open at that day's start, for
    as long as some are found."""
    store.forget_before(day - 1)
    frm = day * NS_DAY
    rows = store.rows(day)
    hi = min(frm + NS_DAY, now)
    spans = rows.filter([s is not None and frm <= s < hi for s in rows.c["start_ns"]])
    traces = traces_reaching(spans, None)
    if traces is not None:
        before = store.rows(day - 1)
        spans.extend(before.filter([t in traces for t in before.c["trace_id"]]))
    d = day + 1
    while d <= min(today, day + FOLLOW_DAYS):
        traces = traces_reaching(spans, d * NS_DAY)
        if traces is None:
            break
        r = store.rows(d)
        nxt = r.filter([t in traces and s is not None and s < now
                        for t, s in zip(r.c["trace_id"], r.c["start_ns"])])
        if len(nxt) == 0:
            break
        spans.extend(nxt)
        d += 1
    return turn_findings(spans, day, now)


def turn_findings(spans, day, now):
    """(the day's findings, its turns per service)."""
    sp, lp = StormParams, LoopParams
    calls, turns, by_service, models = collect(spans)

    def began_today(t):
        return t in turns and day_of_ns(turns[t].began_ns) == day

    def keep(t):
        return began_today(t) and turns[t].settled(now, sp.settle_seconds)

    growth = sp.exponential_ratio
    out = []
    out += [("retry_storm", s) for s in retry_storms(calls, turns, now, sp, models) if began_today(s["turn"])]
    out += [("tool_loop", l) for l in tool_loops(calls, turns, now, sp.settle_seconds, growth, lp)
            if began_today(l["turn"])]
    out += [("wasted_retries", w) for w in wasted_retries(calls, models) if keep(w["turn"])]
    # a request repeated in a loop is reported once, as the loop
    looped = set()
    for l in tool_loops(calls, turns, now, sp.settle_seconds, growth, lp):
        looped.update((l["turn"], t) for t in l["steps"])
    out += [("retry_after_success", r) for r in retries_after_success(calls, growth, read_only)
            if keep(r["turn"]) and (r["turn"], r["tool"]) not in looped]
    out += [("stacked_retries", s) for s in stacked_retries(calls) if keep(s["turn"])]
    out += [("ignored_retry_after", r) for r in
            ignored_retry_after(calls, turns, now, sp.settle_seconds, RetryAfterParams)
            if began_today(r["turn"])]
    for _, f in out:
        f["day"] = day_to_str(day)
    return out, {svc: n for (svc, d), n in by_service.items() if d == day}


def run(store, now, since_days):
    days = store.days()
    if not days:
        sys.exit(f"{store.root} holds no spans")
    today = day_of_ns(now)
    since = today - since_days
    findings = []
    rows = tool_daily(store)
    for v in judge(rows, today, SpikeParams):
        if v["day"] < since:
            continue
        v["day"] = day_to_str(v["day"])
        if v["flagged"]:
            findings.append(("error_rate_spike", v))
        elif v["latency_flagged"]:
            findings.append(("latency_spike", v))
    turns = {}
    for day in days:
        if since <= day <= today:
            found, by_service = turn_day(store, day, today, now)
            findings += found
            for svc, n in by_service.items():
                turns[(svc, day)] = turns.get((svc, day), 0) + n
    # silent tools: the rollup against the turns the per-turn pass counted
    for f in silent_tools(rows, turns, since, today, SilentParams):
        f["day"] = day_to_str(f["day"])
        findings.append(("tool_silent", f))
    for f in no_success(rows, since, now, SilentParams):
        f["day"] = day_to_str(f["day"])
        findings.append(("no_success", f))
    return findings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="a stormwatch data directory")
    ap.add_argument("--now", required=True, type=parse_now, help="the sweep's now: RFC 3339 or a date")
    ap.add_argument("--since-days", type=int, default=30, help="days of findings (default 30)")
    ap.add_argument("--details", action="store_true", help="print the findings on stderr")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.data_dir, "spans")):
        sys.exit(f"{args.data_dir} holds no spans/ directory")
    started = time.perf_counter()
    findings = run(Store(args.data_dir), args.now, args.since_days)
    seconds = time.perf_counter() - started
    counts = {k: 0 for k in KINDS}
    tools = {k: set() for k in KINDS}
    drivers = defaultdict(int)
    model_totals = {}
    for kind, f in findings:
        counts[kind] += 1
        tools[kind].add(f["tool"])
        if "driver" in f:
            d = f["driver"]
            drivers[f"{kind}/{d['driver']}"] += 1
            t = model_totals.setdefault(kind, {"model_calls": 0, "input_tokens": 0, "output_tokens": 0})
            for k in t:
                t[k] += d[k]
    if args.details:
        for kind in KINDS:
            print(f"== {kind}: {counts[kind]}", file=sys.stderr)
            for k, f in sorted((k, json.dumps(f, sort_keys=True)) for k, f in findings if k == kind):
                print("   " + f, file=sys.stderr)
    print(json.dumps({
        "engine": "reference",
        "findings": counts,
        "tools": {k: sorted(v) for k, v in tools.items()},
        "storm_tools": sorted(tools["retry_storm"]),
        "drivers": dict(sorted(drivers.items())),
        "model_totals": dict(sorted(model_totals.items())),
        "seconds": round(seconds, 3),
    }))


if __name__ == "__main__":
    main()
