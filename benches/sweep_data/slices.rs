//! `--slices`: `serve`'s five-minute sweep over one day of the generator's
//! traffic arriving through the store, each sweep timed.
//!
//!     cargo bench --bench sweep_data -- --slices --out DIR [--per-day 1000000]
//!         [--tools 40] [--first 2026-07-07] [--history 3] [--count 288]
//!         [--batch 512] [--sweep-every 1]
//!
//! `DIR` must not hold a store yet. First `--history` days are written as
//! parts straight away, as the generator's other mode writes them (the
//! daily rules' baseline: `min_baseline_days` is 3), with their rollup.
//! Then the next day's traffic is generated and cut into `--count` slices
//! by span end time: a span arrives when it ends, as exporters send them,
//! so a trace's root comes after its calls, often in a later slice. The
//! day is delivered slice by slice to an open [`Store`] (WAL, memtable,
//! flusher, compaction of flush outputs; `serve`'s store options) in
//! OTLP requests of `--batch` spans, each prepared as the receiver
//! prepares one and submitted; the acknowledgements are awaited, the store
//! flushed (as the scheduler flushes before each sweep), and one sweep run
//! with `now` at the slice's end. Only the sweep call is timed
//! ([`Sweeper::sweep`], the one call the scheduler makes). `--sweep-every
//! N` sweeps after every N-th slice only, for a quicker run.
//!
//! Before the first slice one sweep at midnight, untimed, leaves the
//! state a server running since the history would have. After the last
//! slice one cold read of the day: a plain sweep with a fresh state at
//! the last slice's `now`, timed the same way.
//!
//! Output, on stdout: one JSON line per slice (`"slice"`: its spans, the
//! traces still waiting for their root, the submit, flush and sweep
//! times and what the sweep read), then one
//! summary line (`"mode": "slices"`) with the sweeps' median, p90, max and
//! sum, the cold read, sum / cold, and the peak RSS from the store's
//! opening on through the last sweep (writing the history and the day's
//! spill, before, is reported apart: `setup_peak_rss_mib`; the cold read
//! after, too: `cold_peak_rss_mib`). Each sweep's line has its own peak
//! (`sweep_peak_rss_mib`), the RSS after it and what `sweep::Live` holds
//! (`live`, its census). Two store
//! settings differ from `serve`'s: nothing is deleted for age (retention
//! off, as for the demo: the data is dated in the past), and no day is
//! seal-compacted (the trigger is the wall clock, at which the simulated
//! day ended long ago; `serve` seals a day an hour after it ends, so
//! never during the day measured here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use stormwatch::config::Config;
use stormwatch::model::{day_from_str, day_to_string, NANOS_PER_DAY};
use stormwatch::signal::StateDb;
use stormwatch::store::{rollup, Catalog, Layout, Reader, Store};
use stormwatch::sweep::{SweepOptions, SweepReport};

use crate::arrivals::{deliver, Spill};

/// The flags of `--slices`.
struct Args {
    out: PathBuf,
    per_day: usize,
    tools: usize,
    first: i32,
    history: i32,
    count: usize,
    batch: usize,
    sweep_every: usize,
}

fn args() -> Args {
    let mut a = Args {
        out: PathBuf::new(),
        per_day: 1_000_000,
        tools: 40,
        first: day_from_str("2026-07-07").unwrap_or(20_641),
        history: 3,
        count: 288,
        batch: 512,
        sweep_every: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if matches!(flag.as_str(), "--slices" | "--bench") {
            continue;
        }
        let value = it.next().unwrap_or_default();
        let n = value.parse::<usize>().ok();
        match (flag.as_str(), n) {
            ("--out", _) => a.out = PathBuf::from(value),
            ("--first", _) => a.first = day_from_str(&value).unwrap_or(a.first),
            ("--per-day", Some(n)) => a.per_day = n,
            ("--tools", Some(n)) => a.tools = n,
            ("--history", Some(n)) => a.history = n as i32,
            ("--count", Some(n)) if n > 0 => a.count = n,
            ("--batch", Some(n)) if n > 0 => a.batch = n,
            ("--sweep-every", Some(n)) if n > 0 => a.sweep_every = n,
            _ => {
                eprintln!("bad argument {flag:?} {value:?}; see benches/sweep_data/slices.rs");
                std::process::exit(2);
            }
        }
    }
    if a.out.as_os_str().is_empty() {
        eprintln!("--out DIR is required");
        std::process::exit(2);
    }
    a
}

