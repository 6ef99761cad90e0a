//! The permission model end to end: one account with groups X and Y,
//! an action in X only, a wallet in X, and usage keys each holding exactly one
//! permission; plus a second account with its own group, wallet and action.
//!
//! For each key: what it may do succeeds, and every other management write is 403 —
//! also on groups that do not exist (authorization is decided before existence). A key
//! with a permission gets 404 for ids that do not exist in its account, and the second
//! account's ids look nonexistent (404, never a 403 that would leak that they exist).
//!
//! The "execute in X/Y/all" keys are checked here only to be denied every management
//! write and to read; what they may run is covered by the execution tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e::{Appliance, NewWallet, Reply, cid_v0, keccak_hex};
use serde_json::{Value, json};

/// A group id that exists in no account (ids are service-wide and start small).
const NO_GROUP: u64 = 999_999_999;

/// One management request, as a key would send it.
#[derive(Debug, Clone)]
enum Op {
    CreateWalletGet,
    CreateWalletPost,
    AddGroup,
    UpdateGroup(u64),
    RemoveGroup(u64),
    AddPkp(u64, String),
    RemovePkp(u64, String),
    /// Group, raw CID.
    AddActionToGroup(u64, String),
    /// Group, hashed CID.
    RemoveActionFromGroup(u64, String),
    /// Raw CID.
    AddAction(String),
    /// Hashed CID.
    DeleteAction(String),
    /// Hashed CID.
    UpdateActionMetadata(String),
    AddUsageKey,
    /// The key (value) to change.
    UpdateUsageKey(String),
    UpdateUsageKeyMetadata(String),
    RemoveUsageKey(String),
    ListApiKeys,
}

impl Op {
    async fn send(&self, app: &Appliance, key: &str) -> Reply {
        let k = Some(key);
        match self {
            Op::CreateWalletGet => app.get("/create_wallet", k).await,
            Op::CreateWalletPost => app.post("/create_wallet", k, json!({})).await,
            Op::AddGroup => {
                app.post("/add_group", k, json!({"group_name": "new group"}))
                    .await
            }
            Op::UpdateGroup(g) => {
                let body = json!({
                    "group_id": g, "name": "renamed", "description": "",
                    "pkp_ids_permitted": [], "cid_hashes_permitted": []
                });
                app.post("/update_group", k, body).await
            }
            Op::RemoveGroup(g) => app.post("/remove_group", k, json!({"group_id": g})).await,
            Op::AddPkp(g, pkp) => {
                let body = json!({"group_id": g, "pkp_id": pkp});
                app.post("/add_pkp_to_group", k, body).await
            }
            Op::RemovePkp(g, pkp) => {
                let body = json!({"group_id": g, "pkp_id": pkp});
                app.post("/remove_pkp_from_group", k, body).await
            }
            Op::AddActionToGroup(g, cid) => {
                let body = json!({"group_id": g, "action_ipfs_cid": cid});
                app.post("/add_action_to_group", k, body).await
            }
            Op::RemoveActionFromGroup(g, hash) => {
                let body = json!({"group_id": g, "hashed_cid": hash});
                app.post("/remove_action_from_group", k, body).await
            }
            Op::AddAction(cid) => {
                let body = json!({"action_ipfs_cid": cid, "name": "new action"});
                app.post("/add_action", k, body).await
            }
            Op::DeleteAction(hash) => {
                app.post("/delete_action", k, json!({"hashed_cid": hash}))
                    .await
            }
            Op::UpdateActionMetadata(hash) => {
                let body = json!({"hashed_cid": hash, "name": "renamed", "description": "x"});
                app.post("/update_action_metadata", k, body).await
            }
            Op::AddUsageKey => {
                let body = json!({"name": "escalate", "execute_in_groups": [0]});
                app.post("/add_usage_api_key", k, body).await
            }
            Op::UpdateUsageKey(target) => {
                let body = json!({"usage_api_key": target, "execute_in_groups": [0]});
                app.post("/update_usage_api_key", k, body).await
            }
            Op::UpdateUsageKeyMetadata(target) => {
                let body = json!({"usage_api_key": target, "name": "pwned"});
                app.post("/update_usage_api_key_metadata", k, body).await
            }
            Op::RemoveUsageKey(target) => {
                let body = json!({"usage_api_key": target});
                app.post("/remove_usage_api_key", k, body).await
            }
            Op::ListApiKeys => app.get("/list_api_keys", k).await,
        }
    }

