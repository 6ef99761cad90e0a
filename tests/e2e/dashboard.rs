//! The web dashboard (`/dashboard`): its response headers (a strict Content-Security-Policy,
//! nosniff, content types, validators, 404s), its in-browser evidence checks on the real
//! dstack vectors (`tests/browser/evidence.test.mjs`, node) and a real browser session:
//! Debian's chromium driven by playwright-core (`tests/browser/dashboard.mjs`) against a dev
//! appliance with billing on against a localstripe and its own chain (anvil, both contracts
//! deployed), with a browser wallet injected into the page (EIP-1193, answered by a viem
//! local account); its evidence verdicts are then compared with the Rust verifier's
//! (`evidence verify`) on the same appliance. The dashboard's Ethereum code (keccak256, the
//! AccountConfig calldata, the EIP-712 envelope) is checked against viem and the contract's
//! ABI by `tests/browser/chain.test.mjs`.
//!
//! Screenshots and the browser's logs go to `<target>/test-artifacts/dashboard/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use e2e::{Appliance, Launch, LocalStripe};
use serde_json::Value;

const STRICT_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("{} has no {name} header", r.url()))
        .to_str()
        .unwrap()
}

/// The standard base64 of the SHA-256 of the certificate's SubjectPublicKeyInfo: what
/// chromium's `--ignore-certificate-errors-spki-list` names.
fn spki_sha256_base64(pem: &[u8]) -> String {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).unwrap();
    let spki = appliance_client::evidence::bundle::spki_sha256(&pem.contents).unwrap();
    base64::engine::general_purpose::STANDARD.encode(spki)
}

