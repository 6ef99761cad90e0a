//! Accounts: creation and key verification, over HTTPS against the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use e2e::Appliance;
use serde_json::json;

#[tokio::test]
async fn new_account_returns_a_fresh_key_and_wallet() {
    let app = Appliance::start().await;
    let reply = app
        .post(
            "/new_account",
            None,
            json!({"account_name": "alice", "account_description": "d", "email": "a@example.com"}),
        )
        .await;
    let body = reply.assert_ok();
    assert_eq!(body.as_object().unwrap().len(), 2, "{}", reply.text);
    let key = body["api_key"].as_str().unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    assert_eq!((key.len(), raw.len()), (44, 32));
    let wallet = body["wallet_address"].as_str().unwrap();
    assert!(wallet.starts_with("0x") && wallet.len() == 42, "{wallet}");
    assert!(hex::decode(&wallet[2..]).is_ok());

    let (key2, wallet2) = app.new_account("alice").await;
    assert_ne!(key, key2, "every account gets a fresh secret");
    assert_ne!(wallet, wallet2);
}

#[tokio::test]
async fn new_account_validates_its_input() {
    let app = Appliance::start().await;
    for (body, needle) in [
        (json!({}), "account_name"),
        (json!({"account_name": ""}), "account_name"),
        (json!({"account_name": "   "}), "account_name"),
        (json!({"account_name": 5}), "account_name"),
        (json!({"account_name": "x".repeat(300)}), "account_name"),
        (
            json!({"account_name": "ok", "email": "not-an-email"}),
            "email",
        ),
        (
            json!({"account_name": "ok", "account_description": "d".repeat(5000)}),
            "account_description",
        ),
    ] {
        let reply = app.post("/new_account", None, body.clone()).await;
        let description = reply.assert_error(400);
        assert!(description.contains(needle), "{body}: {description}");
    }
}

#[tokio::test]
async fn account_exists_verifies_account_keys() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("bob").await;
    let (usage, _) = app
        .add_usage_key(&key, json!({"execute_in_groups": [0]}))
        .await;

    assert_eq!(
        app.get("/account_exists", Some(&key)).await.assert_ok(),
        &json!(true)
    );
    // X-Api-Key works as well as Bearer.
    let reply = app
        .send(
            app.client
                .get(app.api("/account_exists"))
                .header("X-Api-Key", &key),
        )
        .await;
    assert_eq!(reply.assert_ok(), &json!(true));
    // A usage key is not an account key; an unknown key names no account.
    assert_eq!(
        app.get("/account_exists", Some(&usage)).await.assert_ok(),
        &json!(false)
    );
    let unknown = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    assert_eq!(
        app.get("/account_exists", Some(&unknown)).await.assert_ok(),
        &json!(false)
    );
    // Something that is not a key at all (not base64 of 32 bytes) authenticates nobody:
    // 401, as on every endpoint. No key at all: 401.
    app.get("/account_exists", Some("garbage"))
        .await
        .assert_error(401);
    app.get("/account_exists", None).await.assert_error(401);
}
