//! Abuse of the HTTP layer (issue 18, points 1 and 2): request bodies are bounded per
//! endpoint while they stream in, JSON nesting is bounded, the bytes of bodies held at
//! once have a budget, and connections that do nothing are closed on time, whatever
//! the protocol, without locking out other clients.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use e2e::Appliance;
use e2e::flood::{UNAUTHENTICATED_POSTS, chunked, flood, nested_arrays, time_to_eof, tls_connect};
use http_body_util::{BodyExt as _, Empty};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const MIB: usize = 1024 * 1024;

/// Every POST path of the OpenAPI document.
async fn post_paths(app: &Appliance) -> Vec<String> {
    let doc = app.get("/openapi.json", None).await;
    let paths = doc.assert_ok()["paths"].as_object().unwrap().clone();
    paths
        .into_iter()
        .filter(|(_, item)| item.get("post").is_some())
        .map(|(path, _)| path)
        .collect()
}

#[tokio::test]
async fn every_endpoint_has_its_own_body_limit_enforced_while_streaming() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("limits").await;
    let client = app.client_with(reqwest::Version::HTTP_11);

    // No POST route accepts a body above every class's limit (about 2.2 MiB for
    // `/lit_action` at the defaults): a new route cannot silently take a big body.
    let big = Bytes::from(e2e::json_string_body(3 * MIB));
    let paths = post_paths(&app).await;
    assert!(paths.len() > 20, "{paths:?}");
    for path in &paths {
        let reply = e2e::read(
            client
                .post(app.url(path))
                .bearer_auth(&key)
                .header("content-type", "application/json")
                .body(big.clone())
                .send()
                .await
                .unwrap_or_else(|e| panic!("{path}: no response: {e}")),
        )
        .await;
        let msg = reply.assert_error(413);
        assert!(msg.contains("this endpoint's limit of"), "{path}: {msg}");
    }

    // The limits per endpoint: a few KiB for wallet signatures, small for small
    // writes, the documented action limits for code. One byte over is refused, on the
    // declared length and when streamed without one.
    for (path, limit) in [
        ("/create_wallet_with_signature", 8 * 1024),
        ("/add_usage_api_key_with_signature", 8 * 1024),
        ("/convert_to_chain_secured_account", 8 * 1024),
        ("/new_account", 16 * 1024),
        ("/add_action", 16 * 1024),
        ("/add_group", 256 * 1024),
        ("/get_lit_action_ipfs_id", 2 * MIB + 16 * 1024),
        ("/lit_action", 2 * (MIB + 64 * 1024) + 16 * 1024),
    ] {
        let over = Bytes::from(e2e::json_string_body(limit + 1));
        for streamed in [false, true] {
            let body = if streamed {
                chunked(over.clone())
            } else {
                reqwest::Body::from(over.clone())
            };
            let reply = e2e::read(
                client
                    .post(app.api(path))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            let msg = reply.assert_error(413);
            assert!(
                msg.contains(&format!("limit of {limit} bytes")),
                "{path} (streamed: {streamed}): {msg}"
            );
        }
        // At the limit, the body is read (and refused for what it says, not its size).
        let at = Bytes::from(e2e::json_string_body(limit));
        let reply = e2e::read(
            client
                .post(app.api(path))
                .bearer_auth(&key)
                .header("content-type", "application/json")
                .body(at)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(
            !reply.text.contains("this endpoint's limit"),
            "{path} at its limit: {}",
            reply.text
        );
    }
}

#[tokio::test]
async fn deep_json_and_oversized_js_params_are_refused_before_values_are_built() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("depth").await;
    let client = app.client_with(reqwest::Version::HTTP_2);
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));

    // 64 levels are accepted by the depth check (and refused as a bad typed_data);
    // 65 are refused as such.
    let send = |body: String, path: &'static str| {
        let req = client
            .post(app.api(path))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(body);
        async move { e2e::read(req.send().await.unwrap()).await }
    };
    let ok_depth = format!(r#"{{"typed_data":{},"signature":"0x"}}"#, deep(63));
    let reply = send(ok_depth, "/create_wallet_with_signature").await;
    assert!(!reply.text.contains("levels"), "{}", reply.text);
    let too_deep = format!(r#"{{"typed_data":{},"signature":"0x"}}"#, deep(64));
    let msg = send(too_deep, "/create_wallet_with_signature")
        .await
        .assert_error(400);
    assert!(msg.contains("deeper than 64 levels"), "{msg}");

    // js_params over its limit (64 KiB) is a 413 naming that limit, before anything
    // runs; whitespace does not count.
    let params = json!({"data": "x".repeat(64 * 1024)});
    let body = json!({"code": "async function main(p) { return 1; }", "js_params": params});
    let msg = send(body.to_string(), "/lit_action")
        .await
        .assert_error(413);
    assert!(
        msg.contains("js_params are limited to 65536 bytes"),
        "{msg}"
    );
    let spaced = format!(
        r#"{{"code":"async function main(p) {{ return p.a; }}","js_params":{{"a"{}:{}7}}}}"#,
        " ".repeat(70_000),
        " ".repeat(70_000)
    );
    let reply = send(spaced, "/lit_action").await;
    assert_eq!(reply.assert_ok()["response"], json!(7), "{}", reply.text);
}

#[tokio::test]
async fn a_flood_of_big_nested_bodies_keeps_memory_bounded_and_health_answering() {
    let app = Appliance::start().await;
    // Warm up: one request of each kind, so the baseline includes the steady state.
    for path in UNAUTHENTICATED_POSTS {
        let _ = app.post(path, None, json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = nested_arrays(10 * MIB, 30);
    let report = flood(&app, &UNAUTHENTICATED_POSTS, 6, body).await;
    assert_eq!(
        report.statuses.keys().copied().collect::<Vec<_>>(),
        vec![413],
        "every flood request gets 413: {report:#?}"
    );
    let growth = report.peak_after.saturating_sub(report.peak_before);
    assert!(
        growth < 100 * MIB as u64,
        "peak RSS grew by {} MiB: {report:#?}",
        growth / MIB as u64
    );
    assert_eq!(report.health_failures, 0, "{report:#?}");
    assert!(report.health_polls > 0);
    e2e::read(app.client.get(app.url("/health")).send().await.unwrap())
        .await
        .assert_ok();
}

#[tokio::test]
async fn bodies_over_the_shared_budget_wait_then_get_503_with_retry_after() {
    let app = Appliance::start_with(&[
        ("APPLIANCE_HTTP__MAX_BODY_BYTES", "16384"),
        ("APPLIANCE_HTTP__MAX_BUFFERED_BODY_BYTES", "20000"),
        ("APPLIANCE_HTTP__BODY_BUDGET_WAIT_MS", "300"),
    ])
    .await;
    // A slow client holds 12 000 bytes of the 20 000 and then stalls.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    struct Feed(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);
    impl futures_core::Stream for Feed {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            self.0.poll_recv(cx)
        }
    }
    let slow_client = app.client_with(reqwest::Version::HTTP_11);
    let slow = slow_client
        .post(app.api("/new_account"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(Feed(rx)))
        .send();
    let slow = tokio::spawn(slow);
    let mut head = b"{\"account_name\":\"slow\",\"padding\":\"".to_vec();
    head.resize(12_000, b'a');
    tx.send(Ok(Bytes::from(head))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Another body of 10 000 bytes cannot get its share: 503 with Retry-After, after
    // a short wait.
    let mut other = b"{\"account_name\":\"other\",\"x\":\"".to_vec();
    other.resize(9_998, b'b');
    other.extend_from_slice(b"\"}");
    let started = Instant::now();
    let reply = app
        .send(
            app.client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body(other.clone()),
        )
        .await;
    reply.assert_error(503);
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(reply.headers.get("retry-after").unwrap(), "1");

    // Once the slow body is done, the budget is back.
    tx.send(Ok(Bytes::from_static(b"\"}"))).await.unwrap();
    drop(tx);
    let slow_reply = e2e::read(slow.await.unwrap().unwrap()).await;
    assert_ne!(slow_reply.status, 503);
    let reply = app
        .send(
            app.client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body(other),
        )
        .await;
    assert_ne!(reply.status, 503, "{}", reply.text);
    assert_ne!(reply.status, 413, "{}", reply.text);
}

/// An appliance with small connection limits: 50 permits, 2 s timeouts.
async fn small_scale(per_ip: &str) -> Appliance {
    Appliance::start_with(&[
        ("APPLIANCE_HTTP__MAX_CONNECTIONS", "50"),
        ("APPLIANCE_HTTP__MAX_CONNECTIONS_PER_IP", per_ip),
        ("APPLIANCE_HTTP__FIRST_REQUEST_TIMEOUT_MS", "2000"),
        ("APPLIANCE_HTTP__HTTP1_IDLE_TIMEOUT_MS", "2000"),
        ("APPLIANCE_HTTP__HTTP2_IDLE_TIMEOUT_MS", "2000"),
    ])
    .await
}

/// Closed after about 2 s: not before, and not much after.
fn on_time(what: &str, took: Option<Duration>) {
    let took = took.unwrap_or_else(|| panic!("{what}: still open after 10 s"));
    assert!(
        took >= Duration::from_millis(1800) && took <= Duration::from_millis(3500),
        "{what}: closed after {took:?}, expected about 2 s"
    );
}

#[tokio::test]
async fn idle_tls_connections_neither_lock_out_clients_nor_live_past_their_timeout() {
    let app = small_scale("1000").await;

    // 60 connections complete the handshake and send nothing: more than the 50
    // permits. The longest idle are closed to make room; a new client is served at
    // once, well before any idle timeout.
    let mut idle = Vec::new();
    for i in 0..60 {
        let conn = tokio::time::timeout(Duration::from_secs(5), tls_connect(&app, b"http/1.1"))
            .await
            .unwrap_or_else(|_| panic!("handshake {i} did not complete"))
            .unwrap_or_else(|e| panic!("handshake {i}: {e}"));
        idle.push(conn);
    }
    let started = Instant::now();
    let client = app.client_with(reqwest::Version::HTTP_11);
    let reply = e2e::read(client.get(app.url("/health")).send().await.unwrap()).await;
    reply.assert_ok();
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "a new client waited {:?}",
        started.elapsed()
    );

    // Idle connections are closed after the first-request timeout (2 s).
    let fresh: Vec<_> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(tls_connect(&app, b"http/1.1").await.unwrap());
        }
        v
    };
    let waits: Vec<_> = fresh
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move { time_to_eof(&mut conn, Duration::from_secs(10)).await })
        })
        .collect();
    for wait in waits {
        on_time("an idle TLS connection", wait.await.unwrap());
    }
    drop(idle);
}

