//! CORS (`http.cors_allowed_origins`, `appliance/src/http/cors.rs`) on a dev appliance:
//!
//! * over HTTPS from this process: a preflight from the listed origin gets 204 with the
//!   allowed methods and headers (the credential headers among them), also when the
//!   rate-limit bucket of its endpoint is spent and with no key; a preflight from another
//!   origin gets 403 with no CORS header; actual responses to the listed origin, errors
//!   included (401, 404, 429), expose `X-Request-Id`; other origins get none;
//! * in Debian's chromium (`tests/browser/cors.mjs`): a page served from the listed origin
//!   (a small HTTP server of this test on 127.0.0.1) uses the JS SDK's browser bundle to
//!   create an account, list its groups and read an error's request id; the same page
//!   served from a second, unlisted origin is refused by the browser (`fetch` rejects with
//!   a `TypeError`, the SDK's error has status 0).
//!
//! Needs the SDK built (`npm --prefix sdk/js run build`) and playwright-core and chromium
//! installed (`scripts/setup`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use e2e::{Appliance, Launch};
use reqwest::Method;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "x-api-key", "x-wallet-auth"];

/// The page both origins serve: the SDK's browser bundle as `window.sdk`, and `window.seen`
/// describing a rejection as plain data.
const PAGE: &str = r#"<!doctype html>
<meta charset="utf-8">
<title>cors</title>
<script type="module">
import * as sdk from "/appliance-sdk.js";
window.seen = (e) => ({
  name: e?.name ?? null,
  isTypeError: e instanceof TypeError,
  message: String(e?.message ?? e),
  status: e?.status ?? null,
  requestId: e?.requestId ?? null,
  causeIsTypeError: e?.cause instanceof TypeError,
});
window.sdk = sdk;
</script>
"#;

/// A plain-HTTP server of `PAGE` and the SDK bundle on 127.0.0.1 at a free port, stopped
/// when dropped.
struct PageServer {
    origin: String,
    task: tokio::task::JoinHandle<()>,
}

