//! Applying `AccountConfig` events to the local store (called by the indexer).
//!
//! Only ChainSecured accounts are changed here: API-mode accounts are the service's own
//! and their events are the mirror of writes already in the store. Every
//! batch of events is applied together with the indexer's cursor in one transaction, so
//! an event is applied exactly once even across crashes.

use alloy::primitives::{Address, B256};
use rusqlite::{OptionalExtension, Transaction, params};

use chain_contracts::ops::{MirrorOp, MirrorPermissions};

use super::actions::{self, CidHash};
use super::base::{AccountId, AccountMode, WalletIdentity};
use super::outbox::set_cursor;
use super::wallets::{self, WalletRef};
use super::{Result, Store, now_unix, usage_keys};
use crate::api_keys::KeyHash;
use crate::authz::{GroupSet, Permissions};
use keyservice_api::PkpId;

/// What changed on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainChange {
    /// `AccountCreated`.
    Account {
        admin: Address,
        mode: AccountMode,
        name: String,
        description: String,
    },
    /// `AccountConverted`: the account is ChainSecured from now on.
    Converted { new_admin: Address },
    /// `WalletRegistered`, with the identity keyservice derived for the path (the indexer
    /// checked that it matches the registered address).
    Wallet {
        identity: WalletIdentity,
        name: String,
        description: String,
    },
    /// Any other change, in the same shape as the service's own mirror writes.
    Op(MirrorOp),
}

/// One event of one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEvent {
    pub api_key_hash: B256,
    pub change: ChainChange,
    /// Where it came from, for the log.
    pub block: u64,
}

/// The ChainSecured account `hash`, if there is one (`None` for an API-mode account).
fn chain_secured_account(tx: &Transaction<'_>, hash: &B256) -> Result<Option<AccountId>> {
    let row: Option<(i64, bool)> = tx
        .prepare_cached("SELECT id, managed FROM accounts WHERE api_key_hash = ?1")?
        .query_row([hash.as_slice()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        Some((id, managed)) if AccountMode::from_column(managed) == AccountMode::ChainSecured => {
            Some(AccountId(id))
        }
        _ => None,
    })
}

fn group_row(id: u64) -> Option<i64> {
    i64::try_from(id).ok()
}

/// The wallet row of `account` with `pkp_id`, if registered.
fn wallet_row(tx: &Transaction<'_>, account: AccountId, pkp: &B256) -> Result<Option<i64>> {
    let wallet = WalletRef::Pkp(PkpId(pkp.0));
    Ok(wallets::find(tx, account, &wallet)?.map(|w| w.row))
}

/// The action row of `account` with `cid_hash`, registering it (CID unknown) if needed.
fn action_row(tx: &Transaction<'_>, account: AccountId, cid_hash: &B256) -> Result<i64> {
    let hash = CidHash(cid_hash.0);
    if let Some(id) = actions::find(tx, account, &hash)? {
        return Ok(id);
    }
    // The chain carries only the CID's hash; the CID itself is known if another account
    // registered it, else learnt when code with it is run or hashed here.
    let known_cid: String = tx
        .prepare_cached(
            "SELECT ipfs_cid FROM actions WHERE cid_hash = ?1 AND ipfs_cid != '' LIMIT 1",
        )?
        .query_row([cid_hash.as_slice()], |r| r.get(0))
        .optional()?
        .unwrap_or_default();
    Ok(actions::ensure(tx, account, &known_cid, &hash, "", "")?.0)
}

fn set_group_members(
    tx: &Transaction<'_>,
    account: AccountId,
    group: i64,
    pkp_ids: &[B256],
    cid_hashes: &[B256],
) -> Result<()> {
    let all_wallets = pkp_ids.contains(&B256::ZERO);
    let all_actions = cid_hashes.contains(&B256::ZERO);
    tx.execute(
        "UPDATE groups SET all_wallets = ?2, all_actions = ?3 WHERE id = ?1",
        params![group, all_wallets, all_actions],
    )?;
    tx.execute("DELETE FROM group_wallets WHERE group_id = ?1", [group])?;
    tx.execute("DELETE FROM group_actions WHERE group_id = ?1", [group])?;
    for pkp in pkp_ids.iter().filter(|p| !p.is_zero()) {
        if let Some(wallet) = wallet_row(tx, account, pkp)? {
            tx.execute(
                "INSERT OR IGNORE INTO group_wallets (group_id, wallet_id) VALUES (?1, ?2)",
                [group, wallet],
            )?;
        } else {
            tracing::warn!(group, pkp_id = %pkp, "group names a wallet the account has not registered; ignored");
        }
    }
    for cid in cid_hashes.iter().filter(|c| !c.is_zero()) {
        let action = action_row(tx, account, cid)?;
        tx.execute(
            "INSERT OR IGNORE INTO group_actions (group_id, action_id) VALUES (?1, ?2)",
            [group, action],
        )?;
    }
    Ok(())
}

