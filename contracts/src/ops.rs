//! The contract-call vocabulary: one [`MirrorOp`] per `AccountConfig` write, as the
//! appliance's outbox queues it (to mirror an API-mode write on chain) and as its indexer
//! reads it back from events (a ChainSecured account's own writes).
//!
//! The serde form is persisted (the appliance's `chain_outbox.op`, format 1): renaming a
//! variant or a field breaks existing databases.

use alloy::primitives::{Address, B256, U256};
use serde::{Deserialize, Serialize};
pub use usage_key_permissions::UsageKeyPermissions;

use crate::IAccountConfig;

/// The permissions of a usage key as the contract stores them (group ids; 0 = all). Its
/// serde form is `UsageKeyPermissions`' (the field names), persisted in the outbox.
pub type MirrorPermissions = UsageKeyPermissions<Vec<u64>>;

/// The contract's ABI struct, field for field; the group ids stay `uint256` (what a
/// caller does with one beyond `u64` is its own business).
impl From<IAccountConfig::UsageKeyPermissions> for UsageKeyPermissions<Vec<U256>> {
    fn from(p: IAccountConfig::UsageKeyPermissions) -> Self {
        Self {
            can_create_groups: p.canCreateGroups,
            can_delete_groups: p.canDeleteGroups,
            can_create_pkps: p.canCreatePkps,
            manage_ipfs_ids_in_groups: p.manageIpfsIdsInGroups,
            add_pkp_to_groups: p.addPkpToGroups,
            remove_pkp_from_groups: p.removePkpFromGroups,
            execute_in_groups: p.executeInGroups,
        }
    }
}

impl From<UsageKeyPermissions<Vec<U256>>> for IAccountConfig::UsageKeyPermissions {
    fn from(p: UsageKeyPermissions<Vec<U256>>) -> Self {
        Self {
            canCreateGroups: p.can_create_groups,
            canDeleteGroups: p.can_delete_groups,
            canCreatePkps: p.can_create_pkps,
            manageIpfsIdsInGroups: p.manage_ipfs_ids_in_groups,
            addPkpToGroups: p.add_pkp_to_groups,
            removePkpFromGroups: p.remove_pkp_from_groups,
            executeInGroups: p.execute_in_groups,
        }
    }
}

