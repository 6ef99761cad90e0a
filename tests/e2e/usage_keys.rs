//! Usage API keys: lifecycle, who may manage them, isolation between accounts, paging.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use e2e::Appliance;
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

fn hash_of(key: &str) -> String {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    format!("0x{}", hex::encode(Keccak256::digest(raw)))
}

const PERMISSIONS: [&str; 7] = [
    "can_create_groups",
    "can_delete_groups",
    "can_create_pkps",
    "manage_ipfs_ids_in_groups",
    "add_pkp_to_groups",
    "remove_pkp_from_groups",
    "execute_in_groups",
];

#[tokio::test]
async fn add_list_update_and_remove() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("acme").await;

    let reply = app
        .post(
            "/add_usage_api_key",
            Some(&account),
            json!({
                "name": "runner", "description": "ci",
                "can_create_groups": true, "can_delete_groups": false, "can_create_pkps": true,
                "manage_ipfs_ids_in_groups": [3, "1"], "add_pkp_to_groups": ["0x2"],
                "remove_pkp_from_groups": [], "execute_in_groups": [0]
            }),
        )
        .await;
    let body = reply.assert_ok().clone();
    assert_eq!(body["success"], json!(true));
    let key = body["usage_api_key"].as_str().unwrap().to_owned();
    assert_eq!(
        body["api_key_hash"].as_str().unwrap(),
        hash_of(&key),
        "hash = keccak256(key bytes)"
    );

    // Listed with its hash and full permission set, never its value.
    let list = app.get("/list_api_keys", Some(&account)).await;
    let items = list.assert_ok().as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    assert!(
        !list.text.contains(&key),
        "a list must never contain a key value"
    );
    let item = &items[0];
    assert_eq!(item["api_key_hash"], body["api_key_hash"]);
    assert_eq!(item["name"], json!("runner"));
    assert_eq!(item["description"], json!("ci"));
    assert_eq!(item["can_create_groups"], json!(true));
    assert_eq!(item["can_delete_groups"], json!(false));
    assert_eq!(item["can_create_pkps"], json!(true));
    assert_eq!(item["manage_ipfs_ids_in_groups"], json!(["1", "3"]));
    assert_eq!(item["add_pkp_to_groups"], json!(["2"]));
    assert_eq!(item["remove_pkp_from_groups"], json!([]));
    assert_eq!(item["execute_in_groups"], json!(["0"]));
    assert!(item["id"].as_str().unwrap().parse::<u64>().is_ok());
    for field in PERMISSIONS {
        assert!(item.get(field).is_some(), "{field} missing");
    }

    // Full replacement: omitted permissions are revoked; name kept when omitted.
    app.post(
        "/update_usage_api_key",
        Some(&account),
        json!({"usage_api_key": key, "execute_in_groups": [5]}),
    )
    .await
    .assert_ok();
    let item = app.get("/list_api_keys", Some(&account)).await.assert_ok()[0].clone();
    assert_eq!(item["execute_in_groups"], json!(["5"]));
    assert_eq!(item["can_create_groups"], json!(false));
    assert_eq!(item["can_create_pkps"], json!(false));
    assert_eq!(item["manage_ipfs_ids_in_groups"], json!([]));
    assert_eq!(item["name"], json!("runner"));

    // Metadata, naming the key by its hash this time.
    app.post(
        "/update_usage_api_key_metadata",
        Some(&account),
        json!({"usage_api_key": hash_of(&key), "name": "renamed", "description": "new"}),
    )
    .await
    .assert_ok();
    let item = app.get("/list_api_keys", Some(&account)).await.assert_ok()[0].clone();
    assert_eq!(
        (item["name"].clone(), item["description"].clone()),
        (json!("renamed"), json!("new"))
    );
    assert_eq!(
        item["execute_in_groups"],
        json!(["5"]),
        "metadata leaves permissions alone"
    );

    // The key authenticates until removed (a known usage key gets 403 on management);
    // the very next request after removal is 401.
    app.get("/list_api_keys", Some(&key))
        .await
        .assert_error(403);
    app.post(
        "/remove_usage_api_key",
        Some(&account),
        json!({"usage_api_key": key}),
    )
    .await
    .assert_ok();
    app.get("/list_api_keys", Some(&key))
        .await
        .assert_error(401);
    assert_eq!(
        app.get("/list_api_keys", Some(&account)).await.assert_ok(),
        &json!([])
    );
    // Removing again: it no longer exists.
    app.post(
        "/remove_usage_api_key",
        Some(&account),
        json!({"usage_api_key": key}),
    )
    .await
    .assert_error(404);

    // Neither key value ever reached the server's log.
    let log = app.log();
    assert!(
        log.contains("usage key created"),
        "the log is being written"
    );
    assert!(
        !log.contains(&key) && !log.contains(&account),
        "a key value was logged"
    );
}

