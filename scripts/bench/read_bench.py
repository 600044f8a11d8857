#!/usr/bin/env python3
"""The read-path benchmark (not a test): `GET /api/tools` and the MCP tools
`list_tools` and `get_trace` under load, with wrk, against a running
`stormwatch serve`.

    cargo build --release && cargo bench --bench sweep_data --no-run
    apt-get install wrk
    python3 scripts/bench/read_bench.py --work /tmp/readbench [--runs 3] [--seconds 10] \
        [--baseline OLD_STORMWATCH]   # /api/tools of an older build, on copies of the stores

Three stores, each served by its own `serve` on free ports:

- demo: `serve --demo` (nine tools, the seeds' incident);
- wide: 1000 tools x 90 days written by the `sweep_data` bench
  (`--tools 1000 --days 90 --per-day 100000`), swept once;
- trace: one trace of 10 000 spans (a long agent session: 2 000 turns'
  worth of tool calls, retries among them), imported from OTLP JSON.

Each run measures, with wrk's latency distribution:

- `/api/tools?days=30` at 50 connections (demo, wide);
- MCP `tools/call list_tools` at 50 connections (demo, wide), stateless
  2026-07-28 requests (one POST each, no session);
- MCP `tools/call get_trace` of the 10 000-span trace at 10 connections.

p50 / p99 and requests per second are printed per run, then their medians.
The goals (issue 14): p99 < 10 ms for /api/tools and list_tools at 50
connections, < 50 ms for get_trace at 10.
"""

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

LUA = """
wrk.method = os.getenv("WRK_METHOD") or "GET"
local body = os.getenv("WRK_BODY")
if body and body ~= "" then
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = os.getenv("WRK_TOOL")
end
local failed = 0
response = function(status, headers, body)
  if status ~= 200 or (body and string.find(body, '"isError":true', 1, true)) then
    failed = failed + 1
    if failed == 1 then io.stderr:write("bad answer " .. status .. ": " .. string.sub(body or "", 1, 300) .. "\\n") end
  end
end
"""


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def binary(name, bench=False):
    d = os.path.join(target_dir(), "release")
    if not bench:
        return os.path.join(d, name)
    deps = os.path.join(d, "deps")
    found = sorted(
        (os.path.join(deps, f) for f in os.listdir(deps)
         if f.startswith(name + "-") and os.access(os.path.join(deps, f), os.X_OK) and "." not in f),
        key=os.path.getmtime,
    )
    if not found:
        sys.exit(f"no {name} bench binary under {deps}: run cargo bench --bench {name} --no-run")
    return found[-1]


class Serve:
    def __init__(self, data, extra=(), bin=None, tag="serve"):
        self.http = free_port()
        self.log = open(f"{data}.{tag}.log", "w")
        self.p = subprocess.Popen(
            [bin or binary("stormwatch"), "serve", "--data-dir", data,
             "--otlp-addr", f"127.0.0.1:{free_port()}", "--otlp-grpc-addr", "none",
             "--http-addr", f"127.0.0.1:{self.http}", "--sweep-interval", "0", *extra],
            stdout=subprocess.DEVNULL, stderr=self.log,
            env={**os.environ, "STORMWATCH_RETENTION_DAYS": "0", "RUST_LOG": "warn"},
        )
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthz", timeout=1)
                return
            except Exception:
                if self.p.poll() is not None:
                    sys.exit(f"serve exited; see {self.log.name}")
                time.sleep(0.2)
        sys.exit("serve did not start")

    def url(self, path):
        return f"http://127.0.0.1:{self.http}{path}"

    def stop(self):
        self.p.terminate()
        self.p.wait(60)


def mcp_body(tool, arguments):
    return json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}},
    })


def call(serve, tool, arguments):
    """One MCP call, for checking the answer before loading it."""
    req = urllib.request.Request(serve.url("/mcp"), data=mcp_body(tool, arguments).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool})
    out = json.load(urllib.request.urlopen(req, timeout=60))
    result = out.get("result") or sys.exit(f"{tool}: {out}")
    if result.get("isError"):
        sys.exit(f"{tool}: {result}")
    return result["structuredContent"]


def wrk(url, conns, seconds, lua, body=None, tool=None):
    env = {**os.environ, "WRK_METHOD": "POST" if body else "GET",
           "WRK_BODY": body or "", "WRK_TOOL": tool or ""}
    out = subprocess.run(
        ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", lua, url],
        capture_output=True, text=True, env=env, check=True)
    if "bad answer" in out.stderr:
        sys.exit(out.stderr)
    text = out.stdout

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if errors:
        sys.exit(f"{url}: {errors.group(1)} non-2xx answers\n{text}")
    return {"p50_ms": ms("50"), "p99_ms": ms("99"), "rps": rps}


def wide_store(work):
    data = os.path.join(work, "wide")
    if not os.path.exists(os.path.join(data, "rollups")):
        subprocess.run([binary("sweep_data", bench=True), "--out", data, "--days", "90",
                        "--per-day", "100000", "--tools", "1000", "--first", "2026-05-01"], check=True)
        subprocess.run([binary("stormwatch"), "sweep", "--data-dir", data, "--now", "2026-07-30",
                        "--format", "json"], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "STORMWATCH_RETENTION_DAYS": "0"})
    return data


