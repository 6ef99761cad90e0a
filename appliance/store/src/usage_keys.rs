//! Usage keys: scoped, rotatable keys of an account. Only their hashes are stored.

use alloy::primitives::B256;

use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, AccountMode, ResolvedKey, UsageKeyId, account_head};
use super::integrity::{self, USAGE_KEYS, columns};
use super::ledger::Charge;
use super::sql::{Conn, Row, SqlError, SqlResult, ValueError, params};
use super::{Page, Result, Store, StoreError, now_unix, outbox};
use appliance_domain::api_keys::KeyHash;
use appliance_domain::authz::{GroupSet, Permissions};

#[derive(Debug, Clone)]
pub struct NewUsageKey {
    pub key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub permissions: Permissions,
}

#[derive(Debug, Clone)]
pub struct UsageKeyRecord {
    pub id: UsageKeyId,
    pub key_hash: KeyHash,
    pub name: String,
    pub description: String,
    pub permissions: Permissions,
    pub created_at: i64,
}

const COLUMNS: &str = "id, key_hash, name, description, can_create_groups, can_delete_groups, \
     can_create_pkps, manage_ipfs_ids_in_groups, add_pkp_to_groups, remove_pkp_from_groups, \
     execute_in_groups, created_at";

fn encode_set(set: &GroupSet) -> String {
    // A JSON array of numbers; serialising a slice of u64 cannot fail.
    serde_json::to_string(set.ids()).unwrap_or_else(|_| "[]".to_owned())
}

fn decode_set(row: &Row<'_>, idx: usize) -> SqlResult<GroupSet> {
    let text: String = row.get(idx)?;
    serde_json::from_str::<Vec<u64>>(&text)
        .map(GroupSet::new)
        .map_err(|e| SqlError::Decode {
            column: idx,
            reason: ValueError::Json {
                what: "a group set",
                reason: e.to_string(),
            },
        })
}

fn permissions_from(row: &Row<'_>, first: usize) -> SqlResult<Permissions> {
    Ok(Permissions {
        can_create_groups: row.get(first)?,
        can_delete_groups: row.get(first + 1)?,
        can_create_pkps: row.get(first + 2)?,
        manage_ipfs_ids_in_groups: decode_set(row, first + 3)?,
        add_pkp_to_groups: decode_set(row, first + 4)?,
        remove_pkp_from_groups: decode_set(row, first + 5)?,
        execute_in_groups: decode_set(row, first + 6)?,
    })
}

/// [`COLUMNS`] and then the row for its integrity check (read by [`record_from`]).
fn checked_columns() -> String {
    format!("{COLUMNS}, {}", USAGE_KEYS.select(""))
}

fn record_from(row: &Row<'_>) -> SqlResult<UsageKeyRecord> {
    row.seal(12, &USAGE_KEYS)?;
    Ok(UsageKeyRecord {
        id: UsageKeyId(row.get(0)?),
        key_hash: KeyHash(row.get(1)?),
        name: row.get(2)?,
        description: row.get(3)?,
        permissions: permissions_from(row, 4)?,
        created_at: row.get(11)?,
    })
}

/// Creates or fully replaces `account`'s usage key `hash` (the indexer's path, for keys
/// set on chain), which stops authenticating at `expires_at` (Unix seconds; `None`:
/// never); `false` when the hash belongs to another account, which keeps it.
pub(super) fn upsert(
    tx: Conn<'_>,
    account: AccountId,
    hash: &KeyHash,
    name: &str,
    description: &str,
    p: &Permissions,
    expires_at: Option<i64>,
) -> Result<bool> {
    let now = now_unix();
    let (mut found, mut ours) = (false, false);
    integrity::update_eq(
        tx,
        &USAGE_KEYS,
        columns![("key_hash", hash.0.as_slice())],
        |row| {
            found = true;
            if !row.is("account_id", &account.0) {
                return Ok(false);
            }
            ours = true;
            set_permissions(row, p)?;
            row.set("name", &name)?;
            row.set("description", &description)?;
            row.set("updated_at", &now)?;
            row.set("expires_at", &expires_at)?;
            Ok(true)
        },
    )?;
    if found {
        return Ok(ours);
    }
    insert(tx, account, hash, name, description, p, now, expires_at)?;
    Ok(true)
}

