//! Schemathesis (PyPI, installed by `scripts/setup`) against the OpenAPI document the
//! appliance serves: generated requests for every documented operation, sent with real
//! credentials, with every check schemathesis has (`--checks all`): no 5xx; every
//! response documented (status code, content type, headers, body schema); requests the
//! schema allows are accepted and requests it refuses are refused; authentication is
//! enforced (a missing or invalid credential gets 401 or 403); methods not documented get
//! 405 with `Allow`. The appliance must still be up afterwards. Billing is on (against
//! localstripe): with billing off its endpoints answer 503 by design.
//!
//! The run is bounded: `SCHEMATHESIS_MAX_EXAMPLES` generated requests per operation and
//! phase (default 30) from a fixed seed (`SCHEMATHESIS_SEED`, default 1), so CI sees the
//! same requests each time; raise both by hand for a deeper run.
//!
//! Zero findings, except the [`EXCLUSIONS`]: answers the document cannot predict, each
//! allowed for one operation and one check, with its reason (and in
//! `docs/compatibility.md`, "What the schemas say, and what they cannot").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use e2e::{Appliance, Launch, LocalStripe};
use reqwest::Method;
use serde_json::json;

/// Every check of the installed schemathesis.
const CHECKS: &str = "all";

/// The statuses `positive_data_acceptance` takes as "accepted" by default (schemathesis
/// 4): a documented exclusion adds to these.
const ACCEPTED_BY_DEFAULT: &[&str] = &["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"];

/// A status an operation may give to a request its schema allows, though the document
/// cannot say when: validity that depends on a signature or a hash.
struct Exclusion {
    method: &'static str,
    path: &'static str,
    /// The check it is allowed for, and the status it may answer.
    check: &'static str,
    status: &'static str,
    reason: &'static str,
}

const SIGNATURE_REASON: &str = "a schema-valid typed_data and signature are refused (422) unless \
    the signature is by message.address over exactly this flow's envelope, for this node's \
    chain id, within 300 s of the server's clock, and not used before: a schema cannot \
    describe a valid signature";

/// The documented exclusions (`docs/compatibility.md`, "What the schemas say, and what
/// they cannot").
const EXCLUSIONS: &[Exclusion] = &[
    Exclusion {
        method: "POST",
        path: "/core/v1/create_wallet_with_signature",
        check: "positive_data_acceptance",
        status: "422",
        reason: SIGNATURE_REASON,
    },
    Exclusion {
        method: "POST",
        path: "/core/v1/add_usage_api_key_with_signature",
        check: "positive_data_acceptance",
        status: "422",
        reason: SIGNATURE_REASON,
    },
    Exclusion {
        method: "POST",
        path: "/core/v1/convert_to_chain_secured_account",
        check: "positive_data_acceptance",
        status: "422",
        reason: SIGNATURE_REASON,
    },
    Exclusion {
        method: "POST",
        path: "/core/v1/lit_action",
        check: "positive_data_acceptance",
        status: "422",
        reason: "`code` and `ipfs_id` are each valid, but sent together the code must hash to \
            the CID (422 otherwise): a schema cannot describe a hash",
    },
];

/// The schemathesis configuration of the exclusions: each operation's check gets its
/// extra accepted status.
fn exclusions_config() -> String {
    let mut toml = String::new();
    for e in EXCLUSIONS {
        assert_eq!(
            e.check, "positive_data_acceptance",
            "only this check is excluded"
        );
        assert!(!e.reason.is_empty());
        let statuses: Vec<String> = ACCEPTED_BY_DEFAULT
            .iter()
            .chain([&e.status])
            .map(|s| format!("{s:?}"))
            .collect();
        writeln!(
            toml,
            "[[operations]]\ninclude-path = {:?}\ninclude-method = {:?}\nchecks.{}.expected-statuses = [{}]\n",
            e.path,
            e.method,
            e.check,
            statuses.join(", ")
        )
        .unwrap();
    }
    toml
}

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

/// The credential a run sends on every request.
enum Credential {
    /// `Authorization: Bearer <key>`. Schemathesis also generates values for the other
    /// security schemes (`X-Api-Key`, `X-Wallet-Auth`): the Bearer key must win over a
    /// random `X-Api-Key`.
    Bearer(String),
    /// `X-Api-Key: <key>`, with no generated value for the other schemes: a generated
    /// `Authorization` that is not a Bearer credential (`Authorization: kT`) is rightly
    /// ignored beside a valid `X-Api-Key` (an operator's proxy may add Basic auth,
    /// `tests/e2e/http_conventions.rs`), which `ignored_auth` would take for accepting a
    /// bad credential. Enforcement is still checked: `ignored_auth` sends each request
    /// again with no credential and with an invalid one for each scheme.
    XApiKey(String),
}

/// Runs schemathesis against the served document with `credential`; panics with its
/// report if any check failed.
fn run(app: &Appliance, label: &str, credential: &Credential) {
    let report = tempfile::tempdir().unwrap();
    let config = report.path().join("schemathesis.toml");
    std::fs::write(&config, exclusions_config()).unwrap();
    let started = Instant::now();
    let mut cmd = Command::new(schemathesis());
    cmd.arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(app.api("/openapi.json"))
        .args(["--url", &app.base_url])
        .args(["--checks", CHECKS])
        .args(["--max-examples", &env_or("SCHEMATHESIS_MAX_EXAMPLES", "30")])
        .args(["--seed", &env_or("SCHEMATHESIS_SEED", "1")])
        .args([
            "--phases",
            &env_or("SCHEMATHESIS_PHASES", "examples,coverage,fuzzing,stateful"),
        ])
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
    match credential {
        Credential::Bearer(key) => {
            cmd.args(["--header", &format!("Authorization: Bearer {key}")]);
        }
        Credential::XApiKey(key) => {
            cmd.args(["--header", &format!("X-Api-Key: {key}")]);
            cmd.args(["--generation-with-security-parameters", "false"]);
        }
    }
    // More options by hand (e.g. `--output-sanitize false` to see the headers sent).
    if let Ok(extra) = std::env::var("SCHEMATHESIS_ARGS") {
        cmd.args(extra.split_whitespace());
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
    run(&app, "account key", &Credential::Bearer(account_key));
    run(&app, "usage key", &Credential::XApiKey(usage_key));

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
