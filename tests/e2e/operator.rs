//! The operator's day-2 tasks without a shell in the CVM (docs/operators.md, "Day-2
//! tasks"): signed operator requests over attested TLS, and keyservice's own check of a
//! reseal.
//!
//! * `keyservice_reseals_only_what_an_operator_signed_for_an_allowed_hash` plays a
//!   compromised front end: it holds keyservice's socket and sends `OperatorReseal` itself.
//!   keyservice (started as in the compose: `--chain-config` of the measured configuration,
//!   the RPC URL in its environment) refuses a stranger's signature, a target the
//!   governance contract does not allow, a request for another target or compose hash, and
//!   a replay; a valid one writes `root.sealed.<target prefix>`, which a keyservice of the
//!   new compose hash opens to the same root. `StateFiles` never hands out the dev secret.
//! * `the_cli_runs_the_day_two_tasks_over_attested_tls`: `appliance-cli operator` against
//!   the whole attested chain (`e2e::attested::AttestedStack`): status, export-root,
//!   backup-database (a database that opens, with the account just made), reseal (refused
//!   until governance allows the target, then done, and not again with the same request),
//!   and a stranger's key refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256};
use chain_contracts::{IAppGovernance, deploy_app_governance};
use e2e::attested::AttestedStack;
use k256::ecdsa::SigningKey;
use keyservice_api::{ComposeHash, KeyClient, KeyError};
use operator_auth::{Action, OperatorRequest, address_of, sign};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Anvil's well-known development keys: #8 plays the operator, #9 a stranger.
const OPERATOR_KEY: &str = "dbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97";
const STRANGER_KEY: &str = "2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";

fn key(hex_key: &str) -> SigningKey {
    SigningKey::from_slice(&hex::decode(hex_key).unwrap()).unwrap()
}

