//! Groups: ids, the listed shape and wildcards, id forms, full replacement, wallets and
//! actions in groups, removal, existence checks and paging.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e::{Appliance, cid_v0, cid_v1, keccak_hex, zeros};
use serde_json::{Value, json};

const GROUP_FIELDS: [&str; 5] = [
    "cid_hashes_permitted",
    "description",
    "id",
    "name",
    "pkp_ids_permitted",
];

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn field(items: &[Value], name: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i[name].as_str().unwrap().to_owned())
        .collect()
}

async fn wallets_in(app: &Appliance, key: &str, group: impl std::fmt::Display) -> Vec<String> {
    let items = app
        .list(&format!("/list_wallets_in_group?group_id={group}"), key)
        .await;
    field(&items, "pkp_id")
}

async fn actions_in(app: &Appliance, key: &str, group: impl std::fmt::Display) -> Vec<String> {
    let items = app
        .list(&format!("/list_actions?group_id={group}"), key)
        .await;
    field(&items, "hashed_cid")
}

#[tokio::test]
async fn group_ids_are_decimal_service_wide_and_never_reused() {
    let app = Appliance::start().await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;

    // `add_group` checks the exact response `{"success":true,"group_id":"<decimal>"}`.
    let a1 = app.add_group(&alice, json!({})).await;
    let b1 = app.add_group(&bob, json!({})).await;
    let a2 = app.add_group(&alice, json!({})).await;
    assert!(a1 < b1 && b1 < a2, "{a1} {b1} {a2}: unique across accounts");
    assert!(a1 > 0);

    // Remove the newest group: the next id is still larger (no reuse).
    app.post("/remove_group", Some(&alice), json!({"group_id": a2}))
        .await
        .assert_ok();
    let a3 = app.add_group(&alice, json!({})).await;
    assert!(a3 > a2, "id {a2} was reused as {a3}");
    // Remove everything of both accounts: still no reuse.
    for (key, id) in [(&alice, a1), (&alice, a3), (&bob, b1)] {
        let reply = app
            .post("/remove_group", Some(key), json!({"group_id": id}))
            .await;
        assert_eq!(reply.assert_ok(), &json!({"success": true}));
    }
    let b2 = app.add_group(&bob, json!({})).await;
    assert!(b2 > a3, "{b2} after {a3}");
    let listed: Vec<String> = field(&app.groups(&bob).await, "id");
    assert_eq!(listed, [b2.to_string()]);
    assert!(app.groups(&alice).await.is_empty());
}

