#!/usr/bin/env python3
"""Crash trials (issue 15): `kill -9` a loaded `stormwatch serve`, restart it,
count what it kept.

    scripts/crash_trials.sh [--trials 20] [--seed 1]      # builds, sets up the venv
    $STORMWATCH_CACHE/venv-bench/bin/python scripts/crash_trials.py \\
        --stormwatch "$CARGO_TARGET_DIR/release/stormwatch" --trials 20 --seed 1

Needs Python 3.11 with `duckdb` (the pinned `scripts/bench/requirements.txt`,
the `venv-bench` venv that `scripts/py/setup_venvs.sh` makes); everything
else is the standard library (the load is OTLP/JSON over HTTP). 20 trials
take 7-9 minutes on 2 cores (BENCHMARKS.md); each is bounded (the kill
comes at most `2 x --trial-seconds` into it, starts and stops time out) and
`--max-minutes` bounds the run.

One data directory for the whole run, so trials accumulate (every restart
also replays what the restarts before left). Each trial:

1. starts `serve` (fresh ports on 127.0.0.1, `--sweep-interval 0`, a config
   with a 1 s flush interval, 2000-row flushes, compaction at 3 parts, seal
   compaction 1 s after a day ended and a webhook alert target served here),
   and first resends the requests the last kill left unanswered (as an
   exporter retries);
2. drives load: six threads POST OTLP/JSON (a quarter gzip'd), 1500 new
   spans/s in all, of agent turns with unique span ids, half on today and
   half on one of three past days (the "hot" past day rotates every 3 s, so
   the others go quiet and are seal-compacted again); retry storms, wasted
   retries on a 404 and tool loops make signals, and one tool is new with
   each sweep, so every sweep changes the state; 3 % of requests redeliver an
   acknowledged one; a 2xx records its spans as acknowledged, a failure or a
   429/503 puts the request back to be sent again. One thread sweeps through
   `POST /api/sweep` (the Sweeper's own path; the schedule is off so that the
   script knows every committed sweep), idling about as long as a sweep
   takes between them, and reads `state.sqlite` after each answer;
3. kills the process (SIGKILL) at a moment chosen by the trial's target:
   `uniform` (a uniform moment of the trial), or, armed at a uniform moment,
   with the next run of a phase, seen by polling the data directory every
   2 ms: `flush` (a `.part-*.parquet.tmp` being written, or a commit intent
   naming WAL segments), `compaction` (`.part-*-c.parquet.tmp`, or an intent
   renaming to a `-c` part), `seal` (`.seal-*.tmp` spill files or `-s`
   outputs, or an intent renaming to them) - each killed a uniform time into
   the phase's median duration so far, if it still runs; `group_commit`
   (requests in flight and the newest WAL segment just grew); `sweep` (at
   25-105 % of the median sweep time); `sweep_commit`: `wal`, at the last or
   last but one change of `state.sqlite-wal` a sweep makes (its day results,
   then its signals' transaction), or `visible`, as soon as a reader sees the
   sweep's rows, before its answer is back. Every fourth trial from the
   first is uniform, the others aim at what was hit least so far;
4. records what the dead process left on disk - the ground truth of what
   was in progress: temporary files, a commit intent - and the client's view
   (requests and the sweep unanswered), restarts `serve` on the same
   directory (replay), reads the signal state before anything else runs and
   checks it, sweeps once, stops it with SIGTERM (final flush; exit 0 and an
   empty WAL expected), and counts every span by (trace id, span id) in the
   live Parquet parts (each day's `_parts.json`) with DuckDB.

"Phases at kill" is that evidence: flush, compaction and seal from the files
left; `group_commit` when requests were in flight and the WAL had grown in
the 20 ms before the kill, or when spans of a request never answered are in
the store (the kill fell between its WAL write and its ack); `sweep` when a
sweep was unanswered, `sweep(committed)` when its commit is in the state
after the restart.

Checks (any failure: exit 1):
- every acknowledged span is in the store exactly once (lost = 0 copies,
  duplicated = 2 or more); a span never acknowledged at most once; no span
  the script did not send;
- the signal state after the restart is the last committed one. SQLite
  commits a transaction whole, and a sweep writes the signals, their history,
  its `sweeps` row, the alert outbox rows and `alert_told` in one IMMEDIATE
  transaction (`StateDb::apply_then`; day results and retry outcomes go
  before it, in their own, and are not compared). The script reads the
  state after every answered sweep (nothing else writes those tables here:
  no mutes, no schedule; the outbox is compared without the columns its
  sender updates), so at the kill the last committed state is the one it
  read after the last answered sweep, or, with a sweep unanswered, that one
  plus that sweep's commit. After the restart the state must be exactly the
  former, or the former with the rows of one sweep appended whole: the
  earlier history, sweeps and outbox rows unchanged as a prefix, the new
  history rows all at one time T later than any before, at most one new
  `sweeps` row, at T, whose `changes` equals the new history rows, no signal
  gone. Every state read (during the trials too) must also hold together:
  each signal's state is its last history row's, its first history row is
  its first finding, it has an `alert_told` row (the webhook was told of it
  in the same transaction), each `sweeps` row's `changes` equals its history
  rows. A state that differs with no sweep in flight is a mismatch;
- the state before the next trial's load equals the one left after the
  restart's sweep (a SIGTERM restart keeps it); SIGTERM exits 0 and leaves
  the WAL empty.

At the end the checks are run on damaged copies of their inputs (a part
left out, a part read twice, a sweep's history row missing, its sweeps row
gone, rows of two sweeps, a signal's state without its history row, a
signal without its alert_told row, a change with no sweep in flight) and
on undamaged controls: each must be caught (`--no-self-check` skips it).

A sweep that fails under load is printed (`?`) and counted apart: it is
wrong, but not what these checks are about. Prints a table per trial and
totals; `--json` writes them too. Exit 0: all held; 1: a check failed;
2: the harness could not run, or its self-check failed.
"""

import argparse
import gzip
import http.client
import http.server
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field

try:
    import duckdb
except ImportError:  # pragma: no cover - said plainly below
    duckdb = None