pub fn main() {
    stormwatch::alloc::purge_freed_memory_promptly();
    let a = args();
    let layout = Layout::new(&a.out);
    if layout.days().is_ok_and(|d| !d.is_empty()) {
        eprintln!(
            "{} already holds a store; --slices needs a new one",
            a.out.display()
        );
        std::process::exit(2);
    }
    layout.create().expect("creating the data directory");
    let tools = super::tools(a.tools);
    let t0 = Instant::now();
    let history: Vec<i32> = (a.first..a.first + a.history).collect();
    for (index, &day) in history.iter().enumerate() {
        super::write_day(&layout, day, index as i32, a.per_day, &tools);
    }
    rollup::refresh(&Catalog::new(layout.clone()), &history).expect("refreshing the rollup");
    let day = a.first + a.history;
    let spill = a.out.with_extension("slices-spill");
    let spilled = Spill::write(&spill, (day, a.history), (a.per_day, a.count), &tools);
    eprintln!(
        "{} history day(s) written, {} spans of {} cut into {} slices in {:.1} s",
        a.history,
        spilled,
        day_to_string(day),
        a.count,
        t0.elapsed().as_secs_f64()
    );
    // The peak RSS reported is the store's and the sweeps', from here on.
    let setup_rss = peak_rss_mib();
    reset_peak_rss();
    let day_start = i64::from(day) * NANOS_PER_DAY;
    let slice_ns = NANOS_PER_DAY / a.count as i64;
    let config = Config::default();
    let mut opts = config.store_options(Some(0));
    opts.seal_after = None;
    let store = Store::open(&a.out, opts).expect("opening the store");
    let mut sweeper = Sweeper::new(&config, &layout.state_db());
    let (warm_s, _) = sweeper.sweep(&store.reader(), day_start);
    eprintln!("first sweep, at midnight: {warm_s:.2} s");
    let mut times = Vec::new();
    // The process's peak since the store opened: VmHWM is reset before each
    // sweep (to give the sweep's own), so the peaks before are kept here.
    let mut peak: f64 = 0.0;
    let mut last = None;
    let mut open = std::collections::HashSet::new();
    for slice in 0..a.count {
        let t = Instant::now();
        let spans = deliver(&store, (&spill, slice), a.batch, &mut open);
        let submit_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        store.flush().expect("flushing");
        let flush_s = t.elapsed().as_secs_f64();
        let mut line = serde_json::json!({
            "slice": slice + 1, "spans": spans, "submit_s": submit_s, "flush_s": flush_s,
            // Traces sent without their root so far: the day's read takes
            // the day before too while there are any (sweep/window.rs).
            "rootless": open.len(),
        });
        if (slice + 1) % a.sweep_every == 0 || slice + 1 == a.count {
            let now = day_start + slice_ns * (slice as i64 + 1);
            peak = peak.max(peak_rss_mib());
            reset_peak_rss();
            let (took, report) = sweeper.sweep(&store.reader(), now);
            line["sweep_peak_rss_mib"] = peak_rss_mib().into();
            times.push(took);
            line["now"] = stormwatch::time::rfc3339(now).into();
            line["sweep_s"] = took.into();
            line["spans_scanned"] = report.spans_scanned.into();
            line["days_scanned"] = report.days_scanned.into();
            line["days_reused"] = report.days_reused.into();
            line["days_from_summary"] = report.days_from_summary.into();
            line["findings"] = serde_json::to_value(findings(&report)).expect("json");
            line["rss_mib"] = rss_mib("VmRSS:").into();
            line["live"] = serde_json::to_value(sweeper.live.census()).expect("json");
            last = Some(report);
        }
        println!("{line}");
    }
    let _ = std::fs::remove_dir_all(&spill);
    let now = day_start + slice_ns * a.count as i64;
    peak = peak.max(peak_rss_mib());
    reset_peak_rss();
    let (cold_s, cold) = cold_read(&store.reader(), &config, &a.out, now);
    let cold_peak = peak_rss_mib();
    store.close().expect("closing the store");
    let last = findings(last.as_ref().expect("at least one sweep"));
    let cold_found = findings(&cold);
    summary(
        &a,
        &times,
        (cold_s, &cold),
        (&last, &cold_found),
        (warm_s, setup_rss, peak, cold_peak),
    );
}

