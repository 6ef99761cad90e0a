//! Metrics and traces as an operator sees them: the Prometheus endpoint on its own
//! loopback listener (never the API's TLS port), counters and histograms that move with
//! the requests, actions, 402s and rate-limit refusals that happened, labels that carry
//! no caller's data, and the OpenTelemetry span tree of one action received by a local
//! OTLP/HTTP receiver.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use e2e::Appliance;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use scrape::{Scrape, metrics_listen};
use test_support::metrics as scrape;

const HELLO: &str = r#"async function main() { return "hello"; }"#;
const THROWS: &str = r#"async function main() { throw new Error("no"); }"#;
/// Uses the caller's wallet through keyservice.
const SIGN: &str = e2e::load::SIGN_ACTION;

/// A dev appliance with its metrics on a free loopback port (and `env` on top).
async fn start(env: &[(&str, &str)]) -> (Appliance, SocketAddr) {
    let (addr, (key, value)) = metrics_listen();
    let mut all: Vec<(&str, &str)> = vec![(key, value.as_str())];
    all.extend_from_slice(env);
    (Appliance::start_with(&all).await, addr)
}

async fn action(app: &Appliance, key: &str, code: &str, params: Value) -> e2e::Reply {
    app.post(
        "/lit_action",
        Some(key),
        json!({"code": code, "js_params": params}),
    )
    .await
}

#[tokio::test]
async fn metrics_are_served_on_their_own_loopback_listener_only() {
    // The default is loopback; anything else needs a token.
    let out = e2e::appliance_command()
        .arg("print-config")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split("[metrics]").nth(1).unwrap_or_default();
    assert!(
        section.contains("listen = \"127.0.0.1:9464\""),
        "default metrics listener: {text}"
    );
    let out = e2e::appliance_command()
        .arg("print-config")
        .env("APPLIANCE_METRICS__LISTEN", "0.0.0.0:9464")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a public listener without a token"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("metrics.bearer_token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (app, addr) = start(&[]).await;
    let answer = scrape::get(addr, "/metrics", None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        answer.content_type
    );
    let scrape = Scrape::parse(&answer.body);
    assert!(scrape.value("process_resident_memory_bytes").unwrap() > 1e6);
    assert!(scrape.value("process_open_fds").unwrap() > 3.0);
    assert_eq!(
        scrape.sum("appliance_build_info", &[]),
        1.0,
        "{}",
        answer.body
    );
    assert!(
        scrape.value("appliance_worker_pool_size").unwrap() >= 2.0,
        "the pool's size is read when scraped"
    );
    assert_eq!(scrape.value("appliance_keyservice_up"), Some(1.0));
    let expiry = scrape
        .value("appliance_tls_certificate_expiry_timestamp_seconds")
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now, "the served certificate's expiry: {expiry}");
    // Only /metrics, only GET.
    assert_eq!(scrape::get(addr, "/", None).await.status, 404);
    assert_eq!(
        scrape::get(addr, "/core/v1/openapi.json", None)
            .await
            .status,
        404
    );
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = client
        .post(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status().as_u16(), 405);

    // A second appliance asked for the same metrics address does not start (rather
    // than run with its metrics silently elsewhere).
    let dir = tempfile::tempdir().unwrap();
    let out = e2e::appliance_command()
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("APPLIANCE_CHAIN__DEV_ANVIL", "")
        .env("APPLIANCE_METRICS__LISTEN", addr.to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot serve metrics on"), "{err}");

    // Not on the API's TLS port, and not in its OpenAPI document.
    app.send(app.client.get(app.url("/metrics")))
        .await
        .assert_error(404);
    let openapi = app.get("/openapi.json", None).await;
    assert!(
        !openapi.text.contains("metrics"),
        "the OpenAPI document names metrics"
    );
}

