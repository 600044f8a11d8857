//! Charts are deterministic; hostile names stay text.

use super::chart;
use super::html::{esc, seg};
use axum::http::StatusCode;

fn days() -> Vec<chart::Day> {
    (20_640..20_670)
        .map(|d| {
            (
                d,
                100.0 + (d % 7) as f64,
                if d == 20_663 { 53.0 } else { 2.0 },
            )
        })
        .collect()
}

#[test]
fn charts_are_the_same_bytes_for_the_same_input() {
    let a = chart::volume_svg(&days(), 800, 300);
    assert_eq!(a, chart::volume_svg(&days(), 800, 300));
    assert!(
        a.starts_with("<svg") && a.contains("#D62728")
            || a.contains("#d62728")
            || a.contains("rgb(214,39,40)")
            || a.contains("D62728"),
        "{}",
        &a[..200.min(a.len())]
    );
    let p = chart::volume_png(&days(), 400, 150);
    assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(p, chart::volume_png(&days(), 400, 150));
    assert_ne!(p, chart::volume_png(&days()[..20], 400, 150));
    let r = chart::rate_svg(&days(), 600, 200, "%");
    assert_eq!(r, chart::rate_svg(&days(), 600, 200, "%"));
    assert_eq!(
        chart::sparkline(&[1, 2, 3], &[0, 1, 0]),
        chart::sparkline(&[1, 2, 3], &[0, 1, 0])
    );
    // No data: an empty chart, not a panic.
    assert!(chart::volume_svg(&[], 300, 100).starts_with("<svg"));
    assert!(!chart::volume_png(&[], 300, 100).is_empty());
}

#[test]
fn escaping_leaves_nothing_active() {
    let hostile = r#""><img src=x onerror=alert(1)><script>alert(1)</script>'"#;
    let e = esc(hostile);
    assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
    let s = seg(hostile);
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"%-_.~".contains(&b)),
        "{s}"
    );
}

/// Two retry chains of one tool in one turn, split by a success, are two
/// loops in the trace view, each with its own rhythm.
#[test]
fn each_request_loop_in_a_trace_has_its_own_rhythm() {
    use polars::prelude::*;
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    // Chain one: four no-backoff 503s, then ok. Chain two (after that
    // success, so a loop of its own): three 503s with growing gaps, then ok.
    let starts = [0i64, 110, 220, 330, 440, 1000, 2100, 4200, 8300];
    let n = starts.len();
    let df = df! {
        "trace_id" => vec!["ab".repeat(16); n + 1],
        "span_id" => (0..=n).map(|i| format!("{i:016x}")).collect::<Vec<_>>(),
        "parent_span_id" => (0..=n).map(|i| (i > 0).then(|| format!("{:016x}", 0))).collect::<Vec<_>>(),
        "name" => (0..=n).map(|i| if i == 0 { "invoke_agent".to_string() } else { "execute_tool search".to_string() }).collect::<Vec<_>>(),
        "service_name" => vec!["svc"; n + 1],
        "is_agent" => (0..=n).map(|i| i == 0).collect::<Vec<_>>(),
        "agent_call_id" => vec![None::<String>; n + 1],
        "is_tool_call" => (0..=n).map(|i| i > 0).collect::<Vec<_>>(),
        "tool_name" => (0..=n).map(|i| (i > 0).then_some("search")).collect::<Vec<_>>(),
        "tool_args_hash" => (0..=n).map(|i| match i { 0 => None, 1..=5 => Some("a"), _ => Some("b") }).collect::<Vec<_>>(),
        "tool_convention" => (0..=n).map(|i| (i > 0).then_some("gen_ai")).collect::<Vec<_>>(),
        "error_class" => (0..=n).map(|i| match i { 0 | 5 | 9 => "ok", _ => "unavailable" }).collect::<Vec<_>>(),
        "attributes" => vec!["{}"; n + 1],
        "start_ns" => std::iter::once(ms(0)).chain(starts.iter().map(|s| ms(*s))).collect::<Vec<_>>(),
        "end_ns" => std::iter::once(ms(9000)).chain(starts.iter().map(|s| ms(*s + 100))).collect::<Vec<_>>(),
    }
    .unwrap();
    let v = crate::read::trace::view(&"ab".repeat(16), &df).unwrap();
    let by_id = |i: usize| {
        v.spans
            .iter()
            .find(|s| s.span_id == format!("{i:016x}"))
            .unwrap()
    };
    assert_eq!(by_id(1).verdict, "failed");
    assert_eq!(by_id(4).verdict, "rescued");
    assert_eq!(by_id(5).verdict, "rescued");
    assert_eq!(by_id(4).rhythm.as_deref(), Some("no_backoff"));
    // After the success the next failure starts fresh, then is rescued
    // with growing gaps.
    assert_eq!(by_id(6).verdict, "failed");
    assert_eq!(by_id(9).verdict, "rescued");
    assert_eq!(by_id(9).rhythm.as_deref(), Some("exponential"));
}

