//! `GET /metrics`: the service's own health in Prometheus text format 0.0.4.
//! Counters come from the receiver, the store, the scheduler and the alert
//! sender; signals by state and the outbox by status are read from
//! `state.sqlite` at scrape time, on a blocking thread.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::otlp::OtlpState;
use super::scheduler::Sweeper;
use crate::alert::stats::Stats as AlertStats;
use crate::store::{Store, MAINTENANCE_TASKS, WAL_SYNC_BUCKETS};

/// Everything `/metrics` reads.
#[derive(Clone)]
pub struct Sources {
    pub store: Arc<Store>,
    pub otlp: Arc<OtlpState>,
    pub sweeper: Arc<Sweeper>,
    pub alerts: Arc<AlertStats>,
    pub http: Arc<HttpCounts>,
    pub readiness: Arc<super::health::Readiness>,
}

/// Dashboard and API responses by status code.
#[derive(Debug, Default)]
pub struct HttpCounts(std::sync::Mutex<std::collections::BTreeMap<u16, u64>>);

impl HttpCounts {
    fn count(&self, status: StatusCode) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(status.as_u16()).or_insert(0) += 1;
    }

    fn snapshot(&self) -> Vec<(u16, u64)> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().map(|(c, n)| (*c, *n)).collect()
    }
}

/// The middleware that counts every HTTP response (outermost, so refusals
/// by the token check count too).
pub async fn count_responses(
    axum::extract::State(counts): axum::extract::State<Arc<HttpCounts>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let resp = next.run(req).await;
    counts.count(resp.status());
    resp
}

pub fn router(sources: Sources) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let sources = sources.clone();
            async move {
                match tokio::task::spawn_blocking(move || render(&sources)).await {
                    Ok(text) => (
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response(),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("rendering the metrics failed: {e}\n"),
                    )
                        .into_response(),
                }
            }
        }),
    )
}

/// A label value as the text format wants it.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A metric family being written.
struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }
}

