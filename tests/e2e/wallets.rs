//! Wallets: created inside keyservice (GET or POST `/create_wallet`), identified by
//! `pkp_id` = keccak256 of the uncompressed public key, listed per account (the account
//! wallet first) and per group.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use base64::Engine as _;
use e2e::{Appliance, NewWallet, keccak_hex, wallet_from, zeros};
use keyservice_api::{DerivationPath, KeyClient};
use reqwest::Method;
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

const WALLET_FIELDS: [&str; 5] = ["description", "id", "name", "pkp_id", "wallet_address"];

/// The account wallet's derivation path, from its documented formula (as in
/// tests/e2e/keyservice.rs).
fn account_wallet_path(api_key: &str) -> DerivationPath {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(api_key)
        .unwrap();
    let mut h = Keccak256::new();
    h.update(b"appliance/account-wallet/v1");
    h.update(Keccak256::digest(raw));
    DerivationPath(h.finalize().into())
}

/// Asks keyservice for the public key at `path` and recomputes the wallet's identity
/// from it here: `(pkp_id, lowercase address)`.
async fn identity_from_keyservice(keys: &KeyClient, path: &DerivationPath) -> (String, String) {
    let info = keys.wallet(path).await.unwrap();
    let uncompressed = info.public_key.uncompressed();
    assert_eq!(uncompressed[0], 0x04);
    let pkp_id = keccak_hex(&uncompressed[1..]);
    let address = format!("0x{}", &pkp_id[2 + 24..]);
    (pkp_id, address)
}

fn check_item(item: &Value) {
    let mut keys: Vec<&str> = item
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, WALLET_FIELDS, "{item}");
    assert_eq!(item["id"], item["pkp_id"], "id is the pkp_id: {item}");
    assert!(
        e2e::is_lower_hex(item["pkp_id"].as_str().unwrap(), 64),
        "{item}"
    );
    let address = item["wallet_address"].as_str().unwrap();
    assert_eq!(address, e2e::eip55(address), "EIP-55: {item}");
}

