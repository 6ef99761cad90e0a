//! A real anvil chain for the end-to-end tests (the binary `scripts/setup` installs), dev
//! account wallets, and an appliance mirroring to a freshly deployed `AccountConfig`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, U256, keccak256};
use alloy::providers::{Provider, ProviderBuilder};
use base64::Engine as _;
use chain_contracts::IAccountConfig;
use serde_json::Value;

use crate::{Appliance, Launch};

pub use test_support::chain::wallet;
pub use test_support::tools::anvil_binary;

/// A fresh anvil on a free loopback port, stopped when dropped.
pub fn anvil() -> AnvilInstance {
    test_support::anvil::spawn()
}

/// Every event `contract` emitted, decoded, oldest first.
pub async fn account_config_events(
    anvil: &AnvilInstance,
    contract: Address,
) -> Vec<IAccountConfig::IAccountConfigEvents> {
    use alloy::sol_types::SolEventInterface as _;
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let logs = provider
        .get_logs(
            &alloy::rpc::types::Filter::new()
                .address(contract)
                .from_block(0),
        )
        .await
        .expect("the contract's logs");
    logs.iter()
        .map(|l| {
            IAccountConfig::IAccountConfigEvents::decode_raw_log(l.topics(), &l.data().data)
                .expect("an AccountConfig event")
        })
        .collect()
}

/// Anvil dev account `i`'s private key as `0x` hex (for viem scripts).
pub fn private_key(anvil: &AnvilInstance, i: usize) -> String {
    format!("0x{}", hex::encode(anvil.keys()[i].to_bytes()))
}

/// The on-chain identity of an API key: keccak256 of its 32 decoded bytes.
pub fn key_hash(key: &str) -> U256 {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .expect("a base64 key");
    U256::from_be_bytes(keccak256(bytes).0)
}

/// Deploys `AccountConfig` from dev account 0 (its owner); returns it and the block the
/// indexer should start from.
pub async fn deploy_account_config(anvil: &AnvilInstance) -> (Address, u64) {
    let owner = wallet(anvil, 0);
    let block = owner.get_block_number().await.expect("block number");
    let address = chain_contracts::deploy_account_config(&owner)
        .await
        .expect("AccountConfig deploys");
    (address, block)
}

/// A dev appliance mirroring to `contract` on `anvil` (indexing from block `from`, no
/// confirmations, fast polls).
pub async fn appliance_on(
    dir: &Path,
    anvil: &AnvilInstance,
    contract: Address,
    from: u64,
) -> Appliance {
    appliance_on_with(dir, anvil, contract, from, &[]).await
}

