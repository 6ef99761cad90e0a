//! The wallet-signature endpoints (EIP-712): minting a wallet or a usage key for a wallet
//! owner, and converting an API-mode account to ChainSecured.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::WalletAddress;

/// A wallet-signed request: the EIP-712 envelope and what `eth_signTypedData_v4` returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SignedRequest {
    /// `{"types":{"EIP712Domain":[name,version,chainId],"<Primary>":[address,issuedAt]},
    /// "primaryType","domain":{"name":"Service ChainSecured","version":"1","chainId"},
    /// "message":{"address","issuedAt"}}`; at most 4096 bytes serialised.
    #[schema(value_type = Object)]
    pub typed_data: serde_json::Value,
    /// `0x` + 65 bytes (r ‖ s ‖ v).
    pub signature: String,
}

/// The conversion request: the new admin wallet and its `ConvertAccount` signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConvertRequest {
    /// The wallet that administers the account on chain from now on; must be the signer.
    pub new_admin_wallet_address: WalletAddress,
    #[schema(value_type = Object)]
    pub typed_data: serde_json::Value,
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SignedWalletResponse {
    /// EIP-55 address of the new wallet (its key lives only in keyservice).
    pub wallet_address: String,
    /// `0x` + 64 hex; pass it to `registerWalletDerivation`.
    pub derivation_path: String,
    /// `0x` + keccak256 of the uncompressed public key.
    pub pkp_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SignedUsageKeyResponse {
    /// Standard base64 of 32 secret bytes, shown once. Its on-chain identity is
    /// keccak256 of those bytes (`usage_api_key_hash`).
    pub usage_api_key: String,
    /// `0x` + keccak256(key bytes), for `setUsageApiKey`.
    pub usage_api_key_hash: String,
    pub wallet_address: String,
    pub derivation_path: String,
    pub pkp_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConvertResponse {
    #[schema(example = true)]
    pub success: bool,
    /// The account's admin wallet from now on (EIP-55).
    pub wallet_address: String,
    /// The account's on-chain identity, unchanged: `0x` + keccak256(former account key).
    pub api_key_hash: String,
}
