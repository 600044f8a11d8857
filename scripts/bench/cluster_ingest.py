#!/usr/bin/env python3
"""Ingest throughput of ingest nodes over a shared store: one node against
two, in the same run, on this machine (moto's S3 server on 127.0.0.1).

    cargo build --release && cargo bench --bench ingest --no-run
    scripts/py/setup_venvs.sh          # venv-s3: moto
    python3 scripts/bench/cluster_ingest.py [--runs 3] [--batches 2000] [--clients 4]

Each run starts moto, then `serve --role ingest` nodes on free ports, and
drives them with the ingest benchmark's client (`benches/ingest.rs
--target`: OTLP/HTTP protobuf, 512 spans a request, keep-alive clients,
durable acknowledgement): one node with every batch, then two nodes with
half each, driven at once. A node's throughput is what its clients saw
acknowledged; two nodes' is all their spans over the longer of the two
drives. A local process (no shared store, `--role all`) is driven first
as the baseline. Each node is then stopped (SIGTERM: its last flush is shipped) and
the parts on the shared store are counted. Medians are printed.

On one machine two nodes share its cores, so this measures the overhead of
a second node, not a speed-up: on separate machines nodes share nothing
but the object store, where each writes one part per day per flush.
"""

import argparse
import glob
import json
import os
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
CACHE = os.environ.get("STORMWATCH_CACHE", os.path.expanduser("~/.cache/stormwatch"))


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bench_binary():
    found = sorted(
        glob.glob(os.path.join(target_dir(), "release", "deps", "ingest-*")),
        key=os.path.getmtime,
    )
    found = [f for f in found if os.access(f, os.X_OK) and not f.endswith(".d")]
    if not found:
        sys.exit("no ingest bench binary: run `cargo bench --bench ingest --no-run` first")
    return found[-1]


def wait_http(url, limit=60):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 500:
                    return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"{url} did not answer")


class Moto:
    def __init__(self):
        py = os.path.join(CACHE, "venv-s3", "bin", "python")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [py, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{self.port}/stormwatch", method="PUT"
                )
                urllib.request.urlopen(req, timeout=2)
                return
            except Exception:
                time.sleep(0.3)
        sys.exit("moto did not start")

    def env(self):
        env = dict(os.environ)
        env.update(
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{self.port}",
            AWS_ALLOW_HTTP="true",
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_REGION="us-east-1",
            STORMWATCH_RETENTION_DAYS="0",
        )
        return env

    def count_parts(self, prefix):
        """Parts on the shared store under `prefix`, by node."""
        url = f"http://127.0.0.1:{self.port}/stormwatch?list-type=2&prefix={prefix}/spans/"
        body = urllib.request.urlopen(url).read().decode()
        if "<IsTruncated>true</IsTruncated>" in body:
            sys.exit("more than one page of parts: list them with a continuation token")
        by_node = {}
        for key in re.findall(r"<Key>([^<]+\.parquet)</Key>", body):
            node = re.match(r"part-(.+)-\d+-[0-9a-f]+\.parquet", key.rsplit("/", 1)[1])
            name = node.group(1) if node else "?"
            by_node[name] = by_node.get(name, 0) + 1
        return by_node

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def start_node(moto, root, prefix, name):
    """An ingest node of `s3://stormwatch/{prefix}`, or with `prefix` None
    one local process (`--role all`, scheduled sweeps off): the baseline."""
    otlp, http = free_port(), free_port()
    log = open(os.path.join(root, f"{prefix or 'local'}-{name}.log"), "w")
    if prefix is None:
        config = os.path.join(root, "local.toml")
        with open(config, "w") as f:
            f.write("[sweep]\ninterval_secs = 0\n")
        role = ["--config", config]
    else:
        role = ["--role", "ingest", "--store", f"s3://stormwatch/{prefix}", "--node-id", name]
    proc = subprocess.Popen(
        [os.path.join(target_dir(), "release", "stormwatch"), "serve", *role,
         "--data-dir", os.path.join(root, prefix or "local", name),
         "--otlp-addr", f"127.0.0.1:{otlp}",
         "--otlp-grpc-addr", "none",
         "--http-addr", f"127.0.0.1:{http}"],
        env=moto.env(),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    wait_http(f"http://127.0.0.1:{http}/healthz")
    return proc, otlp


def drive(bench, port, batches, clients):
    start = time.perf_counter()
    out = subprocess.run(
        [bench, "--target", f"127.0.0.1:{port}", "--batches", str(batches), "--clients", str(clients)],
        capture_output=True, text=True, check=True,
    )
    return time.perf_counter() - start, out.stdout.strip()


def stop(proc):
    proc.terminate()
    if proc.wait(timeout=120) != 0:
        sys.exit("an ingest node did not stop cleanly")


def one_run(bench, batches, clients, run):
    moto = Moto()
    root = tempfile.mkdtemp(prefix="swci-")
    try:
        spans = batches * 512
        # One local process, every batch: the baseline.
        node, port = start_node(moto, root, None, "local")
        took0, line0 = drive(bench, port, batches, clients)
        stop(node)
        local = spans / took0
        # One node, every batch.
        node, port = start_node(moto, root, f"one{run}", "ing-a")
        took1, line1 = drive(bench, port, batches, clients)
        stop(node)
        one = spans / took1
        parts1 = moto.count_parts(f"one{run}")
        # Two nodes, half each, at once.
        a, pa = start_node(moto, root, f"two{run}", "ing-a")
        b, pb = start_node(moto, root, f"two{run}", "ing-b")
        procs = []
        t0 = time.perf_counter()
        for port in (pa, pb):
            procs.append(subprocess.Popen(
                [bench, "--target", f"127.0.0.1:{port}", "--batches", str(batches // 2),
                 "--clients", str(max(1, clients // 2))],
                stdout=subprocess.PIPE, text=True))
        lines = [p.communicate()[0].strip() for p in procs]
        took2 = time.perf_counter() - t0
        if any(p.returncode for p in procs):
            sys.exit("a driver failed")
        stop(a)
        stop(b)
        two = (batches // 2) * 2 * 512 / took2
        parts2 = moto.count_parts(f"two{run}")
        print(f"run {run}: local {local:,.0f} spans/s ({line0}); one node {one:,.0f} spans/s ({line1}); two nodes {two:,.0f} spans/s ({' | '.join(lines)}); parts shipped {parts1} / {parts2}")
        return local, one, two
    finally:
        moto.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batches", type=int, default=2000)
    p.add_argument("--clients", type=int, default=4)
    a = p.parse_args()
    bench = bench_binary()
    results = [one_run(bench, a.batches, a.clients, r + 1) for r in range(a.runs)]
    med = lambda i: statistics.median(r[i] for r in results)
    print(json.dumps({
        "local_spans_per_s": med(0),
        "one_node_spans_per_s": med(1),
        "two_nodes_spans_per_s": med(2),
        "one_node_over_local": statistics.median(r[1] / r[0] for r in results),
        "two_over_one": statistics.median(r[2] / r[1] for r in results),
        "runs": results,
    }, indent=1))


if __name__ == "__main__":
    main()
