//! Sweep benchmark data (not a test): writes a stormwatch data directory of
//! synthetic agent traffic straight into Parquet parts, day by day, then the
//! daily rollup — the layout `serve` would have left behind, without going
//! through the receiver (the ingest benchmark measures that).
//!
//!     cargo bench --bench sweep_data -- --out DIR [--days 30] [--per-day 1000000]
//!                                       [--tools 40] [--first 2026-07-07] [--append]
//!     cargo bench --bench sweep_data -- --slices --out DIR [--per-day 1000000] ...
//!
//! `--slices` is `serve`'s five-minute sweep over one day arriving through
//! the store, timed sweep by sweep: see `sweep_data/slices.rs` for it and
//! its flags.
//!
//! Each turn is an `invoke_agent` span with one to four tool calls under it
//! (1 M tool spans a day means about 400 k traces). Forty tools (`--tools`) with skewed
//! volumes and a 1–3 % error floor; about 2 % of turns retry a blip and
//! recover with growing backoff. Planted problems, from the seeds: on days
//! 20–22 of the run `search_flights` returns 503s and 30 turns a day hammer
//! it 15 times with no backoff; every day 50 turns retry `book_flight`'s 400
//! three times, 20 turns call `charge_card` again after it succeeded, and on
//! day 25 `fetch_page` slows to 5× its usual latency. `--append` adds the
//! days after the newest one already there, for the incremental sweep.
//! The run is deterministic: the same flags write the same rows. It writes
//! no model spans (`is_model` false on every row): every chain's driver is
//! `code`, and the sweep's figures stay comparable with the runs before the
//! driver rule (a day's model spans cost the kernel a sparse map entry
//! each; the planted storms' drivers are checked on captured framework
//! runs instead, by `scripts/bench/check_sql.py` and `tests/it/driver.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use stormwatch::model::{day_from_str, day_to_string, ErrorClass, SpanRow, NANOS_PER_DAY};
use stormwatch::store::{frame, parquet, rollup, Catalog, Layout};

#[path = "sweep_data/arrivals.rs"]
mod arrivals;
#[path = "sweep_data/slices.rs"]
mod slices;

/// The allocator `stormwatch` itself runs on (src/main.rs), so that the
/// sweeps `--slices` times cost what they cost in `serve`.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SEC: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
const ROWS_PER_PART: usize = 400_000;

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

struct Tool {
    name: String,
    weight: u64,
    error_rate: f64,
    p50_ms: i64,
}

fn tools(n: usize) -> Vec<Tool> {
    let named = [
        "search_flights",
        "book_flight",
        "charge_card",
        "fetch_page",
        "get_weather",
        "quote_price",
    ];
    (0..n.max(6))
        .map(|i| Tool {
            name: named
                .get(i)
                .map_or_else(|| format!("tool_{i:02}"), |s| s.to_string()),
            // Skewed volumes: the first tools carry most of the calls.
            weight: (1000 / (i as u64 + 2)).max(1),
            error_rate: 0.01 + 0.02 * ((i * 7 % 10) as f64 / 10.0),
            p50_ms: 80 + (i as i64 * 37 % 900),
        })
        .collect()
}

struct Day<'a> {
    rows: Vec<SpanRow>,
    rng: Rng,
    service: Vec<Arc<str>>,
    resource: Arc<str>,
    seq: u64,
    tools: &'a [Tool],
}

