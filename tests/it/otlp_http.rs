//! The OTLP/HTTP receiver in process (`tower::ServiceExt::oneshot`): every
//! accepted form and every refusal, with its status code and body.

use std::io::Write;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use stormwatch::serve::otlp::{router, OtlpState};
use stormwatch::serve::response::RpcStatus;
use stormwatch::store::{Store, StoreOptions};
use tower::ServiceExt;

struct Rig {
    dir: tempfile::TempDir,
    store: Arc<Store>,
    state: Arc<OtlpState>,
    app: axum::Router,
}

fn rig_with(max_body: usize, max_inflight: usize, opts: StoreOptions) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), opts).unwrap());
    let state = Arc::new(OtlpState::new(Arc::clone(&store), max_body, max_inflight));
    let app = router(Arc::clone(&state));
    Rig {
        dir,
        store,
        state,
        app,
    }
}

fn rig() -> Rig {
    rig_with(64 << 20, 256 << 20, StoreOptions::default())
}

impl Rig {
    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, headers, body)
    }

    /// Flush and count stored spans.
    async fn stored(&self) -> usize {
        self.frame().await.height()
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

fn post(path: &str, content_type: &str, encoding: Option<&str>, body: Vec<u8>) -> Request<Body> {
    let mut b = Request::post(path).header("content-type", content_type);
    if let Some(e) = encoding {
        b = b.header("content-encoding", e);
    }
    b.body(Body::from(body)).unwrap()
}

/// A spec-shaped OTLP/JSON document (the shape of the spec's examples/trace.json)
/// with `n` spans, trace id byte `seed`.
fn spec_json(seed: u8, n: usize) -> String {
    let spans: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "traceId": format!("{:02x}", seed).repeat(16),
                "spanId": format!("{:016x}", i + 1),
                "parentSpanId": "",
                "name": "execute_tool search_flights",
                "startTimeUnixNano": "1785354394532000000",
                "endTimeUnixNano": "1785354399332000000",
                "kind": 1,
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": "search_flights"}},
                    {"key": "http.response.status_code", "value": {"intValue": "503"}},
                    {"key": "session.id", "value": {"stringValue": "sess-1"}},
                    {"key": "my.array", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": 2}]}}},
                    {"key": "my.map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": true}}]}}}
                ],
                "events": [{"timeUnixNano": "1785354399332000000", "name": "exception",
                            "attributes": [{"key": "exception.type", "value": {"stringValue": "UpstreamHTTPError"}}]}],
                "status": {"code": 2, "message": "Service Unavailable"}
            })
        })
        .collect();
    serde_json::json!({
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "travel-agent"}}]},
            "scopeSpans": [{"scope": {"name": "my.library", "version": "1.0.0", "attributes": []}, "spans": spans}]
        }]
    })
    .to_string()
}