#[tokio::test]
async fn a_bearer_token_guards_the_endpoint_when_set() {
    let token = "t".repeat(40);
    let (_app, addr) = start(&[("APPLIANCE_METRICS__BEARER_TOKEN", &token)]).await;
    let none = scrape::get(addr, "/metrics", None).await;
    assert_eq!(none.status, 401);
    assert!(!none.body.contains("appliance_"), "{}", none.body);
    let wrong = scrape::get(addr, "/metrics", Some(&"u".repeat(40))).await;
    assert_eq!(wrong.status, 401);
    let right = scrape::get(addr, "/metrics", Some(&token)).await;
    assert_eq!(right.status, 200);
    assert!(right.body.contains("appliance_http_requests"));
}

#[tokio::test]
async fn requests_and_actions_move_their_metrics_and_labels_carry_no_caller_data() {
    let (app, addr) = start(&[]).await;
    let (key, wallet) = app.new_account("metrics").await;
    let pkp = app.get("/list_wallets", Some(&key)).await.assert_ok()[0]["pkp_id"].clone();
    let before = scrape::scrape(addr).await;

    for _ in 0..3 {
        app.send(app.client.get(app.url("/version")))
            .await
            .assert_ok();
    }
    app.get("/list_groups", Some(&key)).await.assert_ok();
    let secret_path = format!("/core/v1/no_such_path_{}", &wallet[2..10]);
    app.send(app.client.get(app.url(&secret_path)))
        .await
        .assert_error(404);
    let ok = action(&app, &key, HELLO, Value::Null).await;
    assert_eq!(ok.assert_ok()["has_error"], json!(false));
    let failed = action(&app, &key, THROWS, Value::Null).await;
    assert_eq!(failed.assert_ok()["has_error"], json!(true));
    let signed = action(&app, &key, SIGN, json!({"pkpId": pkp})).await;
    assert_eq!(
        signed.assert_ok()["has_error"],
        json!(false),
        "{}",
        signed.text
    );

    let after = scrape::scrape(addr).await;
    let moved =
        |name: &str, labels: &[(&str, &str)]| after.sum(name, labels) - before.sum(name, labels);
    let version = [("route", "/version"), ("method", "GET"), ("status", "200")];
    assert_eq!(moved("appliance_http_requests_total", &version), 3.0);
    assert_eq!(
        moved("appliance_http_request_duration_seconds_count", &version),
        3.0
    );
    let groups = [("route", "/core/v1/list_groups"), ("status", "200")];
    assert_eq!(moved("appliance_http_requests_total", &groups), 1.0);
    let unmatched = [("route", "unmatched"), ("status", "404")];
    assert_eq!(moved("appliance_http_requests_total", &unmatched), 1.0);
    let actions = [("route", "/core/v1/lit_action"), ("status", "200")];
    assert_eq!(moved("appliance_http_requests_total", &actions), 3.0);
    let latency = after
        .histogram("appliance_http_request_duration_seconds", &actions)
        .since(&before.histogram("appliance_http_request_duration_seconds", &actions));
    assert_eq!(latency.count, 3.0);
    assert!(latency.quantile(0.5).unwrap() > 0.0);

    assert_eq!(moved("appliance_actions_total", &[("outcome", "ok")]), 2.0);
    assert_eq!(
        moved("appliance_actions_total", &[("outcome", "exception")]),
        1.0
    );
    assert_eq!(
        moved("appliance_action_run_duration_seconds_count", &[]),
        3.0
    );
    assert_eq!(moved("appliance_action_queue_wait_seconds_count", &[]), 3.0);
    assert!(after.value("appliance_workers_started_total").unwrap() >= 2.0);
    assert!(
        moved(
            "appliance_keyservice_request_duration_seconds_count",
            &[("op", "wallet_export_key"), ("result", "ok")]
        ) >= 1.0,
        "the signing action asked keyservice for its key"
    );
    assert!(
        moved(
            "appliance_store_transaction_duration_seconds_count",
            &[("kind", "read")]
        ) >= 1.0
    );
    assert!(
        after.sum(
            "appliance_store_transaction_duration_seconds_count",
            &[("kind", "write")]
        ) >= 1.0
    );
    assert!(after.sum("appliance_tls_handshakes_total", &[]) >= 1.0);
    assert!(after.value("appliance_http_connections_open").unwrap() >= 1.0);
    assert_eq!(after.value("appliance_worker_pool_queued"), Some(0.0));

    // Every label is one of a fixed set of names, and no value is the caller's: no key,
    // no wallet, no path that matched no route.
    let allowed = [
        "route", "method", "status", "kind", "reason", "outcome", "class", "state", "op", "result",
        "le", "version",
    ];
    for sample in &after.samples {
        for (name, value) in &sample.labels {
            assert!(
                allowed.contains(&name.as_str()),
                "{}: label {name}",
                sample.name
            );
            for secret in [
                key.as_str(),
                wallet.as_str(),
                &wallet[2..],
                secret_path.as_str(),
            ] {
                assert!(
                    !value.contains(secret),
                    "{} carries caller data in {name}={value}",
                    sample.name
                );
            }
        }
    }
    // Every route label is a template or `unmatched` (that the caller's path itself never
    // shows is checked just above, with `secret_path`).
    let routes: std::collections::BTreeSet<&String> = after
        .matching("appliance_http_requests_total", &[])
        .filter_map(|s| s.labels.get("route"))
        .collect();
    assert!(
        routes
            .iter()
            .all(|r| r.starts_with('/') || *r == "unmatched"),
        "{routes:?}"
    );
}