impl Day<'_> {
    fn id(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes * 2);
        while s.len() < bytes * 2 {
            s.push_str(&format!("{:016x}", self.rng.next()));
        }
        s.truncate(bytes * 2);
        s
    }

    fn agent(&mut self, trace: &str, span: &str, start: i64, end: i64, svc: usize) {
        self.rows.push(SpanRow {
            trace_id: trace.into(),
            span_id: span.into(),
            parent_span_id: None,
            name: "invoke_agent travel".into(),
            kind: "internal",
            service_name: self.service[svc].clone(),
            start_ns: start,
            end_ns: end,
            duration_ns: end - start,
            status_code: "unset",
            status_message: None,
            is_tool_call: false,
            tool_name: None,
            tool_call_id: None,
            tool_args_hash: None,
            tool_result_hash: None,
            tool_convention: None,
            session_id: Some(format!("s{}", self.rng.below(50_000))),
            turn_id: None,
            is_agent: true,
            agent_call_id: None,
            http_status: None,
            rpc_status: None,
            error_type: None,
            error_class: ErrorClass::Ok,
            retryable: None,
            cost_usd: Some(0.002),
            input_tokens: Some(1200),
            output_tokens: Some(300),
            attributes: "{}".into(),
            events: "[]".into(),
            resource: self.resource.clone(),
            scope_name: None,
            scope_version: None,
            tool_args_recorded: None,
            dependency: None,
            retry_after_ms: None,
            is_model: false,
            model_name: None,
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        trace: &str,
        parent: &str,
        tool: usize,
        args: u64,
        start: i64,
        dur: i64,
        class: ErrorClass,
        svc: usize,
    ) {
        self.seq += 1;
        let http = match class {
            ErrorClass::Ok => Some(200),
            ErrorClass::Unavailable => Some(503),
            ErrorClass::RateLimited => Some(429),
            ErrorClass::InvalidRequest => Some(400),
            ErrorClass::Timeout => None,
            _ => Some(500),
        };
        let span = self.id(8);
        self.rows.push(SpanRow {
            trace_id: trace.into(),
            span_id: span,
            parent_span_id: Some(parent.into()),
            name: format!("execute_tool {}", self.tools[tool].name),
            kind: "internal",
            service_name: self.service[svc].clone(),
            start_ns: start,
            end_ns: start + dur,
            duration_ns: dur,
            status_code: if class.is_error() { "error" } else { "unset" },
            status_message: class
                .is_error()
                .then(|| format!("HTTP {}", http.unwrap_or(0))),
            is_tool_call: true,
            tool_name: Some(self.tools[tool].name.clone()),
            tool_call_id: Some(format!("call_{}", self.seq)),
            tool_args_hash: Some(format!("{args:016x}")),
            tool_result_hash: None,
            tool_convention: Some(stormwatch::model::ToolConvention::GenAi),
            session_id: None,
            turn_id: None,
            is_agent: false,
            agent_call_id: None,
            http_status: http,
            rpc_status: None,
            error_type: class.is_error().then(|| class.as_str().to_string()),
            error_class: class,
            retryable: class.retryable(),
            cost_usd: None,
            input_tokens: None,
            output_tokens: None,
            attributes: "{}".into(),
            events: "[]".into(),
            resource: self.resource.clone(),
            scope_name: None,
            scope_version: None,
            tool_args_recorded: Some(true),
            dependency: None,
            retry_after_ms: None,
            is_model: false,
            model_name: None,
        });
    }
}

fn pick(rng: &mut Rng, tools: &[Tool], total: u64) -> usize {
    let mut x = rng.below(total);
    for (i, t) in tools.iter().enumerate() {
        if x < t.weight {
            return i;
        }
        x -= t.weight;
    }
    tools.len() - 1
}

fn fail_class(rng: &mut Rng) -> ErrorClass {
    match rng.below(10) {
        0..=3 => ErrorClass::Unavailable,
        4..=5 => ErrorClass::RateLimited,
        6..=7 => ErrorClass::Timeout,
        8 => ErrorClass::InvalidRequest,
        _ => ErrorClass::ServerError,
    }
}

/// One day's rows, written as parts; returns the tool spans written.
fn write_day(layout: &Layout, day: i32, index: i32, per_day: usize, tools: &[Tool]) -> usize {
    let dir = layout.day_dir(day);
    let mut part = 0;
    generate_day(day, index, per_day, tools, &mut |rows, force| {
        if rows.is_empty() || (!force && rows.len() < ROWS_PER_PART) {
            return;
        }
        let refs: Vec<&SpanRow> = rows.iter().collect();
        let mut df = frame::rows_to_frame(&refs).expect("frame");
        std::fs::create_dir_all(&dir).expect("day dir");
        parquet::write_file(&dir.join(format!("part-{part:016}-c.parquet")), &mut df)
            .expect("write part");
        part += 1;
        rows.clear();
    })
}

/// One day's rows, handed to `sink` after each trace (the trace's calls
/// in the order they started, then its root) and once more at the end
/// with `true`; the sink takes what it wants out of the vector. Returns
/// the tool spans generated.
fn generate_day(
    day: i32,
    index: i32,
    per_day: usize,
    tools: &[Tool],
    sink: &mut dyn FnMut(&mut Vec<SpanRow>, bool),
) -> usize {
    let total: u64 = tools.iter().map(|t| t.weight).sum();
    let mut d = Day {
        rows: Vec::with_capacity(ROWS_PER_PART + 64),
        rng: Rng(0x5707_3A7C ^ ((day as u64) << 20)),
        service: ["travel-agent", "support-agent", "ops-agent"]
            .iter()
            .map(|s| Arc::from(*s))
            .collect(),
        resource: Arc::from("{\"service.name\":\"travel-agent\"}"),
        seq: u64::from(day as u32) << 32,
        tools,
    };
    let day_start = i64::from(day) * NANOS_PER_DAY;
    let outage = (20..=22).contains(&index);
    let slow_fetch = index == 25;
    let mut tool_spans = 0;
    let mut planted = [(0usize, 30usize), (1, 50), (2, 20)];
    if !outage {
        planted[0].1 = 0;
    }
    while tool_spans < per_day {
        let trace = d.id(16);
        let agent = d.id(8);
        let svc = d.rng.below(3) as usize;
        // Spread turns over the day, away from midnight's edges.
        let start = day_start + 60 * SEC + (d.rng.below(86_000) as i64) * SEC;
        let mut t = start + 5 * MS;
        // A planted turn, while any are left, one in every 2000.
        let plant = planted
            .iter()
            .position(|(_, n)| *n > 0)
            .filter(|_| d.rng.below(2000) == 0);
        match plant {
            Some(0) => {
                // The dead feed: 15 calls, 503, no backoff.
                for _ in 0..15 {
                    d.call(
                        &trace,
                        &agent,
                        0,
                        7,
                        t,
                        900 * MS,
                        ErrorClass::Unavailable,
                        svc,
                    );
                    t += 900 * MS + 40 * MS;
                }
                tool_spans += 15;
            }
            Some(1) => {
                // Retrying a 400.
                for _ in 0..3 {
                    d.call(
                        &trace,
                        &agent,
                        1,
                        9,
                        t,
                        150 * MS,
                        ErrorClass::InvalidRequest,
                        svc,
                    );
                    t += 150 * MS + 500 * MS;
                }
                tool_spans += 3;
            }
            Some(_) => {
                // A charge whose answer was lost, sent again.
                d.call(&trace, &agent, 2, 11, t, 300 * MS, ErrorClass::Ok, svc);
                t += 2 * SEC;
                d.call(&trace, &agent, 2, 11, t, 300 * MS, ErrorClass::Ok, svc);
                t += 300 * MS;
                tool_spans += 2;
            }
            None => {
                let n = 1 + d.rng.below(4) as usize;
                for _ in 0..n {
                    let tool = pick(&mut d.rng, tools, total);
                    let mut p50 = tools[tool].p50_ms;
                    if slow_fetch && tool == 3 {
                        p50 *= 5;
                    }
                    let dur = (p50 / 2 + d.rng.below(p50 as u64) as i64) * MS;
                    let mut rate = tools[tool].error_rate;
                    if outage && tool == 0 {
                        rate = 0.4;
                    }
                    let args = d.rng.next();
                    if d.rng.chance(rate) {
                        let class = fail_class(&mut d.rng);
                        d.call(&trace, &agent, tool, args, t, dur, class, svc);
                        t += dur;
                        tool_spans += 1;
                        if class.retryable() == Some(true) && d.rng.chance(0.5) {
                            // A healthy retry: grows its backoff and recovers.
                            t += 200 * MS;
                            d.call(&trace, &agent, tool, args, t, dur, ErrorClass::Ok, svc);
                            t += dur;
                            tool_spans += 1;
                        }
                    } else {
                        d.call(&trace, &agent, tool, args, t, dur, ErrorClass::Ok, svc);
                        t += dur;
                        tool_spans += 1;
                    }
                    t += (20 + d.rng.below(300) as i64) * MS;
                }
            }
        }
        if let Some(i) = plant {
            planted[i].1 -= 1;
        }
        d.agent(&trace, &agent, start, t + 10 * MS, svc);
        sink(&mut d.rows, false);
    }
    sink(&mut d.rows, true);
    tool_spans
}

fn main() {
    if std::env::args().any(|a| a == "--slices") {
        return slices::main();
    }
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let (mut days, mut per_day, mut first, mut append) = (30i32, 1_000_000usize, None, false);
    let mut n_tools = 40usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from),
            "--days" => days = args.next().and_then(|v| v.parse().ok()).unwrap_or(days),
            "--per-day" => per_day = args.next().and_then(|v| v.parse().ok()).unwrap_or(per_day),
            "--first" => first = args.next().and_then(|v| day_from_str(&v)),
            "--append" => append = true,
            "--tools" => n_tools = args.next().and_then(|v| v.parse().ok()).unwrap_or(n_tools),
            "--bench" => {}
            other => {
                eprintln!("unknown argument {other:?}; see the header of benches/sweep_data.rs");
                std::process::exit(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("--out DIR is required");
        std::process::exit(2);
    };
    let layout = Layout::new(&out);
    layout.create().expect("creating the data directory");
    let existing = layout.days().expect("listing days");
    let first = first.unwrap_or_else(|| day_from_str("2026-07-07").unwrap_or(20_641));
    let (start, base) = match (append, existing.last()) {
        (true, Some(&last)) => (last + 1, existing[0]),
        _ => (first, first),
    };
    let tools = tools(n_tools);
    let t0 = Instant::now();
    let mut written = Vec::new();
    let mut spans = 0;
    for day in start..start + days {
        spans += write_day(&layout, day, day - base, per_day, &tools);
        written.push(day);
        eprintln!("{} written", day_to_string(day));
    }
    rollup::refresh(&Catalog::new(layout.clone()), &written).expect("refreshing the rollup");
    println!(
        "wrote {} tool spans over {} day(s) ({} .. {}) into {} in {:.1} s",
        spans,
        written.len(),
        day_to_string(start),
        day_to_string(start + days - 1),
        out.display(),
        t0.elapsed().as_secs_f64()
    );
}