/// As [`appliance_on`], with more environment variables (for the appliance and the
/// keyservice child it starts).
/// The `[chain]` overrides that point an appliance at `contract` on `anvil`, indexed from
/// block `from`, with the test timings (no confirmations, 100 ms polls).
pub fn chain_env(anvil: &AnvilInstance, contract: Address, from: u64) -> Vec<(String, String)> {
    [
        ("APPLIANCE_CHAIN__RPC_URL", anvil.endpoint()),
        ("APPLIANCE_CHAIN__CHAIN_ID", anvil.chain_id().to_string()),
        (
            "APPLIANCE_CHAIN__ACCOUNT_CONFIG_ADDRESS",
            contract.to_string(),
        ),
        ("APPLIANCE_CHAIN__DEPLOY_BLOCK", from.to_string()),
        ("APPLIANCE_CHAIN__CONFIRMATIONS", "0".into()),
        ("APPLIANCE_CHAIN__POLL_INTERVAL_MS", "100".into()),
        ("APPLIANCE_CHAIN__REQUEST_TIMEOUT_MS", "1000".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub async fn appliance_on_with(
    dir: &Path,
    anvil: &AnvilInstance,
    contract: Address,
    from: u64,
    extra: &[(&str, &str)],
) -> Appliance {
    let env = chain_env(anvil, contract, from);
    let env = env
        .into_iter()
        .chain(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    Appliance::launch(dir, Launch::DevWith { env }).await
}

/// Makes the appliance's API payers payers of `contract` (from its owner, dev account 0),
/// with gas.
pub async fn authorize_payers(anvil: &AnvilInstance, app: &Appliance, contract: Address) {
    let payers = app.get("/get_api_payers", None).await.assert_ok().clone();
    let owner = wallet(anvil, 0);
    let config = IAccountConfig::new(contract, &owner);
    for payer in payers.as_array().expect("a payer list") {
        let payer: Address = payer
            .as_str()
            .and_then(|p| p.parse().ok())
            .expect("a payer address");
        owner
            .raw_request::<_, Value>(
                "anvil_setBalance".into(),
                (payer, U256::from(10u128.pow(20))),
            )
            .await
            .expect("anvil_setBalance");
        config
            .setApiPayer(payer, true)
            .send()
            .await
            .expect("setApiPayer sent")
            .get_receipt()
            .await
            .expect("setApiPayer mined");
    }
}

/// Deploys `AccountConfig`, starts a dev appliance mirroring to it and authorizes its
/// payers: the whole chain setup of a mirror test.
pub async fn mirrored_appliance(dir: &Path, anvil: &AnvilInstance) -> (Appliance, Address) {
    let (contract, from) = deploy_account_config(anvil).await;
    let app = appliance_on(dir, anvil, contract, from).await;
    authorize_payers(anvil, &app, contract).await;
    (app, contract)
}

/// What the store says the chain must hold: the ids of each kind of mirrored object
/// (`accounts`, `usage keys`, `groups`, `wallets`), the usage keys whose removal was
/// acknowledged, and how many outbox entries there are.
#[derive(Default)]
pub struct Mirrored {
    pub kinds: BTreeMap<&'static str, Vec<U256>>,
    pub removed_keys: Vec<U256>,
    pub outbox: usize,
}

/// Asserts that `contract` holds each stored object's event exactly once and nothing
/// the store does not: a usage key removed on chain was set there once and is no longer
/// stored, each acknowledged removal reached the chain, and there is one event per
/// outbox entry. Returns a summary line.
pub async fn assert_mirrored_once(
    anvil: &AnvilInstance,
    contract: Address,
    stored: &Mirrored,
) -> String {
    use IAccountConfig::IAccountConfigEvents as E;
    let mut on_chain: BTreeMap<&str, Vec<U256>> = BTreeMap::new();
    for event in account_config_events(anvil, contract).await {
        let (kind, id) = match event {
            E::AccountCreated(a) => ("accounts", a.apiKeyHash),
            E::UsageApiKeySet(k) => ("usage keys", k.usageKeyHash),
            E::UsageApiKeyRemoved(k) => ("removed usage keys", k.usageKeyHash),
            E::GroupAdded(g) => ("groups", g.groupId),
            E::WalletRegistered(w) => ("wallets", U256::from_be_slice(w.wallet.as_slice())),
            _ => continue,
        };
        on_chain.entry(kind).or_default().push(id);
    }
    let removed = on_chain
        .get("removed usage keys")
        .cloned()
        .unwrap_or_default();
    let none = Vec::new();
    for kind in [
        "accounts",
        "usage keys",
        "groups",
        "wallets",
        "removed usage keys",
    ] {
        let mut expected = stored.kinds.get(kind).unwrap_or(&none).clone();
        match kind {
            // A removed key was set before it was removed.
            "usage keys" => expected.extend(removed.iter().copied()),
            "removed usage keys" => expected.clone_from(&removed),
            _ => {}
        }
        exactly_once(kind, &expected, on_chain.get(kind).unwrap_or(&none));
    }
    let still_stored: BTreeSet<&U256> = stored
        .kinds
        .get("usage keys")
        .unwrap_or(&none)
        .iter()
        .collect();
    let revived: Vec<_> = removed
        .iter()
        .filter(|k| still_stored.contains(k))
        .collect();
    assert!(
        revived.is_empty(),
        "usage keys removed on chain but still stored: {revived:?}"
    );
    let unmirrored: Vec<_> = stored
        .removed_keys
        .iter()
        .filter(|k| !removed.contains(k))
        .collect();
    assert!(
        unmirrored.is_empty(),
        "acknowledged removals that never reached the chain: {unmirrored:?}"
    );
    let mirrored: usize = on_chain.values().map(Vec::len).sum();
    assert_eq!(
        stored.outbox, mirrored,
        "outbox entries vs their events on chain"
    );
    let count = |kind| on_chain.get(kind).map_or(0, Vec::len);
    format!(
        "{} outbox entries, each mined once: {} accounts, {} usage keys set and {} removed, \
         {} groups, {} wallets",
        stored.outbox,
        count("accounts"),
        count("usage keys"),
        count("removed usage keys"),
        count("groups"),
        count("wallets"),
    )
}

/// Asserts each of `expected` appears exactly once in `seen`, and nothing else does.
#[track_caller]
fn exactly_once(what: &str, expected: &[U256], seen: &[U256]) {
    let mut tally: BTreeMap<U256, usize> = BTreeMap::new();
    for id in seen {
        *tally.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = tally.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{what} mirrored more than once: {twice:?}"
    );
    let expected: BTreeSet<U256> = expected.iter().copied().collect();
    let seen: BTreeSet<U256> = tally.into_keys().collect();
    let missing: Vec<_> = expected.difference(&seen).collect();
    assert!(missing.is_empty(), "{what} never mirrored: {missing:?}");
    let extra: Vec<_> = seen.difference(&expected).collect();
    assert!(
        extra.is_empty(),
        "{what} on chain but not in the store: {extra:?}"
    );
}

/// Where the transaction `hash` was mined: its block and its index in the block.
pub async fn position_of(anvil: &AnvilInstance, hash: &[u8]) -> (u64, u64) {
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let receipt = provider
        .get_transaction_receipt(alloy::primitives::B256::from_slice(hash))
        .await
        .expect("a receipt")
        .expect("a mined transaction");
    (
        receipt.block_number.expect("a block"),
        receipt.transaction_index.expect("an index"),
    )
}