/// One `AccountConfig` call; the account (`apiKeyHash`) is stored beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MirrorOp {
    NewAccount {
        admin: Address,
        name: String,
        description: String,
    },
    SetUsageApiKey {
        usage_key_hash: B256,
        name: String,
        description: String,
        permissions: MirrorPermissions,
    },
    UpdateUsageApiKeyMetadata {
        usage_key_hash: B256,
        name: String,
        description: String,
    },
    RemoveUsageApiKey {
        usage_key_hash: B256,
    },
    /// `addGroup` (new) or `updateGroup`; pkp ids / cid hashes of zero mean "all".
    SetGroup {
        new: bool,
        group_id: u64,
        name: String,
        description: String,
        pkp_ids: Vec<B256>,
        cid_hashes: Vec<B256>,
    },
    RemoveGroup {
        group_id: u64,
    },
    AddPkpToGroup {
        group_id: u64,
        pkp_id: B256,
    },
    RemovePkpFromGroup {
        group_id: u64,
        pkp_id: B256,
    },
    AddActionToGroup {
        group_id: u64,
        cid_hash: B256,
    },
    RemoveActionFromGroup {
        group_id: u64,
        cid_hash: B256,
    },
    SetActionMetadata {
        cid_hash: B256,
        name: String,
        description: String,
    },
    DeleteAction {
        cid_hash: B256,
    },
    RegisterWallet {
        wallet: Address,
        derivation_path: B256,
        name: String,
        description: String,
    },
    /// `convertToChainSecuredAccount`: the account's last mirrored write.
    ConvertAccount {
        new_admin: Address,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Outbox rows written by earlier builds must keep decoding: these are the persisted
    /// forms (format 1), written out by hand from the serde attributes above.
    #[test]
    fn persisted_outbox_rows_keep_decoding() {
        let hash = format!("0x{}", "ab".repeat(32));
        let address = format!("0x{}", "12".repeat(20));
        let cases = [
            (
                format!(
                    r#"{{"op":"new_account","admin":"{address}","name":"n","description":"d"}}"#
                ),
                MirrorOp::NewAccount {
                    admin: address.parse().unwrap(),
                    name: "n".into(),
                    description: "d".into(),
                },
            ),
            (
                format!(
                    r#"{{"op":"set_usage_api_key","usage_key_hash":"{hash}","name":"k","description":"","permissions":{{"can_create_groups":true,"can_delete_groups":false,"can_create_pkps":false,"manage_ipfs_ids_in_groups":[0],"add_pkp_to_groups":[],"remove_pkp_from_groups":[7],"execute_in_groups":[1,2]}}}}"#
                ),
                MirrorOp::SetUsageApiKey {
                    usage_key_hash: hash.parse().unwrap(),
                    name: "k".into(),
                    description: String::new(),
                    permissions: MirrorPermissions {
                        can_create_groups: true,
                        can_delete_groups: false,
                        can_create_pkps: false,
                        manage_ipfs_ids_in_groups: vec![0],
                        add_pkp_to_groups: vec![],
                        remove_pkp_from_groups: vec![7],
                        execute_in_groups: vec![1, 2],
                    },
                },
            ),
            (
                format!(
                    r#"{{"op":"set_group","new":true,"group_id":5,"name":"g","description":"","pkp_ids":["{hash}"],"cid_hashes":[]}}"#
                ),
                MirrorOp::SetGroup {
                    new: true,
                    group_id: 5,
                    name: "g".into(),
                    description: String::new(),
                    pkp_ids: vec![hash.parse().unwrap()],
                    cid_hashes: vec![],
                },
            ),
            (
                r#"{"op":"remove_group","group_id":9}"#.to_owned(),
                MirrorOp::RemoveGroup { group_id: 9 },
            ),
            (
                format!(r#"{{"op":"convert_account","new_admin":"{address}"}}"#),
                MirrorOp::ConvertAccount {
                    new_admin: address.parse().unwrap(),
                },
            ),
        ];
        for (json, op) in cases {
            let decoded: MirrorOp = serde_json::from_str(&json).unwrap();
            assert_eq!(decoded, op, "{json}");
            let again: MirrorOp =
                serde_json::from_str(&serde_json::to_string(&op).unwrap()).unwrap();
            assert_eq!(again, op);
        }
    }

    /// Each field of the ABI struct meets the field of the same name, both ways: every
    /// array distinct, and each flag alone set once.
    #[test]
    fn abi_permissions_convert_field_for_field() {
        let ids = |id: u64| vec![U256::from(id)];
        for flag in 0..3 {
            let p = UsageKeyPermissions {
                can_create_groups: flag == 0,
                can_delete_groups: flag == 1,
                can_create_pkps: flag == 2,
                manage_ipfs_ids_in_groups: ids(1),
                add_pkp_to_groups: ids(2),
                remove_pkp_from_groups: ids(3),
                execute_in_groups: ids(4),
            };
            let abi = IAccountConfig::UsageKeyPermissions::from(p.clone());
            assert_eq!(
                [abi.canCreateGroups, abi.canDeleteGroups, abi.canCreatePkps],
                [flag == 0, flag == 1, flag == 2]
            );
            assert_eq!(abi.manageIpfsIdsInGroups, ids(1));
            assert_eq!(abi.addPkpToGroups, ids(2));
            assert_eq!(abi.removePkpFromGroups, ids(3));
            assert_eq!(abi.executeInGroups, ids(4));
            assert_eq!(UsageKeyPermissions::from(abi), p);
        }
    }
}
