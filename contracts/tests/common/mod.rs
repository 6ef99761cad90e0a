//! Shared harness of the contract tests: a fresh anvil per test (the binary that
//! `scripts/setup` installs), wallet providers for its dev accounts, and helpers that send a
//! write and return its receipt, expect a revert and decode it, or decode a write's single
//! event.
#![allow(dead_code, reason = "each test binary uses a subset")]

use alloy::{
    contract::{CallBuilder, CallDecoder},
    node_bindings::AnvilInstance,
    primitives::{Address, U256, keccak256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::TransactionReceipt,
    signers::local::PrivateKeySigner,
    sol_types::{SolEvent, SolInterface},
};

/// A running anvil (stopped on drop) and a signing provider per dev account.
pub struct Chain {
    anvil: AnvilInstance,
    providers: Vec<DynProvider>,
}

/// Roles the tests give anvil's dev accounts.
pub const OWNER: usize = 0;
pub const PAYER: usize = 1;
pub const STRANGER: usize = 2;
pub const ADMIN: usize = 3;
pub const OTHER_ADMIN: usize = 4;

impl Chain {
    /// Starts anvil on 127.0.0.1 at a port it picks itself.
    #[allow(
        clippy::unwrap_used,
        reason = "test scaffolding: a failure is the test's"
    )]
    pub fn start() -> Self {
        let anvil = test_support::anvil::spawn();
        let providers = anvil
            .keys()
            .iter()
            .map(|key| {
                let signer = PrivateKeySigner::from(key.clone());
                // Nonces are read from the node for every transaction: alloy's default
                // cached nonce manager counts a nonce for a transaction whose gas estimate
                // reverted, and the next transaction would then wait forever for the gap.
                ProviderBuilder::new()
                    .disable_recommended_fillers()
                    .with_gas_estimation()
                    .with_simple_nonce_management()
                    .fetch_chain_id()
                    .wallet(signer)
                    .connect_reqwest(
                        chain_contracts::rpc::http_client().unwrap(),
                        anvil.endpoint_url(),
                    )
                    .erased()
            })
            .collect();
        Self { anvil, providers }
    }

    pub fn provider(&self, account: usize) -> &DynProvider {
        &self.providers[account]
    }

    pub fn address(&self, account: usize) -> Address {
        self.anvil.addresses()[account]
    }
}

/// Sends a write, waits for it to be mined and checks it succeeded.
pub async fn send<P: Provider, D: CallDecoder>(call: CallBuilder<P, D>) -> TransactionReceipt {
    let pending = call
        .send()
        .await
        .unwrap_or_else(|e| panic!("sending failed: {e}"));
    let receipt = pending
        .get_receipt()
        .await
        .unwrap_or_else(|e| panic!("no receipt: {e}"));
    assert!(receipt.status(), "transaction reverted: {receipt:?}");
    receipt
}

/// Sends a write that must revert and decodes its revert data as one of `E`'s errors.
pub async fn revert<E: SolInterface + std::fmt::Debug, P: Provider, D: CallDecoder>(
    call: CallBuilder<P, D>,
) -> E {
    match call.send().await {
        Ok(pending) => panic!("expected a revert, sent {}", pending.tx_hash()),
        Err(e) => e
            .as_decoded_interface_error::<E>()
            .unwrap_or_else(|| panic!("revert data is not a known error: {e}")),
    }
}

/// The single event of `receipt`, which must be an `E` emitted by `contract`.
pub fn only_event<E: SolEvent>(receipt: &TransactionReceipt, contract: Address) -> E {
    let logs = receipt.inner.logs();
    assert_eq!(logs.len(), 1, "expected exactly one event, got {logs:#?}");
    assert_eq!(logs[0].address(), contract, "event from another contract");
    receipt
        .decoded_log::<E>()
        .unwrap_or_else(|| panic!("the event is not {}: {:?}", E::SIGNATURE, logs[0]))
        .data
}

pub fn assert_no_events(receipt: &TransactionReceipt) {
    assert!(
        receipt.inner.logs().is_empty(),
        "expected no event, got {:#?}",
        receipt.inner.logs()
    );
}

/// keccak256 of a label, as uint256: stands in for the hashes the appliance computes.
pub fn h(label: &str) -> U256 {
    U256::from_be_bytes(keccak256(label.as_bytes()).0)
}

/// The id `newChainSecuredAccount` gives the account of `admin`.
pub fn chain_secured_id(admin: Address) -> U256 {
    U256::from_be_bytes(keccak256(admin.as_slice()).0)
}
