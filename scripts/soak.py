#!/usr/bin/env python3
"""Soak: `stormwatch serve` at steady load, with sweeps and alerts going.

Starts the server on a fresh data dir with a sweep every 30 s and one signed
webhook target (a local receiver here that answers 503 to every fifth
delivery, so retries run too), then sends agent turns over OTLP/HTTP
protobuf at a steady rate for the given time: most turns call a tool or two
and succeed; one in ten is a retry storm against a failing tool. Every few
seconds it samples the server's RSS, open file descriptors and threads, and
reads /metrics. At the end: SIGTERM (the server must exit 0), a table of the
samples, and the summary lines BENCHMARKS.md quotes.

    $STORMWATCH_CACHE/venv-proto/bin/python scripts/soak.py \\
        --bin "$CARGO_TARGET_DIR/release/stormwatch" --minutes 10 --rate 500

The venv is the one scripts/py/setup_venvs.sh makes (opentelemetry-proto).
"""

import argparse
import http.server
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hook(http.server.BaseHTTPRequestHandler):
    hits = 0
    refused = 0
    lock = threading.Lock()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with Hook.lock:
            Hook.hits += 1
            fail = Hook.hits % 5 == 0
            Hook.refused += fail
        self.send_response(503 if fail else 204)
        if fail:
            self.send_header("retry-after", "1")
        self.end_headers()

    def log_message(self, *args):
        pass


def kv(key, value):
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def turn(rng: random.Random, n: int) -> list:
    """One agent turn: the agent span and its tool calls."""
    trace = rng.randbytes(16)
    root = rng.randbytes(8)
    now = time.time_ns()
    session = f"soak-{n % 500}"
    spans = []
    storm = n % 10 == 0
    tools = ["search_flights"] * 8 if storm else rng.sample(
        ["search_hotels", "get_weather", "book_car", "lookup_loyalty"], rng.randint(1, 3))
    t = now - 2_000_000_000
    for i, tool in enumerate(tools):
        failed = storm and i < 7
        start, end = t, t + 30_000_000
        t = end + (5_000_000 if storm else 200_000_000)
        spans.append(Span(
            trace_id=trace, span_id=rng.randbytes(8), parent_span_id=root,
            name=f"execute_tool {tool}", kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start, end_time_unix_nano=end,
            attributes=[kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", tool),
                        kv("gen_ai.tool.call.id", f"call_{n}_{i}"), kv("session.id", session),
                        kv("gen_ai.tool.call.arguments", '{"from":"SFO","to":"JFK"}' if storm else "{}"),
                        kv("http.response.status_code", 503 if failed else 200)],
            status=Status(code=Status.STATUS_CODE_ERROR, message="HTTP 503") if failed else Status()))
    spans.append(Span(
        trace_id=trace, span_id=root, name="invoke_agent travel-agent",
        start_time_unix_nano=now - 2_100_000_000, end_time_unix_nano=t,
        attributes=[kv("gen_ai.operation.name", "invoke_agent"), kv("session.id", session)]))
    return spans