    /// The group a group-scoped operation names.
    fn group(&self) -> Option<u64> {
        match self {
            Op::UpdateGroup(g)
            | Op::RemoveGroup(g)
            | Op::AddPkp(g, _)
            | Op::RemovePkp(g, _)
            | Op::AddActionToGroup(g, _)
            | Op::RemoveActionFromGroup(g, _) => Some(*g),
            _ => None,
        }
    }
}

/// Sends `op` as `who` and checks the status (and, for errors, the error shape).
async fn expect(app: &Appliance, who: &str, key: &str, op: &Op, status: u16) -> Reply {
    let reply = op.send(app, key).await;
    assert_eq!(
        reply.status.as_u16(),
        status,
        "{who}: {op:?} answered {} (expected {status}): {}",
        reply.status,
        reply.text
    );
    if status >= 400 {
        reply.assert_error(status);
    } else {
        assert_eq!(
            reply.body["success"],
            json!(true),
            "{who}: {op:?}: {}",
            reply.text
        );
    }
    reply
}

struct Action {
    cid: String,
    hash: String,
}

impl Action {
    async fn register(app: &Appliance, key: &str, seed: &str) -> Self {
        let cid = cid_v0(seed);
        let hash = app.add_action(key, &cid, seed).await;
        Self { cid, hash }
    }
}

/// The usage keys of the first account, each holding exactly one permission.
struct Keys {
    create_groups: String,
    delete_groups: String,
    create_wallets: String,
    manage_x: String,
    add_x: String,
    remove_x: String,
    exec_x: String,
    exec_y: String,
    exec_all: String,
    none: String,
}

/// The second account: its own group (permitting its wallet and action), and two
/// usage keys: one with every permission everywhere, one with none.
struct Other {
    account: String,
    all: String,
    none: String,
    group: u64,
    wallet: NewWallet,
    action: Action,
}

struct World {
    app: Appliance,
    account: String,
    account_wallet: String,
    x: u64,
    y: u64,
    /// In X.
    in_x: NewWallet,
    /// In Y.
    in_y: NewWallet,
    /// In no group.
    spare: NewWallet,
    /// Registered and in X only.
    action_x: Action,
    keys: Keys,
    other: Other,
}

/// The shared setup (see the module comment).
async fn world() -> World {
    let app = Appliance::start().await;
    let (account, account_wallet) = app.new_account("first").await;
    let in_x = app.create_wallet(&account).await;
    let in_y = app.create_wallet(&account).await;
    let spare = app.create_wallet(&account).await;
    let action_x = Action::register(&app, &account, "first/action-x").await;
    let x = app
        .add_group(
            &account,
            json!({"group_name": "X", "pkp_ids_permitted": [in_x.pkp_id],
                   "cid_hashes_permitted": [action_x.hash]}),
        )
        .await;
    let y = app
        .add_group(
            &account,
            json!({"group_name": "Y", "pkp_ids_permitted": [in_y.pkp_id]}),
        )
        .await;
    assert_ne!(x, y);

    let key = |fields: Value| {
        let app = &app;
        let account = &account;
        async move { app.add_usage_key(account, fields).await.0 }
    };
    let keys = Keys {
        create_groups: key(json!({"can_create_groups": true})).await,
        delete_groups: key(json!({"can_delete_groups": true})).await,
        create_wallets: key(json!({"can_create_pkps": true})).await,
        manage_x: key(json!({"manage_ipfs_ids_in_groups": [x]})).await,
        add_x: key(json!({"add_pkp_to_groups": [x]})).await,
        remove_x: key(json!({"remove_pkp_from_groups": [x]})).await,
        exec_x: key(json!({"execute_in_groups": [x]})).await,
        exec_y: key(json!({"execute_in_groups": [y]})).await,
        exec_all: key(json!({"execute_in_groups": [0]})).await,
        none: key(json!({})).await,
    };

    let (other_account, _) = app.new_account("second").await;
    let other_wallet = app.create_wallet(&other_account).await;
    let other_action = Action::register(&app, &other_account, "second/action").await;
    let other_group = app
        .add_group(
            &other_account,
            json!({"group_name": "theirs", "pkp_ids_permitted": [other_wallet.pkp_id],
                   "cid_hashes_permitted": [other_action.hash]}),
        )
        .await;
    let (all, _) = app
        .add_usage_key(
            &other_account,
            json!({
                "can_create_groups": true, "can_delete_groups": true, "can_create_pkps": true,
                "manage_ipfs_ids_in_groups": [0], "add_pkp_to_groups": [0],
                "remove_pkp_from_groups": [0], "execute_in_groups": [0]
            }),
        )
        .await;
    let (other_none, _) = app.add_usage_key(&other_account, json!({})).await;

    World {
        app,
        account,
        account_wallet,
        x,
        y,
        in_x,
        in_y,
        spare,
        action_x,
        keys,
        other: Other {
            account: other_account,
            all,
            none: other_none,
            group: other_group,
            wallet: other_wallet,
            action: other_action,
        },
    }
}