fn group_of(tx: &Transaction<'_>, account: AccountId, group_id: u64) -> Result<Option<i64>> {
    let Some(id) = group_row(group_id) else {
        return Ok(None);
    };
    Ok(tx
        .prepare_cached("SELECT id FROM groups WHERE id = ?1 AND account_id = ?2")?
        .query_row(params![id, account.0], |r| r.get(0))
        .optional()?)
}

fn set_usage_key(
    tx: &Transaction<'_>,
    account: AccountId,
    hash: &B256,
    name: &str,
    description: &str,
    p: &MirrorPermissions,
) -> Result<()> {
    let permissions = Permissions {
        can_create_groups: p.can_create_groups,
        can_delete_groups: p.can_delete_groups,
        can_create_pkps: p.can_create_pkps,
        manage_ipfs_ids_in_groups: GroupSet::new(p.manage_ipfs_ids_in_groups.clone()),
        add_pkp_to_groups: GroupSet::new(p.add_pkp_to_groups.clone()),
        remove_pkp_from_groups: GroupSet::new(p.remove_pkp_from_groups.clone()),
        execute_in_groups: GroupSet::new(p.execute_in_groups.clone()),
    };
    let key = KeyHash(hash.0);
    if !usage_keys::upsert(tx, account, &key, name, description, &permissions)? {
        tracing::warn!(usage_key = %hash, "usage key already belongs to another account; ignored");
    }
    Ok(())
}

