//! Registered actions (by CID), their listing per account and per group, deletion from
//! every group, the CID of action code (`get_lit_action_ipfs_id`, checked against
//! published vectors), and body-size limits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e::{Appliance, cid_v0, cid_v1, json_string_body, keccak_hex, zeros};
use reqwest::{Method, Version};
use serde::Deserialize;
use serde_json::{Value, json};

const ACTION_FIELDS: [&str; 5] = ["description", "hashed_cid", "id", "ipfs_cid", "name"];

fn hashes(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|a| a["hashed_cid"].as_str().unwrap().to_owned())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn actions_in(app: &Appliance, key: &str, group: u64) -> Vec<String> {
    hashes(
        &app.list(&format!("/list_actions?group_id={group}"), key)
            .await,
    )
}

#[tokio::test]
async fn add_list_update_and_conflicts() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let c1 = cid_v0("first");
    let c2 = cid_v1("second");
    // A real CID with its published hash (tests/vectors/cids.json).
    let c3 = "QmXoMqm4sckyYxbqarxfyfY36qj9bvmVFihXEYNqK4Uri6";
    let h3 = "0xea0e89b2f81df1edf516c4cbd31f7fdc9cdda78555712c879e4c06937ca7cc64";

    let reply = app
        .post(
            "/add_action",
            Some(&key),
            json!({"action_ipfs_cid": c1, "name": "first", "description": "one"}),
        )
        .await;
    let h1 = keccak_hex(c1.as_bytes());
    assert_eq!(
        reply.assert_ok(),
        &json!({"success": true, "hashed_cid": h1})
    );
    // Description optional.
    let h2 = app.add_action(&key, &c2, "second").await;
    let reply = app
        .post(
            "/add_action",
            Some(&key),
            json!({"action_ipfs_cid": c3, "name": "third"}),
        )
        .await;
    assert_eq!(reply.assert_ok()["hashed_cid"], json!(h3));

    // Already registered on this account: 409, whatever the name.
    for body in [
        json!({"action_ipfs_cid": c1, "name": "first", "description": "one"}),
        json!({"action_ipfs_cid": c1, "name": "other"}),
        json!({"action_ipfs_cid": c2, "name": "second"}),
    ] {
        app.post("/add_action", Some(&key), body)
            .await
            .assert_error(409);
    }

    // Listed in registration order with the exact item shape.
    let items = app.list("/list_actions", &key).await;
    assert_eq!(
        items,
        vec![
            json!({"id": h1, "hashed_cid": h1, "ipfs_cid": c1, "name": "first", "description": "one"}),
            json!({"id": h2, "hashed_cid": h2, "ipfs_cid": c2, "name": "second", "description": ""}),
            json!({"id": h3, "hashed_cid": h3, "ipfs_cid": c3, "name": "third", "description": ""}),
        ]
    );
    for item in &items {
        let mut keys: Vec<&str> = item
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ACTION_FIELDS);
    }

    // Metadata: only the named action changes.
    let reply = app
        .post(
            "/update_action_metadata",
            Some(&key),
            json!({"hashed_cid": h2, "name": "renamed", "description": "now described"}),
        )
        .await;
    assert_eq!(reply.assert_ok(), &json!({"success": true}));
    let items = app.list("/list_actions", &key).await;
    assert_eq!(
        (&items[1]["name"], &items[1]["description"]),
        (&json!("renamed"), &json!("now described"))
    );
    assert_eq!(items[0]["name"], json!("first"));
    assert_eq!(items[1]["ipfs_cid"], json!(c2));
    app.post(
        "/update_action_metadata",
        Some(&key),
        json!({"hashed_cid": keccak_hex(b"unknown"), "name": "x"}),
    )
    .await
    .assert_error(404);
    for body in [
        json!({"hashed_cid": "0x12", "name": "x"}),
        json!({"hashed_cid": c1, "name": "x"}),
        json!({"hashed_cid": h1}),
    ] {
        app.post("/update_action_metadata", Some(&key), body)
            .await
            .assert_error(400);
    }

    // Malformed registrations: 400, nothing registered.
    for body in [
        json!({"action_ipfs_cid": "not a cid", "name": "x"}),
        json!({"action_ipfs_cid": "", "name": "x"}),
        json!({"action_ipfs_cid": &c1[..45], "name": "x"}),
        json!({"action_ipfs_cid": h1, "name": "x"}),
        json!({"action_ipfs_cid": cid_v0("no name")}),
        json!({"name": "no cid"}),
    ] {
        app.post("/add_action", Some(&key), body)
            .await
            .assert_error(400);
    }
    assert_eq!(app.list("/list_actions", &key).await.len(), 3);
    // No key: 401.
    app.post(
        "/add_action",
        None,
        json!({"action_ipfs_cid": c1, "name": "x"}),
    )
    .await
    .assert_error(401);
}