NS = 1_000_000_000
NS_DAY = 86_400 * NS
PHASES = ("group_commit", "flush", "compaction", "seal", "sweep")
# What a trial can aim at: the phases, and a sweep's end (its state commit).
TARGETS = PHASES + ("sweep_commit",)
HEALTHY = ["search_hotels", "get_weather", "book_car", "lookup_loyalty"]

CONFIG = """# written by scripts/crash_trials.py
[store]
flush_interval_secs = 1
flush_rows = 2000
compact_parts = 3
rollup_interval_secs = 1
seal_after_secs = 1
retention_days = 0

[sweep]
interval_secs = 0

[alert]
backoff_base_ms = 200
backoff_cap_secs = 2
pace_ms = 200

[[alert.targets]]
name = "crash-hook"
kind = "webhook"
url = "http://127.0.0.1:{hook_port}/hook"
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hook(http.server.BaseHTTPRequestHandler):
    """The alert target: takes every delivery."""

    hits = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Hook.hits += 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


# ---------------------------------------------------------------- the server


class Server:
    """One `stormwatch serve` process at a time on the run's data directory."""

    def __init__(self, binary, data_dir, config, logs):
        self.binary, self.data_dir, self.config, self.logs = binary, data_dir, config, logs
        self.proc = None
        self.log_path = None

    def start(self, name, timeout=180):
        self.otlp, self.http = free_port(), free_port()
        self.log_path = os.path.join(self.logs, name + ".log")
        # Nothing from the caller's STORMWATCH_* (a token, faults, a data dir) applies.
        env = {k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_")}
        env["RUST_LOG"] = "info"
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [self.binary, "--config", self.config, "--log-format", "json", "serve",
                 "--data-dir", self.data_dir, "--otlp-addr", f"127.0.0.1:{self.otlp}",
                 "--otlp-grpc-addr", "none", "--http-addr", f"127.0.0.1:{self.http}",
                 "--sweep-interval", "0", "--shutdown-timeout", "120"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env, cwd=self.logs)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode} while starting; see {self.log_path}")
            try:
                status, _ = self.get("/readyz", timeout=2)
                if status == 200:
                    return time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"serve not ready after {timeout} s; see {self.log_path}")

    def get(self, path, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.http, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, path, timeout=600):
        c = http.client.HTTPConnection("127.0.0.1", self.http, timeout=timeout)
        try:
            c.request("POST", path, body=b"", headers={"content-length": "0"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=180):
        """SIGTERM and wait: the exit code and seconds taken."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            rc = "timeout"
        return rc, time.monotonic() - t0

    def log_lines(self):
        """The JSON log lines of this start, parsed (others kept as text)."""
        out = []
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    out.append({"level": "TEXT", "message": line.rstrip()})
        return out


def message(line):
    """A log line's message (`--log-format json` puts the fields beside it)."""
    return line.get("message") or line.get("fields", {}).get("message", "")


# ------------------------------------------------------------------ the load


@dataclass
class Request:
    keys: tuple
    body: bytes
    gzipped: bool
    redelivery: bool = False


class Ledger:
    """Every span sent, by key (trace id hex + span id hex), and its fate."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = set()
        self.unacked = set()
        self.retry = deque()
        self.recent = deque(maxlen=64)
        self.inflight = 0
        self.counts = {"requests_ok": 0, "requests_failed": 0, "redeliveries": 0, "rejected_spans": 0,
                       "throttled": 0}

    def sending(self):
        with self.lock:
            self.inflight += 1

    def answered(self, req, ok, rejected=0):
        with self.lock:
            self.inflight -= 1
            if ok:
                self.counts["requests_ok"] += 1
                self.counts["rejected_spans"] += rejected
                self.acked.update(req.keys)
                self.unacked.difference_update(req.keys)
                if not req.redelivery:
                    self.recent.append(req)
            else:
                self.counts["requests_failed"] += 1
                if not req.redelivery:
                    self.unacked.update(k for k in req.keys if k not in self.acked)
                    self.retry.append(req)

    def next_retry(self):
        with self.lock:
            return self.retry.popleft() if self.retry else None


def kv(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def nonzero_id(rng, n):
    while True:
        b = rng.randbytes(n)
        if any(b):
            return b.hex()


def make_turn(rng, start_ns, epoch, n):
    """One agent turn (a trace): the agent span and its tool calls."""
    trace, root = nonzero_id(rng, 16), nonzero_id(rng, 8)
    session = f"crash-{n % 200}"
    r = rng.random()
    if r < 0.2:  # a retry storm against a dead feed; one tool new each sweep
        tool = f"feed_{epoch}" if rng.random() < 0.5 else "search_flights"
        k = rng.randint(6, 9)
        calls = [(tool, i < k - 1 or rng.random() < 0.3, 503, '{"from":"SFO","to":"JFK"}', 5_000_000)
                 for i in range(k)]
    elif r < 0.3:  # retries of a deterministic error
        calls = [("charge_card", True, 404, '{"card":"4242"}', 50_000_000) for _ in range(3)]
    elif r < 0.4:  # a tool loop
        calls = [("read_file", False, 200, '{"path":"a.txt"}', 30_000_000) for _ in range(6)]
    else:
        calls = [(t, False, 200, "{}", 200_000_000) for t in rng.sample(HEALTHY, rng.randint(1, 3))]
    spans, t = [], start_ns + 100_000_000
    for i, (tool, failed, status, args, gap) in enumerate(calls):
        s, e = t, t + 30_000_000
        t = e + gap
        span = {"traceId": trace, "spanId": nonzero_id(rng, 8), "parentSpanId": root,
                "name": f"execute_tool {tool}", "kind": 1,
                "startTimeUnixNano": str(s), "endTimeUnixNano": str(e),
                "attributes": [kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", tool),
                               kv("gen_ai.tool.call.id", f"call_{n}_{i}"), kv("session.id", session),
                               kv("gen_ai.tool.call.arguments", args),
                               kv("http.response.status_code", status if failed else 200)]}
        if failed:
            span["status"] = {"code": 2, "message": f"HTTP {status}"}
        spans.append(span)
    spans.append({"traceId": trace, "spanId": root, "name": "invoke_agent crash-agent", "kind": 1,
                  "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(t + 10_000_000),
                  "attributes": [kv("gen_ai.operation.name", "invoke_agent"), kv("session.id", session)]})
    return spans


class Run:
    """One server process's load: senders, the sweeper, the metrics scraper."""

    def __init__(self, server, ledger, rng_seed, args, past_days, epoch):
        self.server, self.ledger, self.args, self.past_days = server, ledger, args, past_days
        self.seed = rng_seed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.epoch = epoch
        self.sweep_started = None          # monotonic start of the unanswered sweep
        self.committed = None              # state read after the last answered sweep
        self.sweep_ms = []
        self.sweeps_answered = 0
        self.sweep_errors = []
        self.invariant_errors = []
        self.metrics = {}
        self.turns = 0
        self.threads = []

    def start(self, committed):
        self.committed = committed
        for i in range(self.args.threads):
            self.threads.append(threading.Thread(target=self.sender, args=(i,), daemon=True))
        self.threads.append(threading.Thread(target=self.sweeper, daemon=True))
        self.threads.append(threading.Thread(target=self.scraper, daemon=True))
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    def hot_day(self):
        return self.past_days[int(time.monotonic() / 3) % len(self.past_days)]

    def new_request(self, rng):
        spans = []
        for _ in range(2):
            with self.lock:
                self.turns += 1
                n, epoch = self.turns, self.epoch
            if rng.random() < 0.5:
                start = time.time_ns() - rng.randint(150, 900) * NS
            else:
                start = self.hot_day() * NS_DAY + rng.randint(0, 86_000) * NS
            spans += make_turn(rng, start, epoch, n)
        body = json.dumps({"resourceSpans": [{
            "resource": {"attributes": [kv("service.name", "crash-agent")]},
            "scopeSpans": [{"scope": {"name": "crash_trials"}, "spans": spans}]}]}).encode()
        gz = rng.random() < 0.25
        if gz:
            body = gzip.compress(body, 1)
        return Request(tuple(s["traceId"] + s["spanId"] for s in spans), body, gz)

    def sender(self, idx):
        rng = random.Random(self.seed * 1000 + idx)
        per_thread = self.args.rate / self.args.threads
        conn = None
        next_at = time.monotonic()
        while not self.stop.is_set():
            req = self.ledger.next_retry()
            if req is None and rng.random() < 0.03:
                with self.ledger.lock:
                    if self.ledger.recent:
                        old = rng.choice(list(self.ledger.recent))
                        req = Request(old.keys, old.body, old.gzipped, redelivery=True)
                        self.ledger.counts["redeliveries"] += 1
            if req is None:
                req = self.new_request(rng)
            headers = {"content-type": "application/json"}
            if req.gzipped:
                headers["content-encoding"] = "gzip"
            self.ledger.sending()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.server.otlp, timeout=60)
                conn.request("POST", "/v1/traces", body=req.body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, retry_after = resp.status, resp.getheader("retry-after")
            except (OSError, http.client.HTTPException):
                self.ledger.answered(req, False)
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
                continue
            if 200 <= status < 300:
                rejected = int(json.loads(data or b"{}").get("partialSuccess", {}).get("rejectedSpans", 0) or 0)
                self.ledger.answered(req, True, rejected)
            else:
                self.ledger.answered(req, False)
                if status == 429:
                    with self.ledger.lock:
                        self.ledger.counts["throttled"] += 1
                time.sleep(min(float(retry_after or 1), 2.0))
                continue
            next_at += len(req.keys) / per_thread
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1)

    def sweeper(self):
        rng = random.Random(self.seed * 1000 + 999)
        time.sleep(1.0)
        while not self.stop.is_set():
            t0 = time.monotonic()
            with self.lock:
                self.sweep_started = t0
            try:
                status, body = self.server.post("/api/sweep")
            except (OSError, http.client.HTTPException):
                return  # killed: sweep_started stays, the kill saw it unanswered
            # Whatever the answer, the state now is a committed one (nothing
            # else writes it), and the next sweep starts from it.
            state = read_state(self.server.data_dir)
            errs = invariants(state)
            with self.lock:
                self.committed = state
                self.sweep_started = None
                if errs:
                    self.invariant_errors.append(errs)
                if status != 200:
                    self.sweep_errors.append(f"POST /api/sweep answered {status}: {body[:300]!r}")
                else:
                    self.sweep_ms.append((time.monotonic() - t0) * 1000)
                    self.sweeps_answered += 1
                    self.epoch += 1
            if status != 200:
                self.stop.wait(0.5)
                continue
            # Idle about as long as sweeping, so that kills find a sweep in
            # flight about half the time.
            self.stop.wait(0.2 + rng.uniform(0, 1.5) * self.sweep_ms[-1] / 1000)

    def scraper(self):
        while not self.stop.is_set():
            try:
                status, body = self.server.get("/metrics", timeout=5)
                if status == 200:
                    m = {}
                    for line in body.decode().splitlines():
                        if line and not line.startswith("#"):
                            k, v = line.rsplit(" ", 1)
                            m[k] = float(v)
                    self.metrics = m
            except (OSError, http.client.HTTPException, ValueError):
                pass
            self.stop.wait(1.0)


