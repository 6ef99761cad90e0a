//! Fresh evidence on request (issue 33, point 4): `?nonce=<64 hex>` on
//! `/evidences/quote.json` and `/attestation` returns a quote made for that request, whose
//! report data is SHA-256(sha256sum.txt) ‖ nonce, built by keyservice (dev stack: the
//! simulated provider). The unnonced forms are unchanged; a malformed nonce is 400;
//! nonce requests have their own per-client rate limit (429 with `Retry-After`).
//!
//! `evidence verify` and the attested client send a random nonce by default: a relay with
//! a certificate of its own for the name and old evidence listing it (what a front end
//! compromised for an hour could obtain), which replays that `quote.json` for any nonce
//! and forwards the rest to the real deployment, passes every other check and fails
//! `freshness`; the client then sends it nothing. `--allow-stale` / `allow_stale` accept
//! it, on request only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use appliance_client::evidence::check::Status;
use appliance_client::evidence::quote::TdxQuote;
use appliance_client::{Client, ClientError, Policy};
use e2e::relay::{Relay, Tamper};
use e2e::{Appliance, Reply};
use reqwest::Method;
use serde_json::Value;
use sha2::{Digest, Sha256};

async fn fetch(app: &Appliance, path: &str) -> Reply {
    app.send(app.request(Method::GET, &app.url(path))).await
}