#[tokio::test]
async fn delete_action_removes_it_from_every_group() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let c = cid_v0("doomed");
    let h = app.add_action(&key, &c, "doomed").await;
    let keep = app.add_action(&key, &cid_v0("kept"), "kept").await;
    let g1 = app
        .add_group(&key, json!({"cid_hashes_permitted": [h, keep]}))
        .await;
    let g2 = app
        .add_group(&key, json!({"cid_hashes_permitted": [h]}))
        .await;
    let all = app
        .add_group(&key, json!({"cid_hashes_permitted": [0]}))
        .await;
    assert_eq!(
        sorted(actions_in(&app, &key, g1).await),
        sorted(vec![h.clone(), keep.clone()])
    );
    assert_eq!(actions_in(&app, &key, g2).await, [h.as_str()]);

    let reply = app
        .post("/delete_action", Some(&key), json!({"hashed_cid": h}))
        .await;
    assert_eq!(reply.assert_ok(), &json!({"success": true}));
    assert_eq!(actions_in(&app, &key, g1).await, [keep.as_str()]);
    assert!(actions_in(&app, &key, g2).await.is_empty());
    assert_eq!(actions_in(&app, &key, all).await, [keep.as_str()]);
    assert_eq!(
        hashes(&app.list("/list_actions", &key).await),
        [keep.as_str()]
    );
    let listed = app.group(&key, g1).await.unwrap();
    assert_eq!(listed["cid_hashes_permitted"], json!([keep]));
    assert_eq!(
        app.group(&key, g2).await.unwrap()["cid_hashes_permitted"],
        json!([])
    );
    assert_eq!(
        app.group(&key, all).await.unwrap()["cid_hashes_permitted"],
        json!(["0"]),
        "a wildcard group stays a wildcard"
    );

    // Gone: deleting, renaming or removing it from a group is 404.
    app.post("/delete_action", Some(&key), json!({"hashed_cid": h}))
        .await
        .assert_error(404);
    app.post(
        "/update_action_metadata",
        Some(&key),
        json!({"hashed_cid": h, "name": "x"}),
    )
    .await
    .assert_error(404);
    app.post(
        "/remove_action_from_group",
        Some(&key),
        json!({"group_id": g1, "hashed_cid": h}),
    )
    .await
    .assert_error(404);
    app.post("/delete_action", Some(&key), json!({"hashed_cid": "0x12"}))
        .await
        .assert_error(400);
    // It can be registered again; it does not come back into the groups it left.
    assert_eq!(app.add_action(&key, &c, "again").await, h);
    assert_eq!(actions_in(&app, &key, g1).await, [keep.as_str()]);
    assert!(actions_in(&app, &key, g2).await.is_empty());
}