#[tokio::test]
async fn payments_refused_and_rate_limited_requests_are_counted() {
    let (app, addr) = start(&[
        ("APPLIANCE_BILLING__STRIPE_SECRET_KEY", "sk_test_metrics"),
        (
            "APPLIANCE_BILLING__STRIPE_PUBLISHABLE_KEY",
            "pk_test_metrics",
        ),
        // Never reached: no payment is made here.
        ("APPLIANCE_BILLING__STRIPE_API_BASE", "http://127.0.0.1:9"),
        ("APPLIANCE_BILLING__INITIAL_CREDIT_CENTS", "1"),
        ("APPLIANCE_RATE_LIMITS__ENABLED", "true"),
        ("APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_BURST", "1"),
        ("APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_PER_MINUTE", "0.001"),
    ])
    .await;
    let (key, _) = app.new_account("payer").await;
    // The one cent pays for one write; the next write and any action get 402.
    app.post("/add_group", Some(&key), json!({"group_name": "paid"}))
        .await
        .assert_ok();
    app.post("/add_group", Some(&key), json!({"group_name": "unpaid"}))
        .await
        .assert_error(402);
    action(&app, &key, HELLO, Value::Null)
        .await
        .assert_error(402);
    // The new_account bucket held one sign-up.
    app.post("/new_account", None, json!({"account_name": "second"}))
        .await
        .assert_error(429);

    let m = scrape::scrape(addr).await;
    let write = [("kind", "management_write")];
    assert_eq!(m.sum("appliance_billing_charges_total", &write), 1.0);
    assert_eq!(m.sum("appliance_billing_charged_cents_total", &write), 1.0);
    assert_eq!(
        m.sum("appliance_billing_payment_required_total", &write),
        1.0
    );
    assert_eq!(
        m.sum(
            "appliance_billing_payment_required_total",
            &[("kind", "action")]
        ),
        1.0
    );
    assert_eq!(
        m.sum(
            "appliance_actions_total",
            &[("outcome", "insufficient_credit")]
        ),
        1.0
    );
    assert_eq!(
        m.sum("appliance_http_requests_total", &[("status", "402")]),
        2.0
    );
    assert_eq!(
        m.sum(
            "appliance_rate_limit_refusals_total",
            &[("class", "new_account")]
        ),
        1.0
    );
    assert_eq!(
        m.sum(
            "appliance_http_requests_total",
            &[("route", "/core/v1/new_account"), ("status", "429")]
        ),
        1.0
    );
}

// ---- traces --------------------------------------------------------------------------

