//! Groups: bind wallets and actions; usage keys reach them through their per-group
//! permission arrays.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Cid, HashedCid, PagingParams, PermittedCidHash, PkpIdOrAddress, WireU64};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AddGroupRequest {
    #[schema(schema_with = crate::text::group_name)]
    pub group_name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub group_description: String,
    /// pkp_ids (or addresses) of wallets of this account; `0x` + 64 zeros = all wallets.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub pkp_ids_permitted: Vec<PkpIdOrAddress>,
    /// Hashed CIDs of actions of this account; `0` = all actions.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub cid_hashes_permitted: Vec<PermittedCidHash>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddGroupResponse {
    pub success: bool,
    /// The new group's id (decimal string); unique across the service, never reused.
    pub group_id: String,
}

/// The query of `list_groups`: paging only.
pub type ListGroupsRequest = PagingParams;

/// A group as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupItem {
    /// The group id (decimal string).
    pub id: String,
    pub name: String,
    pub description: String,
    /// Permitted wallets' pkp_ids; `["0x00…00"]` = all wallets.
    pub pkp_ids_permitted: Vec<String>,
    /// Permitted actions' hashed CIDs; `["0"]` = all actions.
    pub cid_hashes_permitted: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UpdateGroupRequest {
    pub group_id: WireU64,
    #[schema(schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
    /// The complete new set of permitted wallets (replaces the old one; required, so
    /// that a rename cannot empty a group by accident).
    #[schema(max_items = 1000)]
    pub pkp_ids_permitted: Vec<PkpIdOrAddress>,
    /// The complete new set of permitted actions (replaces the old one; required).
    #[schema(max_items = 1000)]
    pub cid_hashes_permitted: Vec<PermittedCidHash>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupIdRequest {
    pub group_id: WireU64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupWalletRequest {
    pub group_id: WireU64,
    /// The wallet's pkp_id or address.
    pub pkp_id: PkpIdOrAddress,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddActionToGroupRequest {
    pub group_id: WireU64,
    /// The raw IPFS CID; the service hashes it.
    pub action_ipfs_cid: Cid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RemoveActionFromGroupRequest {
    pub group_id: WireU64,
    /// keccak256 of the CID (from list_actions).
    pub hashed_cid: HashedCid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_group_round_trips_with_a_wildcard() {
        let req = AddGroupRequest {
            group_name: "ops".into(),
            pkp_ids_permitted: vec![format!("0x{}", "0".repeat(64)).into()],
            cid_hashes_permitted: vec![PermittedCidHash::all()],
            ..Default::default()
        };
        let text = serde_json::to_string(&req).unwrap();
        assert_eq!(serde_json::from_str::<AddGroupRequest>(&text).unwrap(), req);
        let minimal: AddGroupRequest = serde_json::from_str(r#"{"group_name":"ops"}"#).unwrap();
        assert!(minimal.pkp_ids_permitted.is_empty() && minimal.group_description.is_empty());
    }

    #[test]
    fn group_ids_go_out_as_decimal_strings() {
        let req = GroupWalletRequest {
            group_id: WireU64(12),
            pkp_id: "0x01".into(),
        };
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            serde_json::json!({"group_id": "12", "pkp_id": "0x01"})
        );
    }
}
