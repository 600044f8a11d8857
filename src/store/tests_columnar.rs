//! The columnar write path against the row path it replaced: the same
//! request gives the same rows, the same frame and the same Parquet bytes;
//! dedup drops redelivered spans across the memtable, the frozen table and
//! the parts. The store's Parquet writer: span parts' chosen encodings read
//! back as polars' own writer's, and a frame of other columns refused.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::Event, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};
use polars::prelude::*;

use super::frozen::Frozen;
use super::memtable::{memory_keys, Memtable, Seen};
use super::writer::insert_batch;
use super::*;
use crate::ingest::rows::normalize_rows;
use crate::ingest::{normalize, SpanBatch};
use crate::model::{day_from_str, NANOS_PER_DAY};

fn kv(key: &str, v: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}
fn s(key: &str, v: &str) -> KeyValue {
    kv(key, Value::StringValue(v.into()))
}
fn i(key: &str, v: i64) -> KeyValue {
    kv(key, Value::IntValue(v))
}
fn f(key: &str, v: f64) -> KeyValue {
    kv(key, Value::DoubleValue(v))
}

/// A span's name, attributes, status and events.
type Shape = (&'static str, Vec<KeyValue>, Option<Status>, Vec<Event>);

/// Attributes of every kind of span the normalizer tells apart.
fn attribute_sets() -> Vec<Shape> {
    let error = |m: &str| {
        Some(Status {
            code: StatusCode::Error as i32,
            message: m.into(),
        })
    };
    let ok = Some(Status {
        code: StatusCode::Ok as i32,
        message: String::new(),
    });
    let exception = |t: &str, m: &str| Event {
        time_unix_nano: 1_785_354_394_600_000_000,
        name: "exception".into(),
        attributes: vec![s("exception.type", t), s("exception.message", m)],
        ..Default::default()
    };
    vec![
        (
            "execute_tool search_flights",
            vec![
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", "search_flights"),
                s("gen_ai.tool.call.id", "call_1"),
                s("gen_ai.tool.call.arguments", r#"{"to":"BER","from":"LIS"}"#),
                s("gen_ai.tool.call.result", r#"{"flights":[]}"#),
                s("session.id", "sess-1"),
                i("http.response.status_code", 503),
                s("error.type", "503"),
                f("gen_ai.usage.cost", 0.25),
                i("gen_ai.usage.input_tokens", 120),
                i("gen_ai.usage.output_tokens", 7),
            ],
            error("Service Unavailable"),
            vec![],
        ),
        (
            "execute_tool",
            vec![
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.call.arguments", "{}"),
            ],
            ok.clone(),
            vec![],
        ),
        (
            "weather",
            vec![
                s("openinference.span.kind", "TOOL"),
                s("tool.name", "get_weather"),
                s("tool_call.id", "oi-7"),
                s("input.value", "Lisbon, \"today\"\n\t\u{1}"),
                s(
                    "output.value",
                    r#"{"isError":true,"content":[{"text":"rate limit exceeded"}]}"#,
                ),
                s("llm.token_count.prompt", "42"),
            ],
            None,
            vec![],
        ),
        (
            "lookup.tool",
            vec![
                s("traceloop.span.kind", "tool"),
                s("traceloop.entity.name", "lookup"),
                s("traceloop.entity.input", "[1,2,3]"),
                i("rpc.grpc.status_code", 14),
            ],
            error("unavailable"),
            vec![exception("grpc.RpcError", "UNAVAILABLE: connection reset")],
        ),
        (
            "ai.toolCall",
            vec![
                s("ai.toolCall.name", "quote_price"),
                s("ai.toolCall.id", "vc-1"),
                kv(
                    "ai.toolCall.args",
                    Value::KvlistValue(opentelemetry_proto::tonic::common::v1::KeyValueList {
                        values: vec![s("sku", "ä-42"), i("n", 3)],
                    }),
                ),
                s("ai.telemetry.metadata.sessionId", "vercel-sess"),
            ],
            None,
            vec![],
        ),
        (
            "tools/call fetch_page",
            vec![
                s("mcp.method.name", "tools/call"),
                s("gen_ai.operation.name", "execute_tool"),
                s("mcp.tool.name", "fetch_page"),
                s("server.address", "localhost:8000"),
                i("jsonrpc.request.id", 9),
                s("rpc.response.status_code", "-32602"),
            ],
            error("invalid params"),
            vec![],
        ),
        (
            "something 🌩️ with ünïcödé",
            vec![
                s("tool.name", "fetch_page"),
                kv("gen_ai.tool.call.id", Value::BoolValue(true)),
                kv(
                    "tool_arguments",
                    Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                        values: vec![AnyValue {
                            value: Some(Value::StringValue("日本語".into())),
                        }],
                    }),
                ),
                kv("bytes", Value::BytesValue(vec![0, 255, 16])),
                kv("nan", Value::DoubleValue(f64::NAN)),
            ],
            error(""),
            vec![
                exception("TimeoutError", "deadline exceeded"),
                Event {
                    time_unix_nano: 7,
                    name: "retry \"2\"".into(),
                    ..Default::default()
                },
            ],
        ),
        (
            "invoke_agent planner",
            vec![
                s("gen_ai.operation.name", "invoke_agent"),
                s("gen_ai.agent.call.id", "agent-call-1"),
                s("gen_ai.conversation.id", "conv-9"),
            ],
            None,
            vec![exception("ValueError", "handled, not a failure")],
        ),
        ("", vec![], None, vec![]),
        (
            "GET",
            vec![
                s("http.request.method", "GET"),
                s("url.full", "https://user:pw@API.Fares.example:443/v1/x"),
                i("http.response.status_code", 200),
            ],
            None,
            vec![],
        ),
        (
            "POST",
            vec![
                s("peer.service", "payments"),
                s("server.address", "Pay.example:8443"),
            ],
            None,
            vec![],
        ),
        (
            "chat gpt-4o",
            vec![
                s("gen_ai.operation.name", "chat"),
                s("gen_ai.request.model", "gpt-4o"),
                s("error.type", "RateLimitError"),
                kv("empty", Value::StringValue(String::new())),
                kv("unset", Value::StringValue(String::new())),
            ],
            None,
            vec![],
        ),
    ]
}

/// A request of several resources (one without `service.name`, two alike),
/// spans on two days, every kind, roots and children, and invalid spans.
fn varied_request() -> ExportTraceServiceRequest {
    let day = i64::from(day_from_str("2026-07-29").unwrap()) * NANOS_PER_DAY;
    let sets = attribute_sets();
    let mut n = 0u64;
    let mut spans = |count: usize, start: i64| -> Vec<Span> {
        (0..count)
            .map(|k| {
                n += 1;
                let (name, attrs, status, events) = sets[(n as usize) % sets.len()].clone();
                let start = start + n as i64 * 1_000_003;
                Span {
                    trace_id: [(n % 5 + 1) as u8; 16].to_vec(),
                    span_id: n.to_be_bytes().to_vec(),
                    parent_span_id: match n % 3 {
                        0 => vec![],
                        1 => vec![0; 8],
                        _ => (n - 1).to_be_bytes().to_vec(),
                    },
                    name: name.into(),
                    kind: (n % 7) as i32,
                    start_time_unix_nano: start as u64,
                    // Some end before they start (clock skew).
                    end_time_unix_nano: if k % 9 == 4 {
                        start as u64 - 5
                    } else {
                        start as u64 + 250_000 * n
                    },
                    attributes: attrs,
                    status,
                    events,
                    ..Default::default()
                }
            })
            .collect()
    };
    let late = day + NANOS_PER_DAY - 20 * 1_000_003;
    let mut first = spans(30, day + 3_600_000_000_000);
    first.extend(spans(40, late));
    let mut invalid = spans(3, day);
    invalid[0].trace_id = vec![1; 15];
    invalid[1].span_id = vec![0; 8];
    invalid[2].start_time_unix_nano = 0;
    let second = spans(25, day + 7_200_000_000_000);
    let resource = |attrs: Vec<KeyValue>| Resource {
        attributes: attrs,
        ..Default::default()
    };
    let rs = |r: Option<Resource>, spans: Vec<Span>| ResourceSpans {
        resource: r,
        scope_spans: vec![ScopeSpans {
            spans,
            ..Default::default()
        }],
        ..Default::default()
    };
    let agent = || {
        resource(vec![
            s("service.name", "travel-agent"),
            s("session.id", "resource-session"),
        ])
    };
    ExportTraceServiceRequest {
        resource_spans: vec![
            rs(Some(agent()), first),
            rs(None, invalid),
            rs(Some(resource(vec![i("pid", 4)])), second.clone()),
            rs(Some(agent()), second),
        ],
    }
}

/// The row path's frames, by day.
fn row_frames(req: &ExportTraceServiceRequest) -> Vec<(i32, DataFrame)> {
    let rows = normalize_rows(req);
    let mut days: std::collections::BTreeMap<i32, Vec<&crate::model::SpanRow>> = Default::default();
    for r in &rows {
        days.entry(r.day()).or_default().push(r);
    }
    days.into_iter()
        .map(|(d, rows)| (d, frame::rows_to_frame(&rows).unwrap()))
        .collect()
}

fn parquet_bytes(df: &mut DataFrame) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.parquet");
    parquet::write_file(&path, df).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn the_columnar_path_gives_the_rows_frames_and_parquet_of_the_row_path() {
    let req = varied_request();
    let n = normalize(&req);
    assert_eq!(n.rejected, 3);
    let rows = normalize_rows(&req);
    assert_eq!(n.batch.rows(), rows);
    // Every source of a dependency is among them, and spans without one.
    let deps: std::collections::BTreeSet<Option<&str>> =
        rows.iter().map(|r| r.dependency.as_deref()).collect();
    let expected = [
        None,
        Some("api.fares.example"),
        Some("localhost"),
        Some("payments"),
        Some("travel-agent"),
    ];
    assert_eq!(deps, expected.into_iter().collect(), "{deps:?}");
    // A model span with its model, and spans that are none.
    let models: std::collections::BTreeSet<(bool, Option<&str>)> = rows
        .iter()
        .map(|r| (r.is_model, r.model_name.as_deref()))
        .collect();
    assert_eq!(
        models,
        [(false, None), (true, Some("gpt-4o"))]
            .into_iter()
            .collect()
    );

    // Through the writer's dedup into the memtable's day tables, as served.
    let mut mem = Memtable::default();
    let mut seen = Seen::new(3);
    let (stored, dups) = insert_batch(&mut mem, &mut seen, &n.batch);
    // The last two resources carry the same spans: the second copy is a redelivery.
    assert_eq!((stored, dups), (95, 25));
    let expected = row_frames(&req);
    assert_eq!(mem.days.len(), 2);
    assert_eq!(expected.len(), 2);
    for ((day, old), (mem_day, table)) in expected.into_iter().zip(&mem.days) {
        assert_eq!(day, *mem_day);
        let mut new = frame::batch_to_frame(table).unwrap();
        assert_eq!(new.schema().as_ref(), &frame::schema());
        // Dedup dropped the second copies; the row path kept them.
        let old = {
            let mut seen = super::memtable::KeySet::default();
            frame::dedup(old.clone(), &mut seen).unwrap()
        };
        assert!(new.equals_missing(&old), "{new}\n{old}");
        let mut old = old;
        assert_eq!(parquet_bytes(&mut new), parquet_bytes(&mut old));
    }
}

#[test]
fn a_batch_appended_in_pieces_is_the_batch_whole() {
    let batch = normalize(&varied_request()).batch;
    let mut whole = SpanBatch::default();
    whole.extend_from(&batch, &(0..batch.len() as u32).collect::<Vec<_>>());
    let mut pieces = SpanBatch::default();
    let odd: Vec<u32> = (0..batch.len() as u32).filter(|r| r % 2 == 1).collect();
    let even: Vec<u32> = (0..batch.len() as u32).filter(|r| r % 2 == 0).collect();
    pieces.extend_from(&batch, &odd);
    pieces.extend_from(&batch, &even);
    assert_eq!(whole.rows(), batch.rows());
    let order = |r: &crate::model::SpanRow| (r.span_id.clone(), r.resource.clone());
    let mut sorted = pieces.rows();
    sorted.sort_by_key(order);
    let mut expected = batch.rows();
    expected.sort_by_key(order);
    assert_eq!(sorted, expected);
    assert!(pieces.is_consistent());
    // Dictionaries are shared, not repeated.
    assert_eq!(
        pieces.resources.values().len(),
        batch.resources.values().len()
    );
    assert!(pieces.mem_bytes() > 0);
}

#[test]
fn the_store_writes_the_row_paths_parts() {
    let req = varied_request();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), super::tests::quick()).unwrap();
    let ack = store
        .submit(crate::ingest::prepare(&req))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!((ack.stored, ack.duplicates), (95, 25));
    store.flush().unwrap();
    for (day, old) in row_frames(&req) {
        let parts = store.layout().parts(day).unwrap();
        assert_eq!(parts.len(), 1);
        let names: Vec<_> = frame::schema().iter_names().cloned().collect();
        let stored = parquet::scan_parts(&parts)
            .unwrap()
            .collect()
            .unwrap()
            .select(names)
            .unwrap();
        let mut seen = super::memtable::KeySet::default();
        let old = frame::dedup(old, &mut seen).unwrap();
        assert!(stored.equals_missing(&old), "{stored}\n{old}");
    }
    store.close().unwrap();
}