fn proto_body(seed: u8, n: usize) -> Vec<u8> {
    let req: ExportTraceServiceRequest =
        stormwatch::ingest::json::decode(spec_json(seed, n).as_bytes()).unwrap();
    req.encode_to_vec()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn protobuf_is_accepted_and_answered_in_protobuf() {
    let rig = rig();
    let (status, headers, body) = rig
        .send(post(
            "/v1/traces",
            "application/x-protobuf",
            None,
            proto_body(1, 3),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let resp = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    assert_eq!(resp.partial_success, None);
    assert_eq!(rig.stored().await, 3);
}

#[tokio::test]
async fn spec_json_is_accepted_and_answered_in_json() {
    let rig = rig();
    let (status, headers, body) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            None,
            spec_json(2, 2).into_bytes(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body, b"{}");
    assert_eq!(rig.stored().await, 2);
    let df = rig.frame().await;
    let rows = crate::common::rows_by_key(
        &df,
        &[
            "tool_name",
            "error_class",
            "session_id",
            "error_type",
            "attributes",
        ],
    );
    let row = &rows[&format!("{}/{:016x}", "02".repeat(16), 1)];
    assert_eq!(row[0].as_deref(), Some("search_flights"));
    assert_eq!(row[1].as_deref(), Some("unavailable"));
    assert_eq!(row[2].as_deref(), Some("sess-1"));
    assert_eq!(row[3].as_deref(), Some("UpstreamHTTPError"));
    let attrs: serde_json::Value = serde_json::from_str(row[4].as_deref().unwrap()).unwrap();
    assert_eq!(attrs["my.array"], serde_json::json!(["a", 2]));
    assert_eq!(attrs["my.map"], serde_json::json!({"k": true}));
}

#[tokio::test]
async fn snake_case_and_enum_names_are_accepted_on_the_root_path() {
    let rig = rig();
    let body = r#"{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"svc"}}]},
      "scope_spans":[{"spans":[{"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331",
      "name":"execute_tool lookup","kind":"SPAN_KIND_INTERNAL","start_time_unix_nano":1785354394532000000,
      "end_time_unix_nano":"1785354395532000000",
      "attributes":[{"key":"gen_ai.operation.name","value":{"string_value":"execute_tool"}},
                    {"key":"rpc.grpc.status_code","value":{"int_value":8}}],
      "status":{"code":"STATUS_CODE_ERROR"}}]}]}]}"#;
    let (status, _, resp) = rig
        .send(post(
            "/",
            "application/json; charset=utf-8",
            None,
            body.as_bytes().to_vec(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&resp));
    assert_eq!(rig.stored().await, 1);
    let df = rig.frame().await;
    let rows = crate::common::rows_by_key(&df, &["tool_name", "error_class", "kind"]);
    let row = &rows["0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331"];
    assert_eq!(
        row,
        &vec![
            Some("lookup".into()),
            Some("rate_limited".into()),
            Some("internal".into())
        ]
    );
}

#[tokio::test]
async fn every_content_encoding_is_decompressed() {
    let rig = rig();
    let raw = proto_body(3, 2);
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zlib.write_all(&raw).unwrap();
    let zlib = zlib.finish().unwrap();
    let zstd = zstd::encode_all(&raw[..], 3).unwrap();
    for (enc, body) in [
        ("gzip", gzip(&raw)),
        ("deflate", zlib),
        ("zstd", zstd),
        ("identity", raw.clone()),
    ] {
        let (status, _, resp) = rig
            .send(post(
                "/v1/traces",
                "application/x-protobuf",
                Some(enc),
                body,
            ))
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{enc}: {}",
            String::from_utf8_lossy(&resp)
        );
    }
    // Four deliveries of the same two spans are stored once.
    assert_eq!(rig.stored().await, 2);
}