impl World {
    /// Every management write: each group-scoped one on X, on Y, on a group that does
    /// not exist and on the second account's group; each built so that it would succeed
    /// (or at worst be 404) if it were wrongly allowed.
    fn writes(&self) -> Vec<Op> {
        let mut ops = vec![
            Op::CreateWalletGet,
            Op::CreateWalletPost,
            Op::AddGroup,
            Op::AddAction(cid_v0("sweep/add_action")),
            Op::DeleteAction(self.action_x.hash.clone()),
            Op::UpdateActionMetadata(self.action_x.hash.clone()),
            Op::AddUsageKey,
            Op::UpdateUsageKey(self.keys.none.clone()),
            Op::UpdateUsageKeyMetadata(self.keys.none.clone()),
            Op::RemoveUsageKey(self.keys.none.clone()),
            Op::ListApiKeys,
        ];
        for g in [self.x, self.y, NO_GROUP, self.other.group] {
            let member = if g == self.y {
                &self.in_y.pkp_id
            } else {
                &self.in_x.pkp_id
            };
            ops.extend([
                Op::UpdateGroup(g),
                Op::RemoveGroup(g),
                Op::AddPkp(g, self.spare.pkp_id.clone()),
                Op::RemovePkp(g, member.clone()),
                Op::AddActionToGroup(g, cid_v0(&format!("sweep/{g}"))),
                Op::RemoveActionFromGroup(g, self.action_x.hash.clone()),
            ]);
        }
        ops
    }

    /// Every management write not matched by `allowed` is 403 for `key`.
    async fn assert_denied_except(&self, who: &str, key: &str, allowed: impl Fn(&Op) -> bool) {
        let mut checked = 0;
        for op in self.writes() {
            if allowed(&op) {
                continue;
            }
            expect(&self.app, who, key, &op, 403).await;
            checked += 1;
        }
        assert!(
            checked > 20,
            "{who}: the sweep checked only {checked} requests"
        );
    }

    /// Any live key of the account reads the account's groups, wallets and actions.
    async fn assert_reads(&self, who: &str, key: &str) {
        let app = &self.app;
        let ids: Vec<String> = app
            .groups(key)
            .await
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            ids.contains(&self.x.to_string()) && ids.contains(&self.y.to_string()),
            "{who}: list_groups {ids:?}"
        );
        let wallets = pkp_ids(&app.list("/list_wallets?page_size=1000", key).await);
        assert!(wallets.contains(&self.in_x.pkp_id), "{who}: {wallets:?}");
        let actions = hashes(&app.list("/list_actions?page_size=1000", key).await);
        assert!(actions.contains(&self.action_x.hash), "{who}: {actions:?}");
        let in_x = pkp_ids(
            &app.list(&format!("/list_wallets_in_group?group_id={}", self.x), key)
                .await,
        );
        assert!(in_x.contains(&self.in_x.pkp_id), "{who}: {in_x:?}");
        let actions_x = hashes(
            &app.list(&format!("/list_actions?group_id={}", self.x), key)
                .await,
        );
        assert_eq!(actions_x, [self.action_x.hash.as_str()], "{who}");
        let in_y = pkp_ids(
            &app.list(&format!("/list_wallets_in_group?group_id={}", self.y), key)
                .await,
        );
        assert_eq!(in_y, [self.in_y.pkp_id.as_str()], "{who}");
    }

    async fn wallets_in(&self, group: u64) -> Vec<String> {
        pkp_ids(
            &self
                .app
                .list(
                    &format!("/list_wallets_in_group?group_id={group}"),
                    &self.account,
                )
                .await,
        )
    }

    async fn actions_in(&self, group: u64) -> Vec<String> {
        hashes(
            &self
                .app
                .list(&format!("/list_actions?group_id={group}"), &self.account)
                .await,
        )
    }
}

fn pkp_ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|w| w["pkp_id"].as_str().unwrap().to_owned())
        .collect()
}

