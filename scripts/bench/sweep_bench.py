#!/usr/bin/env python3
"""The sweep benchmark: stormwatch's sweep and the same detection as SQL on
DuckDB, over the same Parquet parts, side by side in one run.

    cargo build --release && cargo bench --bench sweep_data --no-run
    python3 -m venv /tmp/duckvenv
    /tmp/duckvenv/bin/pip install -r scripts/bench/requirements.txt
    /tmp/duckvenv/bin/python scripts/bench/sweep_bench.py --data /tmp/swb [--runs 3] \
        [--stormwatch PATH] [--generator PATH]   # e.g. an older build, for before/after

Without a data directory at --data it first writes one with the
`sweep_data` bench (30 days x 1 M tool spans: about 2 GB, 80 s). Each run
measures, alternating the order so drift hits both alike:

- stormwatch cold: a fresh state.sqlite, every day read from its spans
  (`sweep --rescan`: no summary is read; final days are sealed as it goes);
- stormwatch sealed: a fresh state.sqlite again, every day from the
  summaries the cold run sealed;
- DuckDB: scripts/bench/duckdb_sweep.py with --threads 2;
- DuckDB lean: scripts/bench/duckdb_lean.py with --threads 2, the
  error-rate spike and retry storms alone in a query written to be fast
  (issue 30's yardstick for a cold read; daily counts from the spans);
- stormwatch unchanged: the same sweep again, state kept;
- stormwatch after one more day: a hard-linked copy of the store with one
  more day appended, swept with the state and summaries of the runs before;
- DuckDB lean, one more day: duckdb_lean.py on that copy for the new day
  alone (`--since-days 1`: its spans and the day before's, for turns across
  midnight; `--rollup store`: the daily counts from the store's rollup, as
  stormwatch reads them).

With --slices, each run also measures `serve`'s five-minute sweep: the
`sweep_data` bench's --slices mode (benches/sweep_data/slices.rs) writes
a few history days into a new store beside --data (`<data>-slices`),
delivers one more day of --slices-per-day tool spans (default --per-day)
through the store in 288 slices by span end time, and sweeps after each
(every --slices-every-th with that flag) with `now` at the slice's end;
then one cold read of the day, a sweep with a fresh state. It reports the
sweeps' median, p90, max and their sum over the day, the cold read, sum /
cold, and the peak RSS from the store's opening on (the process's,
history writing included, beside it; each slice's line is kept in
`<data>-slices.jsonl`). --slices-only runs that mode alone.

Wall time and peak RSS come from wait4() on each child process. Medians are
printed, with the ratio stormwatch / DuckDB per run and its median, and
beside it stormwatch / DuckDB lean (one more day: against the lean query
of the new day).
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))


def measure(cmd, env=None):
    """Run cmd; (wall seconds, peak RSS MiB, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{err.decode(errors='replace')}")
    return wall, usage.ru_maxrss / 1024, out


def generator():
    """The sweep_data bench binary (built by `cargo bench --no-run`)."""
    out = subprocess.run(
        ["cargo", "bench", "--bench", "sweep_data", "--no-run", "--message-format", "json"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "sweep_data":
            if msg.get("executable"):
                return msg["executable"]
    sys.exit("could not find the sweep_data bench executable")


def clear_state(data):
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(os.path.join(data, "state.sqlite" + suffix))
        except FileNotFoundError:
            pass


def counts(sweep_json):
    report = json.loads(sweep_json)
    out = {}
    for s in report["signals"]:
        out[s["kind"]] = out.get(s["kind"], 0) + s["findings"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=1_000_000)
    ap.add_argument("--now", default="2026-08-06")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stormwatch", help="the stormwatch binary (default: the release build)")
    ap.add_argument("--generator", help="the sweep_data bench binary (default: built with cargo)")
    ap.add_argument("--slices", action="store_true",
                    help="also measure the five-minute sweep over a day arriving in 288 slices")
    ap.add_argument("--slices-only", action="store_true", help="measure the five-minute sweep alone")
    ap.add_argument("--slices-per-day", type=int, help="tool spans of the sliced day (default: --per-day)")
    ap.add_argument("--slices-every", type=int, default=1,
                    help="sweep after every N-th slice only (a quicker run)")
    args = ap.parse_args()

    stormwatch = args.stormwatch or os.path.join(target_dir(), "release", "stormwatch")
    gen = args.generator or generator()
    if args.slices_only:
        slices_rows = [run_slices(args, gen) for _ in range(args.runs)]
        print_slices(args, slices_rows)
        return
    if not os.path.isdir(os.path.join(args.data, "spans")):
        subprocess.run([gen, "--out", args.data, "--days", str(args.days),
                        "--per-day", str(args.per_day)], check=True)
    # The store with one more day: parts hard-linked (they are never
    # modified in place), the new day written beside them.
    plus = args.data.rstrip("/") + "-plus1"
    if not os.path.isdir(plus):
        os.makedirs(plus)
        shutil.copytree(os.path.join(args.data, "spans"), os.path.join(plus, "spans"),
                        copy_function=os.link)
        shutil.copytree(os.path.join(args.data, "rollups"), os.path.join(plus, "rollups"))
        subprocess.run([gen, "--out", plus, "--days", "1", "--per-day", str(args.per_day),
                        "--append"], check=True, stderr=subprocess.DEVNULL)
    # The appended day is final an hour and a half after the next midnight.
    next_day = datetime.date.fromisoformat(args.now) + datetime.timedelta(days=1)
    next_now = f"{next_day.isoformat()}T02:00:00Z"
    days_since = f"{args.days}d"
    sweep = [stormwatch, "sweep", "--now", args.now, "--since", days_since, "--format", "json"]
    duck = [sys.executable, os.path.join(HERE, "duckdb_sweep.py"), "--data-dir", args.data,
            "--now", args.now, "--since-days", str(args.days), "--threads", "2"]
    lean = [sys.executable, os.path.join(HERE, "duckdb_lean.py"), "--data-dir", args.data,
            "--now", args.now, "--since-days", str(args.days), "--threads", "2"]
    env = dict(os.environ, RUST_LOG="warn")

    rows = {"cold": [], "duckdb": [], "lean": [], "sealed": [], "unchanged": [], "plus1": [], "lean_plus1": []}
    found = {}
    for run in range(args.runs):
        order = ["cold", "duckdb", "lean"] if run % 2 == 0 else ["lean", "duckdb", "cold"]
        for what in order:
            if what == "cold":
                clear_state(args.data)
                wall, rss, out = measure(sweep[:1] + ["--data-dir", args.data] + sweep[1:] + ["--rescan"], env)
                found["stormwatch"] = counts(out)
            elif what == "duckdb":
                wall, rss, out = measure(duck)
                found["duckdb"] = json.loads(out)["findings"]
            else:
                wall, rss, out = measure(lean)
                found["lean"] = json.loads(out)["findings"]
            rows[what].append((wall, rss))
        clear_state(args.data)
        wall, rss, out = measure(sweep[:1] + ["--data-dir", args.data] + sweep[1:], env)
        rows["sealed"].append((wall, rss))
        found["sealed"] = counts(out)
        wall, rss, _ = measure(sweep[:1] + ["--data-dir", args.data] + sweep[1:], env)
        rows["unchanged"].append((wall, rss))
        clear_state(plus)
        shutil.copy2(os.path.join(args.data, "state.sqlite"), os.path.join(plus, "state.sqlite"))
        # The sealed summaries the earlier sweeps left, as a server keeps them.
        shutil.rmtree(os.path.join(plus, "sealed"), ignore_errors=True)
        if os.path.isdir(os.path.join(args.data, "sealed")):
            shutil.copytree(os.path.join(args.data, "sealed"), os.path.join(plus, "sealed"))
        plus_cmd = [stormwatch, "sweep", "--data-dir", plus, "--now", next_now,
                    "--since", days_since, "--format", "json"]
        wall, rss, out = measure(plus_cmd, env)
        rows["plus1"].append((wall, rss))
        report = json.loads(out)
        wall, rss, _ = measure([sys.executable, os.path.join(HERE, "duckdb_lean.py"), "--data-dir", plus,
                                "--now", next_now, "--since-days", "1", "--rollup", "store", "--threads", "2"])
        rows["lean_plus1"].append((wall, rss))
        print(f"run {run + 1}: " + ", ".join(
            f"{k} {v[-1][0]:.2f} s / {v[-1][1]:.0f} MiB" for k, v in rows.items())
            + f" (plus1 read {report['days_scanned']} day(s), reused {report['days_reused']})",
            flush=True)

    med = {k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v))
           for k, v in rows.items()}
    ratios = [c[0] / d[0] for c, d in zip(rows["cold"], rows["duckdb"])]
    sealed_ratios = [c[0] / d[0] for c, d in zip(rows["sealed"], rows["duckdb"])]
    lean_ratios = [c[0] / d[0] for c, d in zip(rows["cold"], rows["lean"])]
    sealed_lean_ratios = [c[0] / d[0] for c, d in zip(rows["sealed"], rows["lean"])]
    plus1_lean_ratios = [c[0] / d[0] for c, d in zip(rows["plus1"], rows["lean_plus1"])]
    print()
    print(f"{args.days} days x {args.per_day} tool spans/day, {args.runs} runs, medians:")
    for k, label in [("cold", "stormwatch sweep, every day read"),
                     ("duckdb", "DuckDB, same detection in SQL"),
                     ("lean", "DuckDB lean: spikes and storms"),
                     ("sealed", "stormwatch sweep, sealed days"),
                     ("unchanged", "stormwatch sweep, nothing changed"),
                     ("plus1", "stormwatch sweep after one more day"),
                     ("lean_plus1", "DuckDB lean: the one more day")]:
        print(f"  {label:40} {med[k][0]:8.2f} s  peak RSS {med[k][1]:7.0f} MiB")
    print(f"  cold / DuckDB time: median {statistics.median(ratios):.2f} "
          f"(runs {', '.join(f'{r:.2f}' for r in ratios)}); "
          f"cold / DuckDB lean: median {statistics.median(lean_ratios):.2f} "
          f"(runs {', '.join(f'{r:.2f}' for r in lean_ratios)})")
    print(f"  sealed / DuckDB time: median {statistics.median(sealed_ratios):.2f} "
          f"(runs {', '.join(f'{r:.2f}' for r in sealed_ratios)}); "
          f"sealed / DuckDB lean: median {statistics.median(sealed_lean_ratios):.2f} "
          f"(runs {', '.join(f'{r:.2f}' for r in sealed_lean_ratios)})")
    print(f"  one more day / DuckDB lean of that day: median {statistics.median(plus1_lean_ratios):.2f} "
          f"(runs {', '.join(f'{r:.2f}' for r in plus1_lean_ratios)})")
    print(f"  findings, stormwatch: {json.dumps(found.get('stormwatch'), sort_keys=True)}")
    print(f"  findings, sealed:     {json.dumps(found.get('sealed'), sort_keys=True)}")
    print(f"  findings, DuckDB:     {json.dumps(found.get('duckdb'), sort_keys=True)}")
    print(f"  findings, DuckDB lean: {json.dumps(found.get('lean'), sort_keys=True)}")
    # The lean query finds two kinds; they must be the full detection's.
    for kind, n in (found.get("lean") or {}).items():
        if n != (found.get("duckdb") or {}).get(kind):
            print(f"  MISMATCH: DuckDB lean finds {n} {kind}, DuckDB {(found.get('duckdb') or {}).get(kind)}")
    if args.slices:
        slices_rows = [run_slices(args, gen) for _ in range(args.runs)]
        print_slices(args, slices_rows)


def run_slices(args, gen):
    """One run of the five-minute sweep (sweep_data --slices) on a new store;
    its summary line, with the process's wall time and peak RSS."""
    out = args.data.rstrip("/") + "-slices"
    for path in (out, out + ".slices-spill"):
        shutil.rmtree(path, ignore_errors=True)
    per_day = args.slices_per_day or args.per_day
    wall, rss, stdout = measure([gen, "--slices", "--out", out, "--per-day", str(per_day),
                                 "--sweep-every", str(args.slices_every)])
    shutil.rmtree(out, ignore_errors=True)
    # Every slice's line, kept for a closer look (sweep time by hour).
    with open(out + ".jsonl", "wb") as f:
        f.write(stdout)
    lines = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    summary = next(line for line in lines if line.get("mode") == "slices")
    summary["wall_s"], summary["wait4_rss_mib"] = wall, rss
    summary["flush_s"] = sum(line.get("flush_s", 0) for line in lines if "slice" in line)
    print(f"slices run: {summary['sweeps']} sweeps, median {summary['median_s']:.3f} s, "
          f"p90 {summary['p90_s']:.3f} s, max {summary['max_s']:.3f} s, sum {summary['sum_s']:.1f} s; "
          f"cold read {summary['cold_s']:.2f} s, sum / cold {summary['sum_over_cold']:.1f}; "
          f"peak RSS {summary['peak_rss_mib']:.0f} MiB (the process {rss:.0f}); {wall:.0f} s in all",
          flush=True)
    return summary


def print_slices(args, rows):
    """The five-minute sweep's medians over the runs."""
    per_day = args.slices_per_day or args.per_day

    def med(key):
        return statistics.median(r[key] for r in rows)

    every = f", a sweep after every {args.slices_every}th" if args.slices_every > 1 else ""
    print()
    print(f"serve's five-minute sweep: a day of {per_day} tool spans in {rows[0]['slices']} slices"
          f"{every}, {len(rows)} run(s), medians:")
    print(f"  {'one sweep: median':40} {med('median_s'):8.3f} s")
    print(f"  {'one sweep: p90':40} {med('p90_s'):8.3f} s")
    print(f"  {'one sweep: max':40} {med('max_s'):8.3f} s")
    label = "the day's sweeps together" + (" (estimated)" if args.slices_every > 1 else "")
    print(f"  {label:40} {med('sum_day_s'):8.2f} s")
    print(f"  {'one cold read of the day':40} {med('cold_s'):8.2f} s")
    print(f"  {'peak RSS, store and sweeps':40} {med('peak_rss_mib'):8.0f} MiB")
    if all("cold_peak_rss_mib" in r for r in rows):
        print(f"  {'peak RSS, the cold read after':40} {med('cold_peak_rss_mib'):8.0f} MiB")
    print(f"  {'peak RSS, the process (with the setup)':40} {med('wait4_rss_mib'):8.0f} MiB")
    print(f"  the day's sweeps / cold read: median {med('sum_over_cold'):.1f} "
          "(runs " + ", ".join(f"{r['sum_over_cold']:.1f}" for r in rows) + ")")
    for r in rows:
        if not r["findings_match"]:
            print(f"  MISMATCH: the last sweep finds {json.dumps(r['findings_last_sweep'], sort_keys=True)}, "
                  f"the cold read {json.dumps(r['findings_cold'], sort_keys=True)}")
    print(f"  findings, cold read of the day: {json.dumps(rows[-1]['findings_cold'], sort_keys=True)}")


if __name__ == "__main__":
    main()
