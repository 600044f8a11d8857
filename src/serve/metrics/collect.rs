//! The `prometheus-client` `Collector`s of `/metrics` over atomics: what
//! the receiver, the store and the scheduler count, read at scrape time (on
//! the blocking thread that encodes); and the helpers that write a family.
//!
//! Names are given without `_total` and without their unit: the encoder
//! appends the unit (`Unit::Seconds`, `Unit::Bytes`) and, on counters,
//! `_total`, so the exposed names are those README.md lists. Help texts are
//! written whole (a collector's help is not given a period).

use std::fmt::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::serve::conn::{Connections, Port, Reason};
use crate::serve::health::Readiness;
use crate::serve::otlp::OtlpState;
use crate::serve::scheduler::Sweeper;
use crate::store::{Store, MAINTENANCE_TASKS};

const SECONDS: Option<&Unit> = Some(&Unit::Seconds);
const BYTES: Option<&Unit> = Some(&Unit::Bytes);

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// One counter family: a sample per label set.
fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result<(), Error> {
    family(
        e,
        name,
        help,
        MetricType::Counter,
        samples,
        ConstCounter::new,
    )
}

/// One gauge family: a sample per label set.
pub(super) fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result<(), Error> {
    family(e, name, help, MetricType::Gauge, samples, ConstGauge::new)
}

fn family<L: EncodeLabelSet, V, M: EncodeMetric>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (L, V)>,
    metric: impl Fn(V) -> M,
) -> Result<(), Error> {
    let mut f = e.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in samples {
        metric(v).encode(f.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One unlabelled counter.
fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: impl EncodeCounterValue,
) -> Result<(), Error> {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, unit, MetricType::Counter)?)
}

/// One unlabelled gauge.
fn gauge(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: impl EncodeGaugeValue,
) -> Result<(), Error> {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

/// The OTLP receivers' counters (both transports).
pub struct Ingest(pub Arc<OtlpState>);

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ingest")
    }
}

impl Collector for Ingest {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        let otlp = &self.0;
        let transports = [("http", &otlp.counters), ("grpc", &otlp.grpc)];
        counters(
            &mut e,
            "stormwatch_ingest_requests",
            "OTLP export requests received, by transport (http, grpc).",
            transports.map(|(t, c)| ([("transport", t)], load(&c.requests))),
        )?;
        let refused: Vec<_> = transports
            .iter()
            .flat_map(|(t, c)| {
                c.refused()
                    .into_iter()
                    .map(move |(reason, n)| ([("transport", *t), ("reason", reason)], n))
            })
            .collect();
        counters(
            &mut e,
            "stormwatch_ingest_requests_refused",
            "OTLP export requests refused, by transport and reason.",
            refused,
        )?;
        counters(
            &mut e,
            "stormwatch_spans_accepted",
            "Spans acknowledged (in the WAL on disk), by transport.",
            transports.map(|(t, c)| ([("transport", t)], load(&c.spans_accepted))),
        )?;
        let rejected = transports.iter().flat_map(|(t, c)| {
            [
                ("invalid_id", load(&c.spans_rejected_invalid)),
                ("future", load(&c.spans_rejected_future)),
                ("past_retention", load(&c.spans_rejected_past)),
                ("store", load(&c.spans_refused_store)),
            ]
            .map(|(reason, n)| ([("transport", *t), ("reason", reason)], n))
        });
        counters(
            &mut e,
            "stormwatch_spans_rejected",
            "Spans not kept, by transport and reason: invalid_id, future (later than the receive time + ingest.max_future_secs), past_retention (on a day the retention drops), each a partial success; or store (the store refused a decoded request).",
            rejected,
        )?;
        gauge(
            &mut e,
            "stormwatch_ingest_inflight_kib_available",
            "Request-body memory budget left (KiB), shared by both transports; 429 / RESOURCE_EXHAUSTED when a request does not fit.",
            None,
            otlp.budget.available_kib(),
        )
    }
}

/// The store's counters and gauges (but the WAL latency histogram, which is
/// registered as it is).
pub struct StoreStats(pub Arc<Store>);

impl std::fmt::Debug for StoreStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreStats")
    }
}

