//! The development stack as a newcomer runs it, checked with `evidence verify`:
//!
//! * `appliance dev --local-acme` takes its certificate from a local Pebble (run as
//!   guarded children), publishes the CAA record naming its ACME account, has the dev
//!   governance allow its compose hash, and prints the `evidence verify` command with
//!   which every check passes; its Pebble processes stop with it;
//! * a plain `appliance dev` (self-signed) gets a report that says `acme-caa` cannot
//!   apply (N/A, with the reason), verified for development only with simulated quotes
//!   allowed, and NOT verified without.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use e2e::Appliance;
use e2e::pebble::free_port;
use serde_json::Value;

/// Starts `appliance dev --local-acme` and returns it with every stdout line it prints,
/// as they come.
fn start_local_acme(data: &Path, port: u16) -> (Child, mpsc::Receiver<String>) {
    let log = std::fs::File::create(data.join("appliance.log")).unwrap();
    // The appliance starts the keyservice, worker and launcher found beside it.
    for name in ["keyservice", "action-worker", "worker-launcher"] {
        e2e::binary(name);
    }
    let mut child = Command::new(e2e::binary("appliance"))
        .args(["dev", "--local-acme", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(data.join("dev"))
        .env(
            "APPLIANCE_CHAIN__DEV_ANVIL",
            test_support::tools::anvil_binary(),
        )
        .stdout(Stdio::piped())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(raw) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_acme_dev_stack_passes_every_check_and_stops_its_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut app, lines) = start_local_acme(tmp.path(), port);
    let log = || std::fs::read_to_string(tmp.path().join("appliance.log")).unwrap_or_default();
    // The verify command is printed once the certificate is issued and CAA published.
    let mut command = None;
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(120)) {
        if let Some(rest) = line.trim().strip_prefix("evidence verify ") {
            command = Some(rest.to_owned());
            break;
        }
    }
    let Some(command) = command else {
        let _ = app.kill();
        panic!("no verify command printed; log:\n{}", log());
    };
    assert!(command.contains("--rpc-url"), "{command}");
    let pebble_config = tmp.path().join("dev/pebble/pebble.json");
    let pebble_config = pebble_config.display().to_string();
    assert_eq!(
        processes_with(&pebble_config).len(),
        2,
        "pebble and its guard"
    );

    let out = Command::new(e2e::binary("evidence"))
        .arg("verify")
        .args(command.split_whitespace())
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(out.status.success(), "{report:#}\nlog:\n{}", log());
    // Every check passes but os-image: a simulated quote has no OS measurement (N/A).
    for check in report["checks"].as_array().unwrap() {
        let expected = if check["id"] == "os-image" {
            "n/a"
        } else {
            "pass"
        };
        assert_eq!(check["status"], expected, "{check}");
    }
    // The nine checks, os-image, freshness and gateway-route.
    assert_eq!(report["checks"].as_array().unwrap().len(), 12);

    // SIGTERM: the appliance stops, and with it Pebble and challtestsrv.
    e2e::signal(app.id(), "TERM");
    let status = tokio::task::spawn_blocking(move || app.wait())
        .await
        .unwrap();
    assert!(status.unwrap().success());
    let gone = e2e::eventually_async(Duration::from_secs(15), || {
        let config = pebble_config.clone();
        async move { processes_with(&config).is_empty() }
    })
    .await;
    assert!(gone, "left running: {:?}", processes_with(&pebble_config));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_dev_stack_says_which_checks_cannot_apply() {
    let app = Appliance::start().await;
    let pem = app.data_dir.join("tls").join("self-signed.pem");
    let url = app
        .base_url
        .replace("127.0.0.1", "localhost")
        .trim_end_matches('/')
        .to_owned();
    let verify = |extra: &[&str]| {
        let out = Command::new(e2e::binary("evidence"))
            .args(["verify", "--url", &url, "--ca-file"])
            .arg(&pem)
            .args(["--skip", "governance", "--json"])
            .args(extra)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.success(), report)
    };
    let caa = |report: &Value| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "acme-caa")
            .unwrap()
            .clone()
    };
    let (ok, report) = verify(&["--allow-simulated"]);
    assert!(ok, "{report:#}");
    assert_eq!(caa(&report)["status"], "n/a", "{report:#}");
    let why = caa(&report)["detail"].as_str().unwrap().to_owned();
    assert!(
        why.contains("self-signed") && why.contains("scripts/dev --acme"),
        "{why}"
    );
    for check in report["checks"].as_array().unwrap() {
        if check["id"] != "acme-caa" && check["id"] != "governance" && check["id"] != "os-image" {
            assert_eq!(check["status"], "pass", "{check}");
        }
    }
    // Without simulated quotes allowed, N/A is a failure.
    let (ok, report) = verify(&[]);
    assert!(!ok);
    assert_eq!(caa(&report)["status"], "fail", "{report:#}");
}