def sender(url, rate, stop, stats, seed):
    rng = random.Random(seed)
    n = seed * 10_000_000
    batch_turns = 10
    next_at = time.monotonic()
    while not stop.is_set():
        spans = []
        for _ in range(batch_turns):
            spans += turn(rng, n)
            n += 1
        body = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=Resource(attributes=[kv("service.name", "soak-agent")]),
            scope_spans=[ScopeSpans(spans=spans)])]).SerializeToString()
        req = urllib.request.Request(url, data=body, headers={"content-type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
            stats["acked"] += len(spans)
        except Exception as e:  # noqa: BLE001 - counted, the soak goes on
            stats["errors"] += 1
            stats["last_error"] = repr(e)
        next_at += len(spans) / rate
        time.sleep(max(0.0, next_at - time.monotonic()))


def proc(pid):
    status = open(f"/proc/{pid}/status").read().splitlines()
    field = lambda k: int(next(l for l in status if l.startswith(k)).split()[1])  # noqa: E731
    return field("VmRSS:") / 1024, len(os.listdir(f"/proc/{pid}/fd")), field("Threads:")


def scrape(base):
    out = {}
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=float, default=500, help="spans per second")
    ap.add_argument("--sample", type=float, default=10, help="seconds between samples")
    args = ap.parse_args()

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="stormwatch-soak.")
    cfg = os.path.join(tmp, "stormwatch.toml")
    with open(cfg, "w") as f:
        f.write(f"""[sweep]
interval_secs = 30
since_days = 2

[alert]
backoff_base_ms = 200
backoff_cap_secs = 5

[[alert.targets]]
name = "soak-hook"
kind = "webhook"
url = "http://127.0.0.1:{hook.server_address[1]}/hook"
""")
    otlp, http_port = free_port(), free_port()
    base = f"http://127.0.0.1:{http_port}"
    log = open(os.path.join(tmp, "server.log"), "w")
    server = subprocess.Popen(
        [args.bin, "serve", "--config", cfg, "--data-dir", os.path.join(tmp, "data"),
         "--otlp-addr", f"127.0.0.1:{otlp}", "--otlp-grpc-addr", "none", "--http-addr", f"127.0.0.1:{http_port}", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1).read()
            break
        except Exception:  # noqa: BLE001
            time.sleep(0.1)
    stop = threading.Event()
    stats = {"acked": 0, "errors": 0, "last_error": ""}
    senders = [threading.Thread(target=sender, args=(f"http://127.0.0.1:{otlp}/v1/traces", args.rate / 2, stop, stats, s))
               for s in (1, 2)]
    for t in senders:
        t.start()
    samples = []
    started = time.monotonic()
    print("   t_s  rss_mib  fds  threads  spans_stored  sweeps_ok  sweeps_failed  signals_open  deliveries")
    while time.monotonic() - started < args.minutes * 60:
        time.sleep(args.sample)
        rss, fds, threads = proc(server.pid)
        m = scrape(base)
        opened = sum(v for k, v in m.items() if k.startswith("stormwatch_signals{") and
                     any(s in k for s in ('"new"', '"ongoing"', '"regressed"')))
        delivered = sum(v for k, v in m.items() if k.startswith("stormwatch_alert_deliveries_total{"))
        row = (time.monotonic() - started, rss, fds, threads, m.get("stormwatch_spans_stored_total", 0),
               m.get('stormwatch_sweeps_total{outcome="ok"}', 0), m.get('stormwatch_sweeps_total{outcome="failed"}', 0),
               opened, delivered)
        samples.append(row)
        print("%6.0f %8.1f %4d %8d %13d %10d %14d %13d %11d" % row, flush=True)
    stop.set()
    for t in senders:
        t.join()
    t0 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=60)
    stopped = time.monotonic() - t0
    hook.shutdown()

    n = len(samples)
    head = samples[max(1, n // 10): max(2, n // 10 + 6)]  # after the first minute
    tail = samples[-6:]
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    print()
    print(f"soak: {args.minutes:g} min at {args.rate:g} spans/s; {stats['acked']} spans acknowledged, "
          f"{stats['errors']} failed requests{' (' + stats['last_error'] + ')' if stats['errors'] else ''}")
    print(f"rss: median {med(head, 1):.0f} MiB after the first minute, {med(tail, 1):.0f} MiB in the last minute, "
          f"max {max(r[1] for r in samples):.0f} MiB")
    print(f"fds: {min(r[2] for r in samples)}-{max(r[2] for r in samples)} (first {samples[0][2]}, last {samples[-1][2]}); "
          f"threads {min(r[3] for r in samples)}-{max(r[3] for r in samples)}")
    print(f"sweeps: {samples[-1][5]:.0f} ok, {samples[-1][6]:.0f} failed; alert deliveries {samples[-1][8]:.0f} "
          f"(receiver: {Hook.hits} requests, {Hook.refused} answered 503)")
    print(f"SIGTERM: exit {code} in {stopped:.1f} s; data and log in {tmp}")
    return 0 if code == 0 and stats["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