fn load(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// The whole exposition.
pub fn render(s: &Sources) -> String {
    let mut o = Out(String::with_capacity(8 << 10));
    o.family(
        "stormwatch_build_info",
        "gauge",
        "Always 1; the version in a label.",
    );
    o.sample(
        "stormwatch_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    ingest(&mut o, &s.otlp);
    store(&mut o, &s.store);
    sweeps(&mut o, &s.sweeper);
    state(&mut o, &s.store);
    o.family(
        "stormwatch_http_responses_total",
        "counter",
        "Dashboard, API and metrics responses by status code.",
    );
    for (code, n) in s.http.snapshot() {
        o.sample(
            "stormwatch_http_responses_total",
            &[("code", &code.to_string())],
            n,
        );
    }
    o.one(
        "stormwatch_readyz_probes_total",
        "counter",
        "Filesystem probes /readyz ran (its answers are cached for a second).",
        s.readiness.probes(),
    );
    o.0.push_str(&s.alerts.prometheus());
    o.0
}

fn ingest(o: &mut Out, otlp: &OtlpState) {
    let transports = [("http", &otlp.counters), ("grpc", &otlp.grpc)];
    o.family(
        "stormwatch_ingest_requests_total",
        "counter",
        "OTLP export requests received, by transport (http, grpc).",
    );
    for (t, c) in transports {
        o.sample(
            "stormwatch_ingest_requests_total",
            &[("transport", t)],
            load(&c.requests),
        );
    }
    o.family(
        "stormwatch_ingest_requests_refused_total",
        "counter",
        "OTLP export requests refused, by transport and reason.",
    );
    for (t, c) in transports {
        for (reason, n) in c.refused() {
            o.sample(
                "stormwatch_ingest_requests_refused_total",
                &[("transport", t), ("reason", reason)],
                n,
            );
        }
    }
    o.family(
        "stormwatch_spans_accepted_total",
        "counter",
        "Spans acknowledged (in the WAL on disk), by transport.",
    );
    for (t, c) in transports {
        o.sample(
            "stormwatch_spans_accepted_total",
            &[("transport", t)],
            load(&c.spans_accepted),
        );
    }
    o.family(
        "stormwatch_spans_rejected_total",
        "counter",
        "Spans not kept, by transport and reason: invalid_id (a partial success) or store (the store refused a decoded request).",
    );
    for (t, c) in transports {
        o.sample(
            "stormwatch_spans_rejected_total",
            &[("transport", t), ("reason", "invalid_id")],
            load(&c.spans_rejected_invalid),
        );
        o.sample(
            "stormwatch_spans_rejected_total",
            &[("transport", t), ("reason", "store")],
            load(&c.spans_refused_store),
        );
    }
    o.one(
        "stormwatch_ingest_inflight_kib_available",
        "gauge",
        "Request-body memory budget left (KiB), shared by both transports; 429 / RESOURCE_EXHAUSTED when a request does not fit.",
        otlp.inflight.available_permits(),
    );
}

fn store(o: &mut Out, store: &Store) {
    let st = store.stats();
    o.one(
        "stormwatch_spans_stored_total",
        "counter",
        "Spans stored for the first time.",
        load(&st.spans_stored),
    );
    o.one(
        "stormwatch_spans_duplicate_total",
        "counter",
        "Spans dropped as already stored (redeliveries).",
        load(&st.spans_duplicate),
    );
    o.one(
        "stormwatch_wal_written_bytes_total",
        "counter",
        "Bytes appended to the write-ahead log.",
        load(&st.wal_bytes),
    );
    o.one(
        "stormwatch_wal_failures_total",
        "counter",
        "WAL writes that failed (their requests were refused with 503).",
        load(&st.wal_failures),
    );
    let wal_dir = store.layout().wal_dir();
    let wal_on_disk: u64 = crate::store::wal::list(&wal_dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|seq| std::fs::metadata(crate::store::wal::segment_path(&wal_dir, seq)).ok())
        .map(|m| m.len())
        .sum();
    o.one(
        "stormwatch_wal_bytes",
        "gauge",
        "Bytes in WAL segments on disk, not yet flushed to Parquet.",
        wal_on_disk,
    );
    let name = "stormwatch_wal_fsync_seconds";
    o.family(
        name,
        "histogram",
        "Latency of one group commit: WAL append and fdatasync.",
    );
    // One read of the count for +Inf and _count, never below the buckets.
    let buckets: Vec<u64> = st.wal_sync_buckets.iter().map(load).collect();
    let count = load(&st.wal_syncs).max(buckets.iter().sum());
    let mut cumulative = 0;
    for (i, bound) in WAL_SYNC_BUCKETS.iter().enumerate() {
        cumulative += buckets[i];
        o.sample(
            &format!("{name}_bucket"),
            &[("le", &bound.to_string())],
            cumulative,
        );
    }
    o.sample(&format!("{name}_bucket"), &[("le", "+Inf")], count);
    o.sample(
        &format!("{name}_sum"),
        &[],
        load(&st.wal_sync_nanos) as f64 / 1e9,
    );
    o.sample(&format!("{name}_count"), &[], count);
    o.one(
        "stormwatch_flushes_total",
        "counter",
        "Memtables written to Parquet.",
        load(&st.flushes),
    );
    o.one(
        "stormwatch_flush_failures_total",
        "counter",
        "Parquet flushes that failed (the rows stay in the WAL; the flusher retries).",
        load(&st.flush_failures),
    );
    o.one(
        "stormwatch_compactions_total",
        "counter",
        "Days whose flush outputs were merged.",
        load(&st.compactions),
    );
    o.one(
        "stormwatch_store_flusher_alive",
        "gauge",
        "1 while the store's flusher thread runs; 0: it stopped, writes are refused (503) until a restart.",
        u8::from(store.flusher_alive()),
    );
    let name = "stormwatch_store_maintenance_panics_total";
    o.family(
        name,
        "counter",
        "Panics caught in the flusher's maintenance tasks (each logged; the flusher carries on).",
    );
    for (task, n) in MAINTENANCE_TASKS.iter().zip(&st.maintenance_panics) {
        o.sample(name, &[("task", task)], load(n));
    }
    o.one(
        "stormwatch_seal_compactions_total",
        "counter",
        "Finished days rewritten as at most four parts sorted by trace.",
        load(&st.seal_compactions),
    );
    o.one(
        "stormwatch_seal_failures_total",
        "counter",
        "Seal compactions that failed (the parts stay as they were; retried later).",
        load(&st.seal_failures),
    );
    o.one(
        "stormwatch_memtable_rows",
        "gauge",
        "Rows acknowledged but not yet in Parquet.",
        st.memtable_rows.load(Ordering::Relaxed),
    );
    o.one(
        "stormwatch_wal_queue_bytes",
        "gauge",
        "Request bytes waiting for the WAL writer; 429 past store.max_pending_bytes.",
        st.pending_bytes.load(Ordering::Relaxed),
    );
    o.one(
        "stormwatch_store_requests_refused_total",
        "counter",
        "Requests refused because the WAL queue was full.",
        load(&st.requests_refused),
    );
}

fn sweeps(o: &mut Out, sweeper: &Sweeper) {
    let st = &sweeper.stats;
    o.family(
        "stormwatch_sweeps_total",
        "counter",
        "Sweeps by outcome: ok, empty (no spans yet), failed, skipped_busy (one was running).",
    );
    for (outcome, n) in [
        ("ok", &st.ok),
        ("empty", &st.empty),
        ("failed", &st.failed),
        ("skipped_busy", &st.skipped_busy),
    ] {
        o.sample("stormwatch_sweeps_total", &[("outcome", outcome)], load(n));
    }
    o.one(
        "stormwatch_sweep_seconds_total",
        "counter",
        "Time spent sweeping, in all.",
        load(&st.duration_nanos_sum) as f64 / 1e9,
    );
    o.one(
        "stormwatch_sweep_last_duration_seconds",
        "gauge",
        "How long the last sweep took.",
        load(&st.last_duration_nanos) as f64 / 1e9,
    );
    o.one(
        "stormwatch_sweep_last_findings",
        "gauge",
        "Findings in the signals the last successful sweep saw.",
        load(&st.last_findings),
    );
    o.one(
        "stormwatch_sweep_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful sweep (0: none yet).",
        st.last_success_unix.load(Ordering::Relaxed),
    );
}

/// Signals by state and the outbox by status, from `state.sqlite`.
fn state(o: &mut Out, store: &Store) {
    let path = store.layout().state_db();
    o.family("stormwatch_signals", "gauge", "Signals by state.");
    match crate::signal::StateDb::open(&path).and_then(|db| db.counts_by_state()) {
        Ok(counts) => {
            for state in ["new", "ongoing", "regressed", "resolved", "muted"] {
                let n = counts
                    .iter()
                    .find(|(s, _)| s == state)
                    .map_or(0, |(_, n)| *n);
                o.sample("stormwatch_signals", &[("state", state)], n);
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics: cannot count signals"),
    }
    o.family(
        "stormwatch_alert_outbox",
        "gauge",
        "Alert messages in the outbox, by target and status (pending, delivered, dead).",
    );
    match crate::alert::commands::open(&path).and_then(|c| crate::alert::outbox::counts(&c)) {
        Ok(rows) => {
            for (target, status, n) in rows {
                o.sample(
                    "stormwatch_alert_outbox",
                    &[("target", &target), ("status", &status)],
                    n,
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics: cannot count the outbox"),
    }
}