impl PageServer {
    async fn start(bundle: Arc<Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let bundle = Arc::clone(&bundle);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split_whitespace().nth(1).unwrap_or("/");
                    let (status, content_type, body): (&str, &str, &[u8]) = match path {
                        "/" => ("200 OK", "text/html; charset=utf-8", PAGE.as_bytes()),
                        "/appliance-sdk.js" => {
                            ("200 OK", "text/javascript; charset=utf-8", &bundle[..])
                        }
                        _ => ("404 Not Found", "text/plain", b"not found"),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                    let _ = conn.write_all(body).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Self { origin, task }
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The standard base64 of the SHA-256 of the certificate's SubjectPublicKeyInfo: what
/// chromium's `--ignore-certificate-errors-spki-list` names.
fn spki_sha256_base64(pem: &[u8]) -> String {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).unwrap();
    let spki = appliance_client::evidence::bundle::spki_sha256(&pem.contents).unwrap();
    base64::engine::general_purpose::STANDARD.encode(spki)
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

fn cors_headers(r: &reqwest::Response) -> Vec<String> {
    r.headers()
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

/// An answer to the allowed origin: its origin echoed, the request id present and
/// exposed, no credentials mode.
fn assert_marked_for(r: &reqwest::Response, origin: &str) {
    let what = format!("{} {}", r.status(), r.url());
    assert_eq!(
        header(r, "access-control-allow-origin").as_deref(),
        Some(origin),
        "{what}"
    );
    let exposed = header(r, "access-control-expose-headers").unwrap_or_default();
    for name in ["x-request-id", "retry-after"] {
        assert!(
            exposed.split(", ").any(|e| e == name),
            "{what}: {name} not in {exposed}"
        );
    }
    assert!(header(r, "x-request-id").is_some(), "{what}");
    assert!(
        header(r, "vary").is_some_and(|v| v.to_ascii_lowercase().contains("origin")),
        "{what}"
    );
    assert_eq!(
        header(r, "access-control-allow-credentials"),
        None,
        "{what}"
    );
}

fn preflight(app: &Appliance, path: &str, origin: &str) -> reqwest::RequestBuilder {
    app.request(Method::OPTIONS, &app.api(path))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_may_call_the_api_from_listed_origins_only() {
    // Not while the container test's engine changes the network interfaces.
    let _network = e2e::NETWORK_CHANGES.lock().await;
    let sdk = e2e::workspace_root().join("sdk").join("js");
    let bundle_path = sdk.join("dist").join("appliance-sdk.js");
    let bundle = std::fs::read(&bundle_path).unwrap_or_else(|err| {
        panic!(
            "{} is missing ({err}): run `npm --prefix sdk/js run build` (scripts/test does it)",
            bundle_path.display()
        )
    });
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "{} is missing: run scripts/setup as root (it installs Debian's chromium)",
        chromium.display()
    );
    let playwright = test_support::tools::node_package("playwright-core", "1.65.1");

    let bundle = Arc::new(bundle);
    let listed = PageServer::start(Arc::clone(&bundle)).await;
    let unlisted = PageServer::start(bundle).await;
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        (
            "APPLIANCE_HTTP__CORS_ALLOWED_ORIGINS".to_owned(),
            format!("[\"{}\"]", listed.origin),
        ),
        (
            "APPLIANCE_HTTP__CORS_MAX_AGE_SECS".to_owned(),
            "120".to_owned(),
        ),
        // The limits on, with a small sign-up bucket that refills in about an hour.
        (
            "APPLIANCE_RATE_LIMITS__ENABLED".to_owned(),
            "true".to_owned(),
        ),
        (
            "APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_BURST".to_owned(),
            "3".to_owned(),
        ),
        (
            "APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_PER_MINUTE".to_owned(),
            "0.02".to_owned(),
        ),
    ];
    let app = Appliance::launch(dir.path(), Launch::DevWith { env }).await;

    // The browser first (it creates one account from the listed origin).
    let pem = std::fs::read(app.data_dir.join("tls").join("self-signed.pem")).unwrap();
    let out = tokio::process::Command::new("node")
        .arg(
            e2e::workspace_root()
                .join("tests")
                .join("browser")
                .join("cors.mjs"),
        )
        .args(["--url", &app.base_url, "--spki", &spki_sha256_base64(&pem)])
        .args(["--allowed", &format!("{}/", listed.origin)])
        .args(["--refused", &format!("{}/", unlisted.origin)])
        .arg("--chromium")
        .arg(chromium)
        .arg("--node-modules")
        .arg(playwright.parent().unwrap())
        .output()
        .await
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{}\nappliance log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        app.log()
    );
    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: not the browser's report:\n{stdout}"));
    eprintln!("what the pages saw: {seen:#}");
    let allowed = &seen["allowed"];
    let refused = &seen["refused"];
    assert_eq!(allowed["origin"], Value::String(listed.origin.clone()));
    assert_eq!(refused["origin"], Value::String(unlisted.origin.clone()));

    // The listed origin: the calls went through (a key of 44 characters, no group yet).
    assert_eq!(allowed["callError"], Value::Null, "{seen:#}");
    assert_eq!(allowed["accountKeyLength"], 44, "{seen:#}");
    assert_eq!(allowed["groups"], serde_json::json!([]), "{seen:#}");
    // An error's status and request id reach the page.
    assert_eq!(allowed["unauthorized"]["status"], 401, "{seen:#}");
    let request_id = allowed["unauthorized"]["requestId"].as_str().unwrap_or("");
    assert_eq!(request_id.len(), 36, "no request id read: {seen:#}");

    // The unlisted origin: the browser refuses every answer.
    for call in ["simpleGet", "jsonPost"] {
        assert_eq!(refused[call]["isTypeError"], true, "{call}: {seen:#}");
    }
    assert_eq!(refused["sdkCall"]["status"], 0, "{seen:#}");
    assert_eq!(refused["sdkCall"]["causeIsTypeError"], true, "{seen:#}");
    // And for CORS, not another reason (the certificate, the connection): chromium says
    // so for both requests of the unlisted page, and never for the listed one.
    let console: Vec<&str> = seen["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let blocked = |origin: &str, path: &str| {
        console.iter().any(|line| {
            line.starts_with(origin)
                && line.contains("blocked by CORS policy")
                && line.contains(path)
        })
    };
    assert!(
        blocked(&unlisted.origin, "/core/v1/get_node_chain_config"),
        "{seen:#}"
    );
    assert!(
        blocked(&unlisted.origin, "/core/v1/new_account"),
        "{seen:#}"
    );
    assert!(
        !console
            .iter()
            .any(|l| l.starts_with(&listed.origin) && l.contains("CORS")),
        "{seen:#}"
    );

    // Over HTTPS from here: what the browser relied on, header by header.
    let r = preflight(&app, "/list_groups", &listed.origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(listed.origin.as_str())
    );
    assert_eq!(
        header(&r, "access-control-allow-methods").as_deref(),
        Some("GET, HEAD, POST")
    );
    let allowed_headers = header(&r, "access-control-allow-headers").unwrap();
    for name in CREDENTIAL_HEADERS.iter().chain(&["content-type"]) {
        assert!(
            allowed_headers.split(", ").any(|h| h == *name),
            "{name}: {allowed_headers}"
        );
    }
    assert_eq!(header(&r, "access-control-max-age").as_deref(), Some("120"));
    assert_eq!(header(&r, "vary").as_deref(), Some("origin"));
    assert_eq!(header(&r, "access-control-allow-credentials"), None);

    let r = preflight(&app, "/list_groups", &unlisted.origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(cors_headers(&r).is_empty(), "{:?}", r.headers());

    // Sign-ups from the listed origin until the bucket is spent: the 429 is marked too.
    let mut limited = None;
    for _ in 0..6 {
        let r = app
            .client
            .post(app.api("/new_account"))
            .header("origin", &listed.origin)
            .json(&serde_json::json!({"account_name": "cors"}))
            .send()
            .await
            .unwrap();
        assert_marked_for(&r, &listed.origin);
        if r.status() == 429 {
            assert!(header(&r, "retry-after").is_some());
            limited = Some(r);
            break;
        }
        assert_eq!(r.status(), 200);
    }
    assert!(limited.is_some(), "the sign-up bucket was never spent");
    // Preflights to that endpoint still succeed, with no key, many times over.
    for _ in 0..20 {
        let r = preflight(&app, "/new_account", &listed.origin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }

    // Other errors are marked as well: no key (401), no such path (404).
    for (method, path) in [
        (Method::GET, "/list_groups"),
        (Method::GET, "/no_such_endpoint"),
    ] {
        let r = app
            .request(method, &app.api(path))
            .header("origin", &listed.origin)
            .send()
            .await
            .unwrap();
        assert!(r.status() == 401 || r.status() == 404, "{}", r.status());
        assert_marked_for(&r, &listed.origin);
    }
    // Another origin, or none: the same answer with no CORS header.
    for origin in [Some(unlisted.origin.as_str()), None] {
        let mut req = app.request(Method::GET, &app.api("/get_node_chain_config"));
        if let Some(origin) = origin {
            req = req.header("origin", origin);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200, "{origin:?}");
        assert!(cors_headers(&r).is_empty(), "{origin:?}: {:?}", r.headers());
    }
}

#[tokio::test]
async fn with_no_origin_listed_no_cors_header_is_sent() {
    let app = Appliance::start().await;
    let origin = "https://app.example.com";
    let r = preflight(&app, "/list_groups", origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405, "no preflight is answered");
    assert!(cors_headers(&r).is_empty(), "{:?}", r.headers());
    let r = app
        .request(Method::GET, &app.api("/get_node_chain_config"))
        .header("origin", origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(cors_headers(&r).is_empty(), "{:?}", r.headers());
    assert_eq!(header(&r, "vary"), None);
}
