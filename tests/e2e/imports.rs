//! Module imports through the real appliance: `[actions.imports]` set by environment
//! variables to a local HTTPS stand-in for the CDN (a self-signed certificate, trusted
//! through `actions.imports.ca_bundle`), an action importing a pinned package, and the
//! integrity lock outliving a restart: once the CDN serves other bytes for a URL, the
//! restarted appliance (nothing cached) refuses them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use e2e::{Appliance, Launch};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

/// An HTTPS server on 127.0.0.1 serving bodies by path (404 otherwise), counting requests.
struct Cdn {
    base: String,
    ca_file: std::path::PathBuf,
    bodies: Arc<Mutex<HashMap<String, String>>>,
    hits: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Cdn {
    async fn start() -> Self {
        let tls = test_support::tls::self_signed("127.0.0.1");
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("cdn-ca.pem");
        std::fs::write(&ca_file, &tls.pem).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!(
            "https://127.0.0.1:{}/",
            listener.local_addr().unwrap().port()
        );
        let bodies: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let hits: Arc<Mutex<usize>> = Arc::default();
        let (served, counted, acceptor) = (Arc::clone(&bodies), Arc::clone(&hits), tls.acceptor);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, served, counted) =
                    (acceptor.clone(), Arc::clone(&served), Arc::clone(&counted));
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(head) = test_support::tls::read_request_head(&mut stream).await else {
                        return;
                    };
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    *counted.lock().unwrap() += 1;
                    let body = served.lock().unwrap().get(&path).cloned();
                    let response = match body {
                        Some(body) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_owned(),
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            base,
            ca_file,
            bodies,
            hits,
            task,
            _dir: dir,
        }
    }

    fn serve(&self, path: &str, body: &str) {
        self.bodies
            .lock()
            .unwrap()
            .insert(path.to_owned(), body.to_owned());
    }

    fn hits(&self) -> usize {
        *self.hits.lock().unwrap()
    }

    /// The appliance's configuration for this CDN.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("APPLIANCE_ACTIONS__IMPORTS__CDN".into(), self.base.clone()),
            (
                "APPLIANCE_ACTIONS__IMPORTS__CA_BUNDLE".into(),
                self.ca_file.display().to_string(),
            ),
        ]
    }
}

impl Drop for Cdn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const CODE: &str =
    "import { greet } from 'greeter@1.0.0';\nasync function main(p) { return greet(p.name); }";

async fn run(app: &Appliance, key: &str) -> Value {
    let reply = app
        .post(
            "/lit_action",
            Some(key),
            json!({"code": CODE, "js_params": {"name": "lit"}}),
        )
        .await;
    reply.assert_ok().clone()
}

#[tokio::test]
async fn an_action_imports_a_pinned_module_and_its_lock_outlives_a_restart() {
    let cdn = Cdn::start().await;
    cdn.serve(
        "/greeter@1.0.0",
        "export * from '/greeter@1.0.0/index.mjs';",
    );
    cdn.serve(
        "/greeter@1.0.0/index.mjs",
        "export const greet = (name) => 'hello ' + name;",
    );
    let data = tempfile::tempdir().unwrap();
    let app = Appliance::launch(data.path(), Launch::DevWith { env: cdn.env() }).await;
    let (key, _) = app.new_account("imports").await;

    let body = run(&app, &key).await;
    assert_eq!(body["has_error"], json!(false), "{body}");
    assert_eq!(body["response"], json!("hello lit"));
    assert_eq!(cdn.hits(), 2);
    // Served from the appliance's cache the second time.
    let body = run(&app, &key).await;
    assert_eq!(body["response"], json!("hello lit"));
    assert_eq!(cdn.hits(), 2);

    // An unpinned import is refused with the reason, before any fetch.
    let reply = app
        .post(
            "/lit_action",
            Some(&key),
            json!({"code": "import { z } from 'zod'; function main() { return 1; }"}),
        )
        .await;
    let body = reply.assert_ok().clone();
    assert_eq!(body["error"]["kind"], json!("exception"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("`zod` names no version"), "{message}");
    assert_eq!(cdn.hits(), 2);

    // The CDN changes the module's bytes; after a restart nothing is cached, the body is
    // fetched again, and the lock recorded on first use refuses it.
    drop(app);
    cdn.serve(
        "/greeter@1.0.0/index.mjs",
        "export const greet = (name) => 'pwned ' + name;",
    );
    let app = Appliance::launch(data.path(), Launch::DevWith { env: cdn.env() }).await;
    let body = run(&app, &key).await;
    assert_eq!(body["has_error"], json!(true), "{body}");
    assert_eq!(body["error"]["kind"], json!("exception"));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{}greeter@1.0.0/index.mjs changed since it was first imported",
            cdn.base
        )),
        "{message}"
    );
}