fn apply_op(tx: &Transaction<'_>, account: AccountId, op: &MirrorOp) -> Result<()> {
    match op {
        MirrorOp::NewAccount { .. }
        | MirrorOp::RegisterWallet { .. }
        | MirrorOp::ConvertAccount { .. } => {}
        MirrorOp::SetUsageApiKey {
            usage_key_hash,
            name,
            description,
            permissions,
        } => set_usage_key(tx, account, usage_key_hash, name, description, permissions)?,
        MirrorOp::UpdateUsageApiKeyMetadata {
            usage_key_hash,
            name,
            description,
        } => {
            tx.execute(
                "UPDATE usage_keys SET name = ?3, description = ?4, updated_at = ?5
                 WHERE account_id = ?1 AND key_hash = ?2",
                params![
                    account.0,
                    usage_key_hash.as_slice(),
                    name,
                    description,
                    now_unix()
                ],
            )?;
        }
        MirrorOp::RemoveUsageApiKey { usage_key_hash } => {
            tx.execute(
                "DELETE FROM usage_keys WHERE account_id = ?1 AND key_hash = ?2",
                params![account.0, usage_key_hash.as_slice()],
            )?;
        }
        MirrorOp::SetGroup {
            new,
            group_id,
            name,
            description,
            pkp_ids,
            cid_hashes,
        } => {
            let existing = group_of(tx, account, *group_id)?;
            let group = match (existing, *new, group_row(*group_id)) {
                (Some(id), _, _) => {
                    tx.execute(
                        "UPDATE groups SET name = ?2, description = ?3, updated_at = ?4 WHERE id = ?1",
                        params![id, name, description, now_unix()],
                    )?;
                    id
                }
                (None, true, Some(id)) => {
                    let now = now_unix();
                    let inserted = tx.execute(
                        "INSERT OR IGNORE INTO groups (id, account_id, name, description, created_at, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                        params![id, account.0, name, description, now],
                    )?;
                    if inserted == 0 {
                        tracing::warn!(group_id, "group id already used locally; ignored");
                        return Ok(());
                    }
                    id
                }
                _ => {
                    tracing::warn!(
                        group_id,
                        "update of a group this account does not have; ignored"
                    );
                    return Ok(());
                }
            };
            set_group_members(tx, account, group, pkp_ids, cid_hashes)?;
        }
        MirrorOp::RemoveGroup { group_id } => {
            if let Some(id) = group_of(tx, account, *group_id)? {
                tx.execute("DELETE FROM groups WHERE id = ?1", [id])?;
            }
        }
        MirrorOp::AddPkpToGroup { group_id, pkp_id } => {
            if let (Some(group), Some(wallet)) = (
                group_of(tx, account, *group_id)?,
                wallet_row(tx, account, pkp_id)?,
            ) {
                tx.execute(
                    "INSERT OR IGNORE INTO group_wallets (group_id, wallet_id) VALUES (?1, ?2)",
                    [group, wallet],
                )?;
            }
        }
        MirrorOp::RemovePkpFromGroup { group_id, pkp_id } => {
            if let (Some(group), Some(wallet)) = (
                group_of(tx, account, *group_id)?,
                wallet_row(tx, account, pkp_id)?,
            ) {
                tx.execute(
                    "DELETE FROM group_wallets WHERE group_id = ?1 AND wallet_id = ?2",
                    [group, wallet],
                )?;
            }
        }
        MirrorOp::AddActionToGroup { group_id, cid_hash } => {
            if let Some(group) = group_of(tx, account, *group_id)? {
                let action = action_row(tx, account, cid_hash)?;
                tx.execute(
                    "INSERT OR IGNORE INTO group_actions (group_id, action_id) VALUES (?1, ?2)",
                    [group, action],
                )?;
            }
        }
        MirrorOp::RemoveActionFromGroup { group_id, cid_hash } => {
            if let Some(group) = group_of(tx, account, *group_id)? {
                tx.execute(
                    "DELETE FROM group_actions WHERE group_id = ?1 AND action_id IN
                        (SELECT id FROM actions WHERE account_id = ?2 AND cid_hash = ?3)",
                    params![group, account.0, cid_hash.as_slice()],
                )?;
            }
        }
        MirrorOp::SetActionMetadata {
            cid_hash,
            name,
            description,
        } => {
            let action = action_row(tx, account, cid_hash)?;
            tx.execute(
                "UPDATE actions SET name = ?2, description = ?3, updated_at = ?4 WHERE id = ?1",
                params![action, name, description, now_unix()],
            )?;
        }
        MirrorOp::DeleteAction { cid_hash } => {
            tx.execute(
                "DELETE FROM actions WHERE account_id = ?1 AND cid_hash = ?2",
                params![account.0, cid_hash.as_slice()],
            )?;
        }
    }
    Ok(())
}

fn apply(tx: &Transaction<'_>, event: &ChainEvent) -> Result<()> {
    let hash = &event.api_key_hash;
    match &event.change {
        ChainChange::Account {
            admin,
            mode,
            name,
            description,
        } => {
            if *mode == AccountMode::Api {
                return Ok(()); // the service's own account, already in the store
            }
            let admin = admin.to_checksum(None);
            tx.execute(
                "INSERT OR IGNORE INTO accounts (api_key_hash, name, description, wallet_address, managed,
                    admin_wallet_address, created_at)
                 VALUES (?1, ?2, ?3, ?4, 0, ?4, ?5)",
                params![hash.as_slice(), name, description, admin, now_unix()],
            )?;
        }
        ChainChange::Converted { new_admin } => {
            tx.execute(
                "UPDATE accounts SET managed = 0, admin_wallet_address = ?2 WHERE api_key_hash = ?1",
                params![hash.as_slice(), new_admin.to_checksum(None)],
            )?;
        }
        ChainChange::Wallet {
            identity,
            name,
            description,
        } => {
            let Some(account) = chain_secured_account(tx, hash)? else {
                return Ok(());
            };
            let owner: Option<Option<i64>> = tx
                .prepare_cached("SELECT account_id FROM wallets WHERE derivation_path = ?1")?
                .query_row([identity.derivation_path.0.as_slice()], |r| r.get(0))
                .optional()?;
            match owner {
                None => {
                    wallets::insert(tx, Some(account), identity, name, description)?;
                }
                Some(None) => {
                    tx.execute(
                        "UPDATE wallets SET account_id = ?2, name = ?3, description = ?4 WHERE derivation_path = ?1",
                        params![identity.derivation_path.0.as_slice(), account.0, name, description],
                    )?;
                }
                Some(Some(other)) if other == account.0 => {}
                Some(Some(_)) => {
                    // Another account's key: registering its path must not hand it over.
                    tracing::warn!(
                        block = event.block,
                        "registration of a wallet that belongs to another account; refused"
                    );
                }
            }
        }
        ChainChange::Op(op) => {
            let Some(account) = chain_secured_account(tx, hash)? else {
                return Ok(());
            };
            apply_op(tx, account, op)?;
        }
    }
    Ok(())
}