fn hashes(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|a| a["hashed_cid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn keys_with_one_account_wide_flag() {
    let w = world().await;
    let app = &w.app;

    // --- can_create_groups ---
    let key = &w.keys.create_groups;
    w.assert_denied_except("create_groups", key, |op| matches!(op, Op::AddGroup))
        .await;
    w.assert_reads("create_groups", key).await;
    let reply = expect(app, "create_groups", key, &Op::AddGroup, 200).await;
    let made = e2e::group_id_from(&reply.body);
    let listed = app.group(&w.account, made).await.expect("new group listed");
    assert_eq!(listed["name"], json!("new group"));
    // Creating a group grants nothing on it.
    for op in [
        Op::RemoveGroup(made),
        Op::UpdateGroup(made),
        Op::AddPkp(made, w.spare.pkp_id.clone()),
        Op::AddActionToGroup(made, cid_v0("create_groups/own")),
    ] {
        expect(app, "create_groups", key, &op, 403).await;
    }

    // --- can_delete_groups (not per group: any group of the account) ---
    let key = &w.keys.delete_groups;
    w.assert_denied_except("delete_groups", key, |op| matches!(op, Op::RemoveGroup(_)))
        .await;
    w.assert_reads("delete_groups", key).await;
    let doomed = app
        .add_group(&w.account, json!({"group_name": "doomed"}))
        .await;
    expect(app, "delete_groups", key, &Op::RemoveGroup(doomed), 200).await;
    assert!(app.group(&w.account, doomed).await.is_none());
    // Permission held: a group that does not exist, or is gone, or belongs to another
    // account, is 404.
    for g in [doomed, NO_GROUP, w.other.group] {
        expect(app, "delete_groups", key, &Op::RemoveGroup(g), 404).await;
    }
    assert!(app.group(&w.other.account, w.other.group).await.is_some());

    // --- can_create_pkps ---
    let key = &w.keys.create_wallets;
    w.assert_denied_except("create_wallets", key, |op| {
        matches!(op, Op::CreateWalletGet | Op::CreateWalletPost)
    })
    .await;
    w.assert_reads("create_wallets", key).await;
    let mut made = Vec::new();
    for op in [Op::CreateWalletGet, Op::CreateWalletPost] {
        let reply = op.send(app, key).await;
        made.push(e2e::wallet_from(reply.assert_ok()).pkp_id);
    }
    // The wallets belong to the key's account, and to no other.
    let listed = pkp_ids(&app.list("/list_wallets", &w.account).await);
    assert!(made.iter().all(|p| listed.contains(p)), "{listed:?}");
    let theirs = pkp_ids(&app.list("/list_wallets", &w.other.account).await);
    assert!(made.iter().all(|p| !theirs.contains(p)), "{theirs:?}");
}

#[tokio::test]
async fn keys_scoped_to_group_x() {
    let w = world().await;
    let app = &w.app;
    let x = w.x;

    // --- add_pkp_to_groups = [X] ---
    let key = &w.keys.add_x;
    w.assert_denied_except("add_x", key, |op| matches!(op, Op::AddPkp(g, _) if *g == x))
        .await;
    w.assert_reads("add_x", key).await;
    let add_spare = Op::AddPkp(x, w.spare.pkp_id.clone());
    expect(app, "add_x", key, &add_spare, 200).await;
    assert!(w.wallets_in(x).await.contains(&w.spare.pkp_id));
    // By wallet address too.
    let add_account_wallet = Op::AddPkp(x, w.account_wallet.clone());
    expect(app, "add_x", key, &add_account_wallet, 200).await;
    assert_eq!(w.wallets_in(x).await.len(), 3);
    // Another account's wallet does not exist here.
    let add_theirs = Op::AddPkp(x, w.other.wallet.pkp_id.clone());
    expect(app, "add_x", key, &add_theirs, 404).await;
    // Holding add does not grant remove.
    expect(
        app,
        "add_x",
        key,
        &Op::RemovePkp(x, w.spare.pkp_id.clone()),
        403,
    )
    .await;

    // --- remove_pkp_from_groups = [X] ---
    let key = &w.keys.remove_x;
    w.assert_denied_except(
        "remove_x",
        key,
        |op| matches!(op, Op::RemovePkp(g, _) if *g == x),
    )
    .await;
    w.assert_reads("remove_x", key).await;
    let remove_spare = Op::RemovePkp(x, w.spare.pkp_id.clone());
    expect(app, "remove_x", key, &remove_spare, 200).await;
    assert!(!w.wallets_in(x).await.contains(&w.spare.pkp_id));
    // Not in the group (any more): 404.
    expect(app, "remove_x", key, &remove_spare, 404).await;
    let remove_account_wallet = Op::RemovePkp(x, w.account_wallet.clone());
    expect(app, "remove_x", key, &remove_account_wallet, 200).await;
    assert_eq!(w.wallets_in(x).await, [w.in_x.pkp_id.as_str()]);
    expect(app, "remove_x", key, &add_spare, 403).await;

    // --- manage_ipfs_ids_in_groups = [X] (also registers and renames actions) ---
    let key = &w.keys.manage_x;
    w.assert_denied_except("manage_x", key, |op| match op {
        Op::AddActionToGroup(g, _) | Op::RemoveActionFromGroup(g, _) => *g == x,
        Op::AddAction(_) | Op::UpdateActionMetadata(_) => true,
        _ => false,
    })
    .await;
    w.assert_reads("manage_x", key).await;
    let cid = cid_v0("manage_x/new");
    let reply = expect(
        app,
        "manage_x",
        key,
        &Op::AddActionToGroup(x, cid.clone()),
        200,
    )
    .await;
    let hash = reply.body["hashed_cid"].as_str().unwrap().to_owned();
    assert_eq!(hash, keccak_hex(cid.as_bytes()));
    assert_eq!(
        w.actions_in(x).await,
        [w.action_x.hash.clone(), hash.clone()]
    );
    expect(
        app,
        "manage_x",
        key,
        &Op::RemoveActionFromGroup(x, hash.clone()),
        200,
    )
    .await;
    assert_eq!(w.actions_in(x).await, [w.action_x.hash.as_str()]);
    let registered = cid_v0("manage_x/registered");
    expect(app, "manage_x", key, &Op::AddAction(registered), 200).await;
    let rename = Op::UpdateActionMetadata(w.action_x.hash.clone());
    expect(app, "manage_x", key, &rename, 200).await;
    let listed = app.list("/list_actions", &w.account).await;
    let renamed = listed
        .iter()
        .find(|a| a["hashed_cid"] == json!(w.action_x.hash))
        .unwrap();
    assert_eq!(renamed["name"], json!("renamed"));
    // Deleting an action everywhere needs the wildcard.
    expect(
        app,
        "manage_x",
        key,
        &Op::DeleteAction(w.action_x.hash.clone()),
        403,
    )
    .await;

    // --- all three per-group arrays on X: update_group X only (an extra key) ---
    let (key, _) = app
        .add_usage_key(
            &w.account,
            json!({"manage_ipfs_ids_in_groups": [x], "add_pkp_to_groups": [x],
                   "remove_pkp_from_groups": [x]}),
        )
        .await;
    w.assert_denied_except("update_x", &key, |op| match op {
        Op::AddAction(_) | Op::UpdateActionMetadata(_) => true,
        _ => op.group() == Some(x) && !matches!(op, Op::RemoveGroup(_)),
    })
    .await;
    let body = json!({"group_id": x, "name": "X2", "description": "updated",
                      "pkp_ids_permitted": [w.spare.pkp_id], "cid_hashes_permitted": []});
    app.post("/update_group", Some(&key), body)
        .await
        .assert_ok();
    let group = app.group(&w.account, x).await.unwrap();
    assert_eq!(group["name"], json!("X2"));
    assert_eq!(group["pkp_ids_permitted"], json!([w.spare.pkp_id]));
    assert_eq!(group["cid_hashes_permitted"], json!([]));
    // One of the three grants missing: 403 on X as well.
    let (partial, _) = app
        .add_usage_key(
            &w.account,
            json!({"manage_ipfs_ids_in_groups": [x], "add_pkp_to_groups": [x]}),
        )
        .await;
    expect(app, "partial", &partial, &Op::UpdateGroup(x), 403).await;
}

#[tokio::test]
async fn execute_keys_and_the_no_permission_key_may_only_read() {
    let w = world().await;
    // What these keys may run is covered by the execution tests; here
    // these keys must be denied every management write and may read.
    for (who, key) in [
        ("exec_x", &w.keys.exec_x),
        ("exec_y", &w.keys.exec_y),
        ("exec_all", &w.keys.exec_all),
        ("none", &w.keys.none),
    ] {
        w.assert_denied_except(who, key, |_| false).await;
        w.assert_reads(who, key).await;
    }
    // Nothing changed.
    let groups = w.app.groups(&w.account).await;
    assert_eq!(groups.len(), 2);
    assert_eq!(w.wallets_in(w.x).await, [w.in_x.pkp_id.as_str()]);
    assert_eq!(w.actions_in(w.x).await, [w.action_x.hash.as_str()]);
    let keys = w.app.list("/list_api_keys", &w.account).await;
    assert_eq!(keys.len(), 10, "no usage key was added or removed");
    assert_eq!(w.app.list("/list_actions", &w.account).await.len(), 1);
    assert_eq!(w.app.list("/list_wallets", &w.account).await.len(), 4);
}

#[tokio::test]
async fn permission_changes_apply_on_the_very_next_request() {
    let w = world().await;
    let app = &w.app;
    let (x, y) = (w.x, w.y);
    let (flip, _) = app.add_usage_key(&w.account, json!({})).await;
    let add_x = Op::AddPkp(x, w.spare.pkp_id.clone());
    let add_y = Op::AddPkp(y, w.spare.pkp_id.clone());
    let update = |perms: Value| {
        let mut body = json!({"usage_api_key": flip});
        for (k, v) in perms.as_object().unwrap() {
            body[k] = v.clone();
        }
        app.post("/update_usage_api_key", Some(&w.account), body)
    };

    expect(app, "flip []", &flip, &add_x, 403).await;
    update(json!({"add_pkp_to_groups": [0]})).await.assert_ok();
    expect(app, "flip [0]", &flip, &add_x, 200).await;
    expect(app, "flip [0]", &flip, &add_y, 200).await;
    update(json!({"add_pkp_to_groups": []})).await.assert_ok();
    expect(app, "flip [] again", &flip, &add_x, 403).await;
    update(json!({"add_pkp_to_groups": [y]})).await.assert_ok();
    expect(app, "flip [Y]", &flip, &add_x, 403).await;
    expect(app, "flip [Y]", &flip, &add_y, 200).await;

    // Removed: 401 on the very next request, reads included.
    app.post(
        "/remove_usage_api_key",
        Some(&w.account),
        json!({"usage_api_key": flip}),
    )
    .await
    .assert_ok();
    expect(app, "removed", &flip, &add_y, 401).await;
    app.get("/list_groups", Some(&flip)).await.assert_error(401);
    app.get("/list_wallets", Some(&flip))
        .await
        .assert_error(401);

    // A removed group's id is never given to a new group, so a key that listed it
    // keeps no access to anything.
    let gone = app.add_group(&w.account, json!({})).await;
    let (holder, _) = app
        .add_usage_key(&w.account, json!({"add_pkp_to_groups": [gone]}))
        .await;
    expect(
        app,
        "holder",
        &holder,
        &Op::AddPkp(gone, w.spare.pkp_id.clone()),
        200,
    )
    .await;
    app.post("/remove_group", Some(&w.account), json!({"group_id": gone}))
        .await
        .assert_ok();
    expect(
        app,
        "holder",
        &holder,
        &Op::AddPkp(gone, w.spare.pkp_id.clone()),
        404,
    )
    .await;
    let fresh = app.add_group(&w.account, json!({})).await;
    assert!(fresh > gone, "group id {gone} reused as {fresh}");
    expect(
        app,
        "holder",
        &holder,
        &Op::AddPkp(fresh, w.spare.pkp_id.clone()),
        403,
    )
    .await;
}

#[tokio::test]
async fn authorization_precedes_existence() {
    let w = world().await;
    let app = &w.app;
    let unknown_pkp = keccak_hex(b"no such wallet");
    let unknown_hash = keccak_hex(b"no such action");
    let nonexistent = vec![
        Op::UpdateGroup(NO_GROUP),
        Op::RemoveGroup(NO_GROUP),
        Op::AddPkp(NO_GROUP, w.spare.pkp_id.clone()),
        Op::RemovePkp(NO_GROUP, w.in_x.pkp_id.clone()),
        Op::AddActionToGroup(NO_GROUP, cid_v0("nonexistent")),
        Op::RemoveActionFromGroup(NO_GROUP, w.action_x.hash.clone()),
        Op::AddPkp(w.x, unknown_pkp.clone()),
        Op::RemovePkp(w.x, unknown_pkp.clone()),
        Op::RemovePkp(w.x, w.spare.pkp_id.clone()),
        Op::RemoveActionFromGroup(w.x, unknown_hash.clone()),
        Op::DeleteAction(unknown_hash.clone()),
        Op::UpdateActionMetadata(unknown_hash.clone()),
        // Group 0 (the wildcard in permission arrays, never a group) and the largest id.
        Op::AddPkp(0, w.spare.pkp_id.clone()),
        Op::RemoveGroup(0),
        Op::AddPkp(u64::MAX, w.spare.pkp_id.clone()),
        Op::UpdateGroup(u64::MAX),
    ];
    // The account key holds every permission: 404.
    for op in &nonexistent {
        expect(app, "account key", &w.account, op, 404).await;
    }
    // A key without the permission learns nothing: 403 for the same requests.
    for op in &nonexistent {
        expect(app, "none", &w.keys.none, op, 403).await;
    }
    // Reading needs no permission: an unknown group is 404 for any key.
    for key in [&w.account, &w.keys.none] {
        for path in ["/list_wallets_in_group", "/list_actions"] {
            for g in [NO_GROUP, 0, u64::MAX] {
                app.get(&format!("{path}?group_id={g}"), Some(key))
                    .await
                    .assert_error(404);
            }
        }
    }

    // A usage key holding the permission for exactly that (nonexistent) group: 404;
    // for a group it does not hold: 403.
    let (holder, _) = app
        .add_usage_key(&w.account, json!({"add_pkp_to_groups": [NO_GROUP]}))
        .await;
    let add_none = Op::AddPkp(NO_GROUP, w.spare.pkp_id.clone());
    expect(app, "holder", &holder, &add_none, 404).await;
    expect(app, "add_x", &w.keys.add_x, &add_none, 403).await;
    // A key holding add on X: an unknown wallet in X is 404, in Y 403.
    let add_unknown_x = Op::AddPkp(w.x, unknown_pkp.clone());
    expect(app, "add_x", &w.keys.add_x, &add_unknown_x, 404).await;
    let add_unknown_y = Op::AddPkp(w.y, unknown_pkp.clone());
    expect(app, "add_x", &w.keys.add_x, &add_unknown_y, 403).await;
    let remove_unknown = Op::RemovePkp(w.x, unknown_pkp.clone());
    expect(app, "remove_x", &w.keys.remove_x, &remove_unknown, 404).await;

    // The action wildcard: nonexistent groups and actions are 404; a real one is
    // deleted (and leaves X).
    let (actions_all, _) = app
        .add_usage_key(&w.account, json!({"manage_ipfs_ids_in_groups": [0]}))
        .await;
    for op in [
        Op::AddActionToGroup(NO_GROUP, cid_v0("wildcard")),
        Op::RemoveActionFromGroup(NO_GROUP, w.action_x.hash.clone()),
        Op::AddActionToGroup(w.other.group, cid_v0("wildcard")),
        Op::DeleteAction(unknown_hash.clone()),
        Op::DeleteAction(w.other.action.hash.clone()),
    ] {
        expect(app, "actions_all", &actions_all, &op, 404).await;
    }
    let delete = Op::DeleteAction(w.action_x.hash.clone());
    expect(app, "actions_all", &actions_all, &delete, 200).await;
    assert_eq!(w.actions_in(w.x).await, Vec::<String>::new());
    expect(app, "actions_all", &actions_all, &delete, 404).await;
}

#[tokio::test]
async fn accounts_never_see_or_touch_each_others_groups_wallets_and_actions() {
    let w = world().await;
    let app = &w.app;
    let o = &w.other;
    let snapshot = || async {
        (
            app.groups(&w.account).await,
            app.list("/list_wallets?page_size=1000", &w.account).await,
            app.list("/list_actions?page_size=1000", &w.account).await,
        )
    };
    let before = snapshot().await;
    let mine: Vec<String> = [
        w.x.to_string(),
        w.y.to_string(),
        w.in_x.pkp_id.clone(),
        w.in_y.pkp_id.clone(),
        w.spare.pkp_id.clone(),
        w.action_x.hash.clone(),
        w.action_x.cid.clone(),
    ]
    .into();
    let my_addresses = [
        w.account_wallet.clone(),
        w.in_x.address.clone(),
        w.spare.address.clone(),
    ];

    for (who, key) in [
        ("second account key", &o.account),
        ("second [0] key", &o.all),
    ] {
        // Seeing: only its own items.
        let groups = app.groups(key).await;
        assert_eq!(groups.len(), 1, "{who}: {groups:?}");
        assert_eq!(groups[0]["id"], json!(o.group.to_string()));
        for path in [
            "/list_wallets?page_size=1000".to_owned(),
            "/list_actions?page_size=1000".to_owned(),
            format!("/list_wallets_in_group?group_id={}", o.group),
            format!("/list_actions?group_id={}", o.group),
            "/list_groups".to_owned(),
        ] {
            let reply = app.get(&path, Some(key)).await;
            reply.assert_ok();
            for item in mine.iter().chain(&my_addresses) {
                let lower = item.to_ascii_lowercase();
                assert!(
                    !reply
                        .text
                        .to_ascii_lowercase()
                        .contains(&format!("\"{lower}\"")),
                    "{who}: {path} shows {item}: {}",
                    reply.text
                );
            }
        }
        assert_eq!(
            pkp_ids(&app.list("/list_wallets", key).await).len(),
            2,
            "{who}: its account wallet and its one wallet"
        );
        for path in ["/list_wallets_in_group", "/list_actions"] {
            for g in [w.x, w.y] {
                app.get(&format!("{path}?group_id={g}"), Some(key))
                    .await
                    .assert_error(404);
            }
        }

        // Touching: the first account's ids do not exist for it.
        let hers = [
            Op::UpdateGroup(w.x),
            Op::RemoveGroup(w.x),
            Op::RemoveGroup(w.y),
            Op::AddPkp(w.x, o.wallet.pkp_id.clone()),
            Op::AddPkp(w.x, w.spare.pkp_id.clone()),
            Op::RemovePkp(w.x, w.in_x.pkp_id.clone()),
            Op::RemovePkp(w.x, w.in_x.address.clone()),
            Op::AddActionToGroup(w.x, cid_v0("second/into-x")),
            Op::AddActionToGroup(w.x, o.action.cid.clone()),
            Op::RemoveActionFromGroup(w.x, w.action_x.hash.clone()),
            Op::DeleteAction(w.action_x.hash.clone()),
            Op::UpdateActionMetadata(w.action_x.hash.clone()),
            // Nor pulled into its own group.
            Op::AddPkp(o.group, w.spare.pkp_id.clone()),
            Op::AddPkp(o.group, w.account_wallet.clone()),
            Op::AddPkp(o.group, w.in_x.address.to_ascii_lowercase()),
        ];
        for op in &hers {
            expect(app, who, key, op, 404).await;
        }
        for body in [
            json!({"group_name": "steal", "pkp_ids_permitted": [w.spare.pkp_id]}),
            json!({"group_name": "steal", "pkp_ids_permitted": [w.account_wallet]}),
            json!({"group_name": "steal", "cid_hashes_permitted": [w.action_x.hash]}),
        ] {
            app.post("/add_group", Some(key), body)
                .await
                .assert_error(404);
        }
        let body = json!({"group_id": o.group, "name": "theirs",
                          "pkp_ids_permitted": [o.wallet.pkp_id, w.in_x.pkp_id],
                          "cid_hashes_permitted": [o.action.hash]});
        app.post("/update_group", Some(key), body)
            .await
            .assert_error(404);
        assert_eq!(app.groups(key).await.len(), 1, "{who}: nothing created");
    }

    // The second account's key without permissions: 403, the same as for any group it
    // holds no grant on (nothing leaks either way).
    for op in [
        Op::UpdateGroup(w.x),
        Op::RemoveGroup(w.x),
        Op::AddPkp(w.x, w.spare.pkp_id.clone()),
        Op::DeleteAction(w.action_x.hash.clone()),
    ] {
        expect(app, "second none key", &o.none, &op, 403).await;
    }

    // Nothing of the first account changed, and the second account's group is intact.
    assert_eq!(snapshot().await, before);
    let theirs = app.group(&o.account, o.group).await.unwrap();
    assert_eq!(theirs["pkp_ids_permitted"], json!([o.wallet.pkp_id]));
    assert_eq!(theirs["cid_hashes_permitted"], json!([o.action.hash]));
    assert_eq!(theirs["name"], json!("theirs"));

    // A CID is public: the second account may register the same code in its own group,
    // which makes its own action (nothing of the first account's metadata shows).
    let reply = app
        .post(
            "/add_action_to_group",
            Some(&o.account),
            json!({"group_id": o.group, "action_ipfs_cid": w.action_x.cid}),
        )
        .await;
    assert_eq!(reply.assert_ok()["hashed_cid"], json!(w.action_x.hash));
    let listed = app.list("/list_actions", &o.account).await;
    let copy = listed
        .iter()
        .find(|a| a["hashed_cid"] == json!(w.action_x.hash))
        .expect("registered on the second account");
    assert_eq!(
        (&copy["name"], &copy["description"]),
        (&json!(""), &json!(""))
    );
    app.post(
        "/delete_action",
        Some(&o.account),
        json!({"hashed_cid": w.action_x.hash}),
    )
    .await
    .assert_ok();
    assert_eq!(
        snapshot().await,
        before,
        "the first account's action is its own"
    );
}
