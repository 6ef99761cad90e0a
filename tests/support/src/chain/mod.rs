//! Contracts on a local chain in tests (feature `chain`): a fresh anvil per test
//! ([`crate::anvil::spawn`]) with a signing provider for each of its dev accounts
//! ([`Chain`], [`wallet`]), and helpers that send a write and return its receipt ([`send`]),
//! expect a revert and decode it ([`revert`]), or decode a write's single event
//! ([`only_event`]). [`test_contracts`] deploys the test-only contracts (a stand-in for
//! dstack's KMS contract, a Safe-style multisig).
//!
//! It links `chain-contracts` (the RPC client every connection to the chain is built with),
//! so the contracts' own tests use it through a dev-dependency cycle (`chain-contracts` →
//! `test-support` → `chain-contracts`), which cargo allows for integration tests: the test
//! binary and this crate see the one `chain-contracts` library.

pub mod test_contracts;

use alloy::{
    contract::{CallBuilder, CallDecoder},
    node_bindings::AnvilInstance,
    primitives::Address,
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

// Roles the tests give anvil's dev accounts (indices into [`Chain`]'s accounts).
/// Deploys the contracts and owns them.
pub const OWNER: usize = 0;
/// An API payer of `AccountConfig`.
pub const PAYER: usize = 1;
/// An account with no role.
pub const STRANGER: usize = 2;
/// The admin of a chain-secured account.
pub const ADMIN: usize = 3;
/// A second admin.
pub const OTHER_ADMIN: usize = 4;

impl Chain {
    /// Starts anvil on 127.0.0.1 at a port it picks itself.
    pub fn start() -> Self {
        let anvil = crate::anvil::spawn();
        let providers = (0..anvil.keys().len())
            .map(|account| wallet(&anvil, account))
            .collect();
        Self { anvil, providers }
    }

    /// The provider signing with dev account `account`.
    pub fn provider(&self, account: usize) -> &DynProvider {
        &self.providers[account]
    }

    /// The address of dev account `account`.
    pub fn address(&self, account: usize) -> Address {
        self.anvil.addresses()[account]
    }
}

/// A provider signing with dev account `account` of `anvil`.
pub fn wallet(anvil: &AnvilInstance, account: usize) -> DynProvider {
    let signer = PrivateKeySigner::from(anvil.keys()[account].clone());
    // Nonces are read from the node for every transaction: alloy's default cached nonce
    // manager counts a nonce for a transaction whose gas estimate reverted, and the next
    // transaction would then wait forever for the gap.
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

/// Asserts that `receipt` carries no event.
pub fn assert_no_events(receipt: &TransactionReceipt) {
    assert!(
        receipt.inner.logs().is_empty(),
        "expected no event, got {:#?}",
        receipt.inner.logs()
    );
}