fn query(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The API takes a query value as given (an empty one is a bad value, and
/// `days` is checked even beside `from` / `to`); the pages drop their forms'
/// blank fields first.
#[test]
fn api_query_values_are_taken_as_given() {
    use super::query::{form_fields, range};
    let last = Some(20_660);
    assert_eq!(range(&query(&[]), last).ok().map(|r| r.days), Some(30));
    for bad in [
        &[("days", "")][..],
        &[("from", "")],
        &[("to", "")],
        &[("days", "true"), ("to", "2026-07-29")],
        &[("days", "7"), ("from", "2026-07-01")],
    ] {
        let e = range(&query(bad), last).err();
        assert_eq!(e.map(|e| e.0), Some(StatusCode::BAD_REQUEST), "{bad:?}");
    }
    let blank = form_fields(query(&[("from", ""), ("to", ""), ("days", "7")]));
    assert_eq!(range(&blank, last).ok().map(|r| r.days), Some(7));
}

/// A path segment that is not UTF-8 is answered like the handlers' own bad
/// values: a 400 page, not axum's plain text.
#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_a_400_page() {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;
    let app = axum::Router::new().route(
        "/x/{id}",
        axum::routing::get(
            |super::query::Segments(id): super::query::Segments<String>| async move { id },
        ),
    );
    let r = app
        .clone()
        .oneshot(Request::get("/x/%FF").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let ct = r.headers()[axum::http::header::CONTENT_TYPE]
        .to_str()
        .unwrap();
    assert!(ct.starts_with("text/html"), "{ct}");
    let ok = app
        .oneshot(Request::get("/x/SW-LWJM").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

/// The demo (`serve --demo`'s spans, swept as of its morning after) behind
/// the dashboard's router, as `serve` mounts it.
struct Demo {
    _dir: tempfile::TempDir,
    store: crate::store::Store,
    cfg: crate::config::Config,
    app: axum::Router,
}

/// A runtime like `serve`'s, for the handlers (whose reads go to its
/// blocking pool); the store is opened and swept outside it.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn demo() -> Demo {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::config::Config::default();
    let store = crate::store::Store::open(dir.path(), cfg.store_options(Some(0))).unwrap();
    crate::demo::load(&store).unwrap();
    crate::demo::sweep(&store, &cfg).unwrap();
    let reads = std::sync::Arc::new(crate::read::cache::Reads::new(store.reader()));
    let app = super::router(
        reads,
        &dir.path().join("no-panels.toml"),
        cfg.detect.error_spike.clone(),
    )
    .unwrap();
    Demo {
        _dir: dir,
        store,
        cfg,
        app,
    }
}

impl Demo {
    /// GET `path`: status, content type, body.
    async fn get(&self, path: &str) -> (StatusCode, String, String) {
        use axum::body::Body;
        use axum::http::Request;
        use tower::ServiceExt;
        let r = self
            .app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = r.status();
        let ct = r
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn json(&self, path: &str) -> serde_json::Value {
        let (status, ct, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(ct.starts_with("application/json"), "{path}: {ct}");
        serde_json::from_str(&body).unwrap()
    }
}

/// The demo's incidents on the overview, `/incidents`, an incident's page
/// and the API: the search_flights outage is one incident of its spike and
/// its storm, with the reason the storm joined, its timeline, impact,
/// remedy and evidence traces linked to the trace view; each member's page
/// links back to it.
#[test]
fn incidents_show_on_the_overview_their_pages_and_the_api() {
    let d = demo();
    runtime().block_on(incidents_show(&d));
}

async fn incidents_show(d: &Demo) {
    let list = d.json("/api/incidents").await;
    let all = list["incidents"].as_array().unwrap();
    assert_eq!(list["total"], all.len());
    assert!(all.len() >= 2, "{list:#}");
    assert_eq!(list["counts"]["open"], all.len(), "{list:#}");
    assert!(all.iter().all(|i| i["state"] == "open"), "{list:#}");
    // Open first, then the most severe first.
    let sev: Vec<&str> = all
        .iter()
        .map(|i| i["severity"].as_str().unwrap())
        .collect();
    let rank = |s: &str| ["critical", "warning", "info"].iter().position(|x| *x == s);
    assert!(sev.windows(2).all(|w| rank(w[0]) <= rank(w[1])), "{sev:?}");
    let flights = all
        .iter()
        .find(|i| i["tools"] == serde_json::json!(["search_flights"]))
        .unwrap_or_else(|| panic!("{list:#}"));
    let id = flights["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("INC-"), "{id}");
    assert!(
        flights["title"]
            .as_str()
            .unwrap()
            .starts_with("search_flights failing since 2026-07-29"),
        "{flights}"
    );
    assert_eq!(flights["members"].as_array().unwrap().len(), 2, "{flights}");

    // The overview: the incidents list, each linked, and the resolved count.
    let (status, _, home) = d.get("/").await;
    assert_eq!(status, StatusCode::OK);
    let section = &home[home
        .find(r#"<div id="incidents">"#)
        .expect("the incidents section")..];
    let section = &section[..section.find("</div>").unwrap()];
    assert!(
        section.contains(&format!(r#"<a href="/incidents/{id}">{id}</a>"#)),
        "{section}"
    );
    assert!(
        section.contains("search_flights failing since"),
        "{section}"
    );
    assert!(
        section.contains(r#"0 resolved · <a href="/incidents?state=all">"#),
        "{section}"
    );
    assert!(
        home.contains(r#"<a href="/incidents">Incidents</a>"#),
        "the header links them"
    );

    // The list page, its filters.
    let (status, _, page) = d.get("/incidents").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        page.matches(r#"<a href="/incidents/INC-"#).count(),
        all.len()
    );
    let (_, _, none) = d.get("/incidents?state=resolved").await;
    assert!(none.contains("No resolved incidents."), "{none}");
    let (_, _, blank) = d.get("/incidents?state=").await;
    assert_eq!(
        blank.matches(r#"<a href="/incidents/INC-"#).count(),
        all.len()
    );
    assert_eq!(
        d.get("/incidents?state=sleeping").await.0,
        StatusCode::BAD_REQUEST
    );

    // One incident's page.
    let (status, _, one) = d.get(&format!("/incidents/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    for want in [
        "<h1>search_flights failing since 2026-07-29",
        r#"<dl id="cause"><dt>Cause</dt><dd>one tool, search_flights</dd>"#,
        r#"<div class="counters" id="impact">"#,
        r#"<dl id="remedy"><dt>Will waiting fix it?</dt>"#,
        "When to cut it off",
        r#"<table id="timeline">"#,
        "first finding: Error-rate spike: search_flights",
        r#"<table id="members">"#,
        "same tool search_flights as SW-",
        r#"<a class="trace" href="/traces/baacbed78f2b62522a113193688fafe8?day=2026-07-29">"#,
        "first member",
    ] {
        assert!(one.contains(want), "{want}: {one}");
    }
    let members: Vec<String> = flights["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    for m in &members {
        assert!(
            one.contains(&format!(r#"<a class="sid" href="/signals/{m}">{m}</a>"#)),
            "{m}"
        );
        // The member's page names its incident, linked; so does its JSON.
        let (_, _, sig) = d.get(&format!("/signals/{m}")).await;
        assert!(
            sig.contains(&format!(r#"Part of <a href="/incidents/{id}">{id}</a>"#)),
            "{sig}"
        );
        let j = d.json(&format!("/api/signals/{m}")).await;
        assert_eq!(j["incident"], id.as_str(), "{j}");
    }
    // Lower case finds it; an unknown id is a 404 page saying where the ids are.
    assert_eq!(
        d.get(&format!("/incidents/{}", id.to_lowercase())).await.0,
        StatusCode::OK
    );
    let (status, ct, missing) = d.get("/incidents/INC-NOPE").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(
        missing.contains("no incident &quot;INC-NOPE&quot;; /incidents lists them"),
        "{missing}"
    );

    // The API's incident: the stored body, its times in RFC 3339, its history.
    let j = d.json(&format!("/api/incidents/{id}")).await;
    assert_eq!(j["id"], id.as_str());
    assert_eq!(j["state"], "open");
    // The first failing call of the storm: the spike knows only its day.
    assert_eq!(j["first_seen"], "2026-07-29T19:03:20.787Z", "{j:#}");
    assert_eq!(j["members"].as_array().unwrap().len(), 2);
    assert_eq!(j["members"][0]["reason"], "first finding");
    assert!(
        j["remedy"]["cut_off"]
            .as_str()
            .unwrap()
            .contains("attempts"),
        "{j:#}"
    );
    assert_eq!(j["history"][0]["to"], "open");
    assert_eq!(j["history"][0]["reason"], "first member");
    assert!(!j["evidence"].as_array().unwrap().is_empty());
    assert_eq!(
        j["evidence"][0]["trace_id"],
        "baacbed78f2b62522a113193688fafe8"
    );
    // Ids of any shape: a 404, never a 500.
    for bad in [
        "nope",
        "INC-%27%20OR%201%3D1--",
        "%E2%98%83",
        "INC-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    ] {
        let (status, _, body) = d.get(&format!("/api/incidents/{bad}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}: {body}");
    }

    // Paging and the filter.
    let p2 = d.json("/api/incidents?page_size=1&page=2").await;
    assert_eq!(p2["pages"], all.len());
    assert_eq!(p2["incidents"][0]["id"], all[1]["id"]);
    for bad in [
        "state=",
        "state=all%20",
        "page=0",
        "page_size=201",
        "page=99",
    ] {
        let (status, _, body) = d.get(&format!("/api/incidents?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    assert_eq!(d.json("/api/incidents?state=resolved").await["total"], 0);
    assert_eq!(d.json("/api/incidents?state=all").await["total"], all.len());

    // The OpenAPI document: both operations, their schemas in components.
    let doc = d.json("/api/openapi.json").await;
    let schemas = &doc["components"]["schemas"];
    for (path, want) in [
        ("/api/incidents", "IncidentsPage"),
        ("/api/incidents/{id}", "IncidentAnswer"),
    ] {
        let r = &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["$ref"];
        assert_eq!(r, &format!("#/components/schemas/{want}"), "{path}");
        assert!(schemas[want]["properties"].is_object(), "{want}");
    }
    // Every reference resolves; no JSON Schema-only keyword OpenAPI 3.0 lacks.
    let text = doc.to_string();
    for r in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(schemas[name].is_object(), "{name}");
    }
    assert!(
        !text.contains("\"$defs\"") && !text.contains("\"const\""),
        "{text}"
    );
    assert!(!text.contains("\"format\":\"uint"), "{text}");
}

/// The kept incidents are read again when a sweep commits: muting every
/// member of an incident and sweeping makes it acknowledged on the pages
/// and the API, without a restart.
#[test]
fn a_sweep_that_changes_an_incident_is_seen_at_once() {
    let d = demo();
    let rt = runtime();
    let list = rt.block_on(d.json("/api/incidents"));
    let flights = list["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["tools"] == serde_json::json!(["search_flights"]))
        .unwrap()
        .clone();
    let id = flights["id"].as_str().unwrap();
    let open_before = list["counts"]["open"].as_u64().unwrap();
    {
        let mut db = crate::signal::StateDb::open(&d.store.reader().layout().state_db()).unwrap();
        for m in flights["members"].as_array().unwrap() {
            db.mute(m.as_str().unwrap(), None, false, crate::demo::NOW_NS)
                .unwrap();
        }
    }
    // The store's calls block: outside the runtime, as `serve` makes them.
    crate::demo::sweep(&d.store, &d.cfg).unwrap();
    rt.block_on(acknowledged(&d, id, open_before));
}

async fn acknowledged(d: &Demo, id: &str, open_before: u64) {
    let after = d.json("/api/incidents").await;
    assert_eq!(after["counts"]["open"], open_before - 1, "{after:#}");
    assert_eq!(after["counts"]["acknowledged"], 1, "{after:#}");
    // Open ones first: the acknowledged one comes last.
    let ids: Vec<&str> = after["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.last(), Some(&id), "{ids:?}");
    let j = d.json(&format!("/api/incidents/{id}")).await;
    assert_eq!(j["state"], "acknowledged");
    assert_eq!(
        j["history"][1]["reason"], "every open member muted",
        "{j:#}"
    );
    let (_, _, page) = d.get(&format!("/incidents/{id}")).await;
    assert!(
        page.contains(
            r#"<span id="state"><span class="pill state-acknowledged">acknowledged</span></span>"#
        ),
        "{page}"
    );
    let (_, _, home) = d.get("/").await;
    assert!(
        home.contains(&format!(r#"<a href="/incidents/{id}">"#)),
        "acknowledged ones stay on the overview"
    );
}

/// The trace view marks a retry that came before the wait its failure
/// stated (the HTTP child's Retry-After), and one that waited it out.
#[test]
fn the_trace_view_marks_retries_that_ignored_retry_after() {
    use polars::prelude::*;
    let ms = |m: i64| (1_785_000_000_000i64 + m) * 1_000_000;
    // Rows: the agent; three tool calls (1, 3, 5), each with an HTTP child
    // (2, 4, 6) saying 30 s. The second call came 200 ms after the first,
    // the third 31 s after the second.
    let starts = [0i64, 0, 10, 300, 310, 31_400, 31_410];
    let ends = [60_000i64, 100, 90, 400, 390, 31_500, 31_490];
    let parent = [None, Some(0), Some(1), Some(0), Some(3), Some(0), Some(5)];
    let tool = |i: usize| i % 2 == 1;
    let n = starts.len();
    let df = df! {
        "trace_id" => vec!["cd".repeat(16); n],
        "span_id" => (0..n).map(|i| format!("{i:016x}")).collect::<Vec<_>>(),
        "parent_span_id" => parent.iter().map(|p| p.map(|p: usize| format!("{p:016x}"))).collect::<Vec<_>>(),
        "name" => (0..n).map(|i| if i == 0 { "invoke_agent" } else if tool(i) { "execute_tool fare_search" } else { "GET" }).collect::<Vec<_>>(),
        "service_name" => vec!["svc"; n],
        "is_agent" => (0..n).map(|i| i == 0).collect::<Vec<_>>(),
        "agent_call_id" => vec![None::<String>; n],
        "is_tool_call" => (0..n).map(tool).collect::<Vec<_>>(),
        "tool_name" => (0..n).map(|i| tool(i).then_some("fare_search")).collect::<Vec<_>>(),
        "tool_args_hash" => (0..n).map(|i| tool(i).then_some("a")).collect::<Vec<_>>(),
        "tool_convention" => (0..n).map(|i| tool(i).then_some("gen_ai")).collect::<Vec<_>>(),
        "error_class" => (0..n).map(|i| if i == 0 || i == 5 || i == 6 { "ok" } else { "rate_limited" }).collect::<Vec<_>>(),
        "retry_after_ms" => (0..n).map(|i| (i == 2 || i == 4).then_some(30_000i64)).collect::<Vec<_>>(),
        "attributes" => vec!["{}"; n],
        "start_ns" => starts.iter().map(|s| ms(*s)).collect::<Vec<_>>(),
        "end_ns" => ends.iter().map(|e| ms(*e)).collect::<Vec<_>>(),
    }
    .unwrap();
    let v = crate::read::trace::view(&"cd".repeat(16), &df).unwrap();
    let by_id = |i: usize| {
        v.spans
            .iter()
            .find(|s| s.span_id == format!("{i:016x}"))
            .unwrap()
    };
    assert_eq!(
        (by_id(3).retry_after_ms, by_id(3).early),
        (Some(30_000), Some(true))
    );
    assert_eq!(
        (by_id(5).retry_after_ms, by_id(5).early),
        (Some(30_000), Some(false))
    );
    assert_eq!((by_id(1).retry_after_ms, by_id(1).early), (None, None));
    let html = super::pages::trace(&v, 1, None);
    assert!(html.contains("early: Retry-After 30 s"), "{html}");
    assert!(html.contains("waited out Retry-After 30 s"), "{html}");
}

/// A captured framework run as the trace view sees it.
fn fixture_view(name: &str) -> crate::read::trace::TraceView {
    let path = format!(
        "{}/fixtures/frameworks/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let req = crate::ingest::json::decode(&std::fs::read(path).unwrap()).unwrap();
    let df = crate::store::frame::batch_to_frame(&crate::ingest::normalize(&req).batch).unwrap();
    crate::read::trace::view("t", &df).unwrap()
}

#[test]
fn the_trace_view_says_who_made_each_retry() {
    // pydantic-ai: the model asked again after every failure.
    let v = fixture_view("pydantic-ai-storm");
    let retries: Vec<_> = v.spans.iter().filter(|s| s.gap_ms.is_some()).collect();
    assert_eq!(retries.len(), 11);
    assert!(retries.iter().all(|s| s.driver.as_deref() == Some("model")));
    assert_eq!(v.spans.iter().filter(|s| s.is_model).count(), 13);
    let page = crate::dash::pages::trace(&v, 1, None);
    assert!(page.contains("the model asked again"), "{page}");
    // A span that is no retry has no driver.
    assert!(v
        .spans
        .iter()
        .filter(|s| s.gap_ms.is_none())
        .all(|s| s.driver.is_none()));
}

#[test]
fn a_signal_s_evidence_row_says_who_made_the_retries() {
    let mut e = crate::signal::Evidence::turn("t1", "t1/root", 20_663, 12, 12);
    e.rhythm = Some("no_backoff".into());
    assert!(!crate::dash::pages::evidence_cells(&e, "").contains("driver"));
    e.driver = Some(crate::signal::driver::DriverEvidence {
        driver: "model".into(),
        model_calls: 11,
        input_tokens: 1144,
        output_tokens: 693,
        cost_usd: None,
        unpriced_calls: 11,
        models: vec!["scripted".into()],
        framework: Some("pydantic-ai".into()),
    });
    let cells = crate::dash::pages::evidence_cells(&e, "");
    assert!(
        cells.contains("no_backoff <span class=\"muted driver\">· driver model, 11 model calls, 1144 + 693 tokens</span>"),
        "{cells}"
    );
}

#[test]
fn the_trace_view_labels_each_retry_by_its_round_as_the_driver_rule_does() {
    use crate::detect::tests_models::{agent, failing_tool, s, span};
    // A failure, a model call, then two overlapping attempts (one round):
    // both retries were asked for by the model, the second too though the
    // first of its round ended after it began.
    let spans = vec![
        agent(),
        failing_tool(2, 0),
        span(
            9,
            Some(1),
            (300, 900),
            vec![
                s("gen_ai.operation.name", "chat"),
                s("gen_ai.request.model", "gpt-4o"),
            ],
        ),
        failing_tool(3, 1000),
        failing_tool(4, 1050),
    ];
    let df = crate::detect::tests_models::frame(spans);
    let v = crate::read::trace::view(&"07".repeat(16), &df).unwrap();
    let drivers: Vec<Option<&str>> = v
        .spans
        .iter()
        .filter(|s| s.tool.is_some())
        .map(|s| s.driver.as_deref())
        .collect();
    assert_eq!(drivers, [None, Some("model"), Some("model")], "{v:?}");
}

/// Markup is made by templates only: no page builds HTML with `format!` or
/// `push_str`, and the only markup a template takes in as it is
/// (`PreEscaped`) is the charts' SVG, the doctype, and the panels' and the
/// spike section's own template output.
#[test]
fn pages_are_templates() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dash");
    let mut stack = vec![dir];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if name != "chart" && name != "static" {
                    stack.push(path);
                }
                continue;
            }
            if !name.ends_with(".rs") || name.starts_with("tests") {
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for bad in [
                "format!(r#\"<",
                "format!(\"<",
                "push_str(\"<",
                "push_str(r#\"<",
            ] {
                assert!(!text.contains(bad), "{}: {bad}", path.display());
            }
            for (i, _) in text.match_indices("PreEscaped(") {
                let after = &text[i + "PreEscaped(".len()..];
                assert!(
                    [
                        "chart::",
                        "swatch(",
                        "\"<!doctype html>\")",
                        "panels)",
                        "rate)"
                    ]
                    .iter()
                    .any(|ok| after.starts_with(ok)),
                    "{}: PreEscaped({}",
                    path.display(),
                    &after[..after.len().min(40)]
                );
            }
        }
    }
    assert!(seen > 10, "read {seen} files");
}