#[tokio::test]
async fn list_groups_shape_and_wildcards() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let w1 = app.create_wallet(&key).await;
    let w2 = app.create_wallet(&key).await;
    let h1 = app.add_action(&key, &cid_v0("a1"), "a1").await;
    let h2 = app.add_action(&key, &cid_v1("a2"), "a2").await;

    // Explicit members; a wallet named by its address (lowercase) is listed by pkp_id.
    let explicit = app
        .add_group(
            &key,
            json!({"group_name": "explicit", "group_description": "two of each",
                   "pkp_ids_permitted": [w1.pkp_id, w2.address.to_ascii_lowercase()],
                   "cid_hashes_permitted": [h1, h2]}),
        )
        .await;
    let bare = app.add_group(&key, json!({"group_name": "bare"})).await;

    let all_wallets = [
        json!([zeros(64)]),
        json!([zeros(40)]),
        json!([w1.pkp_id, zeros(64)]),
        json!([zeros(40), w2.address]),
    ];
    let all_actions = [
        json!([0]),
        json!(["0"]),
        json!([zeros(64)]),
        json!([h1, 0]),
        json!(["0", h2]),
    ];
    let mut wildcards = Vec::new();
    for (i, pkps) in all_wallets.iter().enumerate() {
        let id = app
            .add_group(
                &key,
                json!({"group_name": format!("all wallets {i}"), "pkp_ids_permitted": pkps}),
            )
            .await;
        wildcards.push((id, true, false));
    }
    for (i, cids) in all_actions.iter().enumerate() {
        let id = app
            .add_group(
                &key,
                json!({"group_name": format!("all actions {i}"), "cid_hashes_permitted": cids}),
            )
            .await;
        wildcards.push((id, false, true));
    }

    let groups = app.groups(&key).await;
    assert_eq!(groups.len(), 2 + wildcards.len());
    for g in &groups {
        let mut keys: Vec<&str> = g.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, GROUP_FIELDS, "{g}");
        assert!(g["id"].is_string(), "ids are decimal strings: {g}");
    }
    // Creation order.
    let ids: Vec<u64> = field(&groups, "id")
        .iter()
        .map(|i| i.parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(ids[0], explicit);

    let g = &groups[0];
    assert_eq!(g["name"], json!("explicit"));
    assert_eq!(g["description"], json!("two of each"));
    assert_eq!(
        sorted(strings(&g["pkp_ids_permitted"])),
        sorted(vec![w1.pkp_id.clone(), w2.pkp_id.clone()])
    );
    assert_eq!(
        sorted(strings(&g["cid_hashes_permitted"])),
        sorted(vec![h1.clone(), h2.clone()])
    );
    let g = &groups[1];
    assert_eq!(ids[1], bare);
    assert_eq!(
        (
            &g["name"],
            &g["description"],
            &g["pkp_ids_permitted"],
            &g["cid_hashes_permitted"]
        ),
        (&json!("bare"), &json!(""), &json!([]), &json!([]))
    );

    for ((id, wallets, actions), g) in wildcards.iter().zip(&groups[2..]) {
        assert_eq!(g["id"], json!(id.to_string()));
        if *wallets {
            assert_eq!(g["pkp_ids_permitted"], json!([zeros(64)]), "{g}");
            assert_eq!(g["cid_hashes_permitted"], json!([]), "{g}");
        }
        if *actions {
            assert_eq!(g["cid_hashes_permitted"], json!(["0"]), "{g}");
            assert_eq!(g["pkp_ids_permitted"], json!([]), "{g}");
        }
    }
}

#[tokio::test]
async fn group_id_as_number_decimal_string_or_hex() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let wallet = app.create_wallet(&key).await;
    let g = app.add_group(&key, json!({})).await;
    for form in [json!(g), json!(g.to_string()), json!(format!("0x{g:x}"))] {
        let body = json!({"group_id": form, "pkp_id": wallet.pkp_id});
        app.post("/add_pkp_to_group", Some(&key), body.clone())
            .await
            .assert_ok();
        assert_eq!(wallets_in(&app, &key, g).await, [wallet.pkp_id.as_str()]);
        app.post("/remove_pkp_from_group", Some(&key), body)
            .await
            .assert_ok();
        assert!(wallets_in(&app, &key, g).await.is_empty(), "{form}");
        let body = json!({"group_id": form, "name": format!("named by {form}"),
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []});
        app.post("/update_group", Some(&key), body)
            .await
            .assert_ok();
        assert_eq!(
            app.group(&key, g).await.unwrap()["name"],
            json!(format!("named by {form}"))
        );
    }
    // Query strings: decimal and hex.
    app.post(
        "/add_pkp_to_group",
        Some(&key),
        json!({"group_id": g, "pkp_id": wallet.pkp_id}),
    )
    .await
    .assert_ok();
    for q in [g.to_string(), format!("0x{g:x}")] {
        assert_eq!(wallets_in(&app, &key, &q).await, [wallet.pkp_id.as_str()]);
        assert!(actions_in(&app, &key, &q).await.is_empty());
    }
    // Malformed ids are 400 (the account key may do everything, so nothing else can
    // explain the refusal).
    for bad in [
        json!("abc"),
        json!(-1),
        json!(1.5),
        json!(""),
        json!("0x"),
        json!("12a"),
        json!(null),
        json!([g]),
        json!("18446744073709551616"),
    ] {
        let d = app
            .post(
                "/add_pkp_to_group",
                Some(&key),
                json!({"group_id": bad, "pkp_id": wallet.pkp_id}),
            )
            .await
            .assert_error(400);
        assert!(d.contains("group_id"), "{bad}: {d}");
        app.post("/remove_group", Some(&key), json!({"group_id": bad}))
            .await
            .assert_error(400);
    }
    app.post("/remove_group", Some(&key), json!({}))
        .await
        .assert_error(400);
    for path in [
        "/list_wallets_in_group",
        "/list_wallets_in_group?group_id=",
        "/list_wallets_in_group?group_id=abc",
        "/list_wallets_in_group?group_id=-1",
        "/list_actions?group_id=abc",
        "/list_actions?group_id=1.5",
    ] {
        app.get(path, Some(&key)).await.assert_error(400);
    }
    // Nothing was removed by the malformed requests.
    assert!(app.group(&key, g).await.is_some());
}