/// The evidence's `sha256sum.txt`, once the appliance has built it.
async fn wait_sums(app: &Appliance) -> Vec<u8> {
    let url = app.url("/evidences/sha256sum.txt");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(rsp) = app.client.get(&url).send().await
            && rsp.status() == 200
        {
            return rsp.bytes().await.unwrap().to_vec();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no evidence; log:\n{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The report data inside a quote body (`quote` hex), read from the quote's own bytes.
fn report_data_of(body: &Value) -> String {
    let bytes = hex::decode(body["quote"].as_str().unwrap().trim_start_matches("0x")).unwrap();
    let quote = TdxQuote::parse(&bytes).unwrap();
    assert!(quote.is_simulated());
    hex::encode(quote.report.report_data)
}

fn assert_rate_limited(reply: &Reply) {
    let description = reply.assert_error(429);
    assert!(description.contains("too many requests"), "{description}");
    let retry: u64 = reply.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
}

#[tokio::test]
async fn a_nonce_quote_carries_the_nonce_bad_nonces_are_400_and_the_bound_is_429() {
    let app = Appliance::start_with(&[
        ("APPLIANCE_RATE_LIMITS__ENABLED", "true"),
        ("APPLIANCE_RATE_LIMITS__FRESH_QUOTE_BURST", "3"),
        ("APPLIANCE_RATE_LIMITS__FRESH_QUOTE_PER_MINUTE", "0.01"),
    ])
    .await;
    let sums = wait_sums(&app).await;
    let listing = hex::encode(Sha256::digest(&sums));

    // quote.json?nonce: made for this nonce, not cached by anyone.
    let n1 = "11".repeat(32);
    let reply = fetch(&app, &format!("/evidences/quote.json?nonce={n1}")).await;
    let body = reply.assert_ok();
    assert_eq!(body["report_data"], format!("{listing}{n1}"), "{body}");
    assert_eq!(report_data_of(body), format!("{listing}{n1}"));
    assert_eq!(reply.headers["cache-control"], "no-store");
    // /attestation?nonce (upper-case hex is hex too): the same report data.
    let n2 = "AB".repeat(32);
    let reply = fetch(&app, &format!("/attestation?nonce={n2}")).await;
    let body = reply.assert_ok();
    assert_eq!(
        report_data_of(body),
        format!("{listing}{}", n2.to_ascii_lowercase())
    );
    assert!(body["event_log"].as_str().is_some(), "{body}");

    // Without a nonce, both keep the specification's form.
    let body = fetch(&app, "/evidences/quote.json")
        .await
        .assert_ok()
        .clone();
    assert_eq!(body["report_data"], format!("{listing}{}", "0".repeat(64)));
    let body = fetch(&app, "/attestation").await.assert_ok().clone();
    assert_eq!(report_data_of(&body), "0".repeat(128));

    // Malformed nonces: 400 in the API's error shape, on both endpoints; they cost no
    // quote and no token of the fresh-quote bucket.
    for bad in [
        "abc".to_owned(),
        String::new(),
        "zz".repeat(32),
        "ab".repeat(33),
        format!("0x{}", "ab".repeat(31)),
    ] {
        for path in ["/evidences/quote.json", "/attestation"] {
            let reply = fetch(&app, &format!("{path}?nonce={bad}")).await;
            let description = reply.assert_error(400);
            assert!(
                description.contains("64 hex digits"),
                "{path}?nonce={bad}: {description}"
            );
        }
    }
    // A nonce on another evidence file is refused too.
    let reply = fetch(&app, &format!("/evidences/sha256sum.txt?nonce={n1}")).await;
    assert!(reply.assert_error(400).contains("quote.json"));

    // The third fresh quote is within the burst; the fourth is refused, 429.
    let n3 = "33".repeat(32);
    let reply = fetch(&app, &format!("/evidences/quote.json?nonce={n3}")).await;
    assert_eq!(reply.assert_ok()["report_data"], format!("{listing}{n3}"));
    let reply = fetch(&app, &format!("/attestation?nonce={n3}")).await;
    assert_rate_limited(&reply);
    let reply = fetch(&app, &format!("/evidences/quote.json?nonce={n1}")).await;
    assert_rate_limited(&reply);
    // The unnonced reads are another bucket: still served.
    fetch(&app, "/evidences/quote.json").await.assert_ok();
    fetch(&app, "/attestation").await.assert_ok();
}

/// Runs `evidence verify --allow-simulated --json` with `args`: exit code and report.
fn verify(args: &[&str]) -> (i32, Value) {
    let out = Command::new(e2e::binary("evidence"))
        .arg("verify")
        .args(args)
        .args(["--allow-simulated", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn status(report: &Value, id: &str) -> String {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}: {report:#}"))["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The evidence a relay kept from an earlier time: a quote, as this deployment's
/// keyservice makes it (the dev stack's simulated provider over the same compose, app id
/// and instance id), over a `sha256sum.txt` that lists the relay's own certificate as
/// `cert_name`. That is what a front end compromised for an hour could have had keyservice
/// quote; the quote carries no nonce, because none was asked for.
fn old_evidence(info: &Value, cert_name: &str, cert_pem: &str) -> (String, Vec<u8>) {
    use appliance_client::evidence::SimulatedProvider;
    let compose = info["tcb_info"]["app_compose"].as_str().unwrap();
    let mut provider = SimulatedProvider::new(compose.as_bytes().to_vec());
    if let Ok(id) = <[u8; 20]>::try_from(hex::decode(info["app_id"].as_str().unwrap()).unwrap()) {
        provider = provider.with_app_id(id);
    }
    if let Ok(id) =
        <[u8; 20]>::try_from(hex::decode(info["instance_id"].as_str().unwrap()).unwrap())
    {
        provider = provider.with_instance_id(id);
    }
    let sums = format!(
        "{}  {cert_name}\n",
        hex::encode(Sha256::digest(cert_pem.as_bytes()))
    );
    let quote = provider.quote(appliance_client::evidence::report_data_for(sums.as_bytes()));
    (sums, quote.evidence_quote_json().to_string().into_bytes())
}

fn client_policy(allow_stale: bool) -> Policy {
    Policy {
        allow_simulated: true,
        // No chain on this stack.
        skip: vec!["governance".to_owned()],
        allow_stale,
        ..Policy::default()
    }
}

fn client(base: &str, ca: &Path, policy: Policy) -> Client {
    Client::builder(base)
        .ca_file(ca)
        .policy(policy)
        .api_key("a-key-the-relay-must-never-see")
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_replaying_an_old_quote_is_stale_for_evidence_verify_and_the_client() {
    let tmp = tempfile::tempdir().unwrap();
    let app = Appliance::start().await;
    let sums = String::from_utf8(wait_sums(&app).await).unwrap();
    let app_ca = app.data_dir.join("tls/self-signed.pem");
    let app_ca_arg = app_ca.display().to_string();

    // Positive control: straight to the appliance, a fresh nonce is sent and carried.
    let (code, report) = verify(&["--url", &app.base_url, "--ca-file", &app_ca_arg]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(status(&report, "freshness"), "pass", "{report:#}");

    // The relay: a certificate of its own for the name (self-signed, like the dev
    // stack's, and trusted by the victims), the evidence it kept listing that
    // certificate, and everything else (/info, /attestation) forwarded to the real
    // deployment. Whatever nonce it is asked for, it serves the old quote.
    let cert_name = sums
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .nth(1)
                .filter(|n| n.starts_with("cert-"))
        })
        .unwrap()
        .to_owned();
    let relay_cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let relay_pem = relay_cert.cert.pem();
    let ca_file = tmp.path().join("relay-cert.pem");
    std::fs::write(&ca_file, &relay_pem).unwrap();
    let ca = ca_file.display().to_string();
    let info = fetch(&app, "/info").await.assert_ok().clone();
    let (old_sums, old_quote) = old_evidence(&info, &cert_name, &relay_pem);
    let cert_path = format!("/evidences/{cert_name}");
    let tamper: Tamper = Arc::new(move |path: &str, body: Vec<u8>| {
        if path.starts_with("/evidences/quote.json") {
            old_quote.clone()
        } else if path == "/evidences/sha256sum.txt" {
            old_sums.clone().into_bytes()
        } else if path == cert_path {
            relay_pem.clone().into_bytes()
        } else {
            body
        }
    });
    let relay = Relay::start_presenting(
        relay_cert.cert.der().to_vec(),
        &relay_cert.signing_key.serialize_der(),
        app.client.clone(),
        app.base_url.clone(),
        Some(tamper),
    )
    .await;
    let relay_url = format!("https://localhost:{}", relay.port);
    let cert_file = ca_file.clone();

    // evidence verify: every other check passes (the served certificate is the listed
    // one, the old quote is genuine and from the same TD), and freshness fails, by name.
    let (code, report) = verify(&["--url", &relay_url, "--ca-file", &ca]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(status(&report, "freshness"), "fail", "{report:#}");
    for id in ["report-data", "tls-certificate", "quote", "rtmr-replay"] {
        assert_eq!(status(&report, id), "pass", "{id}: {report:#}");
    }
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["freshness"], "{report:#}");
    // The verifier did send a nonce (the relay saw it), and the replay ignored it.
    assert!(
        relay
            .seen
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /evidences/quote.json?nonce=")),
        "{:?}",
        relay.seen.requests()
    );
    // Accepted only on request: freshness is then skipped, and the report passes.
    let (code, report) = verify(&["--url", &relay_url, "--ca-file", &ca, "--allow-stale"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(status(&report, "freshness"), "skipped", "{report:#}");

    // The attested client: verifies the appliance itself (fresh) ...
    let direct = client(&app.base_url, &app_ca, client_policy(false));
    let v = direct.verify().await.unwrap();
    assert_eq!(v.report.get("freshness").unwrap().status, Status::Pass);
    // ... refuses the relay, whose quote is stale, and sends it no credential.
    let before = relay.seen.requests().len();
    let relayed = client(&relay_url, &cert_file, client_policy(false));
    match relayed.list_groups(&Default::default()).await {
        Err(ClientError::NotVerified { report }) => {
            assert_eq!(report.failed(), vec!["freshness"], "{}", report.to_text());
        }
        other => panic!("expected NotVerified, got {:?}", other.map(|g| g.len())),
    }
    let requests = relay.seen.requests()[before..].to_vec();
    assert!(!requests.is_empty());
    for r in &requests {
        assert!(
            !r.contains("+authorization"),
            "a credential reached the relay: {r}"
        );
        assert!(
            !r.contains("/core/v1"),
            "an API request reached the relay: {r}"
        );
    }
    // With allow_stale the same relay verifies: freshness was what stopped it.
    let lenient = client(&relay_url, &cert_file, client_policy(true));
    let v = lenient.verify().await.unwrap();
    assert_eq!(v.report.get("freshness").unwrap().status, Status::Skipped);
}