#[tokio::test]
async fn invalid_ids_are_a_partial_success_in_either_encoding() {
    let rig = rig();
    let mut doc: serde_json::Value = serde_json::from_str(&spec_json(4, 4)).unwrap();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array_mut()
        .unwrap();
    spans[1]["traceId"] = "00".repeat(16).into();
    spans[2]["spanId"] = "abcd".into();
    let (status, _, body) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            None,
            doc.to_string().into_bytes(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let resp: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(resp["partialSuccess"]["rejectedSpans"], "2");
    let msg = resp["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(
        msg.contains("trace id is all zero") && msg.contains("span id must be 8 bytes, got 2"),
        "{msg}"
    );
    assert_eq!(rig.stored().await, 2);

    let req = stormwatch::ingest::json::decode(
        doc.to_string()
            .replace("\"04040404", "\"05050505")
            .as_bytes(),
    )
    .unwrap();
    let (status, _, body) = rig
        .send(post(
            "/v1/traces",
            "application/x-protobuf",
            None,
            req.encode_to_vec(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let resp = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    let partial = resp.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 2);
    assert!(!partial.error_message.is_empty());
}

#[tokio::test]
async fn undecodable_bodies_are_400_with_a_status_body() {
    let rig = rig();
    let (status, headers, body) = rig
        .send(post(
            "/v1/traces",
            "application/x-protobuf",
            None,
            vec![0xff, 0xff, 0xff, 0x01],
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let st = RpcStatus::decode(body.as_slice()).unwrap();
    assert_eq!(st.code, 3);
    assert!(st.message.contains("protobuf"), "{}", st.message);

    let (status, headers, body) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            None,
            b"{\"resourceSpans\": 7}".to_vec(),
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/json");
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st["code"], 3);
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("$.resourceSpans: expected an array, got a number"),
        "{st}"
    );

    let (status, _, body) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            Some("gzip"),
            b"not gzip at all".to_vec(),
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("could not decompress the gzip body"));
    assert_eq!(rig.stored().await, 0);
}

#[tokio::test]
async fn wrong_method_media_type_and_encoding() {
    let rig = rig();
    let (status, headers, _) = rig
        .send(Request::get("/v1/traces").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "POST");

    let (status, _, body) = rig
        .send(post("/v1/traces", "text/plain", None, b"hi".to_vec()))
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(st["message"]
        .as_str()
        .unwrap()
        .contains("expected application/x-protobuf or application/json"));

    let no_type = Request::post("/v1/traces").body(Body::from("x")).unwrap();
    let (status, _, _) = rig.send(no_type).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let (status, _, body) = rig
        .send(post(
            "/v1/traces",
            "application/x-protobuf",
            Some("br"),
            proto_body(6, 1),
        ))
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let st = RpcStatus::decode(body.as_slice()).unwrap();
    assert!(st.message.contains("\"br\""), "{}", st.message);

    let (status, _, _) = rig
        .send(post("/v1/logs", "application/x-protobuf", None, vec![]))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn oversize_bodies_are_413_before_and_after_decompression() {
    let rig = rig_with(4096, 1 << 20, StoreOptions::default());
    let big = vec![b' '; 5000];
    let (status, _, body) = rig
        .send(post("/v1/traces", "application/json", None, big.clone()))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("4096-byte limit"));
    // Chunked (no Content-Length) is capped while it streams.
    let stream = futures_stream(big.clone());
    let (status, _, _) = rig
        .send(
            Request::post("/v1/traces")
                .header("content-type", "application/json")
                .body(stream)
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // A small gzip that inflates past the cap.
    let bomb = gzip(&vec![b' '; 100_000]);
    assert!(bomb.len() < 4096);
    let (status, _, body) = rig
        .send(post("/v1/traces", "application/json", Some("gzip"), bomb))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&body).contains("once decompressed"));
}

fn futures_stream(bytes: Vec<u8>) -> Body {
    Body::new(Chunks(
        bytes
            .chunks(1000)
            .map(bytes::Bytes::copy_from_slice)
            .collect(),
    ))
}

/// A body that arrives in chunks with no Content-Length.
struct Chunks(std::collections::VecDeque<bytes::Bytes>);

impl http_body::Body for Chunks {
    type Data = bytes::Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[tokio::test]
async fn a_full_write_path_answers_429_with_retry_after() {
    // In-flight body bytes exhausted: refused as the body arrives.
    let rig = rig_with(64 << 10, 64 << 10, StoreOptions::default());
    let _all = rig.state.budget.try_hold(64).unwrap();
    let (status, headers, _) = rig
        .send(post(
            "/v1/traces",
            "application/x-protobuf",
            None,
            proto_body(7, 1),
        ))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
}

/// A body that fits the size cap but whose decoding would need more than the
/// whole in-flight budget can never be admitted: 413, not a 429 to retry.
#[tokio::test]
async fn a_body_that_can_never_fit_the_budget_is_413_not_429() {
    let rig = rig_with(256 << 10, 256 << 10, StoreOptions::default());
    let body = spec_json(9, 200);
    assert!(
        body.len() > 64 << 10 && body.len() < 256 << 10,
        "{}",
        body.len()
    );
    let (status, headers, _) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            None,
            body.into_bytes(),
        ))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(headers.get("retry-after").is_none());
    // The same spans in smaller requests go in.
    let (status, _, _) = rig
        .send(post(
            "/v1/traces",
            "application/json",
            None,
            spec_json(9, 20).into_bytes(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn duplicate_deliveries_are_stored_once() {
    let rig = rig();
    for _ in 0..3 {
        let (status, _, _) = rig
            .send(post(
                "/v1/traces",
                "application/x-protobuf",
                None,
                proto_body(8, 5),
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(rig.stored().await, 5);
    let df = rig.frame().await;
    assert_eq!(crate::common::rows_by_key(&df, &[]).len(), 5);
}
