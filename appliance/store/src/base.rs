//! The store's base layer: the ids and shared types every domain module speaks, SQL error
//! helpers, and the few row-level reads (an account's mode, a group's existence) that
//! several domain modules need. It imports no other store module, so domain modules call
//! into it in one direction only.

use keyservice_api::{Address, DerivationPath, PkpId};

use super::integrity::{ACCOUNTS, GROUPS};
use super::sql::{Conn, OwnedValue, params};

use super::{Result, StoreError};
use appliance_domain::api_keys::KeyHash;
use appliance_domain::authz::{GroupId, Permissions};

/// The store's id of an account. Never shown to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AccountId(pub i64);

/// Who administers an account.
///
/// The `accounts.managed` column stores it (`1` = [`AccountMode::Api`], `0` =
/// [`AccountMode::ChainSecured`]); [`AccountMode::from_column`] reads that encoding, and
/// only SQL in this crate's store writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountMode {
    /// API mode: the service administers the account with its account key, and mirrors
    /// every write on chain through the outbox.
    Api,
    /// Administered on chain by its admin wallet; the service only follows its events.
    ChainSecured,
}

impl AccountMode {
    /// The mode stored in `accounts.managed`.
    pub fn from_column(managed: bool) -> Self {
        if managed {
            Self::Api
        } else {
            Self::ChainSecured
        }
    }
}

/// The store's id of a usage key (shown in lists as `id`). Never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UsageKeyId(pub i64);

/// The public identity of a keyservice wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalletIdentity {
    pub pkp_id: PkpId,
    pub address: Address,
    pub derivation_path: DerivationPath,
}

/// What a presented key turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedKey {
    /// The master key of an API-mode account.
    Account(AccountId),
    /// A live usage key.
    Usage {
        account: AccountId,
        key_id: UsageKeyId,
        permissions: Permissions,
    },
}

impl ResolvedKey {
    pub fn account(&self) -> AccountId {
        match self {
            Self::Account(id) | Self::Usage { account: id, .. } => *id,
        }
    }
}

/// An account's on-chain identity (`apiKeyHash`) and mode.
pub(super) struct AccountHead {
    pub api_key_hash: Vec<u8>,
    pub mode: AccountMode,
}

/// The identity and mode of `account`, if it exists. In a PostgreSQL write batch, read
/// once per batch while no write of the batch changes an account (`RowChecks::recall`):
/// most writes read it for their mirror entry.
pub(super) fn account_head(conn: Conn<'_>, account: AccountId) -> Result<Option<AccountHead>> {
    let memo = format!("account_head:{}", account.0);
    if let Some([OwnedValue::Blob(api_key_hash), OwnedValue::Int(managed)]) =
        conn.checks().and_then(|c| c.recall(&memo)).as_deref()
    {
        return Ok(Some(AccountHead {
            api_key_hash: api_key_hash.clone(),
            mode: AccountMode::from_column(*managed != 0),
        }));
    }
    let head = conn.query_opt(
        &format!(
            "SELECT api_key_hash, managed, {} FROM accounts WHERE id = ?1",
            ACCOUNTS.select("")
        ),
        params![account.0],
        |r| {
            r.seal(2, &ACCOUNTS)?;
            Ok(AccountHead {
                api_key_hash: r.get(0)?,
                mode: AccountMode::from_column(r.get(1)?),
            })
        },
    )?;
    if let (Some(checks), Some(head)) = (conn.checks(), &head) {
        checks.remember(
            memo,
            vec![
                OwnedValue::Blob(head.api_key_hash.clone()),
                OwnedValue::Int(i64::from(head.mode == AccountMode::Api)),
            ],
        );
    }
    Ok(head)
}

/// The flags of a group that exists in `account`.
pub(super) struct GroupFlags {
    pub all_wallets: bool,
    pub all_actions: bool,
}

/// A group id as SQLite stores it. Ids above `i64::MAX` cannot exist there; they map to
/// -1, which matches nothing.
pub(super) fn group_sql_id(group: GroupId) -> i64 {
    i64::try_from(group.0).unwrap_or(-1)
}

/// The flags of `group`, or `NotFound` unless it exists in `account`.
pub(super) fn require_group(
    conn: Conn<'_>,
    account: AccountId,
    group: GroupId,
) -> Result<GroupFlags> {
    conn.query_opt(
        &format!(
            "SELECT all_wallets, all_actions, {} FROM groups WHERE id = ?1 AND account_id = ?2",
            GROUPS.select("")
        ),
        params![group_sql_id(group), account.0],
        |r| {
            r.seal(2, &GROUPS)?;
            Ok(GroupFlags {
                all_wallets: r.get(0)?,
                all_actions: r.get(1)?,
            })
        },
    )?
    .ok_or_else(|| StoreError::NotFound(format!("no group {group} in this account")))
}

/// A key hash read from a 32-byte column.
pub(super) fn key_hash_from(bytes: &[u8]) -> Result<KeyHash> {
    bytes
        .try_into()
        .map(KeyHash)
        .map_err(|_| StoreError::Corrupt("an account key hash is not 32 bytes".into()))
}
