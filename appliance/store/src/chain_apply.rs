//! Applying `AccountConfig` events to the local store (called by the indexer).
//!
//! Only ChainSecured accounts are changed here: API-mode accounts are the service's own
//! and their events are the mirror of writes already in the store. Every
//! batch of events is applied together with the indexer's cursor in one transaction, so
//! an event is applied exactly once even across crashes.

use alloy::primitives::{Address, B256};

use chain_contracts::ops::{MirrorOp, MirrorPermissions};

use super::actions::{self, CidHash};
use super::base::{AccountId, AccountMode, WalletIdentity};
use super::integrity::{
    self, ACCOUNTS, ACTIONS, GROUP_ACTIONS, GROUP_WALLETS, GROUPS, MINTED_USAGE_KEYS, USAGE_KEYS,
    WALLETS, columns,
};
use super::outbox::{cursor_at, set_cursor};
use super::sql::{Conn, params};
use super::wallets::{self, WalletRef};
use super::{Result, Store, now_unix, usage_keys};
use appliance_domain::api_keys::KeyHash;
use appliance_domain::authz::{GroupSet, Permissions};
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
    /// `UsageApiKeySet`: a usage key created or fully replaced, stopping at `expires_at`
    /// (the on-chain `expiration` in Unix seconds; `None` for 0, never).
    UsageKey {
        usage_key_hash: B256,
        name: String,
        description: String,
        permissions: MirrorPermissions,
        expires_at: Option<i64>,
    },
    /// Any other change, in the same shape as the service's own mirror writes.
    Op(MirrorOp),
}