fn pkp_ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["pkp_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn create_wallet_by_get_and_post_is_held_by_keyservice() {
    let dir = tempfile::tempdir().unwrap();
    let app = Appliance::start_in(dir.path()).await;
    let (key, account_wallet) = app.new_account("acme").await;

    let get = app.get("/create_wallet", Some(&key)).await;
    let by_get = wallet_from(get.assert_ok());
    let named = app
        .post(
            "/create_wallet",
            Some(&key),
            json!({"name": "treasury", "description": "cold"}),
        )
        .await;
    let by_post_named = wallet_from(named.assert_ok());
    let empty = app.post("/create_wallet", Some(&key), json!({})).await;
    let by_post_empty = wallet_from(empty.assert_ok());
    // POST without any body (no Content-Type either).
    let bare = app
        .send(
            app.request(Method::POST, &app.api("/create_wallet"))
                .bearer_auth(&key),
        )
        .await;
    let by_post_bare = wallet_from(bare.assert_ok());
    // X-Api-Key works as well.
    let header = app
        .send(
            app.request(Method::GET, &app.api("/create_wallet"))
                .header("x-api-key", &key),
        )
        .await;
    let by_header = wallet_from(header.assert_ok());
    let made: Vec<NewWallet> = vec![
        by_get,
        by_post_named,
        by_post_empty,
        by_post_bare,
        by_header,
    ];

    // Each is the wallet keyservice holds at its derivation path: pkp_id is keccak256
    // of the 64-byte public key, the address its last 20 bytes.
    let keys = KeyClient::connect(dir.path().join("keyservice.sock"))
        .await
        .unwrap();
    for w in &made {
        let path: DerivationPath = w.derivation_path.parse().unwrap();
        let (pkp_id, address) = identity_from_keyservice(&keys, &path).await;
        assert_eq!(w.pkp_id, pkp_id, "{w:?}");
        assert_eq!(w.address.to_ascii_lowercase(), address, "{w:?}");
    }

    // list_wallets: the account wallet first, then the created ones in order.
    let items = app.list("/list_wallets", &key).await;
    assert_eq!(items.len(), 1 + made.len());
    items.iter().for_each(check_item);
    assert_eq!(items[0]["wallet_address"], json!(account_wallet));
    assert_eq!(items[0]["name"], json!("account wallet"));
    let (account_pkp, account_address) =
        identity_from_keyservice(&keys, &account_wallet_path(&key)).await;
    assert_eq!(items[0]["pkp_id"], json!(account_pkp));
    assert_eq!(account_wallet.to_ascii_lowercase(), account_address);
    for (item, w) in items[1..].iter().zip(&made) {
        assert_eq!(item["pkp_id"], json!(w.pkp_id));
        assert_eq!(item["wallet_address"], json!(w.address));
    }
    assert_eq!(
        (&items[2]["name"], &items[2]["description"]),
        (&json!("treasury"), &json!("cold"))
    );
    for i in [1, 3, 4, 5] {
        assert_eq!(
            (&items[i]["name"], &items[i]["description"]),
            (&json!(""), &json!("")),
            "{}",
            items[i]
        );
    }

    // No key: 401; a malformed body: 400; a wrong content type: 415.
    app.get("/create_wallet", None).await.assert_error(401);
    app.post("/create_wallet", None, json!({}))
        .await
        .assert_error(401);
    app.post("/create_wallet", Some(&key), json!({"name": 5}))
        .await
        .assert_error(400);
    app.send(
        app.request(Method::POST, &app.api("/create_wallet"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body("{oops"),
    )
    .await
    .assert_error(400);
    app.send(
        app.request(Method::POST, &app.api("/create_wallet"))
            .bearer_auth(&key)
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await
    .assert_error(415);
    assert_eq!(
        app.list("/list_wallets", &key).await.len(),
        1 + made.len(),
        "refused requests created nothing"
    );
}

#[tokio::test]
async fn every_call_makes_a_distinct_wallet_of_the_callers_account() {
    let app = Appliance::start().await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;
    let mut pending = Vec::new();
    for i in 0..12 {
        let client = app.client.clone();
        let url = app.api("/create_wallet");
        let key = if i % 3 == 0 {
            bob.clone()
        } else {
            alice.clone()
        };
        pending.push(tokio::spawn(async move {
            let reply = e2e::read(
                client
                    .post(url)
                    .bearer_auth(&key)
                    .json(&json!({}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            (key, wallet_from(reply.assert_ok()))
        }));
    }
    let mut made = Vec::new();
    for p in pending {
        made.push(p.await.unwrap());
    }
    let distinct = |f: fn(&NewWallet) -> &String| {
        made.iter()
            .map(|(_, w)| f(w).clone())
            .collect::<HashSet<_>>()
            .len()
    };
    assert_eq!(distinct(|w| &w.address), 12);
    assert_eq!(distinct(|w| &w.pkp_id), 12);
    assert_eq!(distinct(|w| &w.derivation_path), 12);

    for key in [&alice, &bob] {
        let listed: HashSet<String> = pkp_ids(&app.list("/list_wallets", key).await)
            .into_iter()
            .collect();
        let mine: HashSet<String> = made
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, w)| w.pkp_id.clone())
            .collect();
        assert_eq!(
            listed.len(),
            mine.len() + 1,
            "the account wallet and its own"
        );
        assert!(listed.is_superset(&mine));
    }
}

#[tokio::test]
async fn list_wallets_in_group_explicit_and_wildcard() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let (other, _) = app.new_account("other").await;
    let w1 = app.create_wallet(&key).await;
    let w2 = app.create_wallet(&key).await;
    let w3 = app.create_wallet(&key).await;
    let theirs = app.create_wallet(&other).await;
    let their_group = app
        .add_group(&other, json!({"pkp_ids_permitted": [theirs.pkp_id]}))
        .await;

    let explicit = app
        .add_group(&key, json!({"pkp_ids_permitted": [w3.pkp_id, w1.address]}))
        .await;
    let wildcard = app
        .add_group(&key, json!({"pkp_ids_permitted": [zeros(64)]}))
        .await;
    let by_address = app
        .add_group(&key, json!({"pkp_ids_permitted": [zeros(40)]}))
        .await;
    let empty = app.add_group(&key, json!({})).await;

    let in_group = |g: u64| {
        let app = &app;
        let key = &key;
        async move {
            app.list(&format!("/list_wallets_in_group?group_id={g}"), key)
                .await
        }
    };
    let all = app.list("/list_wallets", &key).await;
    assert_eq!(all.len(), 4);

    // Explicit: exactly its members, as list_wallets shows them.
    let items = in_group(explicit).await;
    items.iter().for_each(check_item);
    let mut got = pkp_ids(&items);
    got.sort();
    let mut want = vec![w1.pkp_id.clone(), w3.pkp_id.clone()];
    want.sort();
    assert_eq!(got, want);
    for item in &items {
        assert!(all.contains(item), "{item} differs from list_wallets");
    }
    // Wildcards: every wallet of the account, including ones created later, and never
    // another account's.
    let later = app.create_wallet(&key).await;
    let all = app.list("/list_wallets", &key).await;
    for g in [wildcard, by_address] {
        let mut got = in_group(g).await;
        got.iter().for_each(check_item);
        let mut want = all.clone();
        let by_id = |v: &Value| v["pkp_id"].as_str().unwrap().to_owned();
        got.sort_by_key(by_id);
        want.sort_by_key(by_id);
        assert_eq!(got, want, "group {g}");
        assert!(pkp_ids(&got).contains(&later.pkp_id));
        assert!(!pkp_ids(&got).contains(&theirs.pkp_id));
    }
    assert!(in_group(empty).await.is_empty());
    assert!(!pkp_ids(&in_group(explicit).await).contains(&w2.pkp_id));

    // Paging over a wildcard group.
    let mut paged = Vec::new();
    for n in 0..3 {
        let page = app
            .list(
                &format!("/list_wallets_in_group?group_id={wildcard}&page_number={n}&page_size=2"),
                &key,
            )
            .await;
        assert!(page.len() <= 2);
        if n == 2 {
            assert_eq!(page.len(), 1, "5 wallets: 2 + 2 + 1");
        }
        paged.extend(pkp_ids(&page));
    }
    let unique: HashSet<&String> = paged.iter().collect();
    assert_eq!(unique.len(), 5);

    // group_id: missing or malformed 400; unknown or another account's 404.
    for path in [
        "/list_wallets_in_group".to_owned(),
        "/list_wallets_in_group?group_id=".to_owned(),
        "/list_wallets_in_group?group_id=xyz".to_owned(),
    ] {
        app.get(&path, Some(&key)).await.assert_error(400);
    }
    for g in [999_999_999, their_group] {
        app.get(&format!("/list_wallets_in_group?group_id={g}"), Some(&key))
            .await
            .assert_error(404);
    }
}

#[tokio::test]
async fn list_wallets_pages_in_creation_order() {
    let app = Appliance::start().await;
    let (key, account_wallet) = app.new_account("acme").await;
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(app.create_wallet(&key).await.pkp_id);
    }
    let all = pkp_ids(&app.list("/list_wallets", &key).await);
    assert_eq!(all.len(), 6);
    assert_eq!(all[1..], made[..], "creation order");

    let page = |n: u32| {
        let app = &app;
        let key = &key;
        async move {
            app.list(&format!("/list_wallets?page_number={n}&page_size=4"), key)
                .await
        }
    };
    let first = page(0).await;
    assert_eq!(first.len(), 4);
    assert_eq!(first[0]["wallet_address"], json!(account_wallet));
    assert_eq!(pkp_ids(&first), all[..4]);
    assert_eq!(pkp_ids(&page(1).await), all[4..]);
    assert!(page(2).await.is_empty());
    assert_eq!(
        pkp_ids(&app.list("/list_wallets?page_size=5000", &key).await),
        all
    );
    for q in ["?page_size=abc", "?page_number=-1"] {
        app.get(&format!("/list_wallets{q}"), Some(&key))
            .await
            .assert_error(400);
    }
}
