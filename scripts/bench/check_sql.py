#!/usr/bin/env python3
"""Check that the sweep benchmark compares the same detection: on small
stores, `stormwatch sweep`, duckdb_sweep.sql (through duckdb_sweep.py) and
the Python port of the rules (reference_sweep.py) must count the same
findings of every kind, for the same tools.

    python check_sql.py --stormwatch target/release/stormwatch [--generator BIN]
                        [--work DIR] [STORE ...]

A STORE is `DATA_DIR,NOW,SINCE_DAYS` (a stormwatch data directory, the
sweep's `--now` and its `--since` in days). Without any, the stores are
built first, under --work (default: a temporary directory, removed after):

- each file of fixtures/ imported alone (`stormwatch import`), and all of
  them together, swept at the `--now` their tests use;
- every captured framework run (fixtures/frameworks/), imported together,
  swept an hour after its last span (model spans between the attempts, or
  a retry decorator's attempts back to back);
- edge_cases.py's traces (the per-turn rules' edge cases), imported;
- silent_cases.py's fourteen days of traffic (the silent-tool rules'
  edge cases: a tool that stops while its agent's turns go on, tools with
  no success for days, a weekend dip, a rare tool), imported;
- retry_after_cases.py's turns (the ignored-Retry-After rule's edge cases:
  the wait on the tool span, on its HTTP child, in an exception's words,
  an HTTP-date, in a result; honoured, within the tolerance, under
  min_early, not more than the share, a child outside its call), imported;
- the sweep benchmark's generator (benches/sweep_data.rs; built with
  `cargo bench --bench sweep_data --no-run` unless --generator names it):
  3 days x 20 000 tool spans, and 26 days x 2 000 (its outage and slow days).

On every store the drivers of storms and wasted retries (`code`, `model`,
`mixed`; docs/detection.md §4.2 "Driver") are compared too: their count per
kind and driver, and per kind the model calls between the attempts and
those calls' input and output tokens (stormwatch's from the sweep's
evidence, every finding's kept).

Each sweep starts from a fresh state (`--rescan`, no state.sqlite). Prints a
table per store (kind: stormwatch / duckdb / reference) and exits 1, with
the tools each engine found for the kinds that differ, unless all three
agree everywhere.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from duckdb_sweep import KINDS  # noqa: E402
import edge_cases  # noqa: E402
import silent_cases  # noqa: E402
import retry_after_cases  # noqa: E402

# (name, fixture files, --now, --since days): the times tests/it uses.
FIXTURE_STORES = [
    ("search_flights_history", ["search_flights_history.json"], "2026-08-06", 40),
    ("storms_jul29", ["storms_jul29.json"], "2026-07-30", 2),
    ("fixed_loop", ["fixed_loop.json"], "2026-08-11", 2),
    ("retry_gate", ["retry_gate.json"], "2026-08-13", 2),
    ("all_fixtures", ["search_flights_history.json", "storms_jul29.json", "fixed_loop.json",
                      "retry_gate.json"], "2026-08-13", 40),
]
# (name, files of fixtures/frameworks/, --now, --since days): every captured
# framework run (model spans between the attempts, or a retry decorator's
# attempts back to back), the drivers of their storms compared too.
FRAMEWORK_STORES = [
    ("frameworks", "*.json", None, 10),
]
# (name, sweep_data flags, --now, --since days); the generator starts on 2026-07-07.
SYNTHETIC_STORES = [
    ("synthetic_3d", ["--days", "3", "--per-day", "20000"], "2026-07-10T02:00:00Z", 3),
    ("synthetic_26d", ["--days", "26", "--per-day", "2000"], "2026-08-02T02:00:00Z", 26),
]


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}{p.stdout}")
    return p.stdout


def generator():
    """The sweep_data bench binary, built (or found up to date) by cargo."""
    out = subprocess.run(
        ["cargo", "bench", "--locked", "--bench", "sweep_data", "--no-run", "--message-format", "json"],
        cwd=REPO, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"cargo bench --bench sweep_data --no-run failed:\n{out.stderr}")
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "sweep_data":
            if msg.get("executable"):
                return msg["executable"]
    sys.exit("could not find the sweep_data bench executable")


def stormwatch_env():
    # The fixtures are old: keep every day (retention counts from the clock).
    return dict(os.environ, RUST_LOG="warn", STORMWATCH_RETENTION_DAYS="0")


def build_stores(work, stormwatch, gen):
    env = stormwatch_env()
    stores = []
    for name, files, now, since in FIXTURE_STORES:
        data = os.path.join(work, name)
        paths = [os.path.join(REPO, "fixtures", f) for f in files]
        run([stormwatch, "import", "--data-dir", data] + paths, env)
        stores.append((name, data, now, since))
    for name, pattern, _, since in FRAMEWORK_STORES:
        data = os.path.join(work, name)
        paths = sorted(glob.glob(os.path.join(REPO, "fixtures", "frameworks", pattern)))
        run([stormwatch, "import", "--data-dir", data] + paths, env)
        stores.append((name, data, last_end(paths), since))
    for module in (edge_cases, silent_cases, retry_after_cases):
        name = module.__name__
        traces = os.path.join(work, name + ".json")
        with open(traces, "w", encoding="utf-8") as f:
            json.dump(module.build(), f, separators=(",", ":"))
        data = os.path.join(work, name)
        run([stormwatch, "import", "--data-dir", data, traces], env)
        stores.append((name, data, module.NOW, module.SINCE_DAYS))
    for name, flags, now, since in SYNTHETIC_STORES:
        data = os.path.join(work, name)
        run([gen, "--out", data] + flags)
        stores.append((name, data, now, since))
    return stores


def last_end(paths):
    """An hour after the newest span end of these OTLP JSON files (RFC 3339), so every turn settled."""
    end = 0
    for p in paths:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    end = max(end, int(s["endTimeUnixNano"]))
    t = time.gmtime(end // 1_000_000_000 + 3600)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


def stormwatch_counts(stormwatch, data, now, since):
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(os.path.join(data, "state.sqlite" + suffix))
        except FileNotFoundError:
            pass
    # Every finding's evidence kept, so its driver can be counted.
    config = os.path.join(data, "check_sql.toml")
    with open(config, "w", encoding="utf-8") as f:
        f.write("[signals]\nevidence_limit = 100000\n")
    out = run([stormwatch, "sweep", "--data-dir", data, "--now", now, "--since", f"{since}d",
               "--format", "json", "--rescan", "--config", config], stormwatch_env())
    report = json.loads(out)
    counts = {k: 0 for k in KINDS}
    tools = {k: set() for k in KINDS}
    drivers = {}
    totals = {}
    for s in report["signals"]:
        counts[s["kind"]] = counts.get(s["kind"], 0) + s["findings"]
        tools.setdefault(s["kind"], set()).add(s["tool"])
        for e in s["evidence"]:
            if e.get("driver"):
                key = f"{s['kind']}/{e['driver']['driver']}"
                drivers[key] = drivers.get(key, 0) + 1
                t = totals.setdefault(s["kind"], {"model_calls": 0, "input_tokens": 0, "output_tokens": 0})
                for k in t:
                    t[k] += int(e["driver"].get(k) or 0)
    return (counts, {k: sorted(v) for k, v in tools.items()}, dict(sorted(drivers.items())),
            dict(sorted(totals.items())))


def script_counts(script, data, now, since):
    out = run([sys.executable, os.path.join(HERE, script), "--data-dir", data, "--now", now,
               "--since-days", str(since)])
    r = json.loads(out)
    return r["findings"], r["tools"], r.get("drivers"), r.get("model_totals")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stormwatch", required=True, help="the stormwatch binary")
    ap.add_argument("--generator", help="the sweep_data bench binary (default: built with cargo)")
    ap.add_argument("--work", help="where to build the stores (default: a temporary directory)")
    ap.add_argument("stores", nargs="*", metavar="STORE", help="DATA_DIR,NOW,SINCE_DAYS")
    args = ap.parse_args()
    started = time.perf_counter()
    stormwatch = os.path.abspath(args.stormwatch)

    tmp = None
    if args.stores:
        stores = []
        for spec in args.stores:
            data, now, since = spec.rsplit(",", 2)
            stores.append((os.path.basename(data.rstrip("/")), data, now, int(since)))
    else:
        gen = args.generator or generator()
        work = args.work or (tmp := tempfile.mkdtemp(prefix="stormwatch-check-sql-"))
        os.makedirs(work, exist_ok=True)
        stores = build_stores(work, stormwatch, gen)
    built = time.perf_counter()

    failed = []
    try:
        for name, data, now, since in stores:
            t0 = time.perf_counter()
            engines = {
                "stormwatch": stormwatch_counts(stormwatch, data, now, since),
                "duckdb": script_counts("duckdb_sweep.py", data, now, since),
                "reference": script_counts("reference_sweep.py", data, now, since),
            }
            print(f"\n{name} (--now {now}, --since {since}d), {time.perf_counter() - t0:.1f} s")
            print(f"  {'kind':22} {'stormwatch':>10} {'duckdb':>7} {'reference':>9}")
            bad = []
            for kind in KINDS:
                n = [engines[e][0].get(kind, 0) for e in engines]
                t = [engines[e][1].get(kind, []) for e in engines]
                same = n[0] == n[1] == n[2] and t[0] == t[1] == t[2]
                print(f"  {kind:22} {n[0]:>10} {n[1]:>7} {n[2]:>9}{'' if same else '   <- differs'}")
                if not same:
                    bad.append(kind)
            for kind in bad:
                print(f"  {kind}: tools per engine")
                for e in engines:
                    print(f"    {e:11} {engines[e][0].get(kind, 0):>4}  {', '.join(engines[e][1].get(kind, [])) or '-'}")
            # The drivers of storms and wasted retries (detect/driver.rs), and
            # per kind their model calls and tokens.
            for what, col in (("drivers", 2), ("model calls", 3)):
                v = {e: engines[e][col] for e in engines}
                same = v["stormwatch"] == v["duckdb"] == v["reference"]
                print(f"  {what}:{'' if same else '   <- differs'}")
                for e in engines:
                    print(f"    {e:11} {json.dumps(v[e], sort_keys=True)}")
                if not same:
                    bad.append(what)
            if bad:
                failed.append((name, bad))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    total = time.perf_counter() - started
    print(f"\n{len(stores)} store(s) built in {built - started:.1f} s, checked in {total - (built - started):.1f} s")
    if failed:
        print("check_sql: the engines disagree on " +
              "; ".join(f"{n}: {', '.join(k)}" for n, k in failed), file=sys.stderr)
        sys.exit(1)
    print("check_sql: stormwatch, duckdb_sweep.sql and reference_sweep.py agree on every store"
          " (findings, tools, drivers, model calls and tokens)")


if __name__ == "__main__":
    main()
