//! HTTP conventions: one JSON error shape for every non-2xx, request and correlation
//! ids, body limits, content types, routing, over HTTP/1.1 and HTTP/2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use e2e::Appliance;
use reqwest::{Method, Version};
use serde_json::json;

#[tokio::test]
async fn every_error_has_the_json_shape_on_both_http_versions() {
    let app = Appliance::start().await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let client = app.client_with(version);
        let send =
            |req: reqwest::RequestBuilder| async { e2e::read(req.send().await.unwrap()).await };

        // 400: malformed JSON, and a well-formed body of the wrong shape.
        let r = send(
            client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body("{oops"),
        )
        .await;
        assert_eq!(r.version, version);
        let d = r.assert_error(400);
        assert!(d.contains("JSON"), "{d}");
        let r = send(
            client
                .post(app.api("/new_account"))
                .json(&json!(["not", "an", "object"])),
        )
        .await;
        r.assert_error(400);

        // 415: not JSON, or no content type at all.
        let r = send(
            client
                .post(app.api("/new_account"))
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
        assert!(r.assert_error(415).contains("application/json"));
        let r = send(client.post(app.api("/new_account")).body("{}")).await;
        r.assert_error(415);

        // 413: a body over new_account's limit (16 KiB), declared up front, and a streamed
        // one without length.
        let big = vec![b' '; 16 * 1024 + 1];
        let r = send(
            client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body(big.clone()),
        )
        .await;
        assert!(r.assert_error(413).contains("16384"));
        let stream = futures_body(big);
        let r = send(
            client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body(stream),
        )
        .await;
        r.assert_error(413);
        // Exactly at the limit is read (and is then merely bad JSON-shape-wise).
        let mut at_limit = b"{\"account_name\":\"x\"}".to_vec();
        at_limit.resize(16 * 1024, b' ');
        let r = send(
            client
                .post(app.api("/new_account"))
                .header("content-type", "application/json")
                .body(at_limit),
        )
        .await;
        r.assert_ok();

        // 404: unknown paths, inside and outside the API prefix.
        for path in ["/nope", "/core/v1/nope", "/core/v2/new_account"] {
            let r = send(client.get(app.url(path))).await;
            r.assert_error(404);
        }
        // 405: a known path with the wrong method, with Allow.
        let r = send(client.get(app.api("/new_account"))).await;
        r.assert_error(405);
        assert_eq!(r.headers.get("allow").unwrap(), "POST");
        let r = send(client.request(Method::DELETE, app.api("/list_api_keys"))).await;
        r.assert_error(405);
        // 401.
        let r = send(client.get(app.api("/list_api_keys"))).await;
        r.assert_error(401);
    }
}

/// A body streamed in chunks, so no Content-Length is sent.
fn futures_body(data: Vec<u8>) -> reqwest::Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        data.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    reqwest::Body::wrap_stream(futures_iter(chunks))
}

fn futures_iter(
    items: Vec<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_core_stream::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_core_stream::iter(items)
}

/// A minimal stream over an iterator (avoids a dependency for one test).
mod futures_core_stream {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    pub use futures_core::Stream;

    pub struct Iter<I>(I);

    pub fn iter<I: IntoIterator>(items: I) -> Iter<I::IntoIter> {
        Iter(items.into_iter())
    }

    impl<I: Iterator + Unpin> Stream for Iter<I> {
        type Item = I::Item;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
            Poll::Ready(self.0.next())
        }
    }
}

#[tokio::test]
async fn request_ids_are_fresh_and_correlation_ids_echoed() {
    let app = Appliance::start().await;
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let r = app
            .send(
                app.request(Method::GET, &app.url("/health"))
                    .header("x-request-id", "client-chosen"),
            )
            .await;
        let id = r
            .headers
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(
            id, "client-chosen",
            "a client-supplied request id is ignored"
        );
        let parsed = uuid_v4(&id);
        assert!(parsed, "{id} is not a UUID v4");
        assert!(seen.insert(id), "request ids are unique");
        assert!(
            r.headers.get("x-correlation-id").is_none(),
            "absent when not sent"
        );
    }
    // Echoed on success and on errors.
    let r = app
        .send(
            app.request(Method::GET, &app.url("/health"))
                .header("x-correlation-id", "trace-123"),
        )
        .await;
    assert_eq!(r.headers.get("x-correlation-id").unwrap(), "trace-123");
    let r = app
        .send(
            app.request(Method::GET, &app.url("/missing"))
                .header("x-correlation-id", "trace-456"),
        )
        .await;
    r.assert_error(404);
    assert_eq!(r.headers.get("x-correlation-id").unwrap(), "trace-456");
    assert!(r.headers.get("x-request-id").is_some());
    // An empty one is not echoed.
    let r = app
        .send(
            app.request(Method::GET, &app.url("/health"))
                .header("x-correlation-id", ""),
        )
        .await;
    assert!(r.headers.get("x-correlation-id").is_none());
}

fn uuid_v4(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.chars().all(|c| c.is_ascii_hexdigit()))
        && parts[2].starts_with('4')
        && matches!(parts[3].chars().next(), Some('8' | '9' | 'a' | 'b'))
}

#[tokio::test]
async fn bearer_wins_over_x_api_key() {
    let app = Appliance::start().await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;
    app.add_usage_key(&alice, json!({"name": "alice-only"}))
        .await;
    let r = app
        .send(
            app.request(Method::GET, &app.api("/list_api_keys"))
                .header("authorization", format!("bearer {alice}"))
                .header("x-api-key", &bob),
        )
        .await;
    assert_eq!(
        r.assert_ok().as_array().unwrap().len(),
        1,
        "lowercase bearer scheme, Alice's view"
    );
    // A non-Bearer Authorization falls back to X-Api-Key.
    let r = app
        .send(
            app.request(Method::GET, &app.api("/list_api_keys"))
                .header("authorization", "Basic Zm9vOmJhcg==")
                .header("x-api-key", &bob),
        )
        .await;
    assert_eq!(r.assert_ok().as_array().unwrap().len(), 0, "Bob's view");
}

#[tokio::test]
async fn health_and_version() {
    let app = Appliance::start().await;
    let r = app
        .send(app.request(Method::GET, &app.url("/health")))
        .await;
    assert_eq!(r.assert_ok()["status"], json!("ok"));
    assert_eq!(r.body["checks"]["store"], json!("ok"));
    let r = app
        .send(app.request(Method::GET, &app.url("/version")))
        .await;
    assert_eq!(r.assert_ok()["name"], json!("appliance"));
    assert!(r.body["version"].as_str().is_some());
}
