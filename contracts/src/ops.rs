//! The contract-call vocabulary: one [`MirrorOp`] per `AccountConfig` write, as the
//! appliance's outbox queues it (to mirror an API-mode write on chain) and as its indexer
//! reads it back from events (a ChainSecured account's own writes).
//!
//! The serde form is persisted (the appliance's `chain_outbox.op`, format 1): renaming a
//! variant or a field breaks existing databases.

use alloy::primitives::{Address, B256};
use serde::{Deserialize, Serialize};

/// The permissions of a usage key as the contract stores them (group ids; 0 = all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorPermissions {
    pub can_create_groups: bool,
    pub can_delete_groups: bool,
    pub can_create_pkps: bool,
    pub manage_ipfs_ids_in_groups: Vec<u64>,
    pub add_pkp_to_groups: Vec<u64>,
    pub remove_pkp_from_groups: Vec<u64>,
    pub execute_in_groups: Vec<u64>,
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