#[tokio::test]
async fn update_group_replaces_name_description_and_both_sets() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let (w1, w2, w3) = (
        app.create_wallet(&key).await,
        app.create_wallet(&key).await,
        app.create_wallet(&key).await,
    );
    let h1 = app.add_action(&key, &cid_v0("u1"), "u1").await;
    let h2 = app.add_action(&key, &cid_v0("u2"), "u2").await;
    let g = app
        .add_group(
            &key,
            json!({"group_name": "before", "group_description": "old",
                   "pkp_ids_permitted": [w1.pkp_id, w2.pkp_id], "cid_hashes_permitted": [h1]}),
        )
        .await;
    let update = |body: Value| app.post("/update_group", Some(&key), body);

    let reply = update(json!({"group_id": g, "name": "after", "description": "new",
                              "pkp_ids_permitted": [w3.address], "cid_hashes_permitted": [h2]}))
    .await;
    assert_eq!(reply.assert_ok(), &json!({"success": true}));
    let group = app.group(&key, g).await.unwrap();
    assert_eq!(group["name"], json!("after"));
    assert_eq!(group["description"], json!("new"));
    assert_eq!(group["pkp_ids_permitted"], json!([w3.pkp_id]));
    assert_eq!(group["cid_hashes_permitted"], json!([h2]));
    assert_eq!(wallets_in(&app, &key, g).await, [w3.pkp_id.as_str()]);
    assert_eq!(actions_in(&app, &key, g).await, [h2.as_str()]);

    // To wildcards, then to empty sets.
    update(
        json!({"group_id": g, "name": "after", "pkp_ids_permitted": [zeros(64)],
                  "cid_hashes_permitted": ["0"]}),
    )
    .await
    .assert_ok();
    let group = app.group(&key, g).await.unwrap();
    assert_eq!(group["pkp_ids_permitted"], json!([zeros(64)]));
    assert_eq!(group["cid_hashes_permitted"], json!(["0"]));
    assert_eq!(wallets_in(&app, &key, g).await.len(), 4, "all wallets");
    assert_eq!(actions_in(&app, &key, g).await.len(), 2, "all actions");
    update(
        json!({"group_id": g, "name": "empty", "pkp_ids_permitted": [],
                  "cid_hashes_permitted": []}),
    )
    .await
    .assert_ok();
    let group = app.group(&key, g).await.unwrap();
    assert_eq!(group["pkp_ids_permitted"], json!([]));
    assert_eq!(group["cid_hashes_permitted"], json!([]));
    assert!(wallets_in(&app, &key, g).await.is_empty());
    assert!(actions_in(&app, &key, g).await.is_empty());

    // An unknown wallet or action: 404, and the group is left as it was.
    update(
        json!({"group_id": g, "name": "set", "pkp_ids_permitted": [w1.pkp_id],
                  "cid_hashes_permitted": [h1]}),
    )
    .await
    .assert_ok();
    let before = app.group(&key, g).await.unwrap();
    for body in [
        json!({"group_id": g, "name": "x", "pkp_ids_permitted": [w2.pkp_id, keccak_hex(b"nope")],
               "cid_hashes_permitted": []}),
        json!({"group_id": g, "name": "x", "pkp_ids_permitted": [],
               "cid_hashes_permitted": [h2, keccak_hex(b"nope")]}),
    ] {
        update(body).await.assert_error(404);
        assert_eq!(app.group(&key, g).await.unwrap(), before);
    }
    // An unknown group: 404.
    update(
        json!({"group_id": 999_999_999, "name": "x", "pkp_ids_permitted": [],
                  "cid_hashes_permitted": []}),
    )
    .await
    .assert_error(404);
}

