//! Abuse resistance, quotas (issue 18, points 5 and 6): per-client-IP rate limits on the
//! endpoints that need no credential, the code cache's anonymous area and per-account
//! quota, and answers that do not tell a caller without rights whether a CID, group,
//! wallet, usage key or action exists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e::{Appliance, Reply};
use serde_json::{Value, json};

/// The standard 429: JSON error body and a whole number of seconds in `Retry-After`.
fn assert_rate_limited(reply: &Reply) -> u64 {
    let description = reply.assert_error(429);
    assert!(description.contains("too many requests"), "{description}");
    let retry: u64 = reply
        .headers
        .get("retry-after")
        .expect("Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in whole seconds");
    assert!(retry >= 1, "{retry}");
    retry
}

#[tokio::test]
async fn unauthenticated_endpoints_are_rate_limited_per_client() {
    let app = Appliance::start_with(&[
        ("APPLIANCE_RATE_LIMITS__ENABLED", "true"),
        ("APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_BURST", "3"),
        ("APPLIANCE_RATE_LIMITS__NEW_ACCOUNT_PER_MINUTE", "1"),
        ("APPLIANCE_RATE_LIMITS__CODE_BURST", "2"),
        ("APPLIANCE_RATE_LIMITS__CODE_PER_MINUTE", "1"),
        ("APPLIANCE_RATE_LIMITS__PUBLIC_BURST", "4"),
        ("APPLIANCE_RATE_LIMITS__PUBLIC_PER_MINUTE", "1"),
    ])
    .await;
    // new_account: the burst, then 429 (nothing created).
    let mut key = String::new();
    for i in 0..3 {
        key = app.new_account(&format!("a{i}")).await.0;
    }
    let reply = app
        .post(
            "/new_account",
            None,
            json!({"account_name": "one too many"}),
        )
        .await;
    let retry = assert_rate_limited(&reply);
    assert!(retry <= 60, "one token a minute: {retry}");

    // Classes are separate: get_lit_action_ipfs_id has its own bucket.
    for i in 0..2 {
        app.post("/get_lit_action_ipfs_id", None, json!(format!("// {i}")))
            .await
            .assert_ok();
    }
    assert_rate_limited(
        &app.post("/get_lit_action_ipfs_id", None, json!("// 9"))
            .await,
    );

    // Unauthenticated reads, at the root and under /core/v1, share the public bucket.
    for path in ["/attestation", "/info"] {
        let reply = app
            .send(app.request(reqwest::Method::GET, &app.url(path)))
            .await;
        reply.assert_ok();
    }
    app.get("/get_node_chain_config", None).await.assert_ok();
    app.get("/billing/prices", None).await.assert_ok();
    assert_rate_limited(
        &app.send(app.request(reqwest::Method::GET, &app.url("/attestation")))
            .await,
    );

    // Authenticated endpoints and /health are not limited by these buckets.
    for _ in 0..10 {
        app.get("/account_exists", Some(&key)).await.assert_ok();
    }
    let health = app
        .send(app.request(reqwest::Method::GET, &app.url("/health")))
        .await;
    assert_eq!(health.status.as_u16(), 200, "{}", health.text);
}

#[tokio::test]
async fn rate_limits_are_documented_in_the_openapi_document() {
    let app = Appliance::start().await;
    let doc = app.get("/openapi.json", None).await.assert_ok().clone();
    for (method, path) in [
        ("post", "/core/v1/new_account"),
        ("post", "/core/v1/get_lit_action_ipfs_id"),
        ("post", "/core/v1/create_wallet_with_signature"),
        ("post", "/core/v1/add_usage_api_key_with_signature"),
        ("get", "/core/v1/get_node_chain_config"),
        ("get", "/attestation"),
        ("get", "/info"),
    ] {
        let response = &doc["paths"][path][method]["responses"]["429"];
        assert!(response.is_object(), "{method} {path}: no 429");
        assert!(
            response["headers"]["Retry-After"].is_object(),
            "{method} {path}: {response}"
        );
    }
}

async fn run(app: &Appliance, key: &str, body: Value) -> Reply {
    app.post("/lit_action", Some(key), body).await
}

