//! Accounts, and resolving a presented key to what it authenticates as.

use rusqlite::{Connection, OptionalExtension, params};

use super::outbox::MirrorOp;
use super::{Result, Store, StoreError, now_unix, usage_keys};
use keyservice_api::{Address, DerivationPath, PkpId};

use crate::authz::Permissions;
use crate::secrets::KeyHash;

/// The store's id of an account. Never shown to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AccountId(pub i64);

/// What `new_account` stores: the account and its own wallet.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub api_key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub email: Option<String>,
    pub wallet: WalletIdentity,
}

/// The public identity of a keyservice wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalletIdentity {
    pub pkp_id: PkpId,
    pub address: Address,
    pub derivation_path: DerivationPath,
}

#[derive(Debug, Clone)]
pub struct AccountRecord {
    pub id: AccountId,
    pub api_key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub email: Option<String>,
    pub wallet_address: String,
    pub managed: bool,
    pub created_at: i64,
}

/// What a presented key turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedKey {
    /// The master key of an API-mode account.
    Account(AccountId),
    /// A live usage key.
    Usage {
        account: AccountId,
        key_id: super::UsageKeyId,
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

impl Store {
    pub async fn create_account(&self, new: NewAccount) -> Result<AccountId> {
        self.write(move |tx| {
            let inserted = tx.execute(
                "INSERT INTO accounts (api_key_hash, name, description, email, wallet_address, managed, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)",
                params![
                    new.api_key_hash.0.as_slice(),
                    new.name,
                    new.description,
                    new.email,
                    new.wallet.address.to_checksum(),
                    now_unix()
                ],
            );
            match inserted {
                Ok(_) => {
                    let account = AccountId(tx.last_insert_rowid());
                    // A billed new_account grants its starting credit in this transaction.
                    super::billing::note_account(account);
                    super::wallets::insert(tx, Some(account), &new.wallet, "account wallet", "")?;
                    super::outbox::record(
                        tx,
                        account,
                        &MirrorOp::NewAccount {
                            admin: alloy::primitives::Address::from(new.wallet.address.0),
                            name: new.name.clone(),
                            description: new.description.clone(),
                        },
                    )?;
                    super::outbox::record(
                        tx,
                        account,
                        &super::wallets::register_op(&new.wallet, "account wallet", ""),
                    )?;
                    Ok(account)
                }
                Err(e) if is_unique_violation(&e) => {
                    Err(StoreError::Conflict("an account with this key already exists".into()))
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    pub async fn account(&self, id: AccountId) -> Result<AccountRecord> {
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT id, api_key_hash, name, description, email, wallet_address, managed, created_at
                 FROM accounts WHERE id = ?1",
            )?
            .query_row([id.0], |row| {
                Ok(AccountRecord {
                    id: AccountId(row.get(0)?),
                    api_key_hash: KeyHash(row.get(1)?),
                    name: row.get(2)?,
                    description: row.get(3)?,
                    email: row.get(4)?,
                    wallet_address: row.get(5)?,
                    managed: row.get(6)?,
                    created_at: row.get(7)?,
                })
            })
            .optional()?
            .ok_or_else(|| StoreError::NotFound("no such account".into()))
        })
        .await
    }

    /// Resolves a key hash to an account key or a live usage key.
    pub async fn resolve_key(&self, hash: KeyHash) -> Result<Option<ResolvedKey>> {
        self.read(move |conn| resolve(conn, &hash)).await
    }
}

fn resolve(conn: &Connection, hash: &KeyHash) -> Result<Option<ResolvedKey>> {
    let account: Option<i64> = conn
        .prepare_cached("SELECT id FROM accounts WHERE api_key_hash = ?1 AND managed = 1")?
        .query_row([hash.0.as_slice()], |row| row.get(0))
        .optional()?;
    if let Some(id) = account {
        return Ok(Some(ResolvedKey::Account(AccountId(id))));
    }
    usage_keys::resolve(conn, hash)
}

pub(super) fn is_unique_violation(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(e, _)
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
    )
}