/// Inserts `account`'s usage key `hash` as a new row (its id allocated by the store).
#[allow(clippy::too_many_arguments)]
fn insert(
    tx: Conn<'_>,
    account: AccountId,
    hash: &KeyHash,
    name: &str,
    description: &str,
    p: &Permissions,
    now: i64,
    expires_at: Option<i64>,
) -> Result<i64> {
    integrity::insert_new(
        tx,
        &USAGE_KEYS,
        columns![
            ("account_id", account.0),
            ("key_hash", hash.0.as_slice()),
            ("name", name),
            ("description", description),
            ("can_create_groups", p.can_create_groups),
            ("can_delete_groups", p.can_delete_groups),
            ("can_create_pkps", p.can_create_pkps),
            (
                "manage_ipfs_ids_in_groups",
                encode_set(&p.manage_ipfs_ids_in_groups)
            ),
            ("add_pkp_to_groups", encode_set(&p.add_pkp_to_groups)),
            (
                "remove_pkp_from_groups",
                encode_set(&p.remove_pkp_from_groups)
            ),
            ("execute_in_groups", encode_set(&p.execute_in_groups)),
            ("created_at", now),
            ("updated_at", now),
            ("expires_at", expires_at),
        ],
    )
}

/// Sets a usage key row's permission columns.
fn set_permissions(row: &mut integrity::RowImage, p: &Permissions) -> Result<()> {
    row.set("can_create_groups", &p.can_create_groups)?;
    row.set("can_delete_groups", &p.can_delete_groups)?;
    row.set("can_create_pkps", &p.can_create_pkps)?;
    row.set(
        "manage_ipfs_ids_in_groups",
        &encode_set(&p.manage_ipfs_ids_in_groups),
    )?;
    row.set("add_pkp_to_groups", &encode_set(&p.add_pkp_to_groups))?;
    row.set(
        "remove_pkp_from_groups",
        &encode_set(&p.remove_pkp_from_groups),
    )?;
    row.set("execute_in_groups", &encode_set(&p.execute_in_groups))?;
    Ok(())
}

/// The full mirror of a usage key as it now is (the contract replaces it whole).
fn mirror(tx: Conn<'_>, account: AccountId, key: &KeyHash) -> Result<()> {
    let record = tx.query_row(
        &format!(
            "SELECT {} FROM usage_keys WHERE account_id = ?1 AND key_hash = ?2",
            checked_columns()
        ),
        params![account.0, key.0],
        record_from,
    )?;
    outbox::record(
        tx,
        account,
        &MirrorOp::SetUsageApiKey {
            usage_key_hash: B256::from(key.0),
            name: record.name,
            description: record.description,
            permissions: record.permissions.map_sets(|set| set.ids().to_vec()),
        },
    )
}

fn not_found() -> StoreError {
    StoreError::NotFound("no usage key with that value or hash exists on this account".into())
}

/// The usage key `hash` as a credential. A key past its `expires_at` resolves to nothing,
/// exactly as a removed one: the caller gets the same 401.
/// A live usage key, and when it expires (Unix seconds), if it does.
pub(super) fn resolve(
    conn: Conn<'_>,
    hash: &KeyHash,
) -> Result<Option<(ResolvedKey, Option<i64>)>> {
    let row = conn.query_opt(
        &format!(
            "SELECT account_id, expires_at, {} FROM usage_keys WHERE key_hash = ?1",
            checked_columns()
        ),
        params![hash.0],
        |row| {
            row.seal(14, &USAGE_KEYS)?;
            let expires_at: Option<i64> = row.get(1)?;
            Ok((
                AccountId(row.get(0)?),
                expires_at,
                UsageKeyId(row.get(2)?),
                permissions_from(row, 6)?,
            ))
        },
    )?;
    let Some((account, expires_at, key_id, permissions)) = row else {
        return Ok(None);
    };
    if let Some(expires_at) = expires_at
        && expires_at <= now_unix()
    {
        tracing::debug!(usage_key = %hash, expires_at, "expired usage key presented");
        return Ok(None);
    }
    // A ChainSecured account is administered on chain by its wallet only (the contract
    // refuses the service's writes): its usage keys keep just running actions.
    let mode = account_head(conn, account)?
        .ok_or_else(|| StoreError::Corrupt("a usage key of no account".into()))?
        .mode;
    let permissions = if mode == AccountMode::Api {
        permissions
    } else {
        Permissions {
            execute_in_groups: permissions.execute_in_groups,
            ..Permissions::default()
        }
    };
    Ok(Some((
        ResolvedKey::Usage {
            account,
            key_id,
            permissions,
        },
        expires_at,
    )))
}