/// A ChainSecured account and its admin wallet.
#[derive(Debug, Clone, Copy)]
struct Secured {
    account: AccountId,
    admin: Option<Address>,
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
fn chain_secured_account(tx: Conn<'_>, hash: &B256) -> Result<Option<Secured>> {
    let row: Option<(i64, bool, Option<String>)> = tx.query_opt(
        &format!(
            "SELECT id, managed, admin_wallet_address, {} FROM accounts WHERE api_key_hash = ?1",
            ACCOUNTS.select("")
        ),
        params![hash.as_slice()],
        |r| {
            r.seal(3, &ACCOUNTS)?;
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        },
    )?;
    Ok(match row {
        Some((id, managed, admin))
            if AccountMode::from_column(managed) == AccountMode::ChainSecured =>
        {
            Some(Secured {
                account: AccountId(id),
                admin: admin.and_then(|a| a.parse().ok()),
            })
        }
        _ => None,
    })
}

/// Whether `minter` (a stored 20-byte address) is the account's admin.
fn minted_by_admin(secured: &Secured, minter: &[u8]) -> bool {
    secured
        .admin
        .is_some_and(|admin| admin.as_slice() == minter)
}

fn group_row(id: u64) -> Option<i64> {
    i64::try_from(id).ok()
}

/// The wallet row of `account` with `pkp_id`, if registered.
fn wallet_row(tx: Conn<'_>, account: AccountId, pkp: &B256) -> Result<Option<i64>> {
    let wallet = WalletRef::Pkp(PkpId(pkp.0));
    Ok(wallets::find(tx, account, &wallet)?.map(|w| w.row))
}

/// The action row of `account` with `cid_hash`, registering it (CID unknown) if needed.
fn action_row(tx: Conn<'_>, account: AccountId, cid_hash: &B256) -> Result<i64> {
    let hash = CidHash(cid_hash.0);
    if let Some(id) = actions::find(tx, account, &hash)? {
        return Ok(id);
    }
    // The chain carries only the CID's hash; the CID itself is known if another account
    // registered it, else learnt when code with it is run or hashed here.
    let known_cid: String = tx
        .query_opt(
            &format!(
                "SELECT ipfs_cid, {} FROM actions WHERE cid_hash = ?1 AND ipfs_cid != '' LIMIT 1",
                ACTIONS.select("")
            ),
            params![cid_hash.as_slice()],
            |r| {
                r.seal(1, &ACTIONS)?;
                r.get(0)
            },
        )?
        .unwrap_or_default();
    Ok(actions::ensure(tx, account, &known_cid, &hash, "", "")?.0)
}

fn set_group_members(
    tx: Conn<'_>,
    account: AccountId,
    group: i64,
    pkp_ids: &[B256],
    cid_hashes: &[B256],
) -> Result<()> {
    let all_wallets = pkp_ids.contains(&B256::ZERO);
    let all_actions = cid_hashes.contains(&B256::ZERO);
    integrity::update_eq(tx, &GROUPS, columns![("id", group)], |row| {
        row.set("all_wallets", &all_wallets)?;
        row.set("all_actions", &all_actions)?;
        Ok(true)
    })?;
    integrity::delete(tx, &GROUP_WALLETS, "group_id = ?1", params![group])?;
    integrity::delete(tx, &GROUP_ACTIONS, "group_id = ?1", params![group])?;
    for pkp in pkp_ids.iter().filter(|p| !p.is_zero()) {
        if let Some(wallet) = wallet_row(tx, account, pkp)? {
            integrity::insert_or_ignore(
                tx,
                &GROUP_WALLETS,
                columns![("group_id", group), ("wallet_id", wallet)],
            )?;
        } else {
            tracing::warn!(group, pkp_id = %pkp, "group names a wallet the account has not registered; ignored");
        }
    }
    for cid in cid_hashes.iter().filter(|c| !c.is_zero()) {
        let action = action_row(tx, account, cid)?;
        integrity::insert_or_ignore(
            tx,
            &GROUP_ACTIONS,
            columns![("group_id", group), ("action_id", action)],
        )?;
    }
    Ok(())
}

fn group_of(tx: Conn<'_>, account: AccountId, group_id: u64) -> Result<Option<i64>> {
    let Some(id) = group_row(group_id) else {
        return Ok(None);
    };
    Ok(tx.query_opt(
        &format!(
            "SELECT id, {} FROM groups WHERE id = ?1 AND account_id = ?2",
            GROUPS.select("")
        ),
        params![id, account.0],
        |r| {
            r.seal(1, &GROUPS)?;
            r.get(0)
        },
    )?)
}

#[allow(clippy::too_many_arguments)]
fn set_usage_key(
    tx: Conn<'_>,
    secured: &Secured,
    hash: &B256,
    name: &str,
    description: &str,
    p: &MirrorPermissions,
    expires_at: Option<i64>,
    block: u64,
) -> Result<()> {
    let account = secured.account;
    // A key minted for a wallet owner joins only the account that owner administers.
    let minter: Option<Vec<u8>> = tx.query_opt(
        &format!(
            "SELECT minted_by, {} FROM minted_usage_keys WHERE key_hash = ?1",
            MINTED_USAGE_KEYS.select("")
        ),
        params![hash.as_slice()],
        |r| {
            r.seal(1, &MINTED_USAGE_KEYS)?;
            r.get(0)
        },
    )?;
    if let Some(minter) = minter
        && !minted_by_admin(secured, &minter)
    {
        tracing::info!(
            block,
            account = account.0,
            usage_key = %hash,
            "registration of a usage key minted for another wallet; ignored"
        );
        return Ok(());
    }
    let permissions: Permissions = p.clone().map_sets(GroupSet::new);
    let key = KeyHash(hash.0);
    if !usage_keys::upsert(
        tx,
        account,
        &key,
        name,
        description,
        &permissions,
        expires_at,
    )? {
        tracing::warn!(usage_key = %hash, "usage key already belongs to another account; ignored");
    }
    Ok(())
}

fn apply_op(tx: Conn<'_>, secured: &Secured, op: &MirrorOp, block: u64) -> Result<()> {
    let account = secured.account;
    match op {
        MirrorOp::NewAccount { .. }
        | MirrorOp::RegisterWallet { .. }
        | MirrorOp::ConvertAccount { .. } => {}
        MirrorOp::SetUsageApiKey {
            usage_key_hash,
            name,
            description,
            permissions,
        } => set_usage_key(
            tx,
            secured,
            usage_key_hash,
            name,
            description,
            permissions,
            None,
            block,
        )?,
        MirrorOp::UpdateUsageApiKeyMetadata {
            usage_key_hash,
            name,
            description,
        } => {
            let now = now_unix();
            integrity::update_eq(
                tx,
                &USAGE_KEYS,
                columns![
                    ("account_id", account.0),
                    ("key_hash", usage_key_hash.as_slice())
                ],
                |row| {
                    row.set("name", name)?;
                    row.set("description", description)?;
                    row.set("updated_at", &now)?;
                    Ok(true)
                },
            )?;
        }
        MirrorOp::RemoveUsageApiKey { usage_key_hash } => {
            integrity::delete(
                tx,
                &USAGE_KEYS,
                "account_id = ?1 AND key_hash = ?2",
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
                    let now = now_unix();
                    integrity::update_eq(tx, &GROUPS, columns![("id", id)], |row| {
                        row.set("name", name)?;
                        row.set("description", description)?;
                        row.set("updated_at", &now)?;
                        Ok(true)
                    })?;
                    id
                }
                (None, true, Some(id)) => {
                    let now = now_unix();
                    let inserted = integrity::insert_or_ignore(
                        tx,
                        &GROUPS,
                        columns![
                            ("id", id),
                            ("account_id", account.0),
                            ("name", name),
                            ("description", description),
                            ("all_wallets", false),
                            ("all_actions", false),
                            ("created_at", now),
                            ("updated_at", now),
                        ],
                    )?;
                    if !inserted {
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
                integrity::delete(tx, &GROUPS, "id = ?1", params![id])?;
            }
        }
        MirrorOp::AddPkpToGroup { group_id, pkp_id } => {
            if let (Some(group), Some(wallet)) = (
                group_of(tx, account, *group_id)?,
                wallet_row(tx, account, pkp_id)?,
            ) {
                integrity::insert_or_ignore(
                    tx,
                    &GROUP_WALLETS,
                    columns![("group_id", group), ("wallet_id", wallet)],
                )?;
            }
        }
        MirrorOp::RemovePkpFromGroup { group_id, pkp_id } => {
            if let (Some(group), Some(wallet)) = (
                group_of(tx, account, *group_id)?,
                wallet_row(tx, account, pkp_id)?,
            ) {
                integrity::delete(
                    tx,
                    &GROUP_WALLETS,
                    "group_id = ?1 AND wallet_id = ?2",
                    params![group, wallet],
                )?;
            }
        }
        MirrorOp::AddActionToGroup { group_id, cid_hash } => {
            if let Some(group) = group_of(tx, account, *group_id)? {
                let action = action_row(tx, account, cid_hash)?;
                integrity::insert_or_ignore(
                    tx,
                    &GROUP_ACTIONS,
                    columns![("group_id", group), ("action_id", action)],
                )?;
            }
        }
        MirrorOp::RemoveActionFromGroup { group_id, cid_hash } => {
            if let Some(group) = group_of(tx, account, *group_id)? {
                integrity::delete(
                    tx,
                    &GROUP_ACTIONS,
                    "group_id = ?1 AND action_id IN
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
            let now = now_unix();
            integrity::update_eq(tx, &ACTIONS, columns![("id", action)], |row| {
                row.set("name", name)?;
                row.set("description", description)?;
                row.set("updated_at", &now)?;
                Ok(true)
            })?;
        }
        MirrorOp::DeleteAction { cid_hash } => {
            integrity::delete(
                tx,
                &ACTIONS,
                "account_id = ?1 AND cid_hash = ?2",
                params![account.0, cid_hash.as_slice()],
            )?;
        }
    }
    Ok(())
}

fn apply(tx: Conn<'_>, event: &ChainEvent) -> Result<()> {
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
            integrity::insert_new_or_ignore(
                tx,
                &ACCOUNTS,
                columns![
                    ("api_key_hash", hash.as_slice()),
                    ("name", name),
                    ("description", description),
                    ("email", None::<String>),
                    ("wallet_address", admin),
                    ("managed", 0i64),
                    ("admin_wallet_address", admin),
                    ("created_at", now_unix()),
                ],
            )?;
        }
        ChainChange::Converted { new_admin } => {
            let new_admin = new_admin.to_checksum(None);
            integrity::update_eq(
                tx,
                &ACCOUNTS,
                columns![("api_key_hash", hash.as_slice())],
                |row| {
                    row.set("managed", &0i64)?;
                    row.set("admin_wallet_address", &new_admin)?;
                    Ok(true)
                },
            )?;
        }
        ChainChange::Wallet {
            identity,
            name,
            description,
        } => {
            let Some(secured) = chain_secured_account(tx, hash)? else {
                return Ok(());
            };
            let account = secured.account;
            let owner: Option<(Option<i64>, Option<Vec<u8>>)> = tx.query_opt(
                &format!(
                    "SELECT account_id, minted_by, {} FROM wallets WHERE derivation_path = ?1",
                    WALLETS.select("")
                ),
                params![identity.derivation_path.0],
                |r| {
                    r.seal(2, &WALLETS)?;
                    Ok((r.get(0)?, r.get(1)?))
                },
            )?;
            match owner {
                None => {
                    wallets::insert(tx, Some(account), identity, name, description)?;
                }
                Some((None, Some(minter))) if minted_by_admin(&secured, &minter) => {
                    // Re-checked on the row written: only an unattached wallet this
                    // admin minted joins the account.
                    integrity::update_eq(
                        tx,
                        &WALLETS,
                        columns![("derivation_path", identity.derivation_path.0.as_slice())],
                        |row| {
                            let still_free = row.get::<Option<i64>>("account_id")?.is_none()
                                && row.is("minted_by", &minter);
                            if !still_free {
                                return Ok(false);
                            }
                            row.set("account_id", &account.0)?;
                            row.set("name", name)?;
                            row.set("description", description)?;
                            Ok(true)
                        },
                    )?;
                }
                Some((None, _)) => {
                    // Minted for another wallet (or before minters were recorded): the
                    // registration gives this account nothing and leaves the wallet free
                    // for its minter.
                    tracing::info!(
                        block = event.block,
                        account = account.0,
                        wallet = %identity.address.to_checksum(),
                        "registration of a wallet minted for another wallet; ignored"
                    );
                }
                Some((Some(other), _)) if other == account.0 => {}
                Some((Some(_), _)) => {
                    // Another account's key: registering its path must not hand it over.
                    tracing::warn!(
                        block = event.block,
                        "registration of a wallet that belongs to another account; refused"
                    );
                }
            }
        }
        ChainChange::UsageKey {
            usage_key_hash,
            name,
            description,
            permissions,
            expires_at,
        } => {
            let Some(secured) = chain_secured_account(tx, hash)? else {
                return Ok(());
            };
            set_usage_key(
                tx,
                &secured,
                usage_key_hash,
                name,
                description,
                permissions,
                *expires_at,
                event.block,
            )?;
        }
        ChainChange::Op(op) => {
            let Some(secured) = chain_secured_account(tx, hash)? else {
                return Ok(());
            };
            apply_op(tx, &secured, op, event.block)?;
        }
    }
    Ok(())
}

impl Store {
    /// Applies `events` (in chain order) and moves the cursor `name` to `next_block`, in
    /// one transaction, if the cursor is still where the caller read it (`read_at`; `None`
    /// when it had none): a replica that read the same range before another replica
    /// applied it gets `Conflict` and changes nothing, so no event is applied twice.
    pub async fn apply_chain_events(
        &self,
        events: Vec<ChainEvent>,
        cursor: String,
        read_at: Option<u64>,
        next_block: u64,
    ) -> Result<()> {
        self.write(move |tx| {
            let now = cursor_at(tx, &cursor)?;
            if now != read_at {
                return Err(super::StoreError::Conflict(format!(
                    "the chain cursor {cursor} moved from {read_at:?} to {now:?}: these events were applied already"
                )));
            }
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
    use crate::StoreError;
    use crate::outbox::OutboxEntry;
    use crate::testing::store_test;
    use crate::{
        Charge, GroupSpec, InitialCredit, NewAccount, NewUsageKey, Permitted, ResolvedKey,
    };
    use appliance_domain::api_keys::KeyHash;
    use appliance_domain::authz::{GroupId, GroupSet, Permissions};
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

    fn chain_secured(hash: B256, admin: Address) -> ChainEvent {
        ChainEvent {
            api_key_hash: hash,
            change: ChainChange::Account {
                admin,
                mode: AccountMode::ChainSecured,
                name: "cs".into(),
                description: String::new(),
            },
            block: 1,
        }
    }

    fn usage_key(account: B256, key: KeyHash, expires_at: Option<i64>) -> ChainEvent {
        ChainEvent {
            api_key_hash: account,
            change: ChainChange::UsageKey {
                usage_key_hash: B256::from(key.0),
                name: "k".into(),
                description: String::new(),
                permissions: MirrorPermissions {
                    can_create_groups: false,
                    can_delete_groups: false,
                    can_create_pkps: false,
                    manage_ipfs_ids_in_groups: vec![],
                    add_pkp_to_groups: vec![],
                    remove_pkp_from_groups: vec![],
                    execute_in_groups: vec![0],
                },
                expires_at,
            },
            block: 2,
        }
    }

    fn wallet(account: B256, n: u8) -> ChainEvent {
        ChainEvent {
            api_key_hash: account,
            change: ChainChange::Wallet {
                identity: identity(n),
                name: "w".into(),
                description: String::new(),
            },
            block: 2,
        }
    }

    async fn wallets_of(store: &Store, account: AccountId) -> Vec<[u8; 20]> {
        store
            .list_wallets(
                account,
                crate::Page {
                    number: 0,
                    size: 100,
                },
            )
            .await
            .unwrap()
            .iter()
            .map(|w| w.address.0)
            .collect()
    }

    async fn account_of(store: &Store, key: KeyHash) -> Option<AccountId> {
        match store.resolve_key(key).await.unwrap() {
            Some(ResolvedKey::Usage { account, .. }) => Some(account),
            _ => None,
        }
    }

    store_test! {
    async fn api_mode_writes_queue_their_mirror_in_order_and_failed_writes_queue_nothing(db) {
        let store = db.open().await;
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
                crate::CidHash([5; 32]),
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

    async fn chain_secured_state_is_applied_once_with_the_cursor(db) {
        let store = db.open().await;
        let mine = api_mode_account(&store).await;
        let admin = Address::repeat_byte(0xAA);
        let hash = B256::repeat_byte(0x11);
        let usage = KeyHash([0x22; 32]);
        let chain_group = crate::groups::CHAIN_GROUP_ID_BASE;
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
            .apply_chain_events(events.clone(), "test".into(), None, 7)
            .await
            .unwrap();
        // Applying the same range again (another replica that read it before this one
        // applied it) is refused and changes nothing.
        let replay = store
            .apply_chain_events(events, "test".into(), None, 7)
            .await;
        assert!(matches!(replay, Err(StoreError::Conflict(_))), "{replay:?}");
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
                crate::Page {
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
                    crate::Page {
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

    // The front-running of point 5: an attacker's ChainSecured account registers the
    // victim's freshly minted wallet and usage key first and gets neither; the victim's
    // own registrations, applied afterwards, succeed.
    async fn minted_wallets_and_usage_keys_join_only_their_minters_account(db) {
        let store = db.open().await;
        let victim_admin = Address::repeat_byte(0x31);
        let attacker_admin = Address::repeat_byte(0x41);
        let (victim, attacker) = (B256::repeat_byte(0x30), B256::repeat_byte(0x40));
        store
            .apply_chain_events(
                vec![
                    chain_secured(victim, victim_admin),
                    chain_secured(attacker, attacker_admin),
                ],
                "t".into(),
                None,
                2,
            )
            .await
            .unwrap();
        let minted_key = KeyHash([0x77; 32]);
        let sig = crate::testing::signature(0x31, crate::testing::now());
        assert_eq!(sig.signer, victim_admin);
        assert!(
            store
                .record_signed_wallet(sig, identity(7), Some(minted_key))
                .await
                .unwrap()
        );
        // A wallet minted before minters were recorded (minted_by NULL) joins nobody.
        store
            .write(|tx| {
                wallets::insert(tx, None, &identity(8), "", "")?;
                Ok(())
            })
            .await
            .unwrap();

        store
            .apply_chain_events(
                vec![
                    wallet(attacker, 7),
                    usage_key(attacker, minted_key, None),
                    wallet(attacker, 8),
                ],
                "t".into(),
                Some(2),
                3,
            )
            .await
            .unwrap();
        let resolve_account = |hash: B256| {
            let store = store.clone();
            async move {
                store
                    .master_key_account(KeyHash(hash.0))
                    .await
                    .unwrap()
                    .unwrap()
                    .account
            }
        };
        let (victim_id, attacker_id) = (
            resolve_account(victim).await,
            resolve_account(attacker).await,
        );
        assert!(
            wallets_of(&store, attacker_id).await.is_empty(),
            "the attacker took the victim's minted wallet"
        );
        assert_eq!(
            account_of(&store, minted_key).await,
            None,
            "the attacker took the victim's minted usage key"
        );

        // The victim registers both afterwards: they are the victim's.
        store
            .apply_chain_events(
                vec![
                    wallet(victim, 7),
                    usage_key(victim, minted_key, None),
                    wallet(victim, 8),
                ],
                "t".into(),
                Some(3),
                4,
            )
            .await
            .unwrap();
        assert_eq!(wallets_of(&store, victim_id).await, vec![[7; 20]]);
        assert_eq!(account_of(&store, minted_key).await, Some(victim_id));
        // A later copy by the attacker still moves nothing.
        store
            .apply_chain_events(
                vec![wallet(attacker, 7), usage_key(attacker, minted_key, None)],
                "t".into(),
                Some(4),
                5,
            )
            .await
            .unwrap();
        assert_eq!(account_of(&store, minted_key).await, Some(victim_id));
        assert!(wallets_of(&store, attacker_id).await.is_empty());
        // Positive control: a key hash nobody minted here is the registering account's.
        let own = KeyHash([0x78; 32]);
        store
            .apply_chain_events(vec![usage_key(attacker, own, None)], "t".into(), Some(5), 6)
            .await
            .unwrap();
        assert_eq!(account_of(&store, own).await, Some(attacker_id));
    }

    // On-chain `expiration` (point 6): the key authenticates until then, and not after;
    // replacing it without an expiration makes it permanent again.
    async fn a_chain_secured_usage_key_stops_at_its_on_chain_expiration(db) {
        let store = db.open().await;
        let account = B256::repeat_byte(0x50);
        let key = KeyHash([0x51; 32]);
        let now = now_unix();
        store
            .apply_chain_events(
                vec![
                    chain_secured(account, Address::repeat_byte(0x52)),
                    usage_key(account, key, Some(now + 3600)),
                ],
                "t".into(),
                None,
                2,
            )
            .await
            .unwrap();
        assert!(
            account_of(&store, key).await.is_some(),
            "refused before expiry"
        );
        store
            .apply_chain_events(vec![usage_key(account, key, Some(now - 1))], "t".into(), Some(2), 3)
            .await
            .unwrap();
        assert_eq!(
            store.resolve_key(key).await.unwrap(),
            None,
            "accepted after expiry"
        );
        store
            .apply_chain_events(vec![usage_key(account, key, None)], "t".into(), Some(3), 4)
            .await
            .unwrap();
        assert!(account_of(&store, key).await.is_some());
    }
    }
}
