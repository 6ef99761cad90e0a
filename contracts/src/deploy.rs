//! Deployment through an alloy provider that fills and signs transactions (a wallet
//! provider). The appliance itself deploys the same [`crate::artifacts`] creation code
//! through keyservice-signed raw transactions.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, Bytes, TxHash},
    providers::{PendingTransactionError, Provider},
    rpc::types::TransactionRequest,
    transports::TransportError,
};

use crate::artifacts;

/// Why a deployment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// The node refused the transaction, or could not be reached.
    #[error("sending the deployment transaction failed: {0}")]
    Send(#[source] TransportError),
    /// The transaction was sent but its receipt could not be obtained.
    #[error("waiting for the deployment receipt failed: {0}")]
    Receipt(#[source] PendingTransactionError),
    /// The transaction was mined and reverted.
    #[error("deployment transaction {0} reverted")]
    Reverted(TxHash),
    /// The receipt names no created contract (not a deployment, or a broken node).
    #[error("deployment transaction {0} created no contract")]
    NoContractAddress(TxHash),
}

/// Deploys `AccountConfig` from the provider's default sender (which becomes its owner) and
/// returns its address once the transaction is mined.
pub async fn deploy_account_config<P: Provider>(provider: &P) -> Result<Address, DeployError> {
    deploy(provider, artifacts::account_config_bytecode()).await
}

/// Deploys `AppGovernance` from the provider's default sender (which becomes its owner) and
/// returns its address once the transaction is mined.
pub async fn deploy_app_governance<P: Provider>(provider: &P) -> Result<Address, DeployError> {
    deploy(provider, artifacts::app_governance_bytecode()).await
}

async fn deploy<P: Provider>(provider: &P, creation_code: Bytes) -> Result<Address, DeployError> {
    let tx = TransactionRequest::default().with_deploy_code(creation_code);
    let receipt = provider
        .send_transaction(tx)
        .await
        .map_err(DeployError::Send)?
        .get_receipt()
        .await
        .map_err(DeployError::Receipt)?;
    if !receipt.status() {
        return Err(DeployError::Reverted(receipt.transaction_hash));
    }
    receipt
        .contract_address
        .ok_or(DeployError::NoContractAddress(receipt.transaction_hash))
}
