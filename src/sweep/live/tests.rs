//! Parity of the incremental path with a whole read of the day: a day of
//! agent traffic arrives slice by slice through a real store (flushes,
//! compactions of flush outputs, seals of the day before and of the day,
//! late spans, spans dated after `now`,
//! turns across midnight, MCP client/server pairs whose server span comes
//! later, turns of an agent call id across traces, a restart), and after
//! every slice today's result from [`Live`] is the one [`day::Days`] reads.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{
    status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};

use super::*;
use crate::model::day_from_str;
use crate::store::{Store, StoreOptions};

const S: i64 = 1_000_000_000;

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
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn kv(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn kv_int(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

/// A span and when it reaches the store.
struct Arriving {
    at: i64,
    span: Span,
}

fn span(trace: u64, id: u64, parent: Option<u64>, name: &str, (s, e): (i64, i64)) -> Span {
    Span {
        trace_id: [trace.to_be_bytes(), 7u64.to_be_bytes()].concat(),
        span_id: id.to_be_bytes().to_vec(),
        parent_span_id: parent.map(|p| p.to_be_bytes().to_vec()).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: s as u64,
        end_time_unix_nano: e as u64,
        ..Default::default()
    }
}

/// One trace of agent traffic starting at `t0`, its spans with their
/// arrival times (a span arrives after it ends; the root last).
fn trace(rng: &mut Rng, n: u64, t0: i64, out: &mut Vec<Arriving>) {
    let tools = ["search_flights", "book_flight", "charge_card"];
    let root = n * 1000 + 1;
    let agent_call = (n % 7 == 3).then(|| format!("call-{}", n / 14));
    let mut at = t0 + S;
    let mut last_end = at;
    let mut next_id = root + 1;
    let calls = 1 + rng.below(6);
    let mut spans = Vec::new();
    let repeat = rng.chance(40);
    let tool = tools[rng.below(3) as usize];
    for k in 0..calls {
        let tool = if repeat {
            tool
        } else {
            tools[rng.below(3) as usize]
        };
        let dur = (1 + rng.below(20)) as i64 * S / 4;
        let parent = agent_call.is_none().then_some(root);
        let id = next_id;
        next_id += 1;
        let mcp = rng.chance(25);
        let name = if mcp {
            format!("MCP send tools/call {tool}")
        } else {
            format!("execute_tool {tool}")
        };
        let mut s = span(n, id, parent, &name, (at, at + dur));
        s.attributes = vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", tool),
            kv(
                "gen_ai.tool.call.arguments",
                &format!("{{\"q\":{}}}", if repeat { 1 } else { k }),
            ),
        ];
        if mcp {
            s.attributes.push(kv("mcp.method.name", "tools/call"));
        }
        if let Some(c) = &agent_call {
            s.attributes.push(kv("gen_ai.agent.call.id", c));
        }
        let failed = rng.chance(30);
        if failed {
            s.attributes.push(kv_int(
                "http.response.status_code",
                if rng.chance(50) { 503 } else { 400 },
            ));
            s.status = Some(Status {
                code: StatusCode::Error as i32,
                message: "upstream failed".into(),
            });
        }
        let end = at + dur;
        // Mostly on time; sometimes an hour late; rarely sent before it
        // "started" (a skewed clock).
        let delay = match rng.below(20) {
            0 => 3600 * S,
            1 => -(dur + 120 * S),
            _ => rng.below(300) as i64 * S,
        };
        if mcp {
            // The server's span of the same call, arriving a sweep later.
            let mut server = span(
                n,
                next_id,
                Some(id),
                &format!("tools/call {tool}"),
                (at + S / 10, end - S / 10),
            );
            next_id += 1;
            server.attributes = vec![
                kv("mcp.method.name", "tools/call"),
                kv("gen_ai.tool.name", tool),
            ];
            spans.push(Arriving {
                at: end + delay + 1800 * S,
                span: server,
            });
        }
        spans.push(Arriving {
            at: end + delay,
            span: s,
        });
        at = end + rng.below(30) as i64 * S;
        last_end = last_end.max(end);
    }
    if agent_call.is_none() {
        let mut r = span(n, root, None, "invoke_agent travel", (t0, last_end + S));
        r.attributes = vec![kv("gen_ai.operation.name", "invoke_agent")];
        spans.push(Arriving {
            at: last_end + S + rng.below(600) as i64 * S,
            span: r,
        });
    }
    out.extend(spans);
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                attributes: vec![kv("service.name", "travel-agent")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn options() -> StoreOptions {
    StoreOptions {
        flush_interval: Duration::from_secs(3600),
        retired_grace: Duration::ZERO,
        compact_parts: 4,
        // Seals when the test says (the days are long over by the clock).
        seal_after: None,
        ..StoreOptions::default()
    }
}

#[test]
fn every_sweep_of_the_day_finds_what_a_whole_read_finds() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    let day = day_from_str("2026-08-05").unwrap();
    let midnight = i64::from(day) * NANOS_PER_DAY;
    let mut rng = Rng(30);
    let mut arriving = Vec::new();
    // Traffic from 22:00 the day before to 23:30, denser by day.
    for n in 1..=360u64 {
        let t0 = midnight - 2 * 3600 * S + rng.below(25 * 3600) as i64 * S + (n as i64);
        trace(&mut rng, n, t0, &mut arriving);
    }
    arriving.sort_by_key(|a| a.at);
    let cfg = crate::config::DetectConfig::default();
    let mut live = Live::default();
    let mut sent = 0;
    let mut compared = 0;
    let mut found = 0;
    let (mut let_go, mut woken) = (0, 0);
    // A sweep every 20 minutes of the day, and one after midnight's settling.
    for k in 1..=73i64 {
        let now = midnight + k * 20 * 60 * S;
        let due: Vec<Span> = arriving[sent..]
            .iter()
            .take_while(|a| a.at < now)
            .map(|a| a.span.clone())
            .collect();
        sent += due.len();
        for chunk in due.chunks(40) {
            store
                .submit(crate::ingest::prepare(&request(chunk.to_vec())))
                .unwrap()
                .wait()
                .unwrap();
        }
        store.flush().unwrap();
        if k == 12 {
            // The day before sealed (its late spans since come as new parts).
            store.seal_compact(day - 1).unwrap();
        }
        if k == 30 {
            // The store compacted flush outputs under the kept state so far.
            let merged = store
                .reader()
                .day_parts(day)
                .unwrap()
                .names()
                .iter()
                .filter(|n| n.ends_with("-c.parquet"))
                .count();
            assert!(merged >= 2, "{merged} merged parts");
            // Today's parts rewritten as a seal would: the spans stay.
            store.seal_compact(day).unwrap();
        }
        if k == 40 {
            // A restart: the state is built again from one read.
            assert_eq!(live.rebuilds(), 1, "built once, at the first sweep");
            let (l, w) = live.let_go_and_woken();
            (let_go, woken) = (let_go + l, woken + w);
            live = Live::default();
        }
        if day_of_ns(now) != day {
            break;
        }
        let reader = store.reader();
        let _pin = reader.pin();
        let (want, want_fp, _) = day::Days::new(&reader, &cfg, now).result(day).unwrap();
        let (got, got_fp) = live.result(&reader, &cfg, now, day).unwrap();
        assert_eq!(got, want, "sweep {k} at {}", crate::time::rfc3339(now));
        assert_eq!(got_fp, want_fp, "sweep {k}");
        compared += 1;
        found = found.max(got.findings.len());
    }
    assert!(compared >= 70, "{compared} sweeps compared");
    assert!(
        found >= 5,
        "the traffic gives the rules something to find ({found})"
    );
    assert_eq!(live.rebuilds(), 1, "built again only at the restart");
    // Settled rows were let go, and late spans woke traces let go.
    let (l, w) = live.let_go_and_woken();
    let (let_go, woken) = (let_go + l, woken + w);
    assert!(let_go >= 5, "settled rows let go {let_go} times");
    assert!(woken >= 1, "{woken} traces read again");
}