/// The sweeps' figures, and the cold read's, as the summary line.
fn summary(
    a: &Args,
    times: &[f64],
    (cold_s, cold): (f64, &SweepReport),
    (last, cold_found): (&BTreeMap<String, usize>, &BTreeMap<String, usize>),
    (warm_s, setup_rss, peak, cold_peak): (f64, f64, f64, f64),
) {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank =
        |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    let sum: f64 = times.iter().sum();
    let line = serde_json::json!({
        "mode": "slices",
        "per_day": a.per_day,
        "slices": a.count,
        "sweep_every": a.sweep_every,
        "batch": a.batch,
        "history_days": a.history,
        "sweeps": times.len(),
        "median_s": rank(0.5),
        "p90_s": rank(0.9),
        "max_s": sorted.last().copied().unwrap_or(0.0),
        "sum_s": sum,
        // With --sweep-every N, the day's sum estimated from the sweeps run.
        "sum_day_s": sum / times.len() as f64 * a.count as f64,
        "cold_s": cold_s,
        "cold_spans_scanned": cold.spans_scanned,
        "sum_over_cold": sum / times.len() as f64 * a.count as f64 / cold_s,
        "first_sweep_s": warm_s,
        // Since the store opened (VmHWM reset after writing the history
        // and spilling the day), and before.
        "peak_rss_mib": peak,
        // The cold read's own (the store open, the sweeps' state kept).
        "cold_peak_rss_mib": cold_peak,
        "setup_peak_rss_mib": setup_rss,
        "findings_last_sweep": last,
        "findings_cold": cold_found,
        "findings_match": last == cold_found,
    });
    println!("{line}");
}

/// The scheduler's sweep (`serve::scheduler::Sweeper::sweep_blocking`),
/// its state kept from one sweep to the next.
struct Sweeper {
    config: Config,
    state: StateDb,
    /// Today as the last sweep left it (`serve`'s scheduler keeps one).
    live: stormwatch::sweep::Live,
}

impl Sweeper {
    fn new(config: &Config, state: &Path) -> Sweeper {
        Sweeper {
            config: config.clone(),
            state: StateDb::open(state).expect("opening the state"),
            live: stormwatch::sweep::Live::default(),
        }
    }

    /// One scheduled sweep as of `now_ns`; its wall time (the call alone)
    /// and report.
    fn sweep(&mut self, reader: &Reader, now_ns: i64) -> (f64, SweepReport) {
        let opts = SweepOptions::from_config(&self.config, now_ns, None);
        let t = Instant::now();
        // What `serve`'s scheduler calls: today from what the last sweep
        // kept of it and the spans since.
        let report = stormwatch::sweep::run_live(
            reader,
            &mut self.state,
            &self.config.detect,
            &opts,
            &mut self.live,
        )
        .expect("sweep");
        (t.elapsed().as_secs_f64(), report)
    }
}

/// One cold read: a plain sweep with a fresh state (the store's day
/// summaries stay: what was final is read from them, as `sweep` would).
fn cold_read(reader: &Reader, config: &Config, out: &Path, now_ns: i64) -> (f64, SweepReport) {
    let path = out.join("cold-state.sqlite");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut state = StateDb::open(&path).expect("opening the cold read's state");
    let opts = SweepOptions::from_config(config, now_ns, None);
    let t = Instant::now();
    let report =
        stormwatch::sweep::run(reader, &mut state, &config.detect, &opts).expect("cold sweep");
    (t.elapsed().as_secs_f64(), report)
}

/// Findings per signal kind.
fn findings(report: &SweepReport) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for s in &report.signals {
        *out.entry(s.draft.kind.as_str().to_string()).or_default() += s.draft.findings;
    }
    out
}

/// Start the process's peak RSS (VmHWM) afresh (Linux: `clear_refs` 5);
/// where that is refused, the peak stays the whole process's.
fn reset_peak_rss() {
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        eprintln!("could not reset the peak RSS: it includes writing the history");
    }
}

fn peak_rss_mib() -> f64 {
    rss_mib("VmHWM:")
}

/// A `/proc/self/status` figure in MiB (`VmHWM:` the peak, `VmRSS:` now).
fn rss_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