#[tokio::test]
async fn missing_unknown_and_removed_keys_are_401() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("acme").await;
    let (usage, _) = app.add_usage_key(&account, json!({})).await;

    let d = app.get("/list_api_keys", None).await.assert_error(401);
    assert!(d.contains("missing"), "{d}");
    let unknown = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    app.get("/list_api_keys", Some(&unknown))
        .await
        .assert_error(401);
    app.get("/list_api_keys", Some("not-a-key"))
        .await
        .assert_error(401);
    app.post("/add_usage_api_key", Some(&unknown), json!({"name": "x"}))
        .await
        .assert_error(401);

    app.post(
        "/remove_usage_api_key",
        Some(&account),
        json!({"usage_api_key": usage}),
    )
    .await
    .assert_ok();
    for reply in [
        app.get("/list_api_keys", Some(&usage)).await,
        app.post("/add_usage_api_key", Some(&usage), json!({"name": "x"}))
            .await,
    ] {
        reply.assert_error(401);
    }
    // Deleting a usage key has no effect on the account key.
    app.get("/list_api_keys", Some(&account)).await.assert_ok();
}

#[tokio::test]
async fn usage_keys_cannot_manage_usage_keys() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("acme").await;
    // Even a key holding every permission, wildcards included.
    let (mighty, _) = app
        .add_usage_key(
            &account,
            json!({
                "can_create_groups": true, "can_delete_groups": true, "can_create_pkps": true,
                "manage_ipfs_ids_in_groups": [0], "add_pkp_to_groups": [0],
                "remove_pkp_from_groups": [0], "execute_in_groups": [0]
            }),
        )
        .await;
    let (other, _) = app.add_usage_key(&account, json!({})).await;

    let attempts: Vec<(&str, Value)> = vec![
        (
            "/add_usage_api_key",
            json!({"name": "escalate", "execute_in_groups": [0]}),
        ),
        (
            "/update_usage_api_key",
            json!({"usage_api_key": other, "execute_in_groups": [0]}),
        ),
        (
            "/update_usage_api_key",
            json!({"usage_api_key": mighty, "execute_in_groups": [0]}),
        ),
        (
            "/update_usage_api_key_metadata",
            json!({"usage_api_key": other, "name": "x"}),
        ),
        ("/remove_usage_api_key", json!({"usage_api_key": other})),
    ];
    for (path, body) in attempts {
        let d = app.post(path, Some(&mighty), body).await.assert_error(403);
        assert!(d.contains("account key"), "{path}: {d}");
    }
    app.get("/list_api_keys", Some(&mighty))
        .await
        .assert_error(403);
    // Nothing changed.
    let items = app
        .get("/list_api_keys", Some(&account))
        .await
        .assert_ok()
        .as_array()
        .unwrap()
        .len();
    assert_eq!(items, 2);
}