fn address_text(key: &SigningKey) -> String {
    format!("0x{}", hex::encode(address_of(key.verifying_key())))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A keyservice as the compose runs it: the measured configuration as --chain-config,
/// the RPC URL in the environment.
fn start_keyservice(dir: &Path, compose: &Path, config: &Path, rpc: &str) -> std::process::Child {
    Command::new(e2e::binary("keyservice"))
        .arg("run")
        .arg("--socket")
        .arg(dir.join("ks.sock"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--platform", "dev", "--compose-file"])
        .arg(compose)
        .arg("--chain-config")
        .arg(config)
        .env("APPLIANCE_CHAIN__RPC_URL", rpc)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("keyservice.log")).unwrap())
        .spawn()
        .unwrap()
}

async fn wait_up(client: &KeyClient, dir: &Path) {
    for _ in 0..400 {
        if client.status().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "keyservice did not come up: {}",
        std::fs::read_to_string(dir.join("keyservice.log")).unwrap_or_default()
    );
}

fn refused(result: Result<keyservice_api::Resealed, KeyError>, why: &str) {
    match result {
        Err(KeyError::Rejected { message, .. }) => {
            assert!(message.contains(why), "expected {why:?} in {message:?}")
        }
        other => panic!("expected a refusal ({why}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyservice_reseals_only_what_an_operator_signed_for_an_allowed_hash() {
    let anvil = e2e::chain::anvil();
    let owner = test_support::chain::wallet(&anvil, 0);
    let governance = deploy_app_governance(&owner).await.unwrap();
    let gov = IAppGovernance::new(governance, &owner);
    let operator = key(OPERATOR_KEY);
    let stranger = key(STRANGER_KEY);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let compose_a = dir.join("app-compose.a.json");
    std::fs::write(&compose_a, br#"{"version":"a"}"#).unwrap();
    let compose_b = dir.join("app-compose.b.json");
    std::fs::write(&compose_b, br#"{"version":"b"}"#).unwrap();
    let hash_a = sha256(br#"{"version":"a"}"#);
    let hash_b = sha256(br#"{"version":"b"}"#);
    let config = dir.join("appliance.toml");
    std::fs::write(
        &config,
        format!(
            "[operator]\naddresses = [\"{}\"]\n\n[chain]\ngovernance_address = \"{governance}\"\n",
            address_text(&operator)
        ),
    )
    .unwrap();
    let mut child = start_keyservice(dir, &compose_a, &config, &anvil.endpoint());
    let client = KeyClient::new(dir.join("ks.sock"));
    wait_up(&client, dir).await;
    let running = client.root_status().await.unwrap().root_id.unwrap();
    // The app id of simulated quotes is the governance contract's address.
    let app: [u8; 20] = governance.into_array();

    let request = |action, compose_hash, nonce: u8| OperatorRequest {
        action,
        app,
        compose_hash,
        issued_at: now(),
        nonce: [nonce; 16],
    };
    let reseal_b = Action::Reseal { target: hash_b };
    let send = |signer: &SigningKey, r: &OperatorRequest, target: [u8; 32]| {
        let text = r.render();
        let signature = sign(signer, text.as_bytes()).unwrap();
        let client = client.clone();
        async move {
            client
                .operator_reseal(ComposeHash(target), signature, &text, None)
                .await
        }
    };
    let resealed_file = dir
        .join("state")
        .join(format!("root.sealed.{}", &hex::encode(hash_b)[..16]));

    // A front end with the socket but not the operator's key gets nothing.
    refused(
        send(&stranger, &request(reseal_b, hash_a, 1), hash_b).await,
        "is not an operator",
    );
    // The operator's request, for a hash governance does not allow (yet).
    refused(
        send(&operator, &request(reseal_b, hash_a, 2), hash_b).await,
        "does not allow compose hash",
    );
    assert!(!resealed_file.exists());
    test_support::chain::send(gov.addComposeHash(B256::from(hash_b))).await;
    // Signed for another target than the one sent; signed for another compose hash.
    refused(
        send(
            &operator,
            &request(Action::Reseal { target: [7; 32] }, hash_a, 3),
            hash_b,
        )
        .await,
        "not a reseal to",
    );
    refused(
        send(&operator, &request(reseal_b, [9; 32], 4), hash_b).await,
        "this deployment runs",
    );
    // A status request is no reseal.
    refused(
        send(&operator, &request(Action::Status, hash_a, 5), hash_b).await,
        "not a reseal to",
    );
    // A sealed root from the front end, where keyservice reseals its own file.
    let text = request(reseal_b, hash_a, 6).render();
    let signature = sign(&operator, text.as_bytes()).unwrap();
    assert!(
        client
            .operator_reseal(ComposeHash(hash_b), signature, &text, Some([0; 101]))
            .await
            .is_err()
    );
    assert!(!resealed_file.exists());

    // The real thing, once.
    let good = request(reseal_b, hash_a, 7);
    let done = send(&operator, &good, hash_b).await.unwrap();
    assert_eq!(done.root_id, running);
    assert_eq!(
        done.file.as_deref(),
        resealed_file.file_name().and_then(|n| n.to_str())
    );
    assert_eq!(std::fs::read(&resealed_file).unwrap(), done.sealed);
    refused(send(&operator, &good, hash_b).await, "already used");

    // The state files an operator backs up: the sealed roots, never the dev secret.
    let files = client.state_files().await.unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert!(names.contains(&"root.sealed"), "{names:?}");
    assert!(
        names.contains(&resealed_file.file_name().unwrap().to_str().unwrap()),
        "{names:?}"
    );
    assert!(dir.join("state").join("dev-secret").exists());
    assert!(!names.iter().any(|n| n.contains("secret")), "{names:?}");

    // The new version (compose b) opens the resealed file: the same root.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = start_keyservice(dir, &compose_b, &config, &anvil.endpoint());
    wait_up(&client, dir).await;
    let status = client.root_status().await.unwrap();
    assert_eq!(status.compose_hash, ComposeHash(hash_b));
    assert_eq!(status.root_id, Some(running));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `appliance-cli` with its own config directory and the operator key (or none).
fn cli(config: &Path, operator_key: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(e2e::binary("appliance-cli"));
    cmd.args(args)
        .env_clear()
        .env("APPLIANCE_CLI_CONFIG_DIR", config)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    if let Some(key) = operator_key {
        cmd.env("APPLIANCE_CLI_OPERATOR_KEY", format!("0x{key}"));
    }
    cmd.output().unwrap()
}

fn json_ok(out: Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fails(out: Output, code: i32, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(why), "expected {why:?} in {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_runs_the_day_two_tasks_over_attested_tls() {
    let operator = key(OPERATOR_KEY);
    let stack = AttestedStack::start_with(vec![(
        "APPLIANCE_OPERATOR__ADDRESSES".to_owned(),
        format!("[\"{}\"]", address_text(&operator)),
    )])
    .await;
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("appliance-cli");
    let mut profile = vec!["--json".to_owned()];
    profile.extend(stack.cli_profile_args());
    let profile: Vec<&str> = profile.iter().map(String::as_str).collect();
    json_ok(cli(&config, None, &profile), "profile set");
    // Something in the database to find in the backup.
    let account = stack
        .plain
        .post(format!("{}/core/v1/new_account", stack.base))
        .json(&serde_json::json!({"account_name": "operator-backup"}))
        .send()
        .await
        .unwrap();
    assert_eq!(account.status(), 200);
    let op = Some(OPERATOR_KEY);

    // status: the deployment as verified, its root and sealed files.
    let status = json_ok(
        cli(&config, op, &["--json", "operator", "status"]),
        "status",
    );
    assert_eq!(
        status["compose_hash"],
        format!("0x{}", hex::encode(stack.compose_hash))
    );
    assert_eq!(status["operator"], address_text(&operator));
    assert_eq!(status["store_engine"], "sqlite");
    let files = status["keyservice_files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f["name"] == "root.sealed" && f["current"] == true),
        "{status}"
    );
    let root_id = status["root_id"].as_str().unwrap().to_owned();

    // Without the operator's key, or with a stranger's: refused (exit 4 = the server
    // refused), nothing done.
    fails(
        cli(&config, None, &["operator", "status"]),
        1,
        "APPLIANCE_CLI_OPERATOR_KEY",
    );
    fails(
        cli(&config, Some(STRANGER_KEY), &["operator", "status"]),
        4,
        "is not an operator",
    );

    // export-root: the sealed root file, byte for byte keyservice's.
    let export = config_dir.path().join("export");
    let exported = json_ok(
        cli(
            &config,
            op,
            &[
                "--json",
                "operator",
                "export-root",
                "--out",
                export.to_str().unwrap(),
            ],
        ),
        "export-root",
    );
    assert_eq!(exported["root_id"], root_id.as_str());
    let on_disk = stack.app.data_dir.join("keyservice").join("root.sealed");
    assert_eq!(
        std::fs::read(export.join("root.sealed")).unwrap(),
        std::fs::read(&on_disk).unwrap()
    );

    // backup-database: an SQLite file holding the account made above.
    let backup = config_dir.path().join("backup.db");
    let summary = json_ok(
        cli(
            &config,
            op,
            &[
                "--json",
                "operator",
                "backup-database",
                "--out",
                backup.to_str().unwrap(),
            ],
        ),
        "backup-database",
    );
    let bytes = std::fs::read(&backup).unwrap();
    assert_eq!(summary["bytes"], bytes.len());
    let db = rusqlite::Connection::open(&backup).unwrap();
    let names: i64 = db
        .query_row(
            "SELECT count(*) FROM accounts WHERE name = 'operator-backup'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(names, 1);
    // Nothing left behind in the data directory.
    let leftovers: Vec<PathBuf> = std::fs::read_dir(stack.app.data_dir.join("backups"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // reseal: refused while governance does not allow the target, then done; the file is
    // in keyservice's state directory and opens to the same root for the new hash.
    let next = sha256(b"the next version's app-compose.json");
    let next_hex = hex::encode(next);
    fails(
        cli(&config, op, &["operator", "reseal", "--to", &next_hex]),
        4,
        "does not allow compose hash",
    );
    let gov = IAppGovernance::new(stack.governance, &stack.chain);
    test_support::chain::send(gov.addComposeHash(B256::from(next))).await;
    let resealed = json_ok(
        cli(
            &config,
            op,
            &["--json", "operator", "reseal", "--to", &next_hex],
        ),
        "reseal",
    );
    assert_eq!(resealed["root_id"], root_id.as_str());
    let file = format!("root.sealed.{}", &next_hex[..16]);
    assert_eq!(resealed["stored"], format!("keyservice:{file}"));
    let written = std::fs::read(stack.app.data_dir.join("keyservice").join(&file)).unwrap();
    assert_eq!(written.len(), 101);
    assert_eq!(&written[9..41], &next[..], "sealed for the target hash");

    // A request printed for signing elsewhere, signed, sent: works once.
    let printed = json_ok(
        cli(
            &config,
            None,
            &["--json", "operator", "status", "--print-request"],
        ),
        "print-request",
    );
    let text = printed["request"].as_str().unwrap().to_owned();
    let parsed = OperatorRequest::parse(&text).unwrap();
    assert_eq!(parsed.action, Action::Status);
    let _: Address = stack.governance;
    let request_file = config_dir.path().join("request.txt");
    std::fs::write(&request_file, format!("{text}\n")).unwrap();
    let signature = format!(
        "0x{}",
        hex::encode(sign(&operator, text.as_bytes()).unwrap())
    );
    let with = |out| json_ok(out, "signed elsewhere");
    with(cli(
        &config,
        None,
        &[
            "--json",
            "operator",
            "status",
            "--request-file",
            request_file.to_str().unwrap(),
            "--signature",
            &signature,
        ],
    ));
    fails(
        cli(
            &config,
            None,
            &[
                "operator",
                "status",
                "--request-file",
                request_file.to_str().unwrap(),
                "--signature",
                &signature,
            ],
        ),
        4,
        "already used",
    );
}