# ------------------------------------------------------------ the directory


def markers(data_dir):
    """What the data directory shows in progress: phase -> file names."""
    found = {"flush": set(), "compaction": set(), "seal": set()}
    spans = os.path.join(data_dir, "spans")
    try:
        days = [e.path for e in os.scandir(spans) if e.name.startswith("date=")]
    except FileNotFoundError:
        days = []
    for d in days:
        try:
            names = [e.name for e in os.scandir(d) if e.name.endswith(".tmp")]
        except FileNotFoundError:
            continue
        for name in names:
            day = os.path.basename(d)[5:]
            if name.startswith(".seal-") or name.endswith("-s.parquet.tmp"):
                found["seal"].add(f"{day}/{name}")
            elif name.endswith("-c.parquet.tmp"):
                found["compaction"].add(f"{day}/{name}")
            elif name.startswith(".part-"):
                found["flush"].add(f"{day}/{name}")
    intent = os.path.join(data_dir, "commit-intent.json")
    if os.path.exists(intent + ".tmp"):
        found.setdefault("intent", set()).add("commit-intent.json.tmp")
    try:
        with open(intent, "rb") as f:
            body = json.loads(f.read())
    except (FileNotFoundError, ValueError):
        body = None
    if body is not None:
        finals = [to for _, to in body.get("renames", [])]
        if any(t.endswith("-s.parquet") for t in finals):
            found["seal"].add("commit-intent.json (seal)")
        elif any(t.endswith("-c.parquet") for t in finals):
            found["compaction"].add("commit-intent.json (compaction)")
        elif body.get("wal_upto") is not None:
            found["flush"].add("commit-intent.json (flush)")
        else:
            found.setdefault("intent", set()).add("commit-intent.json (other)")
    return found


