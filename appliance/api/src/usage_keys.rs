//! Usage API keys: scoped, rotatable keys that only the account key may manage.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{PagingParams, UsageKeyRef, WireU64};

pub use usage_key_permissions::UsageKeyPermissions;

/// A usage key's permissions as the fields of a request or an answer carry them.
pub type WirePermissions = UsageKeyPermissions<Vec<WireU64>>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddUsageApiKeyRequest {
    #[schema(example = "ci-runner", schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
    #[serde(default)]
    pub can_create_groups: bool,
    #[serde(default)]
    pub can_delete_groups: bool,
    #[serde(default)]
    pub can_create_pkps: bool,
    /// Groups where the key may add and remove actions (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub manage_ipfs_ids_in_groups: Vec<WireU64>,
    /// Groups where the key may add wallets (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub add_pkp_to_groups: Vec<WireU64>,
    /// Groups where the key may remove wallets (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub remove_pkp_from_groups: Vec<WireU64>,
    /// Groups where the key may execute actions (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub execute_in_groups: Vec<WireU64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AddUsageApiKeyResponse {
    pub success: bool,
    /// The key: standard base64 of 32 random bytes. Shown once.
    pub usage_api_key: String,
    /// Its identity, `0x` + keccak256 of the 32 key bytes.
    pub api_key_hash: String,
}

/// The query of `list_api_keys`: paging only.
pub type ListApiKeysRequest = PagingParams;

/// A usage key as listed: its hash and metadata, never its value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsageKeyItem {
    /// The key's id (decimal string).
    pub id: String,
    pub api_key_hash: String,
    pub name: String,
    pub description: String,
    pub can_create_groups: bool,
    pub can_delete_groups: bool,
    pub can_create_pkps: bool,
    #[schema(value_type = Vec<String>)]
    pub manage_ipfs_ids_in_groups: Vec<WireU64>,
    #[schema(value_type = Vec<String>)]
    pub add_pkp_to_groups: Vec<WireU64>,
    #[schema(value_type = Vec<String>)]
    pub remove_pkp_from_groups: Vec<WireU64>,
    #[schema(value_type = Vec<String>)]
    pub execute_in_groups: Vec<WireU64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateUsageApiKeyRequest {
    /// The key to update: its value, or its `0x` hash.
    pub usage_api_key: UsageKeyRef,
    /// New name; kept when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::text::optional_name)]
    pub name: Option<String>,
    /// New description; kept when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::text::optional_description)]
    pub description: Option<String>,
    // The complete new permission set: it replaces the old one, and omitted fields
    // are not granted.
    #[serde(default)]
    pub can_create_groups: bool,
    #[serde(default)]
    pub can_delete_groups: bool,
    #[serde(default)]
    pub can_create_pkps: bool,
    /// Groups where the key may add and remove actions (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub manage_ipfs_ids_in_groups: Vec<WireU64>,
    /// Groups where the key may add wallets (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub add_pkp_to_groups: Vec<WireU64>,
    /// Groups where the key may remove wallets (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub remove_pkp_from_groups: Vec<WireU64>,
    /// Groups where the key may execute actions (`0` = all groups).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub execute_in_groups: Vec<WireU64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateUsageApiKeyMetadataRequest {
    /// The key: its value, or its `0x` hash.
    pub usage_api_key: UsageKeyRef,
    #[schema(schema_with = crate::text::name)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = crate::text::description)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RemoveUsageApiKeyRequest {
    /// The key: its value, or its `0x` hash.
    pub usage_api_key: UsageKeyRef,
}

