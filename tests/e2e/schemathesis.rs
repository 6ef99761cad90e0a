//! Schemathesis (PyPI, installed by `scripts/setup`) against the OpenAPI document the
//! appliance serves: generated requests for every documented operation, sent with real
//! credentials, must never get a 5xx, and every response must be documented (status code,
//! content type, body schema). The appliance must still be up afterwards. Billing is on
//! (against localstripe): with billing off its endpoints answer 503 by design.
//!
//! The run is bounded: `SCHEMATHESIS_MAX_EXAMPLES` generated requests per operation and
//! phase (default 25) from a fixed seed (`SCHEMATHESIS_SEED`, default 1), so CI sees the
//! same requests each time; raise both by hand for a deeper run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use e2e::{Appliance, Launch, LocalStripe};
use reqwest::Method;
use serde_json::json;

/// The checks that must pass: no 5xx, and the response is the documented one.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

/// The `schemathesis` command of the tools virtualenv (`scripts/setup`), or
/// `$SCHEMATHESIS` when set.
fn schemathesis() -> PathBuf {
    if let Ok(path) = std::env::var("SCHEMATHESIS") {
        return PathBuf::from(path);
    }
    let path = test_support::tools::tools_dir()
        .join("venv")
        .join("bin")
        .join("schemathesis");
    assert!(
        path.exists(),
        "schemathesis is not installed ({} is missing): run scripts/setup, which installs it \
         into the tools virtualenv",
        path.display()
    );
    path
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Runs schemathesis against the served document with `headers`; panics with its report
/// if any check failed.
fn run(app: &Appliance, label: &str, headers: &[String]) {
    let report = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut cmd = Command::new(schemathesis());
    cmd.arg("run")
        .arg(app.api("/openapi.json"))
        .args(["--url", &app.base_url])
        .args(["--checks", CHECKS])
        .args(["--max-examples", &env_or("SCHEMATHESIS_MAX_EXAMPLES", "25")])
        .args(["--seed", &env_or("SCHEMATHESIS_SEED", "1")])
        .args(["--phases", "examples,coverage,fuzzing"])
        // One worker: hypothesis' lambda-source cache is not thread-safe (an "AST
        // constructor recursion depth mismatch" error with two).
        .args(["--workers", "1"])
        .args(["--request-timeout", "30"])
        // A request with a header hyper cannot parse is answered 400 and the connection
        // closed; the client may see the close before the answer (a network error, not a
        // finding): such a request is sent again.
        .args(["--request-retries", "2"])
        .args(["--suppress-health-check", "all"])
        .args(["--report-dir"])
        .arg(report.path())
        .arg("--tls-verify")
        .arg(app.data_dir.join("tls").join("self-signed.pem"))
        // Its cache (.schemathesis/) goes to the temporary folder, not the checkout.
        .current_dir(report.path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    for header in headers {
        cmd.args(["--header", header]);
    }
    let out = cmd.output().expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "schemathesis ({label}) took {:.1} s; its summary:\n{}",
        started.elapsed().as_secs_f64(),
        stdout
            .lines()
            .rev()
            .take(12)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        out.status.success(),
        "schemathesis ({label}) found failures (exit {:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
}

#[tokio::test]
async fn generated_requests_get_no_5xx_and_only_documented_responses() {
    let stripe = LocalStripe::start();
    let data = tempfile::tempdir().unwrap();
    let mut app = Appliance::launch(
        data.path(),
        Launch::DevWith {
            env: stripe.env(1_000_000),
        },
    )
    .await;
    let (account_key, _) = app.new_account("schemathesis").await;
    // Something to find: a wallet, a group holding it and an action.
    let wallet = app.get("/create_wallet", Some(&account_key)).await;
    wallet.assert_ok();
    app.post(
        "/add_group",
        Some(&account_key),
        json!({"group_name": "fuzzed", "group_description": "", "pkp_ids_permitted": [],
               "cid_hashes_permitted": []}),
    )
    .await;
    let (usage_key, _) = app
        .add_usage_key(
            &account_key,
            json!({"can_create_groups": true, "can_create_pkps": true,
                   "execute_in_groups": [0], "manage_ipfs_ids_in_groups": [0]}),
        )
        .await;

    // schemathesis runs in the foreground: the appliance is another process, and this
    // test's runtime has nothing else to do meanwhile.
    run(
        &app,
        "account key",
        &[format!("Authorization: Bearer {account_key}")],
    );
    run(&app, "usage key", &[format!("X-Api-Key: {usage_key}")]);

    // Still up and serving, and no handler panicked (a caught panic is a 500, which the
    // run would have reported, but the log says it even for a response never sent).
    let health = app
        .send(app.request(Method::GET, &app.url("/health")))
        .await;
    assert_eq!(
        health.status.as_u16(),
        200,
        "the appliance stopped answering; its log:\n{}",
        app.log()
    );
    let log = app.log();
    assert!(!log.contains("panicked"), "a handler panicked:\n{log}");
    app.terminate().await;
}
