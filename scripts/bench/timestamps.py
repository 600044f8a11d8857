#!/usr/bin/env python3
"""Hardening v2, timestamps (BENCHMARKS.md): what far-future spans and a wide
tools table cost a `stormwatch serve`, before and after the receive-time
window. Not a test; the acceptance tests are tests/it/bounds.rs.

    python3 scripts/bench/timestamps.py --bin target/release/stormwatch [--tools 200000]

1. One request of 2000 tool spans, each on its own day 1..2000 days ahead
   (plus 20 spans of today), over OTLP/HTTP JSON: the answer's
   partial success, the time until the first flush commits, the files and
   bytes under the data directory, the first sweep (`POST /api/sweep`), the
   stop (final flush), and `/api/tools`' `to` day.
2. `--tools N` tools of one call each, imported; `GET /api/tools` timed and
   sized (an old build answers the whole table, a new one a page).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DAY_NS = 86_400 * 10**9


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def span(trace, tool, start_ns):
    return {
        "traceId": f"{trace:032x}", "spanId": f"{1:016x}", "name": f"execute_tool {tool}", "kind": 1,
        "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns + 1_000_000),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
        ],
    }


def otlp(spans):
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def tree(path):
    files, size = 0, 0
    for root, _, names in os.walk(path):
        for n in names:
            files += 1
            try:
                size += os.path.getsize(os.path.join(root, n))
            except OSError:
                pass
    return files, size


class Serve:
    def __init__(self, binary, data, config):
        self.http, self.otlp = free_port(), free_port()
        self.log = open(data + ".log", "w")
        env = dict(os.environ, STORMWATCH_RETENTION_DAYS="0", RUST_LOG="warn")
        env.pop("STORMWATCH_FAULTS", None)
        self.p = subprocess.Popen(
            [binary, "serve", "--data-dir", data, "--config", config, "--otlp-addr", f"127.0.0.1:{self.otlp}",
             "--otlp-grpc-addr", "none", "--http-addr", f"127.0.0.1:{self.http}", "--sweep-interval", "0"],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthz", timeout=1)
                socket.create_connection(("127.0.0.1", self.otlp), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("serve did not start")

    def get(self, path, timeout=600):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}{path}", timeout=timeout) as r:
            return r.read()

    def post(self, url, body, ctype="application/json", timeout=600):
        req = urllib.request.Request(url, data=body, headers={"content-type": ctype}, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()

    def metric(self, name):
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def stop(self):
        t = time.time()
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=600)
        return time.time() - t


def future_days(binary, work):
    data = os.path.join(work, "future")
    config = os.path.join(work, "future.toml")
    with open(config, "w") as f:
        f.write("[store]\nflush_interval_secs = 1\nrollup_interval_secs = 1\n")
    s = Serve(binary, data, config)
    now = time.time_ns()
    spans = [span(1000 + i, f"future_{i % 50}", now + (i + 1) * DAY_NS) for i in range(2000)]
    spans += [span(1 + i, "today_tool", now - 60 * 10**9 + i) for i in range(20)]
    body = otlp(spans)
    t0 = time.time()
    answer = json.loads(s.post(f"http://127.0.0.1:{s.otlp}/v1/traces", body) or b"{}")
    acked = time.time() - t0
    while s.metric("stormwatch_flushes_total") < 1:
        time.sleep(0.05)
    flushed = time.time() - t0
    files, size = tree(data)
    t1 = time.time()
    sweep = json.loads(s.post(f"http://127.0.0.1:{s.http}/api/sweep", b"", timeout=900))
    swept = time.time() - t1
    to = json.loads(s.get("/api/tools?days=7")).get("to")
    stop = s.stop()
    files_after, size_after = tree(data)
    partial = answer.get("partialSuccess", {})
    print(f"2000 future days: body {len(body)} bytes, acked in {acked:.2f} s, "
          f"rejected {partial.get('rejectedSpans', 0)}; first flush committed {flushed:.2f} s after the post; "
          f"{files} files / {size / 2**20:.1f} MiB then; first sweep {swept:.2f} s ({sweep.get('days_scanned')} days scanned); "
          f"/api/tools ends on {to}; stop (final flush) {stop:.2f} s; {files_after} files / {size_after / 2**20:.1f} MiB after")


def wide_tools(binary, work, n):
    data = os.path.join(work, "wide")
    path = os.path.join(work, "wide.json")
    now = time.time_ns() - 3600 * 10**9
    with open(path, "wb") as f:
        f.write(otlp([span(i + 1, f"tool_{i:07d}", now + i * 1000) for i in range(n)]))
    env = dict(os.environ, STORMWATCH_RETENTION_DAYS="0", RUST_LOG="warn")
    subprocess.run([binary, "import", "--data-dir", data, path], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    config = os.path.join(work, "wide.toml")
    open(config, "w").close()
    s = Serve(binary, data, config)
    for attempt in ("first", "cached"):
        t = time.time()
        body = s.get("/api/tools")
        took = time.time() - t
        j = json.loads(body)
        print(f"{n} tools, /api/tools ({attempt}): {len(body) / 2**20:.2f} MiB, {len(j['tools'])} tools "
              f"(total_tools {j.get('total_tools', '-')}), {took:.3f} s")
    s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tools", type=int, default=200_000)
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="sw-timestamps-")
    future_days(a.bin, work)
    if a.tools:
        wide_tools(a.bin, work, a.tools)


if __name__ == "__main__":
    sys.exit(main())