def wal_bytes(data_dir):
    try:
        return sum(e.stat().st_size for e in os.scandir(os.path.join(data_dir, "wal")) if e.name.endswith(".log"))
    except FileNotFoundError:
        return 0


def newest_wal_size(data_dir):
    try:
        segs = sorted(e.name for e in os.scandir(os.path.join(data_dir, "wal")) if e.name.endswith(".log"))
        return (segs[-1], os.path.getsize(os.path.join(data_dir, "wal", segs[-1]))) if segs else None
    except (FileNotFoundError, IndexError):
        return None


def live_parts(data_dir):
    """Every live part (each day's `_parts.json`), and files beside them no manifest names."""
    files, orphans = [], 0
    spans = os.path.join(data_dir, "spans")
    if not os.path.isdir(spans):
        return files, orphans
    for day in sorted(os.listdir(spans)):
        d = os.path.join(spans, day)
        listed = sorted(n for n in os.listdir(d) if n.startswith("part-") and n.endswith(".parquet"))
        try:
            with open(os.path.join(d, "_parts.json")) as f:
                named = json.load(f)["parts"]
        except FileNotFoundError:
            named = listed
        files += [os.path.join(d, n) for n in named]
        orphans += len(set(listed) - set(named))
    return files, orphans


def store_counts(data_dir):
    """(trace id hex + span id hex) -> copies in the live parts."""
    files, orphans = live_parts(data_dir)
    return count_keys(files), len(files), orphans


def count_keys(files):
    """(trace id hex + span id hex) -> copies in these Parquet files."""
    if not files:
        return {}
    con = duckdb.connect()
    try:
        con.execute("SET threads = 2")
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        rows = con.execute(
            f"SELECT trace_id || span_id AS k, count(*) FROM read_parquet([{listing}], hive_partitioning = false) "
            "GROUP BY k").fetchall()
    finally:
        con.close()
    return dict(rows)


def tally(counts, acked, unacked):
    """Lost (acknowledged, no copy), duplicated (2+ copies), unknown (never
    sent), and unacknowledged spans kept."""
    return {"lost": sorted(k for k in acked if k not in counts),
            "duplicated": sorted(k for k, c in counts.items() if c > 1),
            "unknown": sorted(k for k in counts if k not in acked and k not in unacked),
            "unacked_stored": sum(1 for k in unacked if k in counts)}


# ----------------------------------------------------------- signal state


@dataclass
class State:
    signals: list = field(default_factory=list)   # (id, key, state, draft, findings, ...)
    history: list = field(default_factory=list)   # (rowid, id, at_ns, from, to, reason)
    sweeps: list = field(default_factory=list)    # (rowid, at_ns, horizon_ns, signals, changes)
    outbox: list = field(default_factory=list)    # (id, webhook_id, target, signals, created_ns)
    told: list = field(default_factory=list)      # alert_told rows

    def same(self, other):
        return (self.signals, self.history, self.sweeps, self.outbox, self.told) == \
               (other.signals, other.history, other.sweeps, other.outbox, other.told)

    def brief(self):
        return f"{len(self.signals)} signals, {len(self.history)} history, {len(self.sweeps)} sweeps, {len(self.outbox)} outbox"


def read_state(data_dir):
    """The signal state as one read transaction sees it (the outbox without
    its delivery columns, which the sender changes after the sweep)."""
    path = os.path.join(data_dir, "state.sqlite")
    if not os.path.exists(path):
        return State()
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        con.execute("BEGIN")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        q = lambda t, sql: con.execute(sql).fetchall() if t in tables else []  # noqa: E731
        s = State(
            signals=q("signals", "SELECT id, key, state, draft, findings, last_seen_ns, clean_sweeps, resolved_at_ns, "
                                 "muted_until_ns, mute_until_escalates, mute_escalate_at FROM signals ORDER BY id"),
            history=q("signal_history", "SELECT rowid, id, at_ns, from_state, to_state, reason FROM signal_history "
                                        "ORDER BY rowid"),
            sweeps=q("sweeps", "SELECT rowid, at_ns, horizon_ns, signals, changes FROM sweeps ORDER BY rowid"),
            outbox=q("outbox", "SELECT id, webhook_id, target, signals, created_ns FROM outbox ORDER BY id"),
            told=q("alert_told", "SELECT signal_id, last_ns, last_fire_ns, findings, quiet FROM alert_told "
                                 "ORDER BY signal_id"))
        con.execute("COMMIT")
    finally:
        con.close()
    return s


def invariants(s):
    """What any committed state satisfies; a list of what does not hold."""
    errs = []
    last, first = {}, {}
    for _, sid, at, frm, to, _ in s.history:
        first.setdefault(sid, (frm, to))
        last[sid] = to
    told = {r[0] for r in s.told}
    for row in s.signals:
        sid, state = row[0], row[2]
        if sid not in first:
            errs.append(f"signal {sid} ({state}) has no history")
            continue
        if first[sid][0] is not None or first[sid][1] != "new":
            errs.append(f"signal {sid}: first history row is {first[sid]}, not (None, new)")
        if last[sid] != state:
            errs.append(f"signal {sid} is {state} but its last history row says {last[sid]}")
        if sid not in told:
            errs.append(f"signal {sid} has no alert_told row (its notice was not recorded with it)")
    ids = {r[0] for r in s.signals}
    for sid in set(first) - ids:
        errs.append(f"history of {sid}, which is not a signal")
    per_at = {}
    for h in s.history:
        per_at[h[2]] = per_at.get(h[2], 0) + 1
    for _, at, _, _, changes in s.sweeps:
        if per_at.get(at, 0) != changes:
            errs.append(f"sweep at {at} says {changes} changes, history has {per_at.get(at, 0)} rows at that time")
    return errs