#[tokio::test]
async fn list_actions_by_group_and_pages() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let (other, _) = app.new_account("other").await;
    let mut all = Vec::new();
    for i in 0..5 {
        all.push(
            app.add_action(&key, &cid_v0(&format!("a{i}")), &format!("a{i}"))
                .await,
        );
    }
    let their_action = app.add_action(&other, &cid_v0("theirs"), "theirs").await;
    let their_group = app
        .add_group(&other, json!({"cid_hashes_permitted": [0]}))
        .await;
    let explicit = app
        .add_group(&key, json!({"cid_hashes_permitted": [all[3], all[1]]}))
        .await;
    let wildcard = app
        .add_group(&key, json!({"cid_hashes_permitted": [zeros(64)]}))
        .await;
    let empty = app.add_group(&key, json!({})).await;

    let items = app
        .list(&format!("/list_actions?group_id={explicit}"), &key)
        .await;
    assert_eq!(
        sorted(hashes(&items)),
        sorted(vec![all[1].clone(), all[3].clone()])
    );
    let everything = app.list("/list_actions", &key).await;
    for item in &items {
        assert!(
            everything.contains(item),
            "{item}: same item as list_actions"
        );
    }
    assert_eq!(
        sorted(actions_in(&app, &key, wildcard).await),
        sorted(all.clone())
    );
    assert!(
        !actions_in(&app, &key, wildcard)
            .await
            .contains(&their_action)
    );
    assert!(actions_in(&app, &key, empty).await.is_empty());
    let hex = format!("/list_actions?group_id=0x{explicit:x}");
    assert_eq!(app.list(&hex, &key).await.len(), 2);

    for g in [999_999_999, their_group] {
        app.get(&format!("/list_actions?group_id={g}"), Some(&key))
            .await
            .assert_error(404);
    }
    for q in ["?group_id=abc", "?group_id=-1", "?page_size=x"] {
        app.get(&format!("/list_actions{q}"), Some(&key))
            .await
            .assert_error(400);
    }

    // Paging, in registration order.
    let page = |n: u32| {
        let app = &app;
        let key = &key;
        async move {
            hashes(
                &app.list(&format!("/list_actions?page_number={n}&page_size=2"), key)
                    .await,
            )
        }
    };
    assert_eq!(page(0).await, all[0..2]);
    assert_eq!(page(1).await, all[2..4]);
    assert_eq!(page(2).await, all[4..]);
    assert!(page(3).await.is_empty());
    let paged = app
        .list(
            &format!("/list_actions?group_id={wildcard}&page_number=1&page_size=4"),
            &key,
        )
        .await;
    assert_eq!(paged.len(), 1, "5 actions: page 1 of size 4 holds one");
}

#[tokio::test]
async fn the_same_cid_in_two_accounts_is_two_actions() {
    let app = Appliance::start().await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;
    let cid = cid_v0("shared code");
    let h = app.add_action(&alice, &cid, "alice's").await;
    assert_eq!(app.add_action(&bob, &cid, "bob's").await, h);
    app.post(
        "/update_action_metadata",
        Some(&bob),
        json!({"hashed_cid": h, "name": "bob renamed"}),
    )
    .await
    .assert_ok();
    app.post("/delete_action", Some(&bob), json!({"hashed_cid": h}))
        .await
        .assert_ok();
    assert!(app.list("/list_actions", &bob).await.is_empty());
    let alices = app.list("/list_actions", &alice).await;
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0]["name"], json!("alice's"));
    // Bob knows the hash, but it is not an action of his any more.
    app.post("/delete_action", Some(&bob), json!({"hashed_cid": h}))
        .await
        .assert_error(404);
}

#[derive(Deserialize)]
struct Vectors {
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    bytes: usize,
    cid: String,
    hashed_cid: String,
    code: Option<String>,
    repeat: Option<Repeat>,
}

#[derive(Deserialize)]
struct Repeat {
    text: String,
    count: usize,
}

impl Vector {
    fn code(&self) -> String {
        match (&self.code, &self.repeat) {
            (Some(code), None) => code.clone(),
            (None, Some(r)) => r.text.repeat(r.count),
            _ => panic!("a vector has either code or repeat"),
        }
    }
}

/// The limit on action code (the documented default, `docs/compatibility.md`: code ≤ 1 MiB).
const MAX_CODE: usize = 1024 * 1024;