fn artifacts_dir() -> PathBuf {
    let dir = test_support::binaries::bin_dir()
        .parent()
        .unwrap()
        .join("test-artifacts")
        .join("dashboard");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn browser_dir() -> PathBuf {
    e2e::binaries::workspace_root()
        .join("tests")
        .join("browser")
}

#[tokio::test]
async fn headers_are_strict_on_every_dashboard_response() {
    let app = Appliance::start().await;
    let get = |path: &str| app.client.get(app.url(path)).send();

    for (path, content_type) in [
        ("/dashboard", "text/html; charset=utf-8"),
        ("/dashboard/", "text/html; charset=utf-8"),
        ("/dashboard/assets/app.js", "text/javascript; charset=utf-8"),
        (
            "/dashboard/assets/appliance-sdk.js",
            "text/javascript; charset=utf-8",
        ),
        (
            "/dashboard/assets/evidence.js",
            "text/javascript; charset=utf-8",
        ),
        ("/dashboard/assets/style.css", "text/css; charset=utf-8"),
        ("/dashboard/assets/icon.svg", "image/svg+xml"),
        ("/dashboard/config.json", "application/json"),
    ] {
        let r = get(path).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "content-type"), content_type, "{path}");
        assert_eq!(header(&r, "content-security-policy"), STRICT_CSP, "{path}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&r, "referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header(&r, "x-frame-options"), "DENY", "{path}");
        let cache = header(&r, "cache-control").to_owned();
        assert!(
            cache == "no-cache" || cache == "no-store",
            "{path}: {cache}"
        );
        if path != "/dashboard/config.json" {
            // Revalidated against the asset's hash: 304 while unchanged.
            let etag = header(&r, "etag").to_owned();
            let again = app
                .client
                .get(app.url(path))
                .header("if-none-match", &etag)
                .send()
                .await
                .unwrap();
            assert_eq!(again.status(), 304, "{path}");
            assert_eq!(header(&again, "etag"), etag);
            assert_eq!(header(&again, "content-security-policy"), STRICT_CSP);
        }
    }

    // The page loads only its own files: no inline script, no other origin.
    let html = get("/dashboard").await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="/dashboard/assets/app.js">"#));
    assert!(!html.contains("<script>") && !html.contains("style="));

    // Billing off: the page is told so, and no Stripe origin is admitted.
    let config: Value = get("/dashboard/config.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["billing_enabled"], false, "{config}");
    assert_eq!(config["stripe_js_url"], Value::Null, "{config}");

    // Unknown files: 404 in the API's error shape, with the same headers.
    for path in [
        "/dashboard/assets/nope.js",
        "/dashboard/assets/../index.html",
        "/dashboard/index.html.bak",
        "/dashboard/x/y",
    ] {
        let r = get(path).await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(header(&r, "content-security-policy"), STRICT_CSP, "{path}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&r, "content-type"), "application/json", "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], 404, "{path}: {body}");
    }
    // Only GET (and HEAD).
    let r = app
        .client
        .post(app.url("/dashboard/assets/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = app
        .client
        .head(app.url("/dashboard/assets/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Not part of the API's OpenAPI document.
    let doc = get("/core/v1/openapi.json")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!doc.contains("/dashboard"));
}

#[test]
fn the_dashboards_ethereum_code_matches_viem_and_the_contract_abi() {
    let viem = test_support::tools::node_package("viem", "2.57.20");
    let out = Command::new("node")
        .arg("--test")
        .arg(browser_dir().join("chain.test.mjs"))
        .current_dir(e2e::binaries::workspace_root())
        .env("NODE_PATH", viem.parent().unwrap())
        .output()
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test chain.test.mjs failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

/// The dev chain's RPC URL, from the appliance's log.
fn dev_rpc(app: &Appliance) -> String {
    let log = app.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("dev chain: anvil started"))
        .unwrap_or_else(|| panic!("no dev chain in the log:\n{log}"));
    let start = line.find("http://127.0.0.1:").unwrap();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

#[test]
fn evidence_checks_pass_on_the_real_vectors_and_fail_on_a_flipped_byte() {
    let out = Command::new("node")
        .arg("--test")
        .arg(browser_dir().join("evidence.test.mjs"))
        .current_dir(e2e::binaries::workspace_root())
        .output()
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test evidence.test.mjs failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

/// Checks statuses the page computes against the Rust verifier on the same appliance.
fn cross_check_with_rust_verifier(app: &Appliance, report: &Value) {
    let pem = app.data_dir.join("tls").join("self-signed.pem");
    let out = Command::new(e2e::binary("evidence"))
        .args(["verify", "--url", &app.base_url, "--ca-file"])
        .arg(&pem)
        .args(["--allow-simulated", "--json"])
        .output()
        .unwrap();
    let rust: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "evidence verify: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let status = |r: &Value, id: &str| -> String {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no check {id} in {r}"))["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for id in [
        "compose-hash",
        "images-pinned",
        "report-data",
        "rtmr-replay",
        "compose-hash-event",
        "acme-caa",
        "os-image",
    ] {
        assert_eq!(
            status(report, id),
            status(&rust, id),
            "{id}: the browser and evidence verify disagree\nbrowser: {report:#}\nrust: {rust:#}"
        );
    }
    // What the page cannot see, the Rust verifier does: the served leaf is the evidence
    // certificate.
    assert_eq!(status(&rust, "tls-certificate"), "pass", "{rust:#}");
    assert_eq!(status(report, "tls-certificate"), "compare");
}

#[tokio::test]
async fn the_dashboard_works_in_chromium_with_billing_on_localstripe() {
    // Not while the container test's engine changes the network interfaces.
    let _network = e2e::NETWORK_CHANGES.lock().await;
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "{} is missing: run scripts/setup as root (it installs Debian's chromium)",
        chromium.display()
    );
    let playwright = test_support::tools::node_package("playwright-core", "1.65.1");
    // The page's wallet signs with viem, and the test checks calldata with it.
    test_support::tools::node_package("viem", "2.57.20");
    let stripe = LocalStripe::start();
    let dir = tempfile::tempdir().unwrap();
    let mut env = stripe.env(1000);
    env.push((
        "APPLIANCE_BILLING__STRIPE_JS_URL".to_owned(),
        format!("{}/js.stripe.com/v3/", stripe.base_url),
    ));
    // Its own chain: the admin wallet sends AccountConfig calls there.
    env.push((
        "APPLIANCE_CHAIN__DEV_ANVIL".to_owned(),
        test_support::tools::anvil_binary().display().to_string(),
    ));
    env.push((
        "APPLIANCE_CHAIN__POLL_INTERVAL_MS".to_owned(),
        "100".to_owned(),
    ));
    let app = Appliance::launch(dir.path(), Launch::DevWith { env }).await;
    let rpc = dev_rpc(&app);

    // With billing on, the policy admits the Stripe.js origin, and only there.
    let r = app.client.get(app.url("/dashboard")).send().await.unwrap();
    let csp = header(&r, "content-security-policy").to_owned();
    let origin = stripe.base_url.trim_end_matches('/');
    assert!(
        csp.contains(&format!("script-src 'self' {origin};"))
            && csp.contains(&format!("connect-src 'self' {origin};"))
            && csp.contains(&format!("frame-src {origin};"))
            && csp.starts_with("default-src 'none';"),
        "{csp}"
    );
    let config: Value = app
        .client
        .get(app.url("/dashboard/config.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["billing_enabled"], true, "{config}");

    let pem_path = app.data_dir.join("tls").join("self-signed.pem");
    let pem = std::fs::read(&pem_path).unwrap();
    let artifacts = artifacts_dir();
    let node_modules = playwright.parent().unwrap().to_owned();
    let out = tokio::process::Command::new("node")
        .arg(browser_dir().join("dashboard.mjs"))
        .args(["--url", &app.base_url, "--spki", &spki_sha256_base64(&pem)])
        .arg("--artifacts")
        .arg(&artifacts)
        .args(["--localstripe", &stripe.base_url])
        .args(["--stripe-secret", e2e::localstripe::SECRET_KEY])
        .args(["--rpc", &rpc])
        // The script's own API calls trust the appliance's certificate.
        .env("NODE_EXTRA_CA_CERTS", &pem_path)
        .arg("--chromium")
        .arg(chromium)
        .arg("--node-modules")
        .arg(&node_modules)
        .output()
        .await
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    std::fs::write(artifacts.join("browser.log"), stdout.as_bytes()).unwrap();
    assert!(
        out.status.success(),
        "the browser test failed (screenshots in {}):\n{stdout}\n{}\nappliance log:\n{}",
        artifacts.display(),
        String::from_utf8_lossy(&out.stderr),
        app.log()
    );
    eprintln!("{stdout}");
    eprintln!("screenshots: {}", artifacts.display());

    let report: Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("evidence-report.json")).unwrap())
            .unwrap();
    cross_check_with_rust_verifier(&app, &report);
}