def rows_committed(data_dir):
    """Rows of `sweeps` and `signal_history` a reader sees now."""
    try:
        con = sqlite3.connect(f"file:{os.path.join(data_dir, 'state.sqlite')}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return None
    try:
        return con.execute("SELECT (SELECT count(*) FROM sweeps), (SELECT count(*) FROM signal_history)").fetchone()
    except sqlite3.Error:
        return None
    finally:
        con.close()


def check_transition(prev, post, sweep_unanswered):
    """(verdict, problems): post must be prev, or prev with one sweep's commit appended whole."""
    errs = invariants(post)
    if post.same(prev):
        return "= last committed", errs
    if not sweep_unanswered:
        return "MISMATCH", errs + [f"state changed with no sweep in flight: {prev.brief()} -> {post.brief()}"]
    for name in ("history", "sweeps", "outbox"):
        a, b = getattr(prev, name), getattr(post, name)
        if b[:len(a)] != a:
            errs.append(f"{name}: the rows committed before the kill are not a prefix of the rows after")
    added_h = post.history[len(prev.history):]
    added_s = post.sweeps[len(prev.sweeps):]
    ats = {h[2] for h in added_h} | {s[1] for s in added_s}
    if len(added_s) > 1:
        errs.append(f"{len(added_s)} sweeps rows appeared; one sweep was in flight")
    if len(ats) > 1:
        errs.append(f"new rows carry {len(ats)} different sweep times {sorted(ats)}")
    before = max([h[2] for h in prev.history] + [s[1] for s in prev.sweeps] + [0])
    if ats and min(ats) <= before:
        errs.append("new rows are not later than every row before")
    if added_s and added_s[0][4] != len(added_h):
        errs.append(f"the new sweep row says {added_s[0][4]} changes, {len(added_h)} history rows came with it")
    gone = {r[0] for r in prev.signals} - {r[0] for r in post.signals}
    if gone:
        errs.append(f"signals gone: {sorted(gone)}")
    return ("= last committed + the unanswered sweep" if not errs else "MISMATCH"), errs


# ---------------------------------------------------------------- a trial


@dataclass
class Trial:
    n: int
    target: str
    kill_at_s: float = 0.0
    phases: list = field(default_factory=list)
    evidence: dict = field(default_factory=dict)
    inflight: int = 0
    wal_grew_ms: float = -1
    sweep_unanswered: bool = False
    sweep_committed: bool = False
    acked_total: int = 0
    acked_trial: int = 0
    unacked_stored: int = 0
    lost: int = 0
    duplicated: int = 0
    unknown: int = 0
    stored_total: int = 0
    state: str = ""
    problems: list = field(default_factory=list)
    recovery: dict = field(default_factory=dict)
    restart_s: float = 0.0
    counters: dict = field(default_factory=dict)
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    # Wrong, but not what the crash checks are about (a sweep that failed under load).
    findings: list = field(default_factory=list)


class Monitor:
    """Polls the data directory; measures how long each phase's files live."""

    def __init__(self, data_dir):
        self.data_dir = data_dir
        self.active_since = {}
        self.durations = {"flush": [], "compaction": [], "seal": []}
        self.wal = None
        self.wal_changed = 0.0
        self.db = None
        self.db_changed = 0.0
        # state.sqlite-wal changes seen during each answered sweep, and the running one's.
        self.sweep_start = None
        self.sweep_writes = 0
        self.writes_per_sweep = []

    def poll(self, sweep_started=None):
        now = time.monotonic()
        m = markers(self.data_dir)
        for p in self.durations:
            if m[p] and p not in self.active_since:
                self.active_since[p] = now
            elif not m[p] and p in self.active_since:
                self.durations[p].append(now - self.active_since.pop(p))
        w = newest_wal_size(self.data_dir)
        if w != self.wal:
            self.wal, self.wal_changed = w, now
        try:
            st = os.stat(os.path.join(self.data_dir, "state.sqlite-wal"))
            db = (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            db = None
        if sweep_started != self.sweep_start:
            if self.sweep_start is not None and sweep_started is None:
                self.writes_per_sweep.append(self.sweep_writes)
            self.sweep_start, self.sweep_writes = sweep_started, 0
        if db != self.db:
            self.db, self.db_changed = db, now
            self.sweep_writes += self.sweep_start is not None
        return now, m

    def estimate(self, phase, default):
        d = self.durations[phase][-50:]
        return statistics.median(d) if len(d) >= 3 else default


def choose_target(n, hits, rng, uniform_every):
    """Every `uniform_every`-th trial from the first is uniform; the others
    aim at what was hit least so far."""
    if (n - 1) % uniform_every == 0:
        return "uniform"
    least = min(hits[p] for p in TARGETS)
    return rng.choice([p for p in TARGETS if hits[p] == least])


def run_trial(n, target, server, ledger, monitor, rng, args, past_days, baseline, epoch, sweep_est):
    t_trial = time.monotonic()
    trial = Trial(n, target)
    server.start(f"trial-{n:02d}-load")
    start_state = read_state(server.data_dir)
    if baseline is not None and not start_state.same(baseline):
        trial.problems.append(f"state changed across a SIGTERM restart: {baseline.brief()} -> {start_state.brief()}")
    acked_before = len(ledger.acked)
    run = Run(server, ledger, args.seed * 100 + n, args, past_days, epoch)
    run.start(start_state)
    t0 = time.monotonic()
    warmup = args.warmup
    # Uniform: the kill at a uniform moment of the trial. Targeted: armed at
    # a uniform moment, then the kill comes with the next run of the phase.
    arm_at = rng.uniform(warmup, args.trial_seconds)
    give_up = arm_at + args.trial_seconds
    plan = None  # (kill time, what must still be running: a phase's start, or the sweep's)
    commit_mode = rng.choice(["wal", "visible"])
    if target == "sweep_commit":
        trial.target = f"sweep_commit/{commit_mode}"
    while True:
        with run.lock:
            started = run.sweep_started
        now, m = monitor.poll(started)
        el = now - t0
        fire = False
        if target == "uniform":
            fire = el >= arm_at
        elif el >= give_up:
            fire = True
            trial.notes.append(f"no {target} seen in {args.trial_seconds:.0f} s after arming: killed anyway")
        elif el >= arm_at:
            if target == "group_commit":
                # Requests waiting for their ack while the WAL just grew.
                fire = ledger.inflight >= 2 and now - monitor.wal_changed <= 0.003
            elif target in ("sweep", "sweep_commit"):
                est = sweep_est(run)
                if target == "sweep":
                    # A uniform moment of the sweep (its median duration, a little past).
                    if started is not None and plan is None:
                        plan = (started + rng.uniform(0.25, 1.05) * est, started)
                    if plan is not None:
                        if started != plan[1]:
                            plan = None  # answered before the planned moment: wait for the next one
                        elif now >= plan[0]:
                            fire = True
                elif commit_mode == "wal":
                    # Its end, where it writes state.sqlite: its day results,
                    # then the signals' transaction. As the last or the one
                    # but last change of state.sqlite-wal a sweep makes
                    # (counted over the sweeps so far) is seen.
                    if started is not None and plan is None:
                        w = monitor.writes_per_sweep[-20:]
                        last = max(1, round(statistics.median(w))) if len(w) >= 2 else 3
                        plan = (rng.choice([max(1, last - 1), last]), started)
                        trial.notes.append(f"sweep_commit: kill at its state.sqlite-wal change {plan[0]} of {last}")
                    if plan is not None:
                        if started != plan[1]:
                            plan = None
                            trial.notes.append("... that sweep was answered first; the next one")
                        elif monitor.sweep_writes >= plan[0] and now == monitor.db_changed:
                            fire = True
                else:
                    # Right after its commit: as soon as a reader sees its
                    # rows (sweeps, history), before the answer is back.
                    if started is not None and plan is None:
                        plan = (rows_committed(server.data_dir), started)
                    if plan is not None:
                        if started != plan[1]:
                            plan = None
                        elif rows_committed(server.data_dir) != plan[0]:
                            fire = True
            else:
                if m[target] and plan is None and target in monitor.active_since:
                    est = monitor.estimate(target, {"flush": 0.02, "compaction": 0.1, "seal": 0.5}[target])
                    plan = (now + rng.uniform(0, est), monitor.active_since[target])
                if plan is not None:
                    if monitor.active_since.get(target) != plan[1]:
                        plan = None  # it ended before the planned moment: the next one
                    elif now >= plan[0]:
                        fire = True
        if fire:
            break
        time.sleep(args.poll_ms / 1000)
    # The kill, and what the client side saw at that moment.
    trial.inflight = ledger.inflight
    trial.wal_grew_ms = (time.monotonic() - monitor.wal_changed) * 1000
    with run.lock:
        trial.sweep_unanswered = run.sweep_started is not None
        committed = run.committed
    server.kill9()
    trial.kill_at_s = time.monotonic() - t0
    run.join()
    monitor.active_since.clear()
    trial.notes += [f"load log: {message(x)}" for x in server.log_lines() if x.get("level") in ("WARN", "ERROR")]
    trial.counters = {k: int(run.metrics.get(f"stormwatch_{k}_total", 0)) for k in
                      ("flushes", "compactions", "seal_compactions")}
    trial.counters["sweeps"] = run.sweeps_answered
    trial.counters["sweep_ms_median"] = round(statistics.median(run.sweep_ms)) if run.sweep_ms else None
    trial.problems += [f"during the trial: {e}" for errs in run.invariant_errors for e in errs]
    trial.findings += run.sweep_errors
    # What the dead process left: the ground truth of what was in progress.
    left = markers(server.data_dir)
    trial.evidence = {p: sorted(v) for p, v in left.items() if v}
    trial.phases = [p for p in ("flush", "compaction", "seal") if left[p]]
    if trial.inflight >= 1 and trial.wal_grew_ms <= 20:
        trial.phases.insert(0, "group_commit")
    if trial.sweep_unanswered:
        trial.phases.append("sweep")
    # Restart: replay, then the signal state before anything else runs.
    trial.restart_s = server.start(f"trial-{n:02d}-restart")
    post = read_state(server.data_dir)
    for line in server.log_lines():
        if message(line) == "recovered the write-ahead log":
            trial.recovery = {k: v for k, v in line.items() if k not in ("message", "timestamp", "level", "target")}
    trial.state, errs = check_transition(committed, post, trial.sweep_unanswered)
    trial.problems += errs
    trial.sweep_committed = trial.sweep_unanswered and not post.same(committed)
    if trial.sweep_committed and "sweep" in trial.phases:
        trial.phases[trial.phases.index("sweep")] = "sweep(committed)"
    status, body = server.post("/api/sweep")
    after = read_state(server.data_dir)
    if status != 200:
        trial.problems.append(f"the sweep after the restart answered {status}: {body[:300]!r}")
    trial.problems += [f"after the restart's sweep: {e}" for e in invariants(after)]
    if after.history[:len(post.history)] != post.history:
        trial.problems.append("the restart's sweep rewrote history rows")
    rc, _ = server.stop()
    if rc != 0:
        trial.problems.append(f"SIGTERM after the restart: exit {rc}")
    left_wal = wal_bytes(server.data_dir)
    if left_wal:
        trial.problems.append(f"the WAL holds {left_wal} bytes after a clean stop (not counted below)")
    warn = [message(x) for x in server.log_lines() if x.get("level") in ("WARN", "ERROR")]
    trial.notes += [f"restart log: {w}" for w in warn if "torn record" not in w]
    # Every span, counted.
    counts, parts, orphans = store_counts(server.data_dir)
    with ledger.lock:
        acked, unacked = set(ledger.acked), set(ledger.unacked)
    trial.acked_total = len(acked)
    trial.acked_trial = len(acked) - acked_before
    trial.stored_total = sum(counts.values())
    t = tally(counts, acked, unacked)
    trial.lost, trial.duplicated, trial.unknown = len(t["lost"]), len(t["duplicated"]), len(t["unknown"])
    trial.unacked_stored = t["unacked_stored"]
    # Spans of a request killed before its answer are in the store: the
    # kill fell between the group's WAL write and its acknowledgement.
    if trial.unacked_stored and "group_commit" not in trial.phases:
        trial.phases.insert(0, "group_commit")
    if trial.lost or trial.duplicated or trial.unknown:
        trial.problems.append(f"spans: {trial.lost} lost (e.g. {t['lost'][:5]}), {trial.duplicated} duplicated "
                              f"(e.g. {t['duplicated'][:5]}), {trial.unknown} never sent (e.g. {t['unknown'][:5]})")
    trial.evidence["parts"] = parts
    if orphans:
        trial.evidence["orphan_parts"] = orphans
    trial.seconds = time.monotonic() - t_trial
    return trial, after, run.epoch, run.sweep_ms


# ------------------------------------------------------- the checker, checked


def self_check(server, ledger):
    """The checks must be able to fail. One more start: the state before and
    after one sweep over a new retry storm (so it commits changes), then the
    checks on those two states and on the final store, undamaged (controls)
    and with known damage. A list of what went wrong."""
    out = []
    server.start("self-check")
    before = read_state(server.data_dir)
    rng = random.Random(0)
    # A storm on a new tool, begun 120 s ago: settled (90 s), and newer than
    # anything the sweeps saw (the load's spans begin 150 s ago or more), so
    # the sweep is "fresh" and writes its sweeps row.
    spans = make_turn(rng, time.time_ns() - 120 * NS, "selfcheck", 0)
    while not spans[0]["name"].startswith("execute_tool feed_selfcheck"):
        spans = make_turn(rng, time.time_ns() - 120 * NS, "selfcheck", 0)
    body = json.dumps({"resourceSpans": [{"resource": {"attributes": [kv("service.name", "crash-agent")]},
                                          "scopeSpans": [{"spans": spans}]}]}).encode()
    c = http.client.HTTPConnection("127.0.0.1", server.otlp, timeout=60)
    c.request("POST", "/v1/traces", body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        out.append(f"self-check request answered {r.status}")
    ledger.sending()
    ledger.answered(Request(tuple(x["traceId"] + x["spanId"] for x in spans), body, False), r.status == 200)
    status, _ = server.post("/api/sweep")
    after = read_state(server.data_dir)
    server.stop()
    if status != 200 or len(after.sweeps) != len(before.sweeps) + 1 or after.sweeps[-1][4] == 0:
        return out + [f"the self-check sweep (answered {status}) did not commit one sweeps row with changes "
                      f"({before.brief()} -> {after.brief()}); nothing to damage"]
    t = after.sweeps[-1][1]
    verdict, errs = check_transition(before, after, True)
    if errs or "MISMATCH" in verdict:
        out.append(f"control: a sweep's commit appended whole was refused: {errs}")
    if "MISMATCH" not in check_transition(before, after, False)[0]:
        out.append("a changed state with no sweep in flight was accepted")
    last_row = [h for h in after.history if h[2] == t][-1]
    mixed = State(after.signals, [h for h in after.history if h != last_row], after.sweeps, after.outbox, after.told)
    if not check_transition(before, mixed, True)[1]:
        out.append("a sweep row with one of its history rows missing was accepted")
    lost_row = State(after.signals, after.history, after.sweeps[:-1], after.outbox, after.told)
    if not check_transition(after, lost_row, True)[1]:
        out.append("a committed sweeps row gone after the restart was accepted")
    flipped = State([(r[0], r[1], "resolved" if r[2] != "resolved" else "ongoing") + tuple(r[3:]) if i == 0 else r
                     for i, r in enumerate(after.signals)], after.history, after.sweeps, after.outbox, after.told)
    if not invariants(flipped):
        out.append("a signal whose state is not its last history row's was accepted")
    if not invariants(State(after.signals, after.history, after.sweeps, after.outbox, after.told[1:])):
        out.append("a signal without its alert_told row was accepted")
    two = State(after.signals, after.history + [(10**12, after.signals[0][0], t + 1, None, "new", "x")],
                after.sweeps, after.outbox, after.told)
    if not check_transition(before, two, True)[1]:
        out.append("rows of two sweeps after one unanswered sweep were accepted")
    # The spans: the final store tallies; without a part some span is lost; with one twice, duplicated.
    files, _ = live_parts(server.data_dir)
    with ledger.lock:
        acked, unacked = set(ledger.acked), set(ledger.unacked)
    counts = count_keys(files)
    if any(tally(counts, acked, unacked)[k] for k in ("lost", "duplicated", "unknown")):
        out.append("control: the final store does not tally")
    victim = max(files, key=os.path.getsize)
    if not tally(count_keys([f for f in files if f != victim]), acked, unacked)["lost"]:
        out.append("a live part left out: no span counted lost")
    if not tally(count_keys(files + [victim]), acked, unacked)["duplicated"]:
        out.append("a live part read twice: no span counted duplicated")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stormwatch", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"),
                                                         "release", "stormwatch"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trial-seconds", type=float, default=20,
                    help="a uniform kill falls in [warmup, this]; a targeted one waits at most twice this")
    ap.add_argument("--warmup", type=float, default=3, help="seconds of load before any kill")
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--rate", type=float, default=1500, help="new spans per second, all threads")
    ap.add_argument("--poll-ms", type=float, default=2)
    ap.add_argument("--uniform-every", type=int, default=4, help="trials 1, 1+N, 1+2N… kill at a uniform moment")
    ap.add_argument("--target", choices=("uniform",) + TARGETS,
                    help="aim every trial at this (to reproduce a finding); default: as described above")
    ap.add_argument("--workdir", help="default: a new temporary directory (kept)")
    ap.add_argument("--json", help="write the trials and totals here")
    ap.add_argument("--no-self-check", action="store_true", help="skip damaging copies of the checks' inputs at the end")
    ap.add_argument("--max-minutes", type=float, default=60, help="start no trial after this")
    args = ap.parse_args()
    if duckdb is None:
        log("crash_trials.py needs duckdb: run it with the venv-bench python (scripts/crash_trials.sh sets it up)")
        return 2
    if not os.access(args.stormwatch, os.X_OK):
        log(f"no stormwatch binary at {args.stormwatch} (cargo build --release, or --stormwatch PATH)")
        return 2
    work = args.workdir or tempfile.mkdtemp(prefix="stormwatch-crash.")
    data_dir, logs = os.path.join(work, "data"), os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    config = os.path.join(work, "stormwatch.toml")
    with open(config, "w") as f:
        f.write(CONFIG.format(hook_port=hook.server_address[1]))
    version = subprocess.run([args.stormwatch, "--version"], capture_output=True, text=True).stdout.strip()
    log(f"crash trials: {args.trials} trials, seed {args.seed}, {version}, data and logs in {work}")

    rng = random.Random(args.seed)
    server = Server(args.stormwatch, data_dir, config, logs)
    ledger = Ledger()
    monitor = Monitor(data_dir)
    today = time.time_ns() // NS_DAY
    past_days = [today - 1, today - 2, today - 3]
    hits = {p: 0 for p in TARGETS}
    trials, baseline, epoch, sweep_ms = [], None, 0, []
    sweep_est = lambda run: statistics.median((sweep_ms + run.sweep_ms)[-20:]) / 1000 \
        if len(sweep_ms + run.sweep_ms) >= 2 else 2.0  # noqa: E731
    started = time.monotonic()
    header = (f"{'trial':>5} {'target':<21} {'kill_s':>6} {'phases at kill':<40} {'in_flight':>9} {'acked':>8} {'+trial':>6} "
              f"{'lost':>4} {'dup':>3} {'unacked_kept':>12} {'state check':<40}")
    print(header, flush=True)
    harness_error = None
    for n in range(1, args.trials + 1):
        if time.monotonic() - started > args.max_minutes * 60:
            harness_error = f"stopped after {n - 1} trials: --max-minutes {args.max_minutes} reached"
            break
        target = args.target or choose_target(n, hits, rng, args.uniform_every)
        try:
            trial, baseline, epoch, ms = run_trial(n, target, server, ledger, monitor, rng, args, past_days,
                                                   baseline, epoch, sweep_est)
        except Exception as e:  # noqa: BLE001 - the harness failed: said, and the run stops
            harness_error = f"trial {n}: {e!r}"
            if server.proc is not None and server.proc.poll() is None:
                server.kill9()
            break
        sweep_ms += ms
        for p in trial.phases:
            hits[p.split("(")[0]] += 1
        hits["sweep_commit"] += trial.sweep_committed
        target = target.split("/")[0]
        trials.append(trial)
        print(f"{n:>5} {trial.target:<21} {trial.kill_at_s:>6.1f} {','.join(trial.phases) or '-':<40} {trial.inflight:>9} "
              f"{trial.acked_total:>8} {trial.acked_trial:>6} {trial.lost:>4} {trial.duplicated:>3} "
              f"{trial.unacked_stored:>12} {trial.state:<40}", flush=True)
        for p in trial.problems:
            print(f"      ! {p}", flush=True)
        for p in trial.findings:
            print(f"      ? {p}", flush=True)
        for p in trial.notes:
            print(f"      - {p}", flush=True)
    checked = None
    if trials and not harness_error and not args.no_self_check:
        try:
            checked = self_check(server, ledger)
        except Exception as e:  # noqa: BLE001
            checked = [f"the self-check failed to run: {e!r}"]
    hook.shutdown()
    elapsed = time.monotonic() - started
    failed = [t for t in trials if t.problems or t.lost or t.duplicated or t.unknown or "MISMATCH" in t.state]
    print()
    print(f"trials: {len(trials)} in {elapsed / 60:.1f} min (median {statistics.median([t.seconds for t in trials]) if trials else 0:.0f} s each)")
    print("phases hit (evidence at the kill): " + ", ".join(f"{p} {hits[p]}" for p in PHASES))
    print("targets: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(t.target for t in trials).items())))
    committed = sum(t.sweep_committed for t in trials)
    unanswered = sum(t.sweep_unanswered for t in trials)
    print(f"sweeps unanswered at the kill: {unanswered} (committed before the kill: {committed}, before their commit: {unanswered - committed})")
    tot = lambda k: sum(t.counters.get(k, 0) for t in trials)  # noqa: E731
    print(f"before the kills: {tot('flushes')} flushes, {tot('compactions')} compactions, "
          f"{tot('seal_compactions')} seal compactions, {tot('sweeps')} sweeps answered (as /metrics and the sweeper last saw them)")
    rec = lambda k: sum(int(t.recovery.get(k, 0) or 0) for t in trials)  # noqa: E731
    print(f"restarts: {rec('spans')} spans replayed from the WAL, {rec('torn_tails')} torn tails cut, "
          f"{sum(bool(t.recovery.get('finished_commit')) for t in trials)} interrupted commits finished; "
          f"median restart {statistics.median([t.restart_s for t in trials]) if trials else 0:.1f} s")
    last = trials[-1] if trials else Trial(0, "")
    print(f"spans: {last.acked_total} acknowledged, {last.stored_total} stored, "
          f"{sum(t.lost for t in trials)} lost, {sum(t.duplicated for t in trials)} duplicated, "
          f"{sum(t.unknown for t in trials)} never sent; {len(ledger.unacked)} never acknowledged "
          f"({last.unacked_stored} of them stored); requests {ledger.counts}; alert deliveries {Hook.hits}")
    if checked is not None:
        print("checker self-check: " + ("ok (8 kinds of damage caught, 2 controls passed)" if not checked
                                        else "FAILED: " + "; ".join(checked)))
        if checked and not harness_error:
            harness_error = "the checker's self-check failed"
    other = sum(len(t.findings) for t in trials)
    print(f"other findings (not crash checks; marked ?): {other}")
    print(f"result: {len(failed)} trial(s) failed" + (f"; {harness_error}" if harness_error else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "version": version, "workdir": work, "minutes": elapsed / 60,
                       "hits": hits, "trials": [t.__dict__ for t in trials], "self_check": checked,
                       "harness_error": harness_error},
                      f, indent=1, default=str)
    if failed:
        return 1
    return 2 if harness_error else 0


if __name__ == "__main__":
    sys.exit(main())