/// The contract marks only `description` optional in `update_group`: a request that
/// omits a permitted set (or the name) is malformed, and must not silently empty the
/// group (a client meaning "rename" would otherwise revoke every member).
#[tokio::test]
async fn update_group_requires_name_and_both_sets() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let w = app.create_wallet(&key).await;
    let h = app.add_action(&key, &cid_v0("kept"), "kept").await;
    let g = app
        .add_group(
            &key,
            json!({"group_name": "full", "pkp_ids_permitted": [w.pkp_id],
                   "cid_hashes_permitted": [h]}),
        )
        .await;
    let before = app.group(&key, g).await.unwrap();
    for body in [
        json!({"group_id": g, "name": "renamed"}),
        json!({"group_id": g, "name": "renamed", "pkp_ids_permitted": [w.pkp_id]}),
        json!({"group_id": g, "name": "renamed", "cid_hashes_permitted": [h]}),
        json!({"group_id": g, "pkp_ids_permitted": [w.pkp_id], "cid_hashes_permitted": [h]}),
    ] {
        let reply = app.post("/update_group", Some(&key), body.clone()).await;
        assert_eq!(reply.status.as_u16(), 400, "{body}: {}", reply.text);
        reply.assert_error(400);
        assert_eq!(app.group(&key, g).await.unwrap(), before, "{body}");
    }
}

