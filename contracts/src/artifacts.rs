//! The committed solc output (`contracts/artifacts/*.json`, written by `node
//! contracts/build.js`), embedded at build time. `cargo test -p chain-contracts` fails when
//! an artifact no longer matches its Solidity sources.

use alloy::primitives::Bytes;

/// The solc version the artifacts were compiled with (`0.8.35+commit.…`).
pub const SOLC_VERSION: &str = env!("CHAIN_CONTRACTS_SOLC_VERSION");

static ACCOUNT_CONFIG_BYTECODE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/AccountConfig.bytecode.bin"));
static ACCOUNT_CONFIG_DEPLOYED_BYTECODE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/AccountConfig.deployed.bin"));
static ACCOUNT_CONFIG_ABI: &str = include_str!(concat!(env!("OUT_DIR"), "/AccountConfig.abi.json"));

static APP_GOVERNANCE_BYTECODE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/AppGovernance.bytecode.bin"));
static APP_GOVERNANCE_DEPLOYED_BYTECODE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/AppGovernance.deployed.bin"));
static APP_GOVERNANCE_ABI: &str = include_str!(concat!(env!("OUT_DIR"), "/AppGovernance.abi.json"));

/// Creation code of `AccountConfig` (the constructor takes no arguments: this is the whole
/// `input` of a deployment transaction). The deployer becomes the owner.
pub fn account_config_bytecode() -> Bytes {
    Bytes::from_static(ACCOUNT_CONFIG_BYTECODE)
}

/// Runtime code of `AccountConfig`, as `eth_getCode` returns it after deployment.
pub fn account_config_deployed_bytecode() -> Bytes {
    Bytes::from_static(ACCOUNT_CONFIG_DEPLOYED_BYTECODE)
}

/// The ABI of `AccountConfig` as JSON (an array, as solc writes it).
pub fn account_config_abi_json() -> &'static str {
    ACCOUNT_CONFIG_ABI
}

/// Creation code of `AppGovernance` (no constructor arguments; the deployer becomes the
/// owner).
pub fn app_governance_bytecode() -> Bytes {
    Bytes::from_static(APP_GOVERNANCE_BYTECODE)
}

/// Runtime code of `AppGovernance`, as `eth_getCode` returns it after deployment.
pub fn app_governance_deployed_bytecode() -> Bytes {
    Bytes::from_static(APP_GOVERNANCE_DEPLOYED_BYTECODE)
}

/// The ABI of `AppGovernance` as JSON (an array, as solc writes it).
pub fn app_governance_abi_json() -> &'static str {
    APP_GOVERNANCE_ABI
}
