//! The chain mirror and indexer against a real anvil: API-mode writes reach
//! `AccountConfig` in order and exactly once, through outages and `kill -9`; accounts
//! created on chain by their own wallets work through the API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEventInterface;
use base64::Engine as _;
use chain_contracts::IAccountConfig::{self, IAccountConfigEvents as E};
use e2e::chain::{anvil, appliance_on, authorize_payers, deploy_account_config, key_hash, wallet};
use e2e::{Appliance, eventually_async};
use serde_json::json;

async fn events(anvil: &AnvilInstance, contract: Address) -> Vec<E> {
    let provider = ProviderBuilder::new().connect_http(anvil.endpoint_url());
    let logs = provider
        .get_logs(&Filter::new().address(contract).from_block(0))
        .await
        .unwrap();
    logs.iter()
        .map(|l| E::decode_raw_log(l.topics(), &l.data().data).unwrap())
        .collect()
}

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

    let provider = ProviderBuilder::new().connect_http(anvil.endpoint_url());
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
    let kinds: Vec<&str> = events(&anvil, contract)
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
    events(anvil, contract)
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
    let cid = app
        .post("/get_lit_action_ipfs_id", None, json!(code))
        .await
        .assert_ok()
        .as_str()
        .unwrap()
        .to_owned();
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
