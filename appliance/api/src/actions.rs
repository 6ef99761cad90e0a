//! Registered actions, and the CID of action code.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{Cid, HashedCid, PagingParams, WireU64};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddActionRequest {
    /// The raw IPFS CID of the action's code.
    pub action_ipfs_cid: Cid,
    #[schema(schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HashedCidRequest {
    /// keccak256 of the CID (from list_actions).
    pub hashed_cid: HashedCid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateActionMetadataRequest {
    pub hashed_cid: HashedCid,
    #[schema(schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
}

/// An action as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ActionItem {
    /// The hashed CID (the same as `hashed_cid`).
    pub id: String,
    pub hashed_cid: String,
    pub ipfs_cid: String,
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OptionalGroupQuery {
    /// Only the actions this group permits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<WireU64>,
}

/// The query of `list_actions`: optionally a group, and paging.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListActionsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<WireU64>,
    #[serde(flatten)]
    pub paging: PagingParams,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_actions_sends_only_what_is_set() {
        assert_eq!(
            serde_json::to_value(ListActionsRequest::default()).unwrap(),
            serde_json::json!({})
        );
        let req = ListActionsRequest {
            group_id: Some(WireU64(9)),
            paging: PagingParams {
                page_number: None,
                page_size: Some(10),
            },
        };
        let json = serde_json::to_value(req).unwrap();
        assert_eq!(json, serde_json::json!({"group_id": "9", "page_size": 10}));
        assert_eq!(
            serde_json::from_value::<ListActionsRequest>(json).unwrap(),
            req
        );
    }
}
