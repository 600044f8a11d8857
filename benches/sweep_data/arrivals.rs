//! How the `--slices` day arrives: the generator's rows as the spans an
//! instrumented agent exports (OTLP, GenAI conventions), spilled to disk
//! one file per slice by end time, then read back slice by slice and
//! submitted to the store in exporter-sized requests, prepared as the
//! receiver prepares them.

use std::collections::HashSet;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use stormwatch::model::{ErrorClass, SpanRow, NANOS_PER_DAY};
use stormwatch::store::Store;

/// The services the generator spreads turns over (`Day::service`).
const SERVICES: [&str; 3] = ["travel-agent", "support-agent", "ops-agent"];

/// The error classes the generator writes, by their index in a spilled span.
const CLASSES: [ErrorClass; 6] = [
    ErrorClass::Ok,
    ErrorClass::Unavailable,
    ErrorClass::RateLimited,
    ErrorClass::Timeout,
    ErrorClass::InvalidRequest,
    ErrorClass::ServerError,
];

/// The day's spans as OTLP, one file per slice on disk (so the process's
/// memory is the store's and the sweep's, not the day's): each span its
/// end time, service, expected error class and encoded `Span`.
pub struct Spill;

impl Spill {
    /// Generate `day` and spill it by slice; the spans spilled.
    pub fn write(
        dir: &Path,
        (day, index): (i32, i32),
        (per_day, count): (usize, usize),
        tools: &[crate::Tool],
    ) -> usize {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).expect("the spill directory");
        let mut files: Vec<BufWriter<std::fs::File>> = (0..count)
            .map(|i| BufWriter::new(std::fs::File::create(dir.join(i.to_string())).expect("spill")))
            .collect();
        let day_start = i64::from(day) * NANOS_PER_DAY;
        let slice_ns = NANOS_PER_DAY / count as i64;
        let mut spans = 0;
        crate::generate_day(day, index, per_day, tools, &mut |rows, _| {
            for r in rows.drain(..) {
                let slice = ((r.end_ns - day_start) / slice_ns).clamp(0, count as i64 - 1);
                let svc = SERVICES
                    .iter()
                    .position(|s| **s == *r.service_name)
                    .expect("a generator's service");
                let class = CLASSES
                    .iter()
                    .position(|c| *c == r.error_class)
                    .expect("a generator's class");
                let bytes = otlp_span(&r).encode_to_vec();
                let f = &mut files[slice as usize];
                f.write_all(&r.end_ns.to_le_bytes()).expect("spill");
                f.write_all(&[svc as u8, class as u8]).expect("spill");
                f.write_all(&(bytes.len() as u32).to_le_bytes())
                    .expect("spill");
                f.write_all(&bytes).expect("spill");
                spans += 1;
            }
        });
        for mut f in files {
            f.flush().expect("spill");
        }
        spans
    }

    /// Slice `slice`'s spans, by end time: (service, class, span).
    fn read(dir: &Path, slice: usize) -> Vec<(usize, ErrorClass, Span)> {
        let mut buf = Vec::new();
        std::fs::File::open(dir.join(slice.to_string()))
            .and_then(|mut f| f.read_to_end(&mut buf))
            .expect("reading the spill");
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let end = i64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
            let (svc, class) = (buf[at + 8] as usize, CLASSES[buf[at + 9] as usize]);
            let len = u32::from_le_bytes(buf[at + 10..at + 14].try_into().expect("4 bytes"));
            let body = &buf[at + 14..at + 14 + len as usize];
            out.push((end, svc, class, Span::decode(body).expect("a spilled span")));
            at += 14 + len as usize;
        }
        // Stable: spans ending together keep the generator's order.
        out.sort_by_key(|(end, ..)| *end);
        out.into_iter()
            .map(|(_, s, c, span)| (s, c, span))
            .collect()
    }
}

