//! A real anvil chain for the end-to-end tests (the binary `scripts/setup` installs), dev
//! account wallets, and an appliance mirroring to a freshly deployed `AccountConfig`.

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