/// Runs by `cid` until it answers 200 (code is kept off the request path).
async fn wait_runnable(app: &Appliance, key: &str, cid: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = run(app, key, json!({"ipfs_id": cid})).await;
        if reply.status.as_u16() == 200 {
            return;
        }
        assert_eq!(reply.status.as_u16(), 404, "{}", reply.text);
        assert!(Instant::now() < deadline, "{cid} never became runnable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn anonymous_uploads_cannot_push_an_accounts_code_out() {
    // A 4 KiB anonymous area: a few uploads fill it.
    let app = Appliance::start_with(&[("APPLIANCE_ACTIONS__CODE_CACHE_BYTES", "4096")]).await;
    let (key, _) = app.new_account("owner").await;
    let code = r#"async function main() { return "still here"; }"#;
    // Run inline once: the code is kept in the account's own area.
    let body = run(&app, &key, json!({"code": code})).await;
    assert_eq!(body.assert_ok()["response"], json!("still here"));
    let cid = app.cid_of(code).await;
    wait_runnable(&app, &key, &cid).await;

    // A stranger floods the anonymous area with 40 KiB of distinct code.
    let mut first_junk = String::new();
    for i in 0..40 {
        let junk = format!("// junk {i}\n{}", "x".repeat(1000));
        let junk_cid = app.cid_of(&junk).await;
        if i == 0 {
            first_junk = junk_cid;
        }
    }
    // The account's code survives; the anonymous area kept only its newest entries.
    let reply = run(&app, &key, json!({"ipfs_id": cid})).await;
    assert_eq!(reply.assert_ok()["response"], json!("still here"));
    run(&app, &key, json!({"ipfs_id": first_junk}))
        .await
        .assert_error(404);

    // Another account never reads this account's area: its code is unknown there.
    let (other, _) = app.new_account("other").await;
    let fresh = r#"async function main() { return "private copy"; }"#;
    run(&app, &key, json!({"code": fresh})).await.assert_ok();
    let fresh_cid = app.cid_of(fresh).await;
    wait_runnable(&app, &key, &fresh_cid).await;
    // Evict the anonymous copy, then the other account asks for it.
    for i in 0..10 {
        let junk = format!("// more junk {i}\n{}", "y".repeat(1000));
        app.post("/get_lit_action_ipfs_id", None, json!(junk))
            .await
            .assert_ok();
    }
    run(&app, &other, json!({"ipfs_id": fresh_cid}))
        .await
        .assert_error(404);
}

#[tokio::test]
async fn stored_code_is_held_to_the_accounts_quota_pinned_code_included() {
    let app =
        Appliance::start_with(&[("APPLIANCE_ACTIONS__CODE_QUOTA_BYTES_PER_ACCOUNT", "3000")]).await;
    let (key, _) = app.new_account("quota").await;
    let code_of = |tag: &str| {
        format!(
            "async function main() {{ return 1; }}\n// {tag} {}",
            "z".repeat(1900)
        )
    };
    let store = |code: String| {
        let app = &app;
        let key = key.clone();
        async move {
            app.post("/get_lit_action_ipfs_id", Some(&key), json!(code))
                .await
        }
    };
    let pinned = store(code_of("pinned")).await.assert_ok().clone();
    let hashed = app
        .post(
            "/add_action",
            Some(&key),
            json!({"action_ipfs_cid": pinned, "name": "pinned"}),
        )
        .await
        .assert_ok()["hashed_cid"]
        .clone();
    // 1.9 KB pinned + 1.9 KB more does not fit in 3000 bytes, and the pinned code is not
    // evicted to make room: 409.
    let description = store(code_of("second")).await.assert_error(409);
    assert!(description.contains("quota"), "{description}");
    let reply = run(&app, &key, json!({"ipfs_id": pinned})).await;
    reply.assert_ok();
    // Unpinned code is evicted for newer code instead.
    app.post("/delete_action", Some(&key), json!({"hashed_cid": hashed}))
        .await
        .assert_ok();
    store(code_of("third")).await.assert_ok();
    // A run of inline code never fails for the quota.
    let big = format!(
        "async function main() {{ return 1; }}\n// {}",
        "q".repeat(2900)
    );
    run(&app, &key, json!({"code": big})).await.assert_ok();
    // An unknown key on the optional-key endpoint is 401, not an anonymous upload.
    app.post(
        "/get_lit_action_ipfs_id",
        Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        json!("// x"),
    )
    .await
    .assert_error(401);
}

/// The description with the identifiers the caller sent blanked out: two answers that
/// differ only in which id they name are the same answer.
fn blank(description: &str, ids: &[&str]) -> String {
    let mut out = description.to_owned();
    for id in ids {
        out = out.replace(id, "<id>");
    }
    out
}

#[tokio::test]
async fn callers_without_rights_cannot_tell_what_exists() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("victim").await;
    let (stranger, _) = app.new_account("stranger").await;
    let permitted_code = r#"async function main() { return "ok"; }"#;
    let permitted = app.cid_of(permitted_code).await;
    let group = app
        .add_group(&account, json!({"cid_hashes_permitted": []}))
        .await;
    app.add_action_to_group(&account, group, &permitted).await;
    let (runner, _) = app
        .add_usage_key(&account, json!({"execute_in_groups": [group]}))
        .await;

    // CIDs: a known CID the key may not run and an unknown one get the same 403.
    let known = app
        .post(
            "/get_lit_action_ipfs_id",
            None,
            json!("async function main() { return 'known'; }"),
        )
        .await
        .assert_ok()
        .as_str()
        .unwrap()
        .to_owned();
    let unknown = "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR";
    let a = run(&app, &runner, json!({"ipfs_id": known}))
        .await
        .assert_error(403);
    let b = run(&app, &runner, json!({"ipfs_id": unknown}))
        .await
        .assert_error(403);
    assert_eq!(blank(&a, &[&known]), blank(&b, &[unknown]));
    // With the right, the answer is the code's.
    run(&app, &runner, json!({"ipfs_id": permitted}))
        .await
        .assert_ok();

    // Groups: another account's group and a group that does not exist.
    let others_group = app.add_group(&stranger, json!({})).await;
    let missing_group = others_group + 1_000_000;
    let ask = |g: u64| {
        let app = &app;
        let account = account.clone();
        async move {
            app.get(
                &format!("/list_wallets_in_group?group_id={g}"),
                Some(&account),
            )
            .await
        }
    };
    let a = ask(others_group).await.assert_error(404);
    let b = ask(missing_group).await.assert_error(404);
    assert_eq!(
        blank(&a, &[&others_group.to_string()]),
        blank(&b, &[&missing_group.to_string()])
    );

    // Wallets: another account's wallet and one that does not exist.
    let others_wallet = app.create_wallet(&stranger).await;
    let missing_wallet = format!("0x{}", "ab".repeat(32));
    let add = |pkp: String| {
        let app = &app;
        let account = account.clone();
        async move {
            app.post(
                "/add_pkp_to_group",
                Some(&account),
                json!({"group_id": group, "pkp_id": pkp}),
            )
            .await
        }
    };
    let a = add(others_wallet.pkp_id.clone()).await.assert_error(404);
    let b = add(missing_wallet.clone()).await.assert_error(404);
    assert_eq!(
        blank(&a, &[&others_wallet.pkp_id]),
        blank(&b, &[&missing_wallet])
    );

    // Usage keys: another account's key and one that does not exist.
    let (others_key, others_hash) = app.add_usage_key(&stranger, json!({})).await;
    let missing_hash = format!("0x{}", "cd".repeat(32));
    let remove = |k: String| {
        let app = &app;
        let account = account.clone();
        async move {
            app.post(
                "/remove_usage_api_key",
                Some(&account),
                json!({"usage_api_key": k}),
            )
            .await
        }
    };
    let a = remove(others_hash.clone()).await.assert_error(404);
    let b = remove(missing_hash.clone()).await.assert_error(404);
    assert_eq!(blank(&a, &[&others_hash]), blank(&b, &[&missing_hash]));
    // The stranger's key was not removed: it still authenticates.
    let still = app.get("/billing/balance", Some(&others_key)).await;
    assert_ne!(still.status.as_u16(), 401, "{}", still.text);

    // Actions: another account's registered action and one nobody registered.
    let theirs = app
        .post(
            "/add_action",
            Some(&stranger),
            json!({"action_ipfs_cid": known, "name": "theirs"}),
        )
        .await
        .assert_ok()["hashed_cid"]
        .as_str()
        .unwrap()
        .to_owned();
    let nobodys = format!("0x{}", "ef".repeat(32));
    let delete = |h: String| {
        let app = &app;
        let account = account.clone();
        async move {
            app.post("/delete_action", Some(&account), json!({"hashed_cid": h}))
                .await
        }
    };
    let a = delete(theirs.clone()).await.assert_error(404);
    let b = delete(nobodys.clone()).await.assert_error(404);
    assert_eq!(blank(&a, &[&theirs]), blank(&b, &[&nobodys]));
}