#[test]
fn redelivered_spans_are_dropped_against_memtable_frozen_table_and_parts() {
    let batch = normalize(&varied_request()).batch;
    let days: Vec<i32> = batch.days().into_iter().collect();
    // In the memtable.
    let mut mem = Memtable::default();
    let mut seen = Seen::new(3);
    assert_eq!(insert_batch(&mut mem, &mut seen, &batch), (95, 25));
    assert_eq!(insert_batch(&mut mem, &mut seen, &batch), (0, 120));
    assert_eq!(mem.rows, 95);
    // In the frozen table, with the keys loaded afresh (as after eviction).
    let frozen = Arc::new(Frozen::new(mem.take(0), 0));
    let mut seen = Seen::new(3);
    let in_use = days.iter().copied().collect();
    for &d in &days {
        seen.load(d, memory_keys(d, &mem, Some(&frozen)), &in_use);
    }
    assert_eq!(insert_batch(&mut mem, &mut seen, &batch), (0, 120));
    assert!(mem.is_empty());

    // In the parts: a reopened store reads the keys back from Parquet.
    let dir = tempfile::tempdir().unwrap();
    let put = |store: &Store| {
        store
            .submit(crate::ingest::prepare(&varied_request()))
            .unwrap()
            .wait()
            .unwrap()
    };
    let store = Store::open(dir.path(), super::tests::quick()).unwrap();
    assert_eq!(put(&store).stored, 95);
    store.flush().unwrap();
    assert_eq!(put(&store).duplicates, 120);
    store.close().unwrap();
    drop(store);
    let store = Store::open(dir.path(), super::tests::quick()).unwrap();
    assert_eq!(put(&store).duplicates, 120);
    store.close().unwrap();
    assert_eq!(super::tests::count(dir.path()), 95);
}