#[tokio::test]
async fn idle_http1_and_http2_connections_are_closed_after_their_idle_timeouts() {
    let app = small_scale("1000").await;

    // HTTP/1 keep-alive: one request, then nothing: closed ~2 s after the response.
    let mut conn = tls_connect(&app, b"http/1.1").await.unwrap();
    conn.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !response_complete(&seen) {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the response");
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    on_time(
        "an idle HTTP/1 keep-alive connection",
        time_to_eof(&mut conn, Duration::from_secs(10)).await,
    );

    // HTTP/2: one stream, then none: GOAWAY and close ~2 s later.
    let tls = tls_connect(&app, b"h2").await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let req = http::Request::get("https://localhost/health")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let rsp = sender.send_request(req).await.unwrap();
    assert_eq!(rsp.status(), 200);
    rsp.into_body().collect().await.unwrap();
    let idle_from = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), conn).await;
    assert!(
        ended.is_ok(),
        "the idle HTTP/2 connection is still open after 10 s"
    );
    on_time(
        "an HTTP/2 connection without streams",
        Some(idle_from.elapsed()),
    );
}

/// True once `seen` holds a whole response with a Content-Length body.
fn response_complete(seen: &[u8]) -> bool {
    let text = String::from_utf8_lossy(seen);
    let Some(end) = text.find("\r\n\r\n") else {
        return false;
    };
    let length = text[..end]
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    seen.len() >= end + 4 + length
}

#[tokio::test]
async fn connections_over_the_per_ip_cap_are_closed_before_the_handshake() {
    let app = small_scale("4").await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(tls_connect(&app, b"http/1.1").await.unwrap());
    }
    // The fifth from the same IP is closed at once: no handshake.
    let started = Instant::now();
    let refused = tokio::time::timeout(Duration::from_secs(5), tls_connect(&app, b"http/1.1"))
        .await
        .expect("the refused connection hangs instead of closing");
    assert!(
        refused.is_err(),
        "a fifth connection from one IP was served"
    );
    assert!(started.elapsed() < Duration::from_secs(1));

    // A closed connection frees its slot.
    drop(held.pop());
    let mut served = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(mut conn) = tls_connect(&app, b"http/1.1").await {
            conn.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
                .await
                .unwrap();
            let mut buf = [0u8; 12];
            if conn.read_exact(&mut buf).await.is_ok() && &buf == b"HTTP/1.1 200" {
                served = true;
                break;
            }
        }
    }
    assert!(served, "no slot came back after a connection closed");
}
