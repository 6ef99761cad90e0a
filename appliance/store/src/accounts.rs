//! Accounts, and resolving a presented key to what it authenticates as.

use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, AccountMode, ResolvedKey, WalletIdentity};
use super::integrity::{self, ACCOUNTS, columns};
use super::ledger::InitialCredit;
use super::sql::{Conn, params};
use super::{Result, Store, StoreError, now_unix, outbox, usage_keys, wallets};
use appliance_domain::api_keys::KeyHash;

/// What `new_account` stores: the account and its own wallet.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub api_key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub email: Option<String>,
    pub wallet: WalletIdentity,
}

/// What the chain mirror receives for an account description: not the description (up
/// to 4 KiB of calldata paid by the service's payer for an unauthenticated call) but
/// `keccak256:0x<64 hex>` of its UTF-8 bytes, a fixed 76 bytes that still lets the
/// owner prove which description was given; an empty description stays empty. The
/// store keeps the full text.
pub fn mirrored_description(description: &str) -> String {
    if description.is_empty() {
        return String::new();
    }
    format!(
        "keccak256:{}",
        alloy::primitives::keccak256(description.as_bytes())
    )
}

#[derive(Debug, Clone)]
pub struct AccountRecord {
    pub id: AccountId,
    pub api_key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub email: Option<String>,
    pub wallet_address: String,
    pub mode: AccountMode,
    pub created_at: i64,
}

impl Store {
    /// Creates an API-mode account with its own wallet, granting it `credit` in the same
    /// transaction.
    pub async fn create_account(
        &self,
        new: NewAccount,
        credit: InitialCredit,
    ) -> Result<AccountId> {
        self.write(move |tx| {
            let inserted = integrity::insert_new(
                tx,
                &ACCOUNTS,
                columns![
                    ("api_key_hash", new.api_key_hash.0.as_slice()),
                    ("name", new.name),
                    ("description", new.description),
                    ("email", new.email),
                    ("wallet_address", new.wallet.address.to_checksum()),
                    ("managed", 1i64),
                    ("admin_wallet_address", None::<String>),
                    ("created_at", now_unix()),
                ],
            );
            match inserted {
                Ok(id) => {
                    let account = AccountId(id);
                    wallets::insert(tx, Some(account), &new.wallet, "account wallet", "")?;
                    outbox::record(
                        tx,
                        account,
                        &MirrorOp::NewAccount {
                            admin: alloy::primitives::Address::from(new.wallet.address.0),
                            name: new.name.clone(),
                            description: mirrored_description(&new.description),
                        },
                    )?;
                    outbox::record(
                        tx,
                        account,
                        &wallets::register_op(&new.wallet, "account wallet", ""),
                    )?;
                    super::ledger::grant_initial(tx, account, &credit)?;
                    Ok(account)
                }
                Err(e) if integrity::is_unique_violation(&e) => Err(StoreError::Conflict(
                    "an account with this key already exists".into(),
                )),
                Err(e) => Err(e),
            }
        })
        .await
    }

    pub async fn account(&self, id: AccountId) -> Result<AccountRecord> {
        self.read(move |conn| {
            conn.query_opt(
                &format!(
                    "SELECT id, api_key_hash, name, description, email, wallet_address, managed, created_at, {}
                     FROM accounts WHERE id = ?1",
                    ACCOUNTS.select("")
                ),
                params![id.0],
                |row| {
                row.seal(8, &ACCOUNTS)?;
                Ok(AccountRecord {
                    id: AccountId(row.get(0)?),
                    api_key_hash: KeyHash(row.get(1)?),
                    name: row.get(2)?,
                    description: row.get(3)?,
                    email: row.get(4)?,
                    wallet_address: row.get(5)?,
                    mode: AccountMode::from_column(row.get(6)?),
                    created_at: row.get(7)?,
                })
            })?
            .ok_or_else(|| StoreError::NotFound("no such account".into()))
        })
        .await
    }

    /// Resolves a key hash to an account key or a live usage key: from memory when a
    /// request has resolved it since the last write (`store::key_cache`), else from the
    /// database.
    pub async fn resolve_key(&self, hash: KeyHash) -> Result<Option<ResolvedKey>> {
        let cache = &self.inner.keys;
        if let Some(key) = cache.get(&hash) {
            return Ok(Some(key));
        }
        let generation = cache.generation();
        let resolved = self.read(move |conn| resolve(conn, &hash)).await?;
        Ok(resolved.map(|(key, expires_at)| {
            cache.insert(generation, hash, key.clone(), expires_at);
            key
        }))
    }
}

/// What `hash` is in the database, and when it expires (usage keys only).
fn resolve(conn: Conn<'_>, hash: &KeyHash) -> Result<Option<(ResolvedKey, Option<i64>)>> {
    let account: Option<i64> = conn.query_opt(
        &format!(
            "SELECT id, {} FROM accounts WHERE api_key_hash = ?1 AND managed = 1",
            ACCOUNTS.select("")
        ),
        params![hash.0],
        |row| {
            row.seal(1, &ACCOUNTS)?;
            row.get(0)
        },
    )?;
    if let Some(id) = account {
        return Ok(Some((ResolvedKey::Account(AccountId(id)), None)));
    }
    usage_keys::resolve(conn, hash)
}

#[cfg(test)]
mod mirror_tests {
    use super::mirrored_description;
    use crate::InitialCredit;
    use crate::sql::params;
    use crate::testing::{new_account_spec, store_test};

    #[test]
    fn descriptions_are_mirrored_as_a_fixed_size_hash() {
        assert_eq!(mirrored_description(""), "");
        let long = "x".repeat(4096);
        let mirrored = mirrored_description(&long);
        assert_eq!(mirrored.len(), 76);
        assert_eq!(
            mirrored_description("abc"),
            "keccak256:0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
        );
    }

    store_test! {
    // What `new_account` queues for the chain carries a 76-byte hash, never the 4 KiB
    // description the caller sent; the store keeps the description itself.
    async fn new_account_queues_a_bounded_mirror_write(db) {
        let store = db.open().await;
        let description = "d".repeat(4096);
        let mut spec = new_account_spec(3);
        spec.description = description.clone();
        store
            .create_account(spec, InitialCredit::NONE)
            .await
            .unwrap();
        let ops: Vec<String> = store
            .read(|c| {
                Ok(c.query_map("SELECT op FROM chain_outbox ORDER BY seq", params![], |r| {
                    r.get::<String>(0)
                })?)
            })
            .await
            .unwrap();
        let new_account = ops
            .iter()
            .find(|op| op.contains("\"new_account\""))
            .expect("a new_account op");
        assert!(!new_account.contains(&description[..100]), "{new_account}");
        assert!(
            new_account.contains(&mirrored_description(&description)),
            "{new_account}"
        );
        assert!(new_account.len() < 400, "{}", new_account.len());
        let kept: String = store
            .read(|c| Ok(c.query_row("SELECT description FROM accounts", params![], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(kept, description);
    }
    }
}
