//! The appliance and keyservice together: wallets come from keyservice, an outage is a
//! clean 503 that heals by itself, and in dev mode the keyservice child is supervised
//! (restarted when it dies, stopped when the appliance stops, even by `kill -9`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use base64::Engine as _;
use e2e::{Appliance, KeyService, Launch, eventually, processes_matching};
use keyservice_api::{DerivationPath, KeyClient};
use reqwest::Method;
use serde_json::json;
use sha3::{Digest, Keccak256};

/// The account wallet's derivation path, computed here from its documented formula.
fn account_wallet_path(api_key: &str) -> DerivationPath {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(api_key)
        .unwrap();
    let key_hash = Keccak256::digest(raw);
    let mut h = Keccak256::new();
    h.update(b"appliance/account-wallet/v1");
    h.update(key_hash);
    DerivationPath(h.finalize().into())
}

#[tokio::test]
async fn the_account_wallet_is_held_by_keyservice() {
    let dir = tempfile::tempdir().unwrap();
    let app = Appliance::start_in(dir.path()).await;
    let (key, wallet) = app.new_account("alice").await;

    // Ask keyservice directly: the wallet at the documented path is the one returned.
    let socket = dir.path().join("keyservice.sock");
    let keys = KeyClient::connect(&socket).await.unwrap();
    let held = keys.wallet(&account_wallet_path(&key)).await.unwrap();
    assert_eq!(held.address.to_checksum(), wallet);

    let health = app
        .send(app.request(Method::GET, &app.url("/health")))
        .await;
    assert_eq!(health.assert_ok()["checks"]["keyservice"], json!("ok"));

    // After a restart the sealed root unseals again: same root, same wallet.
    drop(app);
    let app = Appliance::start_in(dir.path()).await;
    let keys = KeyClient::connect(&socket).await.unwrap();
    let again = keys.wallet(&account_wallet_path(&key)).await.unwrap();
    assert_eq!(again.address.to_checksum(), wallet);
    assert_eq!(
        app.get("/account_exists", Some(&key)).await.assert_ok(),
        &json!(true)
    );
}

#[tokio::test]
async fn keyservice_outage_is_503_and_heals_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ks.sock");
    let state = dir.path().join("ks-state");
    let compose = dir.path().join("compose.json");
    let mut keyservice = KeyService::start(&socket, &state, &compose).await;

    // Production layout: keyservice runs on its own, the appliance connects to it.
    let env = vec![
        (
            "APPLIANCE_KEYSERVICE__SOCKET".to_owned(),
            socket.display().to_string(),
        ),
        // `serve` listens for metrics on 127.0.0.1:9464 by default: tests run side by side.
        (
            "APPLIANCE_METRICS__LISTEN".to_owned(),
            "127.0.0.1:0".to_owned(),
        ),
    ];
    let app = Appliance::launch(dir.path(), Launch::Serve { env }).await;
    let (first_key, first_wallet) = app.new_account("before").await;

    keyservice.kill9();
    let reply = app
        .post("/new_account", None, json!({"account_name": "during"}))
        .await;
    let description = reply.assert_error(503);
    assert!(description.contains("key service"), "{description}");
    let health = app
        .send(app.request(Method::GET, &app.url("/health")))
        .await;
    health.assert_error_free_503();
    assert_eq!(health.body["checks"]["keyservice"], json!("unavailable"));
    assert_eq!(health.body["checks"]["store"], json!("ok"));
    // Requests that need no key keep working.
    assert_eq!(
        app.get("/account_exists", Some(&first_key))
            .await
            .assert_ok(),
        &json!(true)
    );

    // Back up: the appliance reconnects by itself, and the root is the same.
    let _keyservice = KeyService::start(&socket, &state, &compose).await;
    let (_, wallet) = app.new_account("after").await;
    assert!(wallet.starts_with("0x"));
    let health = app
        .send(app.request(Method::GET, &app.url("/health")))
        .await;
    assert_eq!(health.assert_ok()["status"], json!("ok"));
    let keys = KeyClient::connect(&socket).await.unwrap();
    let held = keys.wallet(&account_wallet_path(&first_key)).await.unwrap();
    assert_eq!(held.address.to_checksum(), first_wallet);

    // keyservice keeps the certificates it may quote for in memory only: the restarted one
    // knows none, yet fresh evidence works at once (the appliance registers its
    // certificate again before each fresh quote).
    let nonce = "5c".repeat(32);
    let fresh = app
        .send(app.request(
            Method::GET,
            &app.url(&format!("/evidences/quote.json?nonce={nonce}")),
        ))
        .await;
    let body = fresh.assert_ok();
    let quote = hex::decode(body["quote"].as_str().unwrap().trim_start_matches("0x")).unwrap();
    let quote = appliance_client::evidence::quote::TdxQuote::parse(&quote).unwrap();
    assert_eq!(
        hex::encode(&quote.report.report_data[32..]),
        nonce,
        "the fresh quote after a keyservice restart must carry the nonce"
    );
}

#[tokio::test]
async fn dev_keyservice_child_is_supervised() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = Appliance::start_in(dir.path()).await;
    let socket = dir.path().join("keyservice.sock").display().to_string();
    let children = || processes_matching(&["keyservice", "run", &socket]);
    let first = children();
    assert_eq!(first.len(), 1, "exactly one keyservice child: {first:?}");

    // The child dies: it is restarted, and key operations recover without a restart.
    e2e::signal(first[0], "KILL");
    assert!(
        eventually(Duration::from_secs(10), || {
            let now = children();
            now.len() == 1 && now[0] != first[0]
        })
        .await,
        "keyservice was not restarted; log:\n{}",
        app.log()
    );
    let mut recovered = false;
    for _ in 0..100 {
        let reply = app
            .post("/new_account", None, json!({"account_name": "x"}))
            .await;
        if reply.status.is_success() {
            recovered = true;
            break;
        }
        reply.assert_error(503);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        recovered,
        "new_account did not recover after the keyservice restart"
    );

    // A clean stop of the appliance stops its child too.
    let status = app.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(eventually(Duration::from_secs(5), || children().is_empty()).await);

    // kill -9 of the appliance: the child notices and exits by itself.
    let mut app = Appliance::start_in(dir.path()).await;
    assert_eq!(children().len(), 1);
    app.kill9();
    assert!(
        eventually(Duration::from_secs(5), || children().is_empty()).await,
        "an orphaned keyservice kept running"
    );
}