/// Submit slice `slice` in requests of `batch` spans, as the receiver
/// prepares them, and wait for every acknowledgement; the spans sent.
/// `open` keeps the traces some of whose calls were sent and whose root
/// was not yet.
pub fn deliver(
    store: &Store,
    (spill, slice): (&Path, usize),
    batch: usize,
    open: &mut HashSet<Vec<u8>>,
) -> usize {
    let spans = Spill::read(spill, slice);
    let sent = spans.len();
    for (_, _, span) in &spans {
        if span.parent_span_id.is_empty() {
            open.remove(&span.trace_id);
        } else if !open.contains(&span.trace_id) {
            open.insert(span.trace_id.clone());
        }
    }
    let mut acks = Vec::new();
    let mut spans = spans.into_iter().peekable();
    while spans.peek().is_some() {
        let chunk: Vec<_> = spans.by_ref().take(batch).collect();
        let (request, expected) = request(chunk);
        let prepared = stormwatch::ingest::prepare_within(
            &request,
            &store.window_now(),
            &store.result_shapes(),
        );
        assert_eq!(
            prepared.normalized.rejected, 0,
            "{:?}",
            prepared.normalized.reasons
        );
        assert_eq!(
            prepared.normalized.batch.error_class, expected,
            "the receiver classifies the spans as the generator meant"
        );
        acks.push(store.submit(prepared).expect("submitting"));
    }
    for ack in acks {
        ack.wait().expect("acknowledged");
    }
    sent
}

/// One exporter request: the spans grouped by service (a resource each),
/// and the error classes the receiver should find, in its order.
fn request(chunk: Vec<(usize, ErrorClass, Span)>) -> (ExportTraceServiceRequest, Vec<ErrorClass>) {
    let mut by_service: Vec<(Vec<Span>, Vec<ErrorClass>)> =
        vec![Default::default(); SERVICES.len()];
    for (svc, class, span) in chunk {
        by_service[svc].0.push(span);
        by_service[svc].1.push(class);
    }
    let mut expected = Vec::new();
    let resource_spans = by_service
        .into_iter()
        .enumerate()
        .filter(|(_, (spans, _))| !spans.is_empty())
        .map(|(svc, (spans, classes))| {
            expected.extend(classes);
            ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", Value::StringValue(SERVICES[svc].into()))],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .collect();
    (ExportTraceServiceRequest { resource_spans }, expected)
}

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("a hex id"))
        .collect()
}

/// A generated row as the span an instrumented agent exports (GenAI
/// semantic conventions): what the receiver turns back into that row.
fn otlp_span(r: &SpanRow) -> Span {
    let s = |v: &str| Value::StringValue(v.to_string());
    let mut attrs = Vec::new();
    if r.is_agent {
        attrs.push(kv("gen_ai.operation.name", s("invoke_agent")));
        if let Some(v) = &r.session_id {
            attrs.push(kv("session.id", s(v)));
        }
        if let Some(v) = r.input_tokens {
            attrs.push(kv("gen_ai.usage.input_tokens", Value::IntValue(v)));
        }
        if let Some(v) = r.output_tokens {
            attrs.push(kv("gen_ai.usage.output_tokens", Value::IntValue(v)));
        }
        if let Some(v) = r.cost_usd {
            attrs.push(kv("gen_ai.usage.cost", Value::DoubleValue(v)));
        }
    }
    if r.is_tool_call {
        attrs.push(kv("gen_ai.operation.name", s("execute_tool")));
        if let Some(v) = &r.tool_name {
            attrs.push(kv("gen_ai.tool.name", s(v)));
        }
        if let Some(v) = &r.tool_call_id {
            attrs.push(kv("gen_ai.tool.call.id", s(v)));
        }
        if let Some(v) = &r.tool_args_hash {
            let args = format!("{{\"args\":\"{v}\"}}");
            attrs.push(kv("gen_ai.tool.call.arguments", Value::StringValue(args)));
        }
    }
    if let Some(v) = r.http_status {
        attrs.push(kv("http.response.status_code", Value::IntValue(v.into())));
    }
    if let Some(v) = &r.error_type {
        attrs.push(kv("error.type", s(v)));
    }
    Span {
        trace_id: unhex(&r.trace_id),
        span_id: unhex(&r.span_id),
        parent_span_id: r.parent_span_id.as_deref().map(unhex).unwrap_or_default(),
        name: r.name.clone(),
        kind: 1,
        start_time_unix_nano: r.start_ns as u64,
        end_time_unix_nano: r.end_ns as u64,
        attributes: attrs,
        status: (r.status_code == "error").then(|| Status {
            code: 2,
            message: r.status_message.clone().unwrap_or_default(),
        }),
        ..Default::default()
    }
}