impl Collector for StoreStats {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        let store = &self.0;
        let st = store.stats();
        let e = &mut e;
        counter(
            e,
            "stormwatch_spans_stored",
            "Spans stored for the first time.",
            None,
            load(&st.spans_stored),
        )?;
        counter(
            e,
            "stormwatch_spans_duplicate",
            "Spans dropped as already stored (redeliveries).",
            None,
            load(&st.spans_duplicate),
        )?;
        counter(
            e,
            "stormwatch_wal_written",
            "Bytes appended to the write-ahead log.",
            BYTES,
            load(&st.wal_bytes),
        )?;
        counter(
            e,
            "stormwatch_wal_failures",
            "WAL writes that failed (their requests were refused with 503).",
            None,
            load(&st.wal_failures),
        )?;
        gauge(
            e,
            "stormwatch_wal",
            "Bytes in WAL segments on disk, not yet flushed to Parquet.",
            BYTES,
            wal_on_disk(store),
        )?;
        counter(
            e,
            "stormwatch_flushes",
            "Memtables written to Parquet.",
            None,
            load(&st.flushes),
        )?;
        counter(
            e,
            "stormwatch_flush_failures",
            "Parquet flushes that failed (the rows stay in the WAL; the flusher retries).",
            None,
            load(&st.flush_failures),
        )?;
        counter(
            e,
            "stormwatch_compactions",
            "Days whose flush outputs were merged.",
            None,
            load(&st.compactions),
        )?;
        gauge(
            e,
            "stormwatch_store_flusher_alive",
            "1 while the store's flusher thread runs; 0: it stopped, writes are refused (503) until a restart.",
            None,
            u32::from(store.flusher_alive()),
        )?;
        counters(
            e,
            "stormwatch_store_maintenance_panics",
            "Panics caught in the flusher's maintenance tasks (each logged; the flusher carries on).",
            MAINTENANCE_TASKS
                .iter()
                .zip(&st.maintenance_panics)
                .map(|(task, n)| ([("task", *task)], load(n))),
        )?;
        counter(
            e,
            "stormwatch_seal_compactions",
            "Finished days rewritten as at most four parts sorted by trace.",
            None,
            load(&st.seal_compactions),
        )?;
        counter(
            e,
            "stormwatch_seal_failures",
            "Seal compactions that failed (the parts stay as they were; retried later).",
            None,
            load(&st.seal_failures),
        )?;
        gauge(
            e,
            "stormwatch_memtable_rows",
            "Rows acknowledged but not yet in Parquet.",
            None,
            st.memtable_rows.load(Ordering::Relaxed),
        )?;
        gauge(
            e,
            "stormwatch_wal_queue",
            "Request bytes waiting for the WAL writer; 429 past store.max_pending_bytes.",
            BYTES,
            st.pending_bytes.load(Ordering::Relaxed),
        )?;
        counter(
            e,
            "stormwatch_store_requests_refused",
            "Requests refused because the WAL queue was full.",
            None,
            load(&st.requests_refused),
        )
    }
}

/// Bytes in the WAL segments on disk (a directory listing: blocking).
fn wal_on_disk(store: &Store) -> u64 {
    let wal_dir = store.layout().wal_dir();
    crate::store::wal::list(&wal_dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|seq| std::fs::metadata(crate::store::wal::segment_path(&wal_dir, seq)).ok())
        .map(|m| m.len())
        .sum()
}

/// The scheduler's sweeps.
pub struct Sweeps(pub Arc<Sweeper>);

impl std::fmt::Debug for Sweeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sweeps")
    }
}

impl Collector for Sweeps {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        let st = &self.0.stats;
        let e = &mut e;
        counters(
            e,
            "stormwatch_sweeps",
            "Sweeps by outcome: ok, empty (no spans yet), failed, skipped_busy (one was running).",
            [
                ("ok", &st.ok),
                ("empty", &st.empty),
                ("failed", &st.failed),
                ("skipped_busy", &st.skipped_busy),
            ]
            .map(|(outcome, n)| ([("outcome", outcome)], load(n))),
        )?;
        counter(
            e,
            "stormwatch_sweep",
            "Time spent sweeping, in all.",
            SECONDS,
            load(&st.duration_nanos_sum) as f64 / 1e9,
        )?;
        gauge(
            e,
            "stormwatch_sweep_last_duration",
            "How long the last sweep took.",
            SECONDS,
            load(&st.last_duration_nanos) as f64 / 1e9,
        )?;
        gauge(
            e,
            "stormwatch_sweep_last_findings",
            "Findings in the signals the last successful sweep saw.",
            None,
            load(&st.last_findings),
        )?;
        gauge(
            e,
            "stormwatch_sweep_last_success_timestamp",
            "Unix time of the last successful sweep (0: none yet).",
            SECONDS,
            st.last_success_unix.load(Ordering::Relaxed),
        )
    }
}

/// How often `/readyz` really probed the filesystem.
pub struct Readyz(pub Arc<Readiness>);

impl std::fmt::Debug for Readyz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readyz")
    }
}

impl Collector for Readyz {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        counter(
            &mut e,
            "stormwatch_readyz_probes",
            "Filesystem probes /readyz ran (its answers are cached for a second).",
            None,
            self.0.probes(),
        )
    }
}

/// The three ports' connections: open now, and closed by their limits.
pub struct Conns(pub Arc<Connections>);

impl std::fmt::Debug for Conns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Conns")
    }
}

impl Collector for Conns {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), Error> {
        let c = &self.0;
        gauges(
            &mut e,
            "stormwatch_connections_open",
            "Connections open now, by port (otlp_http, otlp_grpc, http).",
            Port::ALL.map(|p| ([("port", p.name())], c.open(p))),
        )?;
        let closed = Port::ALL.into_iter().flat_map(|p| {
            Reason::ALL.map(|r| {
                (
                    [("port", p.name()), ("reason", r.name())],
                    c.closed_for(p, r),
                )
            })
        });
        counters(
            &mut e,
            "stormwatch_connections_closed",
            "Connections refused or closed by the admission limits, by port and reason: peer_cap (refused past admission.max_connections_per_peer), header_timeout, idle_timeout, write_stall (the peer stopped reading an answer, or granted it no HTTP/2 window).",
            closed,
        )
    }
}
