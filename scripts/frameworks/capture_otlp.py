"""Capture what a program sends over OTLP/HTTP (protobuf) as one OTLP JSON document.

    capture_otlp.py --out FILE [--max-value-len N] -- CMD ARG... {endpoint} ...

Starts a receiver on 127.0.0.1 (a free port), runs CMD with every `{endpoint}`
argument replaced by its traces URL, answers each POST /v1/traces with an
empty ExportTraceServiceResponse, and when CMD has exited writes every
request's resourceSpans, in arrival order, as one ExportTraceServiceRequest in
the OTLP JSON encoding (hex trace and span ids, integer enums, lowerCamelCase
keys), which `stormwatch import` reads. CMD's stdout passes through.

String values longer than --max-value-len (default: no limit) are cut to that
length with "…[cut N chars]" appended, to keep fixtures small; the keys and
every other value stay as they were sent. Needs opentelemetry-proto
(venv-frameworks has it).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def hex_ids(node: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants hex ids."""
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ID_KEYS and isinstance(v, str) else hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [hex_ids(v) for v in node]
    return node


def cut(node: Any, limit: int | None) -> Any:
    if limit is None:
        return node
    if isinstance(node, dict):
        return {k: cut(v, limit) for k, v in node.items()}
    if isinstance(node, list):
        return [cut(v, limit) for v in node]
    if isinstance(node, str) and len(node) > limit:
        return node[:limit] + f"…[cut {len(node) - limit} chars]"
    return node


def one_span_a_line(doc: dict[str, Any]) -> str:
    """The document as compact JSON with one span a line, like fixtures/*.json."""
    dump = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)  # noqa: E731

    def head(obj: dict[str, Any], inner: str) -> str:
        rest = "".join(f"{dump(k)}:{dump(v)}," for k, v in obj.items() if k != inner)
        return "{" + rest + dump(inner) + ":["

    out = []
    for rs in doc.get("resourceSpans", []):
        scopes = []
        for ss in rs.get("scopeSpans", []):
            spans = ",\n".join(dump(s) for s in ss.get("spans", []))
            scopes.append(head(ss, "spans") + "\n" + spans + "\n]}")
        out.append(head(rs, "scopeSpans") + "\n" + ",\n".join(scopes) + "\n]}")
    return '{"resourceSpans":[' + ",\n".join(out) + "]}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-value-len", type=int, default=None)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the command after --")

    requests: list[ExportTraceServiceRequest] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.read_body()
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            if "protobuf" not in self.headers.get("Content-Type", ""):
                self.send_error(415, "only application/x-protobuf is captured")
                return
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            with lock:
                requests.append(req)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))
            chunks = []  # the JavaScript exporter streams its body
            while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    rc = subprocess.call([a.replace("{endpoint}", endpoint) for a in cmd])
    server.shutdown()
    if rc != 0:
        print(f"capture_otlp.py: the command exited with {rc}; nothing written", file=sys.stderr)
        return rc
    merged = ExportTraceServiceRequest()
    for req in requests:
        merged.resource_spans.extend(req.resource_spans)
    doc = cut(hex_ids(MessageToDict(merged, use_integers_for_enums=True)), args.max_value_len)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(one_span_a_line(doc))
    spans = sum(len(ss.spans) for rs in merged.resource_spans for ss in rs.scope_spans)
    print(f"capture_otlp.py: {len(requests)} request(s), {spans} span(s) -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
