//! Proposing a compose hash to the `AppGovernance` contract (`addComposeHash`), reading
//! whether one is allowed, and the calldata for an owner that is a multisig.

use alloy::{
    primitives::{Address, B256, Bytes, TxHash},
    providers::{Provider, ProviderBuilder},
    signers::local::PrivateKeySigner,
    sol_types::SolCall,
    transports::http::reqwest::Url,
};
use chain_contracts::IAppGovernance;

/// Why talking to the governance contract failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GovernanceError {
    #[error("bad RPC URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("the owner key is not a 32-byte hex private key")]
    Key,
    #[error("no contract at {0} on this chain")]
    NoContract(Address),
    #[error(
        "the key's address {signer} is not the governance owner {owner}; a multisig owner proposes with `compose-pin propose --calldata-only`"
    )]
    NotOwner { signer: Address, owner: Address },
    #[error("RPC call to the governance contract failed: {0}")]
    Rpc(String),
    #[error("transaction {0} reverted")]
    Reverted(TxHash),
}

/// What [`propose`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposed {
    /// `addComposeHash` was mined in this transaction.
    Added(TxHash),
    /// The hash was already allowed; nothing was sent.
    AlreadyAllowed,
}

fn parse_url(rpc: &str) -> Result<Url, GovernanceError> {
    rpc.parse::<Url>().map_err(|e| GovernanceError::Url {
        url: rpc.to_owned(),
        reason: e.to_string(),
    })
}

/// alloy's HTTP client on rustls with ring (the workspace's one crypto provider).
fn rpc_client() -> Result<chain_contracts::rpc::reqwest::Client, GovernanceError> {
    chain_contracts::rpc::http_client().map_err(|e| GovernanceError::Rpc(e.to_string()))
}

/// Whether the governance contract at `governance` allows `hash`.
pub async fn is_allowed(
    rpc: &str,
    governance: Address,
    hash: [u8; 32],
) -> Result<bool, GovernanceError> {
    let provider = ProviderBuilder::new().connect_reqwest(rpc_client()?, parse_url(rpc)?);
    let code = provider
        .get_code_at(governance)
        .await
        .map_err(|e| GovernanceError::Rpc(e.to_string()))?;
    if code.is_empty() {
        return Err(GovernanceError::NoContract(governance));
    }
    IAppGovernance::new(governance, provider)
        .allowedComposeHashes(B256::from(hash))
        .call()
        .await
        .map_err(|e| GovernanceError::Rpc(e.to_string()))
}

/// The calldata of `addComposeHash(hash)`, for an owner that signs elsewhere (a multisig).
pub fn add_compose_hash_calldata(hash: [u8; 32]) -> Bytes {
    IAppGovernance::addComposeHashCall {
        composeHash: B256::from(hash),
    }
    .abi_encode()
    .into()
}

/// Sends `addComposeHash(hash)` from `owner_key` (hex, `0x` optional) and waits for it to be
/// mined. Checks first that the key is the owner (a clear error instead of a revert) and
/// sends nothing when the hash is already allowed.
pub async fn propose(
    rpc: &str,
    governance: Address,
    owner_key: &str,
    hash: [u8; 32],
) -> Result<Proposed, GovernanceError> {
    let signer: PrivateKeySigner = owner_key.trim().parse().map_err(|_| GovernanceError::Key)?;
    let signer_address = signer.address();
    if is_allowed(rpc, governance, hash).await? {
        return Ok(Proposed::AlreadyAllowed);
    }
    let provider = ProviderBuilder::new()
        .wallet(signer)
        .connect_reqwest(rpc_client()?, parse_url(rpc)?);
    let contract = IAppGovernance::new(governance, provider);
    let owner = contract
        .owner()
        .call()
        .await
        .map_err(|e| GovernanceError::Rpc(e.to_string()))?;
    if owner != signer_address {
        return Err(GovernanceError::NotOwner {
            signer: signer_address,
            owner,
        });
    }
    let receipt = contract
        .addComposeHash(B256::from(hash))
        .send()
        .await
        .map_err(|e| GovernanceError::Rpc(e.to_string()))?
        .get_receipt()
        .await
        .map_err(|e| GovernanceError::Rpc(e.to_string()))?;
    if !receipt.status() {
        return Err(GovernanceError::Reverted(receipt.transaction_hash));
    }
    Ok(Proposed::Added(receipt.transaction_hash))
}