def long_trace(work):
    """One trace of 10 000 spans: a root, 2 000 turns' LLM spans, 7 999 tool calls."""
    data = os.path.join(work, "trace")
    trace_id = "7ace0000000000000000000000001000"
    if os.path.exists(os.path.join(data, "spans")):
        return data, trace_id
    rng = random.Random(14)
    t0 = 1_785_283_200_000_000_000  # 2026-07-29
    spans = [{"traceId": trace_id, "spanId": "%016x" % 1, "name": "invoke_agent", "kind": 1,
              "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t0 + 3_600_000_000_000),
              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]
    n, t = 2, t0
    tools = [f"tool_{i:02d}" for i in range(40)]
    while n <= 10_000:
        # An LLM span, then calls of one tool, retried when it fails.
        spans.append({"traceId": trace_id, "spanId": "%016x" % n, "parentSpanId": "%016x" % 1,
                      "name": "chat", "kind": 3, "startTimeUnixNano": str(t), "endTimeUnixNano": str(t + 200_000_000),
                      "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]})
        n += 1
        t += 200_000_000
        tool = rng.choice(tools)
        for attempt in range(rng.choice([1, 1, 1, 2, 3, 6])):
            if n > 10_000:
                break
            fail = attempt < 2 and rng.random() < 0.5
            span = {"traceId": trace_id, "spanId": "%016x" % n, "parentSpanId": "%016x" % 1,
                    "name": f"execute_tool {tool}", "kind": 1, "startTimeUnixNano": str(t),
                    "endTimeUnixNano": str(t + 50_000_000),
                    "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                   {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
                                   {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": json.dumps({"q": n % 7})}}]}
            if fail:
                span["status"] = {"code": 2, "message": "HTTP 503"}
                span["attributes"].append({"key": "error.type", "value": {"stringValue": "503"}})
            spans.append(span)
            n += 1
            t += 60_000_000
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "long-agent"}}]},
                               "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}
    path = os.path.join(work, "long_trace.json")
    with open(path, "w") as f:
        json.dump(body, f)
    subprocess.run([binary("stormwatch"), "import", "--data-dir", data, path], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "STORMWATCH_RETENTION_DAYS": "0"})
    return data, trace_id


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "stormwatch-readbench"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--baseline", help="an older stormwatch binary: its /api/tools is measured too, on copies of the same stores")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is required (apt-get install wrk)")
    os.makedirs(args.work, exist_ok=True)
    lua = os.path.join(args.work, "bench.lua")
    with open(lua, "w") as f:
        f.write(LUA)

    demo_dir = os.path.join(args.work, "demo")
    wide_dir = wide_store(args.work)
    trace_dir, trace_id = long_trace(args.work)
    servers = {"demo": Serve(demo_dir, ["--demo"]), "wide": Serve(wide_dir), "trace": Serve(trace_dir)}
    if args.baseline:
        # Copies, so the baseline's own files (its state schema, its demo load) stay apart.
        for name, src in (("demo", None), ("wide", wide_dir)):
            dst = os.path.join(args.work, f"{name}-baseline")
            if src and not os.path.exists(dst):
                shutil.copytree(src, dst)
            servers[f"{name}-baseline"] = Serve(dst, ["--demo"] if name == "demo" else [], bin=args.baseline, tag="baseline")
    try:
        wide_tools = call(servers["wide"], "list_tools", {"days": 30})
        demo_tools = call(servers["demo"], "list_tools", {"days": 30})
        trace = call(servers["trace"], "get_trace", {"trace_id": trace_id, "day": "2026-07-29"})
        print(f"wide store: {wide_tools['total']} tools in the window; demo: {demo_tools['total']}; "
              f"trace: {trace['total_spans']} spans, {len(trace['loops'])} loops", flush=True)
        cases = [
            ("demo /api/tools", servers["demo"], "/api/tools?days=30", 50, None, None),
            ("wide /api/tools", servers["wide"], "/api/tools?days=30", 50, None, None),
            ("demo list_tools", servers["demo"], "/mcp", 50, mcp_body("list_tools", {"days": 30}), "list_tools"),
            ("wide list_tools", servers["wide"], "/mcp", 50, mcp_body("list_tools", {"days": 30}), "list_tools"),
            ("get_trace 10k spans", servers["trace"], "/mcp", 10,
             mcp_body("get_trace", {"trace_id": trace_id, "day": "2026-07-29"}), "get_trace"),
        ]
        if args.baseline:
            cases[0:0] = [
                ("demo /api/tools (baseline)", servers["demo-baseline"], "/api/tools?days=30", 50, None, None),
                ("wide /api/tools (baseline)", servers["wide-baseline"], "/api/tools?days=30", 50, None, None),
            ]
        results = {c[0]: [] for c in cases}
        for run in range(args.runs):
            for name, srv, path, conns, body, tool in cases:
                r = wrk(srv.url(path), conns, args.seconds, lua, body, tool)
                results[name].append(r)
                print(f"run {run + 1} {name:28s} c={conns:2d}  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  {r['rps']:9.0f} req/s", flush=True)
        print("\nmedians")
        for name, rs in results.items():
            med = {k: statistics.median(r[k] for r in rs) for k in ("p50_ms", "p99_ms", "rps")}
            print(f"{name:28s}  p50 {med['p50_ms']:7.2f} ms  p99 {med['p99_ms']:7.2f} ms  {med['rps']:9.0f} req/s")
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
