//! The settlement chain as clients see it: which chain and contract, and the payer
//! wallets that submit the service's transactions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeChainConfig {
    pub chain_name: String,
    pub chain_id: u64,
    pub is_evm: bool,
    pub testnet: bool,
    pub token: String,
    /// The `AccountConfig` contract (EIP-55), or null when none is configured.
    pub contract_address: Option<String>,
}