impl Store {
    pub async fn add_usage_key(
        &self,
        account: AccountId,
        new: NewUsageKey,
        charge: Charge,
    ) -> Result<UsageKeyRecord> {
        self.write_charged(account, charge, move |tx| {
            let now = now_unix();
            let p = &new.permissions;
            let inserted = insert(
                tx,
                account,
                &new.key_hash,
                &new.name,
                &new.description,
                p,
                now,
                None,
            );
            match inserted {
                Ok(id) => {
                    let id = UsageKeyId(id);
                    mirror(tx, account, &new.key_hash)?;
                    Ok(UsageKeyRecord {
                        id,
                        key_hash: new.key_hash,
                        name: new.name,
                        description: new.description,
                        permissions: new.permissions,
                        created_at: now,
                    })
                }
                Err(e) if integrity::is_unique_violation(&e) => Err(StoreError::Conflict(
                    "a key with this value already exists".into(),
                )),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// The account's usage keys in creation order.
    pub async fn list_usage_keys(
        &self,
        account: AccountId,
        page: Page,
    ) -> Result<Vec<UsageKeyRecord>> {
        let Some((limit, offset)) = page.limit_offset() else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            Ok(conn.query_map(
                &format!(
                    "SELECT {} FROM usage_keys WHERE account_id = ?1 ORDER BY id LIMIT ?2 + 0 OFFSET ?3 + 0",
                    checked_columns()
                ),
                params![account.0, limit, offset],
                record_from,
            )?)
        })
        .await
    }

    /// Replaces the key's whole permission set, and its name and description when given.
    pub async fn update_usage_key(
        &self,
        account: AccountId,
        key: KeyHash,
        permissions: Permissions,
        name: Option<String>,
        description: Option<String>,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let p = &permissions;
            let now = now_unix();
            let changed = integrity::update_eq(
                tx,
                &USAGE_KEYS,
                columns![("account_id", account.0), ("key_hash", key.0)],
                |row| {
                    set_permissions(row, p)?;
                    if let Some(name) = &name {
                        row.set("name", name)?;
                    }
                    if let Some(description) = &description {
                        row.set("description", description)?;
                    }
                    row.set("updated_at", &now)?;
                    Ok(true)
                },
            )?;
            if changed == 0 {
                Err(not_found())
            } else {
                mirror(tx, account, &key)
            }
        })
        .await
    }