/// Each column's dictionary page, by column name, in every row group of
/// the file at `path`: whether it has one.
fn dictionaries(path: &std::path::Path) -> Vec<(String, bool)> {
    let bytes = std::fs::read(path).unwrap();
    let meta =
        polars_parquet::parquet::read::read_metadata(&mut std::io::Cursor::new(bytes)).unwrap();
    assert!(!meta.row_groups.is_empty());
    meta.row_groups
        .iter()
        .flat_map(|rg| {
            rg.parquet_columns()
                .iter()
                .map(|c| {
                    (
                        c.descriptor().path_in_schema.join("."),
                        c.dictionary_page_offset().is_some(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_writer_chooses_plain_pages_for_unique_columns_and_reads_back_as_polars_does() {
    use crate::store::format::writer::{SpanWriter, PLAIN};
    let dir = tempfile::tempdir().unwrap();
    for (day, df) in row_frames(&varied_request()) {
        // polars' own writer, every column's dictionary tried.
        let theirs = dir.path().join(format!("{day}-polars.parquet"));
        ParquetWriter::new(std::fs::File::create(&theirs).unwrap())
            .with_compression(ParquetCompression::Zstd(None))
            .finish(&mut df.clone())
            .unwrap();
        let ours = dir.path().join(format!("{day}-ours.parquet"));
        parquet::write_file(&ours, &mut df.clone()).unwrap();
        let spill = dir.path().join(format!("{day}-spill.parquet"));
        let mut b = parquet::Batches::create(&spill, ParquetCompression::Lz4Raw).unwrap();
        b.write(&df).unwrap();
        assert_eq!(b.finish(false).unwrap(), df.height());
        let read = |p: &std::path::Path| {
            let f = std::fs::File::open(p).unwrap();
            ParquetReader::new(f).finish().unwrap()
        };
        for p in [&theirs, &ours, &spill] {
            let back = read(p);
            assert_eq!(back.schema(), df.schema(), "{}", p.display());
            assert!(back.equals_missing(&df), "{}\n{back}\n{df}", p.display());
        }
        // Ids, hashes, blobs and times plain; name columns keep their dictionary.
        for p in [&ours, &spill] {
            let dicts = dictionaries(p);
            for (column, dict) in &dicts {
                if PLAIN.contains(&column.as_str()) {
                    assert!(!dict, "{column} has a dictionary page in {}", p.display());
                }
            }
            assert!(
                dicts.iter().any(|(c, d)| c == "service_name" && *d),
                "{dicts:?}"
            );
        }
        // (polars tries one everywhere: a chunk this small always gets it.)
        assert!(dictionaries(&theirs)
            .iter()
            .any(|(c, d)| c == "span_id" && *d));
        // A flush output's row groups may be copied into a merged part as they are.
        let merged = SpanWriter::new(
            std::io::sink(),
            &frame::schema(),
            ParquetCompression::Zstd(None),
        )
        .unwrap();
        let raw = crate::store::format::pages::RawGroups::read(&ours).unwrap();
        assert!(raw.fits(merged.parquet_schema()));
        assert_eq!(raw.rows(), df.height());
    }
}

#[test]
fn a_frame_whose_columns_are_not_the_files_is_refused_by_name() {
    use crate::store::format::writer::SpanWriter;
    let (_, df) = row_frames(&varied_request()).remove(0);
    let mut w = SpanWriter::new(
        std::io::sink(),
        &frame::schema(),
        ParquetCompression::Zstd(None),
    )
    .unwrap();
    // The same number of columns, two of them swapped.
    let mut names: Vec<PlSmallStr> = df.get_column_names_owned();
    names.swap(3, 6);
    let swapped = df.select(names).unwrap();
    let e = w.write(&swapped).unwrap_err().to_string();
    assert!(
        e.contains("column 4 of the file is `name` (str), the frame's is `start_ns` (i64)"),
        "{e}"
    );
    let e = w
        .write(&df.drop("model_name").unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`model_name` (str), the frame's is no column"),
        "{e}"
    );
    w.write(&df).unwrap();
}