/// A local OTLP/HTTP receiver: decodes every `POST /v1/traces` and keeps its spans.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let kept = Arc::clone(&spans);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let kept = Arc::clone(&kept);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let kept = Arc::clone(&kept);
                            async move {
                                let path_ok = req.uri().path() == "/v1/traces";
                                let is_proto = req
                                    .headers()
                                    .get("content-type")
                                    .is_some_and(|v| v == "application/x-protobuf");
                                let body = Limited::new(req.into_body(), 16 << 20)
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let status = match ExportTraceServiceRequest::decode(body) {
                                    Ok(export) if path_ok && is_proto => {
                                        let mut kept = kept.lock().unwrap();
                                        for resource in export.resource_spans {
                                            for scope in resource.scope_spans {
                                                kept.extend(scope.spans);
                                            }
                                        }
                                        200
                                    }
                                    _ => 400,
                                };
                                let answer = ExportTraceServiceResponse::default().encode_to_vec();
                                Ok::<_, std::convert::Infallible>(
                                    http::Response::builder()
                                        .status(status)
                                        .header("content-type", "application/x-protobuf")
                                        .body(Full::new(Bytes::from(answer)))
                                        .unwrap(),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Self { addr, spans, task }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

fn attribute(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.clone())
}

fn string_attribute(span: &Span, key: &str) -> Option<String> {
    match attribute(span, key)? {
        AnyValue::StringValue(s) => Some(s),
        _ => None,
    }
}

#[tokio::test]
async fn one_action_exports_its_span_tree_with_the_request_id() {
    let receiver = Receiver::start().await;
    let endpoint = format!("http://{}", receiver.addr);
    let (app, _) = start(&[
        ("APPLIANCE_TRACES__ENDPOINT", &endpoint),
        ("APPLIANCE_TRACES__BATCH_DELAY_MS", "100"),
        ("APPLIANCE_TRACES__SERVICE_NAME", "appliance-under-test"),
    ])
    .await;
    let (key, _) = app.new_account("traced").await;
    let pkp = app.get("/list_wallets", Some(&key)).await.assert_ok()[0]["pkp_id"].clone();
    let reply = action(&app, &key, SIGN, json!({"pkpId": pkp})).await;
    assert_eq!(
        reply.assert_ok()["has_error"],
        json!(false),
        "{}",
        reply.text
    );
    let request_id = reply.headers["x-request-id"].to_str().unwrap().to_owned();

    // The request's root span, once exported.
    let deadline = Instant::now() + Duration::from_secs(20);
    let root = loop {
        let found = receiver.spans().into_iter().find(|s| {
            s.name == "POST /core/v1/lit_action"
                && string_attribute(s, "request_id").as_deref() == Some(request_id.as_str())
        });
        if let Some(root) = found {
            break root;
        }
        assert!(
            Instant::now() < deadline,
            "no request span for {request_id}; received: {:?}",
            receiver.spans().iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        root.parent_span_id.is_empty(),
        "the request span is the root"
    );
    assert_eq!(root.kind, 2, "a server span");
    assert_eq!(
        string_attribute(&root, "http.route").as_deref(),
        Some("/core/v1/lit_action")
    );
    assert_eq!(
        attribute(&root, "http.response.status_code"),
        Some(AnyValue::IntValue(200))
    );

    // Its children arrive with it or soon after (the worker's task ends last).
    let tree = loop {
        let tree: Vec<Span> = receiver
            .spans()
            .into_iter()
            .filter(|s| s.trace_id == root.trace_id)
            .collect();
        let names: Vec<&str> = tree.iter().map(|s| s.name.as_str()).collect();
        let complete = ["authorize", "worker.run", "keyservice.call"]
            .iter()
            .all(|n| names.contains(n))
            && names.iter().any(|n| n.starts_with("store."));
        if complete {
            break tree;
        }
        assert!(Instant::now() < deadline, "incomplete tree: {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let by_id = |id: &[u8]| tree.iter().find(|s| s.span_id == id);
    let ancestors = |span: &Span| {
        let mut chain = Vec::new();
        let mut parent = span.parent_span_id.clone();
        while !parent.is_empty() {
            let p = by_id(&parent).unwrap_or_else(|| panic!("{}: parent not exported", span.name));
            chain.push(p.name.clone());
            parent = p.parent_span_id.clone();
        }
        chain
    };
    for span in &tree {
        assert_eq!(
            string_attribute(span, "request_id").as_deref(),
            Some(request_id.as_str()),
            "{} carries the request id",
            span.name
        );
        if span.span_id != root.span_id {
            let chain = ancestors(span);
            assert_eq!(
                chain.last().map(String::as_str),
                Some("POST /core/v1/lit_action"),
                "{} descends from the request span",
                span.name
            );
        }
    }
    let worker_runs: Vec<&Span> = tree.iter().filter(|s| s.name == "worker.run").collect();
    assert_eq!(worker_runs.len(), 1);
    assert_eq!(
        worker_runs[0].parent_span_id, root.span_id,
        "the run is the request's child"
    );
    let key_calls: Vec<&Span> = tree
        .iter()
        .filter(|s| s.name == "keyservice.call")
        .collect();
    assert!(
        key_calls.iter().any(|s| {
            string_attribute(s, "op").as_deref() == Some("wallet_export_key")
                && ancestors(s).contains(&"worker.run".to_owned())
        }),
        "the action's key came from keyservice during its run"
    );
    let authorize = tree.iter().find(|s| s.name == "authorize").unwrap();
    assert_eq!(authorize.parent_span_id, root.span_id);
    // Another request is a trace of its own.
    let others = receiver
        .spans()
        .into_iter()
        .filter(|s| s.name == "POST /core/v1/new_account")
        .count();
    assert!(others >= 1);
    assert!(
        receiver
            .spans()
            .iter()
            .filter(|s| s.name == "POST /core/v1/new_account")
            .all(|s| s.trace_id != root.trace_id)
    );
}

#[tokio::test]
async fn a_dead_collector_costs_spans_not_requests() {
    // Nothing listens at this port.
    let dead = format!("http://127.0.0.1:{}", scrape::free_port());
    let (app, addr) = start(&[
        ("APPLIANCE_TRACES__ENDPOINT", &dead),
        ("APPLIANCE_TRACES__BATCH_DELAY_MS", "50"),
        ("APPLIANCE_TRACES__MAX_QUEUE_SPANS", "16"),
        ("APPLIANCE_TRACES__MAX_BATCH_SPANS", "8"),
        ("APPLIANCE_TRACES__EXPORT_TIMEOUT_MS", "500"),
    ])
    .await;
    let started = Instant::now();
    for _ in 0..200 {
        app.send(app.client.get(app.url("/version")))
            .await
            .assert_ok();
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "requests waited for the collector: {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = scrape::scrape(addr).await;
        if m.sum("appliance_trace_exports_total", &[("outcome", "failed")]) >= 1.0 {
            assert_eq!(
                m.sum("appliance_trace_exports_total", &[("outcome", "ok")]),
                0.0
            );
            break;
        }
        assert!(Instant::now() < deadline, "no failed export counted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.send(app.client.get(app.url("/health")))
        .await
        .assert_ok();
}

#[tokio::test]
async fn idle_scrape_connections_are_bounded_and_the_endpoint_recovers() {
    use tokio::io::AsyncReadExt as _;
    let (app, addr) = start(&[]).await;
    // 16 connections that never send a request hold every place (the bound is
    // MAX_CONNECTIONS = 16 in appliance/src/metrics_listener.rs).
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    // Give the accept loop time to take them all.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // One more is closed at once, without an answer.
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut buf))
        .await
        .expect("the connection over the bound is closed, not left hanging");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // Freeing the places makes the endpoint answer again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        if let Ok(reply) = client.get(format!("http://{addr}/metrics")).send().await
            && reply.status().as_u16() == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "the endpoint did not recover");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(app);
}
