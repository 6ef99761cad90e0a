//! The JavaScript SDK (`sdk/js`) end to end: a dev appliance with billing on against
//! localstripe, and node running the SDK's live tests (`sdk/js/test/live/`) against it,
//! as a node application would use the package: accounts, groups, wallets, usage keys
//! listed page by page, the CID computed locally against the server's, an action run,
//! the server's errors as `ApplianceError`, ChainSecured signatures made with viem (a
//! replay refused), a card top-up and `X-Wallet-Auth` billing after a conversion.
//!
//! The SDK must be built first (`npm --prefix sdk/js run build`; `scripts/test` does it
//! before `cargo test`). Node trusts the appliance's self-signed certificate through
//! `NODE_EXTRA_CA_CERTS`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use e2e::{Appliance, LocalStripe, workspace_root};

/// Credit every new account starts with (management writes cost 1 cent each).
const INITIAL_CREDIT_CENTS: u64 = 1000;

#[tokio::test]
async fn the_js_sdk_drives_a_live_appliance() {
    let sdk = workspace_root().join("sdk").join("js");
    for (built, what) in [
        (sdk.join("node_modules"), "its npm packages"),
        (sdk.join("dist").join("index.js"), "its build"),
    ] {
        assert!(
            built.exists(),
            "{} is missing ({what}): run scripts/setup, then `npm --prefix sdk/js run build` (scripts/test does both)",
            built.display()
        );
    }

    let stripe = LocalStripe::start();
    let env = stripe.env(INITIAL_CREDIT_CENTS);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = Appliance::start_with(&env).await;
    let cert = app.data_dir.join("tls").join("self-signed.pem");

    let out = run_live_tests(&sdk, &app.base_url, &cert, &stripe.base_url);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK's live tests failed ({}):\n{stdout}\n{stderr}\nthe appliance's log:\n{}",
        out.status,
        app.log()
    );
    // Every test ran: none skipped (billing is on here), none left out.
    assert!(stdout.contains("# fail 0"), "{stdout}");
    assert!(stdout.contains("# skipped 0"), "{stdout}");
    let passed = stdout
        .lines()
        .find_map(|line| line.strip_prefix("# pass "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or(0);
    assert!(passed >= 9, "only {passed} live tests passed:\n{stdout}");
}

/// `node --test sdk/js/test/live/` against `base_url`, with nothing of the caller's
/// node settings.
fn run_live_tests(
    sdk: &Path,
    base_url: &str,
    cert: &Path,
    stripe_url: &str,
) -> std::process::Output {
    Command::new("node")
        .args([
            "--test",
            "--test-reporter=tap",
            "--test-timeout=120000",
            "test/live/",
        ])
        .current_dir(sdk)
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_PATH")
        .env("APPLIANCE_CLI_URL", base_url)
        .env("NODE_EXTRA_CA_CERTS", cert)
        .env("LOCALSTRIPE_URL", stripe_url)
        .env("LOCALSTRIPE_SECRET_KEY", e2e::localstripe::SECRET_KEY)
        .output()
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js 20 or later"))
}
