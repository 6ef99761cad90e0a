//! Durability: an acknowledged write survives `kill -9`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e::Appliance;
use serde_json::json;

#[tokio::test]
async fn acknowledged_usage_key_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = Appliance::start_in(dir.path()).await;
    let (account, _) = app.new_account("durable").await;
    let (usage, hash) = app
        .add_usage_key(
            &account,
            json!({"name": "survivor", "execute_in_groups": [7]}),
        )
        .await;
    // SIGKILL immediately after the acknowledgement: no shutdown code runs.
    app.kill9();

    let app = Appliance::start_in(dir.path()).await;
    assert_eq!(
        app.get("/account_exists", Some(&account)).await.assert_ok(),
        &json!(true)
    );
    // The usage key authenticates (a usage key is not an account key, but it is known:
    // a management call gets 403, not 401).
    app.get("/list_api_keys", Some(&usage))
        .await
        .assert_error(403);
    let items = app
        .get("/list_api_keys", Some(&account))
        .await
        .assert_ok()
        .clone();
    assert_eq!(items.as_array().unwrap().len(), 1);
    assert_eq!(items[0]["api_key_hash"], json!(hash));
    assert_eq!(items[0]["name"], json!("survivor"));
    assert_eq!(items[0]["execute_in_groups"], json!(["7"]));
}

#[tokio::test]
async fn a_burst_of_acknowledged_writes_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = Appliance::start_in(dir.path()).await;
    let (account, _) = app.new_account("burst").await;
    // Fire concurrent writes and kill while later ones may still be in flight; every
    // write that was acknowledged must be there after the restart.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let client = app.client.clone();
        let url = app.api("/add_usage_api_key");
        let account = account.clone();
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(account)
                .json(&json!({"name": format!("k{i}")}))
                .send()
                .await
                .ok()?;
            let body: serde_json::Value = r.json().await.ok()?;
            body["api_key_hash"].as_str().map(str::to_owned)
        }));
    }
    let mut acknowledged = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        if i == 20 {
            app.kill9();
        }
        if let Ok(Some(hash)) = t.await {
            acknowledged.push(hash);
        }
    }
    assert!(
        acknowledged.len() >= 20,
        "at least the writes awaited before the kill were acknowledged"
    );
    let app = Appliance::start_in(dir.path()).await;
    let listed = app
        .get("/list_api_keys?page_size=1000", Some(&account))
        .await
        .assert_ok()
        .clone();
    let stored: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["api_key_hash"].as_str().unwrap())
        .collect();
    for hash in &acknowledged {
        assert!(
            stored.contains(&hash.as_str()),
            "acknowledged key {hash} lost"
        );
    }
}
