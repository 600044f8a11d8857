"""Seed inputs for the cargo-fuzz targets, cut from the repository's OTLP
fixtures: small requests (a few spans each, every framework's shapes:
pydantic-ai, the Vercel AI SDK, the hand-written incident), as OTLP/JSON,
as OTLP protobuf, compressed under each content encoding, and in each file
layout `import` reads. Run once by scripts/fuzz.sh when a target's corpus
directory is empty; the minimized corpora are committed under fuzz/corpus/.

Needs the `opentelemetry-proto` package (the venv-proto venv)."""

import base64
import copy
import gzip
import json
import pathlib
import struct
import sys
import zlib

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = [
    "fixtures/frameworks/pydantic-ai-storm.json",
    "fixtures/frameworks/pydantic-ai-healthy.json",
    "fixtures/frameworks/vercel-ai-6-storm.json",
    "fixtures/frameworks/vercel-ai-7-storm.json",
    "fixtures/storms_jul29.json",
]


def cuts(doc, per=3):
    """Requests of `per` consecutive spans from each scope of `doc`."""
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            spans = ss["spans"]
            for i in range(0, min(len(spans), 4 * per), per):
                out = {"resourceSpans": [copy.deepcopy({k: v for k, v in rs.items() if k != "scopeSpans"})]}
                part = copy.deepcopy({k: v for k, v in ss.items() if k != "spans"})
                part["spans"] = copy.deepcopy(spans[i : i + per])
                out["resourceSpans"][0]["scopeSpans"] = [part]
                yield out


def hex_to_b64(doc):
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping wants base64."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if s.get(k):
                        s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
                for link in s.get("links", []):
                    for k in ("traceId", "spanId"):
                        if link.get(k):
                            link[k] = base64.b64encode(bytes.fromhex(link[k])).decode()
    return doc


def protobuf(doc):
    msg = trace_service_pb2.ExportTraceServiceRequest()
    json_format.ParseDict(hex_to_b64(doc), msg, ignore_unknown_fields=True)
    return msg.SerializeToString()


def main(out_root):
    out_root = pathlib.Path(out_root)
    requests = []
    for f in FIXTURES:
        requests.extend(cuts(json.loads((ROOT / f).read_text())))
    seeds = {name: [] for name in ("decode_json", "decode_protobuf", "decompress", "read_file")}
    for doc in requests:
        text = json.dumps(doc, separators=(",", ":")).encode()
        pb = protobuf(doc)
        seeds["decode_json"].append(text)
        seeds["decode_protobuf"].append(pb)
        seeds["decompress"] += [gzip.compress(pb), zlib.compress(text), zstd(pb)]
        # read_file: the first byte picks the file name (see the target).
        seeds["read_file"] += [
            b"\x00" + text,  # .json
            b"\x01" + text + b"\n" + text + b"\n",  # .jsonl
            b"\x02" + pb,  # .pb, bare
            b"\x02" + struct.pack(">I", len(pb)) + pb + struct.pack(">I", len(pb)) + pb,  # framed
            b"\x03" + gzip.compress(text + b"\n" + text + b"\n"),  # .jsonl.gz
            b"\x04" + gzip.compress(pb),  # no extension: sniffed
        ]
    for name, items in seeds.items():
        d = out_root / name
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(items):
            (d / f"seed-{i:03}").write_bytes(data)
        print(f"{name}: {len(items)} seeds", file=sys.stderr)


def zstd(data):
    """A zstd frame with one raw (uncompressed) block: the format without a
    zstd package (RFC 8878 §3.1.1)."""
    header = bytes([0x28, 0xB5, 0x2F, 0xFD])  # magic
    # Frame header descriptor: single segment, 4-byte content size.
    fhd = 0b1010_0000
    size = struct.pack("<I", len(data))
    block_header = (len(data) << 3) | 0b001  # last block, raw
    block = struct.pack("<I", block_header)[:3]
    return header + bytes([fhd]) + size + block + data


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus")
