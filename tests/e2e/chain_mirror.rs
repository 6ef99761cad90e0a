//! The chain mirror and indexer against a real anvil: API-mode writes reach
//! `AccountConfig` in order and exactly once, through outages and `kill -9`; accounts
//! created on chain by their own wallets work through the API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::ProviderBuilder;
use alloy::sol_types::SolEventInterface;
use base64::Engine as _;
use chain_contracts::IAccountConfig::{self, IAccountConfigEvents as E};
use e2e::chain::{anvil, appliance_on, authorize_payers, deploy_account_config, key_hash, wallet};
use e2e::{Appliance, eventually_async};
use serde_json::json;

fn stop(anvil: &AnvilInstance, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &anvil.child().id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn api_writes_appear_on_chain_with_their_values_and_events() {
    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    let app = appliance_on(dir.path(), &anvil, contract, from).await;
    authorize_payers(&anvil, &app, contract).await;

    let (key, wallet_address) = app.new_account("mirrored").await;
    let wallet = app
        .post("/create_wallet", Some(&key), json!({}))
        .await
        .assert_ok()
        .clone();
    let pkp_id = wallet["pkp_id"].as_str().unwrap().to_owned();
    let cid = "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR";
    app.post(
        "/add_action",
        Some(&key),
        json!({"action_ipfs_cid": cid, "name": "act", "description": "an action"}),
    )
    .await
    .assert_ok();
    let group = app
        .post(
            "/add_group",
            Some(&key),
            json!({"group_name": "g", "group_description": "d", "pkp_ids_permitted": [pkp_id], "cid_hashes_permitted": []}),
        )
        .await
        .assert_ok()
        .clone();
    let group_id: u64 = group["group_id"].as_str().unwrap().parse().unwrap();
    let usage = app
        .post(
            "/add_usage_api_key",
            Some(&key),
            json!({"name": "u", "description": "", "can_create_groups": false, "can_delete_groups": false,
                   "can_create_pkps": true, "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [group_id],
                   "remove_pkp_from_groups": [], "execute_in_groups": [group_id]}),
        )
        .await
        .assert_ok()
        .clone();
    let usage_hash = key_hash(usage["usage_api_key"].as_str().unwrap());
    let account = key_hash(&key);

    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let config = IAccountConfig::new(contract, &provider);
    assert!(
        eventually_async(Duration::from_secs(20), || async {
            config
                .getUsageApiKey(usage_hash)
                .call()
                .await
                .map(|k| k.apiKeyHash == account)
                .unwrap_or(false)
        })
        .await,
        "the usage key did not reach the chain"
    );
    let acct = config.getAccount(account).call().await.unwrap();
    assert!(acct.exists && acct.managed);
    assert_eq!(acct.admin, wallet_address.parse::<Address>().unwrap());
    assert_eq!(acct.name, "mirrored");
    let g = config.getGroup(U256::from(group_id)).call().await.unwrap();
    assert_eq!(g.apiKeyHash, account);
    assert_eq!(
        g.pkpIds,
        vec![U256::from_be_bytes(
            B256::from_slice(&hex::decode(&pkp_id[2..]).unwrap()).0
        )]
    );
    let action = config
        .getAction(account, U256::from_be_bytes(keccak256(cid.as_bytes()).0))
        .call()
        .await
        .unwrap();
    assert!(action.exists);
    assert_eq!(action.description, "an action");
    let k = config.getUsageApiKey(usage_hash).call().await.unwrap();
    assert!(k.permissions.canCreatePkps && !k.permissions.canCreateGroups);
    assert_eq!(k.permissions.executeInGroups, vec![U256::from(group_id)]);
    let w = config
        .getWallet(wallet["wallet_address"].as_str().unwrap().parse().unwrap())
        .call()
        .await
        .unwrap();
    assert_eq!(w.apiKeyHash, account);

    // One event per write, in the order of the writes.
    let kinds: Vec<&str> = e2e::chain::account_config_events(&anvil, contract)
        .await
        .iter()
        .filter_map(|e| match e {
            E::AccountCreated(_) => Some("account"),
            E::WalletRegistered(_) => Some("wallet"),
            E::ActionMetadataSet(_) => Some("action"),
            E::GroupAdded(_) => Some("group"),
            E::UsageApiKeySet(_) => Some("usage_key"),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "account",
            "wallet",
            "wallet",
            "action",
            "group",
            "usage_key"
        ]
    );
}

/// Group names on chain, in event order.
async fn mirrored_groups(anvil: &AnvilInstance, contract: Address) -> Vec<String> {
    e2e::chain::account_config_events(anvil, contract)
        .await
        .into_iter()
        .filter_map(|e| match e {
            E::GroupAdded(g) => Some(g.name),
            _ => None,
        })
        .collect()
}

async fn add_group(app: &Appliance, key: &str, i: usize) {
    let body = json!({"group_name": format!("g{i:02}"), "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []});
    app.post("/add_group", Some(key), body).await.assert_ok();
}

#[tokio::test]
async fn writes_during_an_outage_and_a_kill_9_are_mirrored_once_and_in_order() {
    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = appliance_on(dir.path(), &anvil, contract, from).await;
    authorize_payers(&anvil, &app, contract).await;
    let (key, _) = app.new_account("outage").await;

    // The chain becomes unreachable (frozen: requests time out).
    stop(&anvil, "-STOP");
    for i in 0..10 {
        add_group(&app, &key, i).await;
    }
    // kill -9 with a non-empty outbox, restart on the same data, ten more writes.
    app.kill9();
    let app = appliance_on(dir.path(), &anvil, contract, from).await;
    for i in 10..20 {
        add_group(&app, &key, i).await;
    }
    stop(&anvil, "-CONT");

    let expected: Vec<String> = (0..20).map(|i| format!("g{i:02}")).collect();
    assert!(
        eventually_async(Duration::from_secs(60), || async {
            mirrored_groups(&anvil, contract).await.len() >= 20
        })
        .await,
        "the mirror did not catch up: {:?}",
        mirrored_groups(&anvil, contract).await
    );
    // Give a duplicate the chance to appear before asserting there is none.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(mirrored_groups(&anvil, contract).await, expected);
}

#[tokio::test]
async fn an_account_created_on_chain_executes_through_the_api() {
    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    let app = appliance_on(dir.path(), &anvil, contract, from).await;

    let code = "async function main(p) { return 'chain secured ' + p.n; }";
    let cid = app.cid_of(code).await;
    let admin = wallet(&anvil, 5);
    let config = IAccountConfig::new(contract, &admin);
    config
        .newChainSecuredAccount("mine".into(), "on chain".into())
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let account = U256::from_be_bytes(keccak256(anvil.addresses()[5].as_slice()).0);
    let receipt = config
        .addGroup(
            account,
            U256::ZERO,
            "runners".into(),
            String::new(),
            vec![],
            vec![U256::from_be_bytes(keccak256(cid.as_bytes()).0)],
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let group = receipt
        .inner
        .logs()
        .iter()
        .find_map(|l| match E::decode_raw_log(l.topics(), &l.data().data) {
            Ok(E::GroupAdded(g)) => Some(g.groupId),
            _ => None,
        })
        .unwrap();
    let secret = [0x5au8; 32];
    let usage_key = base64::engine::general_purpose::STANDARD.encode(secret);
    config
        .setUsageApiKey(
            account,
            U256::from_be_bytes(keccak256(secret).0),
            U256::ZERO,
            U256::ZERO,
            "runner".into(),
            String::new(),
            IAccountConfig::UsageKeyPermissions {
                canCreateGroups: false,
                canDeleteGroups: false,
                canCreatePkps: false,
                manageIpfsIdsInGroups: vec![],
                addPkpToGroups: vec![],
                removePkpFromGroups: vec![],
                executeInGroups: vec![group],
            },
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();

    let run = || async {
        app.post(
            "/lit_action",
            Some(&usage_key),
            json!({"code": code, "js_params": {"n": 7}}),
        )
        .await
    };
    assert!(
        eventually_async(Duration::from_secs(20), || async {
            run().await.status == 200
        })
        .await,
        "the on-chain usage key never worked: {}",
        run().await.text
    );
    assert_eq!(
        run().await.assert_ok()["response"],
        json!("chain secured 7")
    );
    // A different code (a CID the group does not permit) is refused.
    let other = app
        .post(
            "/lit_action",
            Some(&usage_key),
            json!({"code": "async function main() { return 1; }"}),
        )
        .await;
    other.assert_error(403);
}

/// The outbox rows of the appliance whose data directory is `dir`: (op, state, error).
fn outbox_rows(dir: &std::path::Path) -> Vec<(String, String, Option<String>)> {
    let db = rusqlite::Connection::open_with_flags(
        dir.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare("SELECT json_extract(op, '$.op'), state, error FROM chain_outbox ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Waits until the outbox holds `n` entries, all failed, and returns them.
async fn all_failed(dir: &std::path::Path, n: usize) -> Vec<(String, String, Option<String>)> {
    assert!(
        eventually_async(Duration::from_secs(30), || async {
            let rows = outbox_rows(dir);
            rows.len() == n && rows.iter().all(|(_, state, _)| state == "failed")
        })
        .await,
        "the entries were not all marked failed: {:?}",
        outbox_rows(dir)
    );
    outbox_rows(dir)
}

/// keyservice's payer policy refuses every mirror transaction here (its fee cap is 1 wei).
/// A refusal is permanent: the entry is marked failed once, with the policy's reason
/// recorded, nothing is sent, and the relayer does not retry it. (The wallet registration
/// after a refused `new_account` then fails on chain for its own reason, the account being
/// unknown there. The same writes reach the chain without the cap:
/// `api_writes_appear_on_chain_with_their_values_and_events`.)
#[tokio::test]
async fn a_transaction_the_payer_policy_refuses_fails_its_entries_with_the_reason() {
    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    let app = e2e::chain::appliance_on_with(
        dir.path(),
        &anvil,
        contract,
        from,
        &[("KEYSERVICE_PAYER_MAX_FEE_WEI", "1")],
    )
    .await;
    authorize_payers(&anvil, &app, contract).await;

    // Two accounts: new_account and its wallet's registration each.
    app.new_account("refused 1").await;
    app.new_account("refused 2").await;
    let rows = all_failed(dir.path(), 4).await;
    let check = |rows: &[(String, String, Option<String>)]| {
        for (op, _, error) in rows {
            let error = error.clone().unwrap_or_default();
            if op == "new_account" {
                assert!(
                    error.contains("payer policy") && error.contains("fee cap"),
                    "{op}: {error}"
                );
            } else {
                assert!(
                    !error.is_empty() && !error.contains("payer policy"),
                    "{op}: {error}"
                );
            }
        }
        assert_eq!(
            rows.iter().filter(|(op, _, _)| op == "new_account").count() * 2,
            rows.len()
        );
    };
    check(&rows);
    // Nothing was sent.
    let db = rusqlite::Connection::open_with_flags(
        dir.path().join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let batches: i64 = db
        .query_row("SELECT count(*) FROM chain_batches", [], |r| r.get(0))
        .unwrap();
    assert_eq!(batches, 0);
    assert!(
        e2e::chain::account_config_events(&anvil, contract)
            .await
            .iter()
            .all(|e| !matches!(e, E::AccountCreated(_) | E::WalletRegistered(_))),
        "a refused write reached the chain"
    );
    // The API keeps taking writes; a later one is refused the same way, once.
    app.new_account("refused 3").await;
    check(&all_failed(dir.path(), 6).await);
    // Each entry was refused exactly once: one log line each, no retry loop.
    let log = std::fs::read_to_string(dir.path().join("appliance.log")).unwrap();
    assert_eq!(log.matches("mirror entry refused for good").count(), 6);
}