    pub async fn update_usage_key_metadata(
        &self,
        account: AccountId,
        key: KeyHash,
        name: String,
        description: String,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let now = now_unix();
            let changed = integrity::update_eq(
                tx,
                &USAGE_KEYS,
                columns![("account_id", account.0), ("key_hash", key.0)],
                |row| {
                    row.set("name", &name)?;
                    row.set("description", &description)?;
                    row.set("updated_at", &now)?;
                    Ok(true)
                },
            )?;
            if changed == 0 {
                Err(not_found())
            } else {
                outbox::record(
                    tx,
                    account,
                    &MirrorOp::UpdateUsageApiKeyMetadata {
                        usage_key_hash: B256::from(key.0),
                        name,
                        description,
                    },
                )
            }
        })
        .await
    }

    /// Removes the key; the very next request with it is refused.
    pub async fn remove_usage_key(
        &self,
        account: AccountId,
        key: KeyHash,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let changed = integrity::delete(
                tx,
                &USAGE_KEYS,
                "account_id = ?1 AND key_hash = ?2",
                params![account.0, key.0],
            )?;
            if changed == 0 {
                Err(not_found())
            } else {
                outbox::record(
                    tx,
                    account,
                    &MirrorOp::RemoveUsageApiKey {
                        usage_key_hash: B256::from(key.0),
                    },
                )
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store_test;
    use crate::testing::store_with_account;

    fn perms() -> Permissions {
        Permissions {
            can_create_groups: true,
            execute_in_groups: GroupSet::new(vec![4, 2]),
            ..Default::default()
        }
    }

    store_test! {
    async fn add_resolve_update_remove(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let hash = KeyHash([9; 32]);
        let rec = store
            .add_usage_key(
                account,
                NewUsageKey {
                    key_hash: hash,
                    name: "k".into(),
                    description: "d".into(),
                    permissions: perms(),
                },
                Charge::free(),
            )
            .await
            .unwrap();
        match store.resolve_key(hash).await.unwrap() {
            Some(ResolvedKey::Usage {
                account: a,
                key_id,
                permissions,
            }) => {
                assert_eq!(a, account);
                assert_eq!(key_id, rec.id);
                assert_eq!(permissions, perms());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            store.resolve_key(KeyHash([1; 32])).await.unwrap(),
            Some(ResolvedKey::Account(account))
        );

        store
            .update_usage_key(
                account,
                hash,
                Permissions::default(),
                None,
                None,
                Charge::free(),
            )
            .await
            .unwrap();
        let listed = store
            .list_usage_keys(
                account,
                Page {
                    number: 0,
                    size: 10,
                },
            )
            .await
            .unwrap();
        assert_eq!(listed[0].permissions, Permissions::default());
        assert_eq!(listed[0].name, "k", "name is kept when not given");

        store
            .remove_usage_key(account, hash, Charge::free())
            .await
            .unwrap();
        assert_eq!(store.resolve_key(hash).await.unwrap(), None);
        assert!(matches!(
            store.remove_usage_key(account, hash, Charge::free()).await,
            Err(StoreError::NotFound(_))
        ));
    }

    // Keys are resolved from memory after the first look-up (`store::key_cache`), and
    // every acknowledged write that changes a key is seen by the very next look-up:
    // new permissions, a removal, and the account's conversion to ChainSecured.
    async fn the_next_lookup_after_a_write_sees_the_change(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let hash = KeyHash([9; 32]);
        let new_key = NewUsageKey {
            key_hash: hash,
            name: "k".into(),
            description: String::new(),
            permissions: perms(),
        };
        store
            .add_usage_key(account, new_key, Charge::free())
            .await
            .unwrap();
        let permissions = |resolved: Option<ResolvedKey>| match resolved {
            Some(ResolvedKey::Usage { permissions, .. }) => Some(permissions),
            _ => None,
        };
        assert_eq!(
            permissions(store.resolve_key(hash).await.unwrap()),
            Some(perms())
        );

        // Served from memory: a change made behind the store's back (never done outside
        // tests: the store is the database's only writer) is not seen... (SQLite only:
        // on PostgreSQL such a change fails the row's MAC, `store::integrity`.)
        if db.engine() == crate::Engine::Sqlite {
            db.behind_the_back("UPDATE usage_keys SET can_create_groups = 0")
                .await;
            assert_eq!(
                permissions(store.resolve_key(hash).await.unwrap()),
                Some(perms())
            );
        }
        // ...until any write goes through the store.
        store
            .update_usage_key(account, hash, perms(), None, None, Charge::free())
            .await
            .unwrap();
        assert_eq!(
            permissions(store.resolve_key(hash).await.unwrap()),
            Some(perms())
        );

        store
            .update_usage_key(
                account,
                hash,
                Permissions::default(),
                None,
                None,
                Charge::free(),
            )
            .await
            .unwrap();
        assert_eq!(
            permissions(store.resolve_key(hash).await.unwrap()),
            Some(Permissions::default())
        );

        // The account key, resolved and held; then the account becomes ChainSecured.
        let account_key = KeyHash([1; 32]);
        assert_eq!(
            store.resolve_key(account_key).await.unwrap(),
            Some(ResolvedKey::Account(account))
        );
        store
            .convert_account(
                account,
                alloy::primitives::Address::repeat_byte(7),
                crate::testing::signature(7, crate::testing::now()),
            )
            .await
            .unwrap();
        assert_eq!(store.resolve_key(account_key).await.unwrap(), None);

        store
            .remove_usage_key(account, hash, Charge::free())
            .await
            .unwrap();
        assert_eq!(store.resolve_key(hash).await.unwrap(), None);
    }

    async fn ids_are_never_reused(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let mk = |b| NewUsageKey {
            key_hash: KeyHash([b; 32]),
            name: "k".into(),
            description: String::new(),
            permissions: perms(),
        };
        let first = store
            .add_usage_key(account, mk(5), Charge::free())
            .await
            .unwrap();
        store
            .remove_usage_key(account, KeyHash([5; 32]), Charge::free())
            .await
            .unwrap();
        let second = store
            .add_usage_key(account, mk(6), Charge::free())
            .await
            .unwrap();
        assert!(second.id.0 > first.id.0);
    }
    }
}