impl Store {
    /// Applies `events` (in chain order) and moves the cursor `name` to `next_block`, in
    /// one transaction.
    pub async fn apply_chain_events(
        &self,
        events: Vec<ChainEvent>,
        cursor: String,
        next_block: u64,
    ) -> Result<()> {
        self.write(move |tx| {
            for event in &events {
                apply(tx, event)?;
            }
            set_cursor(tx, &cursor, next_block)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_keys::KeyHash;
    use crate::authz::{GroupId, GroupSet, Permissions};
    use crate::store::outbox::OutboxEntry;
    use crate::store::{
        Charge, GroupSpec, InitialCredit, NewAccount, NewUsageKey, Permitted, ResolvedKey,
    };
    use keyservice_api::{DerivationPath, PkpId};

    fn identity(n: u8) -> WalletIdentity {
        WalletIdentity {
            pkp_id: PkpId([n; 32]),
            address: keyservice_api::Address([n; 20]),
            derivation_path: DerivationPath([n; 32]),
        }
    }

    async fn api_mode_account(store: &Store) -> AccountId {
        store
            .create_account(
                NewAccount {
                    api_key_hash: KeyHash([1; 32]),
                    name: "api".into(),
                    description: "d".into(),
                    email: None,
                    wallet: identity(2),
                },
                InitialCredit::NONE,
            )
            .await
            .unwrap()
    }

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
    }

    fn ops(entries: &[OutboxEntry]) -> Vec<&str> {
        entries
            .iter()
            .map(|e| match &e.op {
                MirrorOp::NewAccount { .. } => "new_account",
                MirrorOp::RegisterWallet { .. } => "register_wallet",
                MirrorOp::SetUsageApiKey { .. } => "set_usage_api_key",
                MirrorOp::SetGroup { new: true, .. } => "add_group",
                MirrorOp::SetGroup { new: false, .. } => "update_group",
                MirrorOp::RemoveGroup { .. } => "remove_group",
                MirrorOp::SetActionMetadata { .. } => "set_action_metadata",
                MirrorOp::AddActionToGroup { .. } => "add_action_to_group",
                _ => "other",
            })
            .collect()
    }

    #[tokio::test]
    async fn api_mode_writes_queue_their_mirror_in_order_and_failed_writes_queue_nothing() {
        let (_dir, store) = open();
        let account = api_mode_account(&store).await;
        let key = KeyHash([9; 32]);
        store
            .add_usage_key(
                account,
                NewUsageKey {
                    key_hash: key,
                    name: "k".into(),
                    description: String::new(),
                    permissions: Permissions {
                        execute_in_groups: GroupSet::new(vec![7]),
                        ..Default::default()
                    },
                },
                Charge::free(),
            )
            .await
            .unwrap();
        // A duplicate key is refused and must leave no outbox entry behind.
        assert!(
            store
                .add_usage_key(
                    account,
                    NewUsageKey {
                        key_hash: key,
                        name: "k".into(),
                        description: String::new(),
                        permissions: Permissions::default(),
                    },
                    Charge::free(),
                )
                .await
                .is_err()
        );
        let group = store
            .add_group(
                account,
                GroupSpec {
                    name: "g".into(),
                    description: String::new(),
                    wallets: Permitted::All,
                    actions: Permitted::Only(vec![]),
                },
                Charge::free(),
            )
            .await
            .unwrap();
        store
            .add_action_to_group(
                account,
                group,
                "QmX".into(),
                crate::store::CidHash([5; 32]),
                Charge::free(),
            )
            .await
            .unwrap();
        let entries = store.outbox_pending(100).await.unwrap();
        assert_eq!(
            ops(&entries),
            [
                "new_account",
                "register_wallet",
                "set_usage_api_key",
                "add_group",
                "set_action_metadata",
                "add_action_to_group"
            ]
        );
        assert!(entries.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(
            entries
                .iter()
                .all(|e| e.api_key_hash == B256::from([1; 32]))
        );
        match &entries[3].op {
            MirrorOp::SetGroup {
                group_id, pkp_ids, ..
            } => {
                assert_eq!(*group_id, group.0);
                assert_eq!(
                    pkp_ids,
                    &vec![B256::ZERO],
                    "all wallets mirrors as pkp id 0"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn chain_secured_state_is_applied_once_with_the_cursor() {
        let (_dir, store) = open();
        let mine = api_mode_account(&store).await;
        let admin = Address::repeat_byte(0xAA);
        let hash = B256::repeat_byte(0x11);
        let usage = KeyHash([0x22; 32]);
        let chain_group = crate::store::groups::CHAIN_GROUP_ID_BASE;
        let events = vec![
            ChainEvent {
                api_key_hash: hash,
                change: ChainChange::Account {
                    admin,
                    mode: AccountMode::ChainSecured,
                    name: "cs".into(),
                    description: String::new(),
                },
                block: 5,
            },
            ChainEvent {
                api_key_hash: hash,
                change: ChainChange::Op(MirrorOp::SetGroup {
                    new: true,
                    group_id: chain_group,
                    name: "g".into(),
                    description: String::new(),
                    pkp_ids: vec![],
                    cid_hashes: vec![B256::ZERO],
                }),
                block: 5,
            },
            ChainEvent {
                api_key_hash: hash,
                change: ChainChange::Op(MirrorOp::SetUsageApiKey {
                    usage_key_hash: B256::from(usage.0),
                    name: "u".into(),
                    description: String::new(),
                    permissions: MirrorPermissions {
                        can_create_groups: false,
                        can_delete_groups: false,
                        can_create_pkps: false,
                        manage_ipfs_ids_in_groups: vec![],
                        add_pkp_to_groups: vec![],
                        remove_pkp_from_groups: vec![],
                        execute_in_groups: vec![chain_group],
                    },
                }),
                block: 6,
            },
            // Someone registering the API-mode account's wallet path: refused.
            ChainEvent {
                api_key_hash: hash,
                change: ChainChange::Wallet {
                    identity: identity(2),
                    name: "stolen".into(),
                    description: String::new(),
                },
                block: 6,
            },
            // Events of an API-mode account are the service's own mirror: ignored.
            ChainEvent {
                api_key_hash: B256::from([1; 32]),
                change: ChainChange::Op(MirrorOp::RemoveUsageApiKey {
                    usage_key_hash: B256::from(usage.0),
                }),
                block: 6,
            },
        ];
        store
            .apply_chain_events(events.clone(), "test".into(), 7)
            .await
            .unwrap();
        // Applying the same range again (a crash before the cursor moved cannot happen,
        // but a replay must be harmless) changes nothing.
        store
            .apply_chain_events(events, "test".into(), 7)
            .await
            .unwrap();
        assert_eq!(store.chain_cursor("test".into()).await.unwrap(), Some(7));

        let Some(ResolvedKey::Usage {
            account,
            permissions,
            ..
        }) = store.resolve_key(usage).await.unwrap()
        else {
            panic!("the chain's usage key does not resolve");
        };
        assert_ne!(account, mine);
        assert_eq!(permissions.execute_in_groups.ids(), &[chain_group]);
        let record = store.account(account).await.unwrap();
        assert_eq!(record.mode, AccountMode::ChainSecured);
        let groups = store
            .list_groups(
                account,
                crate::store::Page {
                    number: 0,
                    size: 100,
                },
            )
            .await
            .unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].id, GroupId(chain_group));
        assert_eq!(groups[0].actions, Permitted::All);
        assert!(
            store
                .list_wallets(
                    account,
                    crate::store::Page {
                        number: 0,
                        size: 100
                    }
                )
                .await
                .unwrap()
                .is_empty(),
            "another account's wallet must not be handed over"
        );
        // The chain's high group id does not move the service's own sequence.
        let next = store
            .add_group(
                mine,
                GroupSpec {
                    name: "local".into(),
                    description: String::new(),
                    wallets: Permitted::Only(vec![]),
                    actions: Permitted::Only(vec![]),
                },
                Charge::free(),
            )
            .await
            .unwrap();
        assert!(next.0 < chain_group, "{next:?}");
        // Nothing was queued for the ChainSecured account.
        assert!(
            store
                .outbox_pending(100)
                .await
                .unwrap()
                .iter()
                .all(|e| e.api_key_hash == B256::from([1; 32]))
        );
    }
}
