//! `GET /metrics`: the service's own health, encoded by the
//! `prometheus-client` crate: OpenMetrics 1.0.0 when the scraper's `Accept`
//! asks for it (Prometheus does), the Prometheus text format 0.0.4
//! otherwise (curl, a browser). The crate writes the names (`_total` on
//! counters, `_bucket`/`_sum`/`_count` on histograms, units), escapes the
//! label values and ends OpenMetrics with `# EOF`.
//!
//! What each source becomes, and why:
//! - the build's version: an `Info` metric (`stormwatch_build_info`);
//! - HTTP responses by status code: a `Family` of `Counter`s owned here,
//!   counted by the [`count_responses`] middleware; only `/metrics` reads it;
//! - the WAL write latency: the store's own `Histogram`
//!   ([`crate::store::Stats::wal_sync`]), registered here;
//! - the receiver's, the store's and the scheduler's counters: atomics that
//!   their owners also log and test against, so [`collect`]'s `Collector`s
//!   read them at scrape time rather than the owners taking a metrics type;
//! - signals by state and the outbox by status: read from `state.sqlite` by
//!   [`state`]'s `Collector` at scrape time;
//! - alert deliveries: [`crate::alert::stats::Stats`] is its own
//!   `Collector` (`alerts flush` reads those counts back).
//!
//! The whole encoding runs on a blocking thread, so the SQLite reads and
//! the WAL directory listing stay off the async workers.

mod collect;
mod state;

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::{prometheus_text, text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::otlp::OtlpState;
use super::scheduler::Sweeper;
use crate::alert::stats::Stats as AlertStats;
use crate::store::Store;

/// The `Content-Type` of OpenMetrics text 1.0.0.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything `/metrics` reads.
#[derive(Clone)]
pub struct Sources {
    pub store: Arc<Store>,
    pub otlp: Arc<OtlpState>,
    pub sweeper: Arc<Sweeper>,
    pub alerts: Arc<AlertStats>,
    pub http: Arc<HttpCounts>,
    pub readiness: Arc<super::health::Readiness>,
    /// The three ports' connections.
    pub connections: Arc<super::conn::Connections>,
}

/// Dashboard and API responses by status code.
#[derive(Debug, Default)]
pub struct HttpCounts(Family<Code, Counter>);

/// The label of [`HttpCounts`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: u16,
}

impl HttpCounts {
    fn count(&self, status: StatusCode) {
        let code = status.as_u16();
        self.0.get_or_create(&Code { code }).inc();
    }
}

/// The middleware that counts every HTTP response (outermost, so refusals
/// by the token check count too).
pub async fn count_responses(
    axum::extract::State(counts): axum::extract::State<Arc<HttpCounts>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let resp = next.run(req).await;
    counts.count(resp.status());
    resp
}

/// Every metric `/metrics` serves. Help texts given to `register` have no
/// final period: the registry adds it (the collectors write their own).
pub fn registry(s: &Sources) -> Registry {
    let mut r = Registry::default();
    r.register(
        "stormwatch_build",
        "Always 1; the version in a label",
        Info::new([("version", env!("CARGO_PKG_VERSION"))]),
    );
    r.register(
        "stormwatch_http_responses",
        "Dashboard, API and metrics responses by status code",
        s.http.0.clone(),
    );
    r.register_with_unit(
        "stormwatch_wal_fsync",
        "Latency of one group commit: WAL append and fdatasync",
        Unit::Seconds,
        s.store.stats().wal_sync.clone(),
    );
    r.register_collector(Box::new(collect::Ingest(Arc::clone(&s.otlp))));
    r.register_collector(Box::new(collect::StoreStats(Arc::clone(&s.store))));
    r.register_collector(Box::new(collect::Sweeps(Arc::clone(&s.sweeper))));
    r.register_collector(Box::new(collect::Readyz(Arc::clone(&s.readiness))));
    r.register_collector(Box::new(collect::Conns(Arc::clone(&s.connections))));
    r.register_collector(Box::new(state::StateDb(Arc::clone(&s.store))));
    r.register_collector(Box::new(Arc::clone(&s.alerts)));
    r
}

pub fn router(sources: Sources) -> Router {
    let registry = Arc::new(registry(&sources));
    Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| scrape(Arc::clone(&registry), headers)),
    )
}

async fn scrape(registry: Arc<Registry>, headers: HeaderMap) -> Response {
    let format = Format::for_accept(headers.get_all(header::ACCEPT));
    match tokio::task::spawn_blocking(move || format.encode(&registry)).await {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, format.content_type()),
                (header::VARY, "accept"),
            ],
            body,
        )
            .into_response(),
        Ok(Err(std::fmt::Error)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering the metrics failed: {e}\n"),
        )
            .into_response(),
    }
}

/// The exposition format of one scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    /// OpenMetrics when an `Accept` range names `application/openmetrics-text`
    /// with a quality above 0 and at least that of any range that takes
    /// `text/plain` (`text/plain`, `text/*`, `*/*`); the text format
    /// otherwise, including without `Accept`.
    pub fn for_accept<'a>(accept: impl IntoIterator<Item = &'a HeaderValue>) -> Format {
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        let ranges = accept
            .into_iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','));
        for range in ranges {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(0.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Text => prometheus_text::CONTENT_TYPE,
        }
    }

    /// The whole exposition (OpenMetrics's `# EOF` included).
    pub fn encode(self, registry: &Registry) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 << 10);
        match self {
            Format::OpenMetrics => text::encode(&mut out, registry)?,
            Format::Text => prometheus_text::encode(&mut out, registry)?,
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(accept: &[&str]) -> Format {
        let values: Vec<HeaderValue> = accept
            .iter()
            .map(|a| HeaderValue::from_str(a).unwrap())
            .collect();
        Format::for_accept(&values)
    }

    #[test]
    fn openmetrics_only_when_the_scraper_prefers_it() {
        // Prometheus 2.x and 3.x.
        assert_eq!(
            negotiate(&["application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"]),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(&["application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,*/*;q=0.2"]),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(&["text/plain", "Application/OpenMetrics-Text; q=0.9"]),
            Format::Text
        );
        assert_eq!(
            negotiate(&["application/openmetrics-text; q=0"]),
            Format::Text
        );
        assert_eq!(
            negotiate(&["application/openmetrics-text; q=zero"]),
            Format::Text
        );
        assert_eq!(negotiate(&["*/*"]), Format::Text);
        assert_eq!(negotiate(&[]), Format::Text);
        assert_eq!(
            negotiate(&["application/json, application/openmetrics-text"]),
            Format::OpenMetrics
        );
    }
}