#[tokio::test]
async fn get_lit_action_ipfs_id_matches_the_vectors() {
    let app = Appliance::start().await;
    let vectors: Vectors = serde_json::from_str(include_str!("../vectors/cids.json")).unwrap();
    let mut checked = 0;
    for v in &vectors.vectors {
        let code = v.code();
        assert_eq!(code.len(), v.bytes, "{}", v.cid);
        assert_eq!(
            keccak_hex(v.cid.as_bytes()),
            v.hashed_cid,
            "the vector itself"
        );
        if code.len() > MAX_CODE {
            continue;
        }
        // No key needed.
        let reply = app.post("/get_lit_action_ipfs_id", None, json!(code)).await;
        assert_eq!(
            reply.assert_ok(),
            &json!(v.cid),
            "code of {} bytes",
            v.bytes
        );
        assert_eq!(
            reply.headers.get("content-type").unwrap(),
            "application/json"
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} vectors checked");

    // The CID it returns registers to the published hashed_cid.
    let (key, _) = app.new_account("acme").await;
    let v = &vectors.vectors[3];
    let cid = app
        .post("/get_lit_action_ipfs_id", None, json!(v.code()))
        .await;
    let cid = cid.assert_ok().as_str().unwrap().to_owned();
    assert_eq!(app.add_action(&key, &cid, "hello").await, v.hashed_cid);
}

#[tokio::test]
async fn get_lit_action_ipfs_id_rejects_what_is_not_code() {
    let app = Appliance::start().await;
    // Not a JSON string: 400.
    for body in [
        json!({"code": "x"}),
        json!(["x"]),
        json!(42),
        json!(null),
        json!(true),
    ] {
        app.post("/get_lit_action_ipfs_id", None, body.clone())
            .await
            .assert_error(400);
    }
    let raw = |body: &'static str, content_type: &'static str| {
        app.send(
            app.request(Method::POST, &app.api("/get_lit_action_ipfs_id"))
                .header("content-type", content_type)
                .body(body),
        )
    };
    raw("\"unterminated", "application/json")
        .await
        .assert_error(400);
    raw("", "application/json").await.assert_error(400);
    raw("\"x\"", "text/plain").await.assert_error(415);

    // Code over 1 MiB: 413; exactly 1 MiB is fine. Bytes are counted, not characters.
    let over = "a".repeat(MAX_CODE + 1);
    app.post("/get_lit_action_ipfs_id", None, json!(over))
        .await
        .assert_error(413);
    let wide = "é".repeat(MAX_CODE / 2 + 1);
    app.post("/get_lit_action_ipfs_id", None, json!(wide))
        .await
        .assert_error(413);
    // The limit is on the code, not on its JSON form: 1 MiB of newlines is a 2 MiB body.
    let escaped = "\n".repeat(MAX_CODE);
    let reply = app
        .post("/get_lit_action_ipfs_id", None, json!(escaped))
        .await;
    assert!(reply.assert_ok().as_str().unwrap().starts_with("Qm"));
    let at_limit = "a".repeat(MAX_CODE);
    let reply = app
        .post("/get_lit_action_ipfs_id", None, json!(at_limit))
        .await;
    let cid = reply.assert_ok().as_str().unwrap().to_owned();
    assert!(cid.starts_with("Qm") && cid.len() == 46, "{cid}");
}

#[tokio::test]
async fn bodies_over_10_mib_are_a_clean_413_on_both_http_versions() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let body = json_string_body(10 * 1024 * 1024 + 1);
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let client = app.client_with(version);
        for (path, auth) in [
            ("/get_lit_action_ipfs_id", false),
            ("/add_action", true),
            ("/add_group", true),
            ("/update_group", true),
            ("/create_wallet", true),
        ] {
            let mut req = client
                .post(app.api(path))
                .header("content-type", "application/json")
                .body(body.clone());
            if auth {
                req = req.bearer_auth(&key);
            }
            let resp = req
                .send()
                .await
                .unwrap_or_else(|e| panic!("{path} over {version:?}: no response: {e}"));
            let reply = e2e::read(resp).await;
            assert_eq!(reply.version, version);
            reply.assert_error(413);
        }
        // Streamed, without a Content-Length.
        let resp = client
            .post(app.api("/get_lit_action_ipfs_id"))
            .header("content-type", "application/json")
            .body(e2e::streamed_body(body.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("streamed over {version:?}: no response: {e}"));
        e2e::read(resp).await.assert_error(413);
        // The connection is still usable afterwards.
        let reply = e2e::read(
            client
                .get(app.api("/list_groups"))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(reply.assert_ok(), &json!([]), "nothing was created");
    }
}
