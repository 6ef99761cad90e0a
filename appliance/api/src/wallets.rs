//! Wallets (PKPs): created inside keyservice, listed per account and per group.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{PagingParams, WireU64};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateWalletRequest {
    #[serde(default)]
    #[schema(schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateWalletResponse {
    /// EIP-55 address.
    pub wallet_address: String,
    /// `0x` + keccak256 of the uncompressed public key (without 0x04).
    pub pkp_id: String,
    /// `0x` + 64 hex; the wallet's key is derived from it inside keyservice.
    pub derivation_path: String,
}

/// A wallet as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WalletItem {
    /// The wallet's pkp_id (the same as `pkp_id`).
    pub id: String,
    pub pkp_id: String,
    pub wallet_address: String,
    pub name: String,
    pub description: String,
}

/// The query of `list_wallets`: paging only.
pub type ListWalletsRequest = PagingParams;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupQuery {
    /// The group (decimal or 0x hex).
    pub group_id: WireU64,
}

/// The query of `list_wallets_in_group`: the group, and paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListWalletsInGroupRequest {
    pub group_id: WireU64,
    #[serde(flatten)]
    pub paging: PagingParams,
}