/// [`WirePermissions`] from and into the seven permission fields, for the three types that
/// carry them. Each type spells the fields out rather than `#[serde(flatten)]`ing a
/// `WirePermissions`: a bad value in a flattened field gets an error that does not name
/// the field, and the OpenAPI document would describe the types differently.
macro_rules! permission_fields {
    ($($wire:ty),+) => {$(
        impl $wire {
            /// The permission fields.
            pub fn permissions(&self) -> WirePermissions {
                UsageKeyPermissions {
                    can_create_groups: self.can_create_groups,
                    can_delete_groups: self.can_delete_groups,
                    can_create_pkps: self.can_create_pkps,
                    manage_ipfs_ids_in_groups: self.manage_ipfs_ids_in_groups.clone(),
                    add_pkp_to_groups: self.add_pkp_to_groups.clone(),
                    remove_pkp_from_groups: self.remove_pkp_from_groups.clone(),
                    execute_in_groups: self.execute_in_groups.clone(),
                }
            }

            /// The same value with its permission fields set to `p`.
            pub fn with_permissions(self, p: WirePermissions) -> Self {
                let UsageKeyPermissions {
                    can_create_groups,
                    can_delete_groups,
                    can_create_pkps,
                    manage_ipfs_ids_in_groups,
                    add_pkp_to_groups,
                    remove_pkp_from_groups,
                    execute_in_groups,
                } = p;
                Self {
                    can_create_groups,
                    can_delete_groups,
                    can_create_pkps,
                    manage_ipfs_ids_in_groups,
                    add_pkp_to_groups,
                    remove_pkp_from_groups,
                    execute_in_groups,
                    ..self
                }
            }
        }
    )+};
}

permission_fields!(
    AddUsageApiKeyRequest,
    UpdateUsageApiKeyRequest,
    UsageKeyItem
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each permission field of the three wire types meets the `WirePermissions` field of
    /// the same name, both ways: every array distinct, each flag alone set once.
    #[test]
    fn permission_fields_convert_by_name() {
        fn check<T: Default + Serialize>(
            p: &WirePermissions,
            with: fn(T, WirePermissions) -> T,
            get: fn(&T) -> WirePermissions,
        ) {
            let wire = with(T::default(), p.clone());
            assert_eq!(&get(&wire), p);
            let wire = serde_json::to_value(&wire).unwrap();
            let fields = serde_json::to_value(p).unwrap();
            for (name, value) in fields.as_object().unwrap() {
                assert_eq!(&wire[name], value, "{name}");
            }
        }
        for flag in 0..3 {
            let p = WirePermissions {
                can_create_groups: flag == 0,
                can_delete_groups: flag == 1,
                can_create_pkps: flag == 2,
                manage_ipfs_ids_in_groups: vec![WireU64(1)],
                add_pkp_to_groups: vec![WireU64(2), WireU64(22)],
                remove_pkp_from_groups: vec![WireU64(3)],
                execute_in_groups: vec![WireU64(4)],
            };
            check(
                &p,
                AddUsageApiKeyRequest::with_permissions,
                AddUsageApiKeyRequest::permissions,
            );
            check(
                &p,
                UpdateUsageApiKeyRequest::with_permissions,
                UpdateUsageApiKeyRequest::permissions,
            );
            check(
                &p,
                UsageKeyItem::with_permissions,
                UsageKeyItem::permissions,
            );
        }
    }

    #[test]
    fn an_update_keeps_what_it_does_not_name() {
        let req = UpdateUsageApiKeyRequest {
            usage_api_key: "0xab".into(),
            execute_in_groups: vec![WireU64(3)],
            ..Default::default()
        };
        let json = serde_json::to_value(&req).unwrap();
        assert!(json.get("name").is_none() && json.get("description").is_none());
        assert_eq!(json["execute_in_groups"], serde_json::json!(["3"]));
        assert_eq!(
            serde_json::from_value::<UpdateUsageApiKeyRequest>(json).unwrap(),
            req
        );
    }

    #[test]
    fn group_ids_in_any_form() {
        let req: AddUsageApiKeyRequest =
            serde_json::from_str(r#"{"name":"ci","execute_in_groups":[1,"2","0x3"]}"#).unwrap();
        assert_eq!(
            req.execute_in_groups,
            vec![WireU64(1), WireU64(2), WireU64(3)]
        );
        assert!(req.add_pkp_to_groups.is_empty() && !req.can_create_groups);
    }
}