#[tokio::test]
async fn wallets_join_and_leave_groups() {
    let app = Appliance::start().await;
    let (key, account_wallet) = app.new_account("acme").await;
    let (other, _) = app.new_account("other").await;
    let w1 = app.create_wallet(&key).await;
    let w2 = app.create_wallet(&key).await;
    let theirs = app.create_wallet(&other).await;
    let g = app.add_group(&key, json!({})).await;
    let add = |pkp: &str| {
        app.post(
            "/add_pkp_to_group",
            Some(&key),
            json!({"group_id": g, "pkp_id": pkp}),
        )
    };
    let remove = |pkp: &str| {
        app.post(
            "/remove_pkp_from_group",
            Some(&key),
            json!({"group_id": g, "pkp_id": pkp}),
        )
    };

    // By pkp_id, twice: idempotent.
    assert_eq!(add(&w1.pkp_id).await.assert_ok(), &json!({"success": true}));
    add(&w1.pkp_id).await.assert_ok();
    assert_eq!(wallets_in(&app, &key, g).await, [w1.pkp_id.as_str()]);
    // By address in every case; still once.
    let hex_part = &w2.address[2..];
    for form in [
        w2.address.clone(),
        format!("0x{}", hex_part.to_ascii_lowercase()),
        format!("0x{}", hex_part.to_ascii_uppercase()),
    ] {
        add(&form).await.assert_ok();
    }
    // The account's own wallet too.
    add(&account_wallet).await.assert_ok();
    let expected = sorted(vec![
        w1.pkp_id.clone(),
        w2.pkp_id.clone(),
        app.list("/list_wallets", &key).await[0]["pkp_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    ]);
    assert_eq!(sorted(wallets_in(&app, &key, g).await), expected);
    let group = app.group(&key, g).await.unwrap();
    assert_eq!(sorted(strings(&group["pkp_ids_permitted"])), expected);

    // Unknown wallets and another account's wallet: 404; malformed: 400.
    for missing in [
        keccak_hex(b"nope"),
        format!("0x{}", "ab".repeat(20)),
        theirs.pkp_id.clone(),
        theirs.address.clone(),
    ] {
        add(&missing).await.assert_error(404);
    }
    for bad in ["", "0x12", "hello", &format!("0x{}", "g".repeat(64))] {
        add(bad).await.assert_error(400);
        remove(bad).await.assert_error(400);
    }
    assert_eq!(sorted(wallets_in(&app, &key, g).await), expected);

    // Removal, by address (lowercase) or pkp_id; a wallet not in the group is 404.
    let reply = remove(&w2.address.to_ascii_lowercase()).await;
    assert_eq!(reply.assert_ok(), &json!({"success": true}));
    remove(&w2.pkp_id).await.assert_error(404);
    remove(&w2.address).await.assert_error(404);
    remove(&theirs.pkp_id).await.assert_error(404);
    remove(&w1.pkp_id).await.assert_ok();
    remove(&account_wallet).await.assert_ok();
    assert!(wallets_in(&app, &key, g).await.is_empty());
    // The wallets themselves are untouched.
    assert_eq!(app.list("/list_wallets", &key).await.len(), 3);
}

#[tokio::test]
async fn actions_join_and_leave_groups() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let g = app.add_group(&key, json!({})).await;
    let add = |cid: &str| {
        app.post(
            "/add_action_to_group",
            Some(&key),
            json!({"group_id": g, "action_ipfs_cid": cid}),
        )
    };
    let remove = |hash: &str| {
        app.post(
            "/remove_action_from_group",
            Some(&key),
            json!({"group_id": g, "hashed_cid": hash}),
        )
    };

    // A raw CID not yet registered is registered (empty name and description) and
    // hashed by the service: keccak256 of the CID text.
    let v0 = cid_v0("in-group");
    let reply = add(&v0).await;
    let body = reply.assert_ok();
    let h0 = keccak_hex(v0.as_bytes());
    assert_eq!(body, &json!({"success": true, "hashed_cid": h0}));
    // Idempotent.
    assert_eq!(
        add(&v0).await.assert_ok(),
        &json!({"success": true, "hashed_cid": h0})
    );
    let actions = app.list("/list_actions", &key).await;
    assert_eq!(actions.len(), 1);
    assert_eq!(
        actions[0],
        json!({"id": h0, "hashed_cid": h0, "ipfs_cid": v0, "name": "", "description": ""})
    );
    // CIDv1, and a real CID whose hash is a published vector.
    let v1 = cid_v1("in-group");
    let h1 = add(&v1).await.assert_ok()["hashed_cid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(h1, keccak_hex(v1.as_bytes()));
    let real = "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR";
    let reply = add(real).await;
    assert_eq!(
        reply.assert_ok()["hashed_cid"],
        json!("0x8c4105ec0937f0fc27873d0af1dd93b35f6ee096ec93d173c629fb17c4abf22f")
    );
    // An action already registered keeps its name.
    let named = cid_v0("named");
    let hn = app.add_action(&key, &named, "keep me").await;
    add(&named).await.assert_ok();
    let listed = app.list("/list_actions", &key).await;
    let item = listed
        .iter()
        .find(|a| a["hashed_cid"] == json!(hn))
        .unwrap();
    assert_eq!(item["name"], json!("keep me"));

    let in_group = sorted(actions_in(&app, &key, g).await);
    let expected = sorted(vec![
        h0.clone(),
        h1.clone(),
        keccak_hex(real.as_bytes()),
        hn.clone(),
    ]);
    assert_eq!(in_group, expected);
    let group = app.group(&key, g).await.unwrap();
    assert_eq!(sorted(strings(&group["cid_hashes_permitted"])), expected);

    // Malformed CIDs: 400, and nothing registered.
    let v0_bad_char = format!("{}0", &v0[..45]); // '0' is not base58
    let v0_short = v0[..45].to_owned();
    let v0_long = format!("{v0}a");
    let v1_upper = format!("b{}", v1[1..].to_ascii_uppercase());
    let v1_bad_char = format!("{}1", &v1[..v1.len() - 1]); // '1' is not base32
    for bad in [
        "",
        "hello",
        "Qm123",
        v0_bad_char.as_str(),
        v0_short.as_str(),
        v0_long.as_str(),
        v1_upper.as_str(),
        v1_bad_char.as_str(),
        "bafy",
        &v1.to_ascii_uppercase(),
        &h0,
        "zQmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR",
    ] {
        let reply = add(bad).await;
        assert_eq!(reply.status.as_u16(), 400, "{bad:?}: {}", reply.text);
        let d = reply.assert_error(400);
        assert!(d.to_ascii_lowercase().contains("cid"), "{bad:?}: {d}");
    }
    app.post(
        "/add_action_to_group",
        Some(&key),
        json!({"group_id": g, "action_ipfs_cid": 5}),
    )
    .await
    .assert_error(400);
    assert_eq!(app.list("/list_actions", &key).await.len(), 4);

    // Removal by hashed CID; the action stays registered.
    assert_eq!(remove(&h0).await.assert_ok(), &json!({"success": true}));
    assert!(!actions_in(&app, &key, g).await.contains(&h0));
    remove(&h0).await.assert_error(404);
    remove(&keccak_hex(b"never registered"))
        .await
        .assert_error(404);
    for bad in ["", "0x12", &v0] {
        remove(bad).await.assert_error(400);
    }
    assert_eq!(app.list("/list_actions", &key).await.len(), 4);
    // An unknown group: 404.
    app.post(
        "/add_action_to_group",
        Some(&key),
        json!({"group_id": 999_999_999, "action_ipfs_cid": v0}),
    )
    .await
    .assert_error(404);
}

#[tokio::test]
async fn a_removed_group_is_gone_everywhere() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let w = app.create_wallet(&key).await;
    let cid = cid_v0("kept");
    let h = app.add_action(&key, &cid, "kept").await;
    let g = app
        .add_group(
            &key,
            json!({"pkp_ids_permitted": [w.pkp_id], "cid_hashes_permitted": [h]}),
        )
        .await;
    let other = app.add_group(&key, json!({"group_name": "stays"})).await;
    let reply = app
        .post("/remove_group", Some(&key), json!({"group_id": g}))
        .await;
    assert_eq!(reply.assert_ok(), &json!({"success": true}));

    assert_eq!(field(&app.groups(&key).await, "id"), [other.to_string()]);
    for path in [
        format!("/list_wallets_in_group?group_id={g}"),
        format!("/list_actions?group_id={g}"),
    ] {
        app.get(&path, Some(&key)).await.assert_error(404);
    }
    for (path, body) in [
        ("/remove_group", json!({"group_id": g})),
        (
            "/update_group",
            json!({"group_id": g, "name": "x", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
        ),
        (
            "/add_pkp_to_group",
            json!({"group_id": g, "pkp_id": w.pkp_id}),
        ),
        (
            "/remove_pkp_from_group",
            json!({"group_id": g, "pkp_id": w.pkp_id}),
        ),
        (
            "/add_action_to_group",
            json!({"group_id": g, "action_ipfs_cid": cid}),
        ),
        (
            "/remove_action_from_group",
            json!({"group_id": g, "hashed_cid": h}),
        ),
    ] {
        app.post(path, Some(&key), body).await.assert_error(404);
    }
    // Its wallet and action remain.
    let wallets = field(&app.list("/list_wallets", &key).await, "pkp_id");
    assert!(wallets.contains(&w.pkp_id));
    assert_eq!(
        field(&app.list("/list_actions", &key).await, "hashed_cid"),
        [h]
    );
}

#[tokio::test]
async fn add_group_with_unknown_members_creates_nothing() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let (other, _) = app.new_account("other").await;
    let mine = app.create_wallet(&key).await;
    let theirs = app.create_wallet(&other).await;
    let my_action = app.add_action(&key, &cid_v0("mine"), "mine").await;
    let their_action = app.add_action(&other, &cid_v0("theirs"), "theirs").await;

    for (pkps, cids) in [
        (json!([keccak_hex(b"nope")]), json!([])),
        (json!([format!("0x{}", "cd".repeat(20))]), json!([])),
        (json!([mine.pkp_id, theirs.pkp_id]), json!([])),
        (json!([theirs.address]), json!([])),
        (json!([]), json!([keccak_hex(b"nope")])),
        (json!([]), json!([my_action, their_action])),
        (json!([mine.pkp_id]), json!([my_action, keccak_hex(b"x")])),
    ] {
        let body =
            json!({"group_name": "g", "pkp_ids_permitted": pkps, "cid_hashes_permitted": cids});
        app.post("/add_group", Some(&key), body)
            .await
            .assert_error(404);
    }
    // Malformed members and a missing or empty name: 400.
    for body in [
        json!({"group_name": "g", "pkp_ids_permitted": ["0x12"]}),
        json!({"group_name": "g", "pkp_ids_permitted": [5]}),
        json!({"group_name": "g", "cid_hashes_permitted": ["0x12"]}),
        json!({"group_name": "g", "cid_hashes_permitted": [7]}),
        json!({"group_name": "g", "cid_hashes_permitted": "0"}),
        json!({"group_description": "no name"}),
    ] {
        app.post("/add_group", Some(&key), body.clone())
            .await
            .assert_error(400);
    }
    assert!(app.groups(&key).await.is_empty(), "nothing was created");
    // The other account's group list is untouched too, and a valid group works.
    assert!(app.groups(&other).await.is_empty());
    let g = app
        .add_group(
            &key,
            json!({"pkp_ids_permitted": [mine.address], "cid_hashes_permitted": [my_action]}),
        )
        .await;
    assert_eq!(field(&app.groups(&key).await, "id"), [g.to_string()]);
}

#[tokio::test]
async fn list_groups_pages() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(
            app.add_group(&key, json!({"group_name": format!("g{i}")}))
                .await
                .to_string(),
        );
    }
    let page = |n: u32, size: u32| {
        let app = &app;
        let key = &key;
        async move {
            field(
                &app.list(
                    &format!("/list_groups?page_number={n}&page_size={size}"),
                    key,
                )
                .await,
                "id",
            )
        }
    };
    assert_eq!(page(0, 3).await, made[0..3]);
    assert_eq!(page(1, 3).await, made[3..6]);
    assert_eq!(page(2, 3).await, made[6..]);
    assert!(page(3, 3).await.is_empty());
    assert_eq!(page(0, 5000).await, made, "clamped, not refused");
    assert_eq!(field(&app.list("/list_groups", &key).await, "id"), made);
    for q in ["?page_size=abc", "?page_number=-1", "?page_size=1.5"] {
        app.get(&format!("/list_groups{q}"), Some(&key))
            .await
            .assert_error(400);
    }
}

/// The test's own encoders (used to make well-formed CIDs) against known values.
#[test]
fn test_encoders_match_known_values() {
    let v0 = hex::decode("1220f852c7fa62f971817f54d8a80dcd63fcf7098b3cbde9ae8ec1ee449013ec5db0")
        .unwrap();
    assert_eq!(
        e2e::base58btc(&v0),
        "Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD"
    );
    let v1 =
        hex::decode("01701220c3c4733ec8affd06cf9e9ff50ffc6bcd2ec85a6170004bb709669c31de94391a")
            .unwrap();
    assert_eq!(
        format!("b{}", e2e::base32_lower(&v1)),
        "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
    );
    // EIP-55's own examples.
    for address in [
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    ] {
        assert_eq!(e2e::eip55(&address.to_ascii_lowercase()), address);
    }
    assert_eq!(cid_v0("x").len(), 46);
    assert!(cid_v1("x").starts_with("bafybei"));
}

/// Removing one wallet or action from a group that permits all of them cannot take
/// effect; it is refused (409) rather than answered with a success that changes
/// nothing, and the group still permits everything.
#[tokio::test]
async fn removing_from_a_wildcard_group_is_a_conflict() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("acme").await;
    let wallet = app.create_wallet(&key).await;
    let hash = app.add_action(&key, &cid_v0("w"), "w").await;
    let g = app
        .add_group(
            &key,
            json!({"group_name": "everything", "pkp_ids_permitted": [zeros(64)],
                   "cid_hashes_permitted": [0]}),
        )
        .await;
    // Adding explicitly to a wildcard group is harmless and idempotent.
    app.post(
        "/add_pkp_to_group",
        Some(&key),
        json!({"group_id": g, "pkp_id": wallet.pkp_id}),
    )
    .await
    .assert_ok();
    let d = app
        .post(
            "/remove_pkp_from_group",
            Some(&key),
            json!({"group_id": g, "pkp_id": wallet.pkp_id}),
        )
        .await
        .assert_error(409);
    assert!(d.contains("all wallets"), "{d}");
    let d = app
        .post(
            "/remove_action_from_group",
            Some(&key),
            json!({"group_id": g, "hashed_cid": hash}),
        )
        .await
        .assert_error(409);
    assert!(d.contains("all actions"), "{d}");
    let group = app.groups(&key).await[0].clone();
    assert_eq!(group["pkp_ids_permitted"], json!([zeros(64)]));
    assert_eq!(group["cid_hashes_permitted"], json!(["0"]));
}
