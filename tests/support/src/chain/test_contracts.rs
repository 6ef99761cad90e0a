//! The test-only contracts of `contracts/test/` (compiled with the others by
//! `contracts/build.js` into `contracts/artifacts/test/`): [`TestKms`], a stand-in for
//! dstack's on-chain KMS as far as it consults an app's contract, and [`TestMultisig`], a
//! Safe-style multisig owner (threshold signatures over an EIP-712 hash, executed by
//! anyone). [`multisig_exec`] plays its owners.

use alloy::{
    primitives::{Address, B256, Bytes, U256},
    providers::Provider,
    rpc::types::TransactionReceipt,
    signers::{SignerSync, local::PrivateKeySigner},
};

#[allow(
    clippy::too_many_arguments,
    reason = "generated from the contracts' functions"
)]
mod bindings {
    alloy::sol!(
        #[sol(rpc, all_derives)]
        TestKms,
        "../../contracts/artifacts/test/TestKms.json"
    );
}

#[allow(
    clippy::too_many_arguments,
    reason = "generated from the contracts' functions"
)]
mod multisig_bindings {
    alloy::sol!(
        #[sol(rpc, all_derives)]
        TestMultisig,
        "../../contracts/artifacts/test/TestMultisig.json"
    );
}

pub use bindings::TestKms;
pub use multisig_bindings::TestMultisig;

/// Has `signers` (at least the multisig's threshold, any order) sign the multisig's next
/// transaction `to.call{value}(data)` and submits it through `submitter`. Returns the
/// receipt of a transaction that succeeded, or the error of one that would revert (the
/// multisig's own error or the revert data of the call it made, decodable by the caller:
/// the gas estimate runs the call first).
pub async fn multisig_exec<P: Provider>(
    multisig: &TestMultisig::TestMultisigInstance<P>,
    signers: &[&PrivateKeySigner],
    to: Address,
    value: U256,
    data: Bytes,
) -> Result<TransactionReceipt, alloy::contract::Error> {
    let nonce = multisig.nonce().call().await?;
    let hash = multisig
        .transactionHash(to, value, data.clone(), nonce)
        .call()
        .await?;
    let call = multisig.execTransaction(to, value, data, multisig_signatures(signers, hash));
    let pending = call.send().await?;
    let receipt = pending
        .get_receipt()
        .await
        .unwrap_or_else(|e| panic!("no receipt: {e}"));
    assert!(
        receipt.status(),
        "the multisig transaction reverted: {receipt:?}"
    );
    Ok(receipt)
}

/// The signatures `execTransaction` takes: r ‖ s ‖ v (65 bytes) of each signer over `hash`,
/// in ascending order of the signers' addresses.
pub fn multisig_signatures(signers: &[&PrivateKeySigner], hash: B256) -> Bytes {
    let mut sorted: Vec<&PrivateKeySigner> = signers.to_vec();
    sorted.sort_by_key(|s| s.address());
    let mut out = Vec::with_capacity(65 * sorted.len());
    for signer in sorted {
        let signature = signer
            .sign_hash_sync(&hash)
            .unwrap_or_else(|e| panic!("signing failed: {e}"));
        out.extend_from_slice(&signature.as_bytes());
    }
    out.into()
}
