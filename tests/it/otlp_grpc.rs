//! The OTLP/gRPC receiver in process, driven by real tonic clients over a
//! loopback socket: the generated `TraceServiceClient` for well-formed
//! requests, and `tonic::client::Grpc` with a bytes codec for what no
//! generated client would send. The twins of `otlp_http.rs`.

use std::io::Write;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use stormwatch::serve::grpc::{self, RetryInfo, EXPORT_PATH, RETRY_INFO_TYPE};
use stormwatch::serve::otlp::OtlpState;
use stormwatch::serve::response::RpcStatus;
use stormwatch::store::{Store, StoreOptions};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};

struct Rig {
    dir: tempfile::TempDir,
    store: Arc<Store>,
    state: Arc<OtlpState>,
    url: String,
    _server: tokio::task::JoinHandle<()>,
}

async fn rig_with(
    max_body: usize,
    max_inflight: usize,
    token: Option<&str>,
    loopback_only: bool,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), StoreOptions::default()).unwrap());
    let state = Arc::new(OtlpState {
        token: stormwatch::serve::auth::Token::new(token, false).unwrap(),
        ..OtlpState::new(Arc::clone(&store), max_body, max_inflight)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let service = grpc::TraceService::new(Arc::clone(&state), loopback_only.then_some(None));
    let server = tokio::spawn(async move {
        grpc::server()
            .add_routes(grpc::routes(service))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    Rig {
        dir,
        store,
        state,
        url,
        _server: server,
    }
}

async fn rig() -> Rig {
    rig_with(64 << 20, 256 << 20, None, true).await
}

impl Rig {
    async fn client(&self) -> TraceServiceClient<Channel> {
        TraceServiceClient::connect(self.url.clone()).await.unwrap()
    }

    /// A client for bytes no generated client would send.
    async fn raw(&self, body: Vec<u8>) -> Result<ExportTraceServiceResponse, Status> {
        self.raw_to(EXPORT_PATH, body).await
    }

    /// `raw` to any method path.
    async fn raw_to(
        &self,
        path: &'static str,
        body: Vec<u8>,
    ) -> Result<ExportTraceServiceResponse, Status> {
        let channel = Channel::from_shared(self.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        grpc.unary(
            tonic::Request::new(Bytes::from(body)),
            tonic::codegen::http::uri::PathAndQuery::from_static(path),
            BytesCodec,
        )
        .await
        .map(tonic::Response::into_inner)
    }

    /// Flush and read every stored span (polars runs off the async runtime).
    async fn frame(&self) -> polars::prelude::DataFrame {
        self.store.flush_async().await.unwrap();
        let dir = self.dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || crate::common::spans(&dir))
            .await
            .unwrap()
    }
}

/// Encodes bytes as they are, decodes the service's response.
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;
    fn encoder(&mut self) -> BytesCodec {
        BytesCodec
    }
    fn decoder(&mut self) -> BytesCodec {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = ExportTraceServiceResponse;
    type Error = Status;
    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> Result<Option<ExportTraceServiceResponse>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        ExportTraceServiceResponse::decode(bytes)
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }
}

/// `n` GenAI tool spans of trace byte `seed`: search_flights answered 503,
/// session `sess-<seed>`.
fn request(seed: u8, n: usize) -> ExportTraceServiceRequest {
    let spans: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "traceId": format!("{:02x}", seed).repeat(16),
                "spanId": format!("{:016x}", i + 1),
                "name": "execute_tool search_flights",
                "startTimeUnixNano": "1785354394532000000",
                "endTimeUnixNano": "1785354399332000000",
                "kind": 1,
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": "search_flights"}},
                    {"key": "http.response.status_code", "value": {"intValue": "503"}},
                    {"key": "session.id", "value": {"stringValue": format!("sess-{seed}")}}
                ],
                "status": {"code": 2, "message": "Service Unavailable"}
            })
        })
        .collect();
    let doc = serde_json::json!({
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "travel-agent"}}]},
            "scopeSpans": [{"scope": {"name": "grpc-test"}, "spans": spans}]
        }]
    });
    stormwatch::ingest::json::decode(doc.to_string().as_bytes()).unwrap()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn retry_delay_secs(status: &Status) -> Option<i64> {
    let details = RpcStatus::decode(status.details()).ok()?;
    let any = details
        .details
        .iter()
        .find(|a| a.type_url == RETRY_INFO_TYPE)?;
    RetryInfo::decode(any.value.as_slice())
        .ok()?
        .retry_delay
        .map(|d| d.seconds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_gzip_and_zstd_exports_are_stored_with_tool_class_and_session() {
    let rig = rig().await;
    let resp = rig
        .client()
        .await
        .export(request(1, 3))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.partial_success, None);
    for (seed, encoding) in [
        (2, CompressionEncoding::Gzip),
        (3, CompressionEncoding::Zstd),
    ] {
        let resp = rig
            .client()
            .await
            .send_compressed(encoding)
            .export(request(seed, 3))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.partial_success, None);
    }
    let df = rig.frame().await;
    let rows = crate::common::rows_by_key(&df, &["tool_name", "error_class", "session_id"]);
    assert_eq!(rows.len(), 9, "{rows:?}");
    for seed in [1u8, 2, 3] {
        let key = format!("{}/{:016x}", format!("{seed:02x}").repeat(16), 1);
        assert_eq!(
            rows[&key],
            vec![
                Some("search_flights".to_string()),
                Some("unavailable".to_string()),
                Some(format!("sess-{seed}"))
            ],
            "{key}"
        );
    }
    let metrics = &rig.state.grpc;
    assert_eq!(
        metrics
            .spans_accepted
            .load(std::sync::atomic::Ordering::Relaxed),
        9
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_ids_are_a_partial_success() {
    let rig = rig().await;
    let mut req = request(4, 3);
    req.resource_spans[0].scope_spans[0].spans[1].trace_id = vec![1; 8];
    let resp = rig.client().await.export(req).await.unwrap().into_inner();
    let partial = resp.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial.error_message.contains("trace id must be 16 bytes"),
        "{}",
        partial.error_message
    );
    assert_eq!(rig.frame().await.height(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_messages_are_invalid_argument_and_store_nothing() {
    let rig = rig().await;
    let err = rig
        .raw(b"\x0a\xff\xff\xff\xff not protobuf".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("protobuf"), "{}", err.message());
    assert_eq!(rig.frame().await.height(), 0);
    // Well-formed bytes through the same raw client go in.
    let ok = rig.raw(request(5, 2).encode_to_vec()).await.unwrap();
    assert_eq!(ok.partial_success, None);
    assert_eq!(rig.frame().await.height(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_messages_are_resource_exhausted_without_retry_info() {
    let rig = rig_with(4096, 1 << 20, None, true).await;
    let big = request(6, 40);
    assert!(big.encoded_len() > 4096);
    let err = rig.client().await.export(big.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("4096"), "{}", err.message());
    assert_eq!(retry_delay_secs(&err), None);
    // Small on the wire, past the cap once decompressed.
    let bomb = gzip(&big.encode_to_vec());
    assert!(bomb.len() < 4096, "{}", bomb.len());
    let err = rig
        .client()
        .await
        .send_compressed(CompressionEncoding::Gzip)
        .export(big)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(retry_delay_secs(&err), None);
    let refused = rig.state.grpc.refused();
    assert_eq!(refused, vec![("too_large", 2)], "{refused:?}");
    assert_eq!(rig.frame().await.height(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingest_token_is_checked_in_metadata() {
    let rig = rig_with(64 << 20, 256 << 20, Some("s3cret-token-0123456789"), false).await;
    let err = rig.client().await.export(request(7, 1)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(err.message().contains("authorization"), "{}", err.message());
    for (value, ok) in [
        ("Bearer wrong-token-0123456789", false),
        ("Bearer s3cret-token-0123456789", true),
    ] {
        let mut req = tonic::Request::new(request(7, 1));
        req.metadata_mut()
            .insert("authorization", value.parse().unwrap());
        let result = rig.client().await.export(req).await;
        assert_eq!(result.is_ok(), ok, "{value}: {result:?}");
        if let Err(e) = result {
            assert_eq!(e.code(), Code::Unauthenticated);
            assert!(e.message().contains("not `Bearer"), "{}", e.message());
        }
    }
    assert_eq!(rig.frame().await.height(), 1);
    assert_eq!(rig.state.grpc.refused(), vec![("unauthorized", 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_budget_is_resource_exhausted_with_retry_info_and_a_retry_goes_in() {
    let rig = rig_with(64 << 10, 64 << 10, None, true).await;
    let all = rig.state.budget.try_hold(64).unwrap();
    let mut client = rig.client().await;
    let err = client.export(request(8, 2)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    let delay = retry_delay_secs(&err).expect("RetryInfo in the status details");
    assert_eq!(delay, 1);
    // The client does as RetryInfo says: waits, and the retry is admitted.
    let release = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        drop(all);
    });
    tokio::time::sleep(std::time::Duration::from_secs(delay as u64)).await;
    release.await.unwrap();
    client.export(request(8, 2)).await.unwrap();
    assert_eq!(rig.frame().await.height(), 2);
    assert_eq!(rig.state.grpc.refused(), vec![("overloaded", 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_store_is_unavailable_and_retryable() {
    let rig = rig().await;
    let store = Arc::clone(&rig.store);
    tokio::task::spawn_blocking(move || store.close())
        .await
        .unwrap()
        .unwrap();
    let err = rig.client().await.export(request(9, 1)).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(retry_delay_secs(&err).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_method_or_host_is_refused() {
    let rig = rig().await;
    let err = rig
        .raw_to(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            Vec::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    assert!(
        err.message().contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        "{}",
        err.message()
    );
    assert_eq!(rig.state.grpc.refused(), vec![("unimplemented", 1)]);
    // A loopback listener without a token answers only requests addressed
    // to localhost (a name that rebinds to 127.0.0.1 is refused).
    let port = rig.url.rsplit(':').next().unwrap();
    let channel = Channel::from_shared(rig.url.clone())
        .unwrap()
        .origin(format!("http://attacker.example:{port}").parse().unwrap())
        .connect()
        .await
        .unwrap();
    let err = TraceServiceClient::new(channel)
        .export(request(10, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert_eq!(rig.frame().await.height(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_sent_over_both_transports_is_stored_once() {
    let rig = rig().await;
    let http = stormwatch::serve::otlp::router(Arc::clone(&rig.state));
    let req = request(11, 4);
    use tower::ServiceExt;
    let resp = http
        .oneshot(
            axum::http::Request::post("/v1/traces")
                .header("content-type", "application/x-protobuf")
                .body(axum::body::Body::from(req.encode_to_vec()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), axum::http::StatusCode::OK);
    rig.client().await.export(req).await.unwrap();
    assert_eq!(rig.frame().await.height(), 4);
}

/// A message under the size cap whose bytes alone pass the whole in-flight
/// budget is refused as it streams in, and not as a retryable overload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_whole_budget_is_refused_while_it_streams() {
    let rig = rig_with(1 << 20, 64 << 10, None, true).await;
    let big = request(12, 600);
    assert!(big.encoded_len() > 64 << 10 && big.encoded_len() < 1 << 20);
    let err = rig.client().await.export(big).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(retry_delay_secs(&err), None, "{err:?}");
    assert!(err.message().contains("never fit"), "{}", err.message());
    // Every permit is back.
    assert_eq!(rig.state.budget.available_kib(), 64);
    rig.client().await.export(request(12, 5)).await.unwrap();
    assert_eq!(rig.frame().await.height(), 5);
}