#[tokio::test]
async fn accounts_never_see_each_others_keys() {
    let app = Appliance::start().await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;
    let (alice_usage, alice_hash) = app
        .add_usage_key(&alice, json!({"execute_in_groups": [1]}))
        .await;
    app.add_usage_key(&bob, json!({})).await;

    let bobs = app.get("/list_api_keys", Some(&bob)).await;
    assert_eq!(bobs.assert_ok().as_array().unwrap().len(), 1);
    assert!(!bobs.text.contains(&alice_hash));

    // Bob cannot touch Alice's key, by value or by hash: it does not exist for him.
    for reference in [alice_usage.clone(), alice_hash.clone()] {
        app.post(
            "/update_usage_api_key",
            Some(&bob),
            json!({"usage_api_key": reference, "execute_in_groups": [0]}),
        )
        .await
        .assert_error(404);
        app.post(
            "/update_usage_api_key_metadata",
            Some(&bob),
            json!({"usage_api_key": reference, "name": "pwned"}),
        )
        .await
        .assert_error(404);
        app.post(
            "/remove_usage_api_key",
            Some(&bob),
            json!({"usage_api_key": reference}),
        )
        .await
        .assert_error(404);
    }
    let item = app.get("/list_api_keys", Some(&alice)).await.assert_ok()[0].clone();
    assert_eq!(item["execute_in_groups"], json!(["1"]));
    assert_eq!(item["name"], json!("key"));
}

#[tokio::test]
async fn usage_key_references_are_validated() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("acme").await;
    for bad in ["", "0x12", "hello", &"A".repeat(44)] {
        let d = app
            .post(
                "/remove_usage_api_key",
                Some(&account),
                json!({"usage_api_key": bad}),
            )
            .await
            .assert_error(400);
        assert!(d.contains("usage_api_key"), "{d}");
    }
    // Permission arrays: numbers, decimal strings, hex strings; nothing else.
    for bad in [
        json!(["x"]),
        json!([-1]),
        json!([1.5]),
        json!("0"),
        json!([null]),
    ] {
        let d = app
            .post(
                "/add_usage_api_key",
                Some(&account),
                json!({"name": "k", "execute_in_groups": bad}),
            )
            .await
            .assert_error(400);
        assert!(d.contains("execute_in_groups"), "{d}");
    }
    app.post(
        "/add_usage_api_key",
        Some(&account),
        json!({"description": "no name"}),
    )
    .await
    .assert_error(400);
}

#[tokio::test]
async fn pagination_defaults_clamping_and_past_the_end() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("many").await;
    const N: usize = 1005;
    let mut pending = Vec::new();
    for i in 0..N {
        let app_client = app.client.clone();
        let url = app.api("/add_usage_api_key");
        let account = account.clone();
        pending.push(tokio::spawn(async move {
            let r = app_client
                .post(url)
                .bearer_auth(account)
                .json(&json!({"name": format!("k{i}")}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }));
        if pending.len() == 32 {
            for p in pending.drain(..) {
                p.await.unwrap();
            }
        }
    }
    for p in pending {
        p.await.unwrap();
    }

    let ids = |v: &Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().parse().unwrap())
            .collect()
    };
    // Default: page 0 of 100, in creation order.
    let first = app
        .get("/list_api_keys", Some(&account))
        .await
        .assert_ok()
        .clone();
    let first_ids = ids(&first);
    assert_eq!(first_ids.len(), 100);
    assert!(
        first_ids.windows(2).all(|w| w[0] < w[1]),
        "stable creation order"
    );
    // Page 1 continues where page 0 ended.
    let second = app
        .get("/list_api_keys?page_number=1&page_size=100", Some(&account))
        .await
        .assert_ok()
        .clone();
    assert!(ids(&second)[0] > *first_ids.last().unwrap());
    // page_size above 1000 is clamped to 1000.
    let big = app
        .get("/list_api_keys?page_size=5000", Some(&account))
        .await
        .assert_ok()
        .clone();
    assert_eq!(ids(&big).len(), 1000);
    let rest = app
        .get(
            "/list_api_keys?page_number=1&page_size=1000",
            Some(&account),
        )
        .await
        .assert_ok()
        .clone();
    assert_eq!(ids(&rest).len(), N - 1000);
    // Past the end: an empty page.
    for q in [
        "?page_number=2&page_size=1000",
        "?page_number=99999999",
        "?page_number=18446744073709551615&page_size=1000",
    ] {
        assert_eq!(
            app.get(&format!("/list_api_keys{q}"), Some(&account))
                .await
                .assert_ok(),
            &json!([]),
            "{q}"
        );
    }
    // Malformed paging is 400.
    for q in ["?page_size=abc", "?page_number=-1", "?page_size=1.5"] {
        app.get(&format!("/list_api_keys{q}"), Some(&account))
            .await
            .assert_error(400);
    }
}
