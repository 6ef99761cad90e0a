//! ChainSecured accounts: converting an API-mode account (its master key stops
//! authenticating, its admin wallet takes over on chain), finding an account by its master
//! key in either mode, and finding the ChainSecured account a wallet administers.
//!
//! Invariant: a conversion never gives a wallet a second account. A wallet that already
//! administers a ChainSecured account is refused as the new admin of another
//! ([`Conversion::AdminTaken`]), so a wallet signature (`X-Wallet-Auth`, billing) always
//! means one account. The check and the update are one write job, and writes are
//! serialised (SQLite's one writer; PostgreSQL's write lock), so two conversions cannot
//! both pass it. The chain itself lets a wallet create its own account
//! (`newChainSecuredAccount`) after another was converted to it; the indexer mirrors what
//! the chain says, and [`Store::chain_secured_account_of`] then resolves the wallet to its
//! own account.

use alloy::primitives::{Address, keccak256};
use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, AccountMode, account_head, key_hash_from};
use super::integrity::{self, ACCOUNTS, columns};
use super::sql::params;
use super::{Result, Store, StoreError, outbox, signature_replay};
use appliance_domain::api_keys::KeyHash;
use typed_data::Verified;

/// An account's master key, whatever the account's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterKeyAccount {
    pub account: AccountId,
    pub mode: AccountMode,
    /// The admin wallet of a ChainSecured account (EIP-55).
    pub admin_wallet_address: Option<String>,
}

/// The outcome of a conversion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversion {
    /// Converted; the on-chain call is queued in the outbox. `api_key_hash` is preserved.
    Converted { api_key_hash: KeyHash },
    /// The account is ChainSecured already.
    AlreadyChainSecured,
    /// The new admin already administers a ChainSecured account; nothing changed (the
    /// signature is not consumed).
    AdminTaken,
    /// The signature was accepted before.
    Replayed,
}

/// A ChainSecured account resolved from its admin wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSecuredAccount {
    pub account: AccountId,
    pub api_key_hash: KeyHash,
    pub admin: Address,
}

impl Store {
    /// The account whose master key hashes to `hash`, in either mode.
    pub async fn master_key_account(&self, hash: KeyHash) -> Result<Option<MasterKeyAccount>> {
        self.read(move |conn| {
            Ok(conn.query_opt(
                &format!(
                    "SELECT id, managed, admin_wallet_address, {} FROM accounts WHERE api_key_hash = ?1",
                    ACCOUNTS.select("")
                ),
                params![hash.0],
                |r| {
                    r.seal(3, &ACCOUNTS)?;
                    Ok(MasterKeyAccount {
                        account: AccountId(r.get(0)?),
                        mode: AccountMode::from_column(r.get(1)?),
                        admin_wallet_address: r.get(2)?,
                    })
                },
            )?)
        })
        .await
    }

    /// Converts API-mode `account` to ChainSecured with `new_admin`, in one transaction:
    /// accepts the signature, queues `convertToChainSecuredAccount` for the API payer and
    /// makes the account ChainSecured (its master key stops authenticating; usage keys,
    /// groups, wallets and actions stay).
    pub async fn convert_account(
        &self,
        account: AccountId,
        new_admin: Address,
        signature: Verified,
    ) -> Result<Conversion> {
        self.write(move |tx| {
            let Some(head) = account_head(tx, account)? else {
                return Err(StoreError::NotFound("no such account".into()));
            };
            if head.mode == AccountMode::ChainSecured {
                return Ok(Conversion::AlreadyChainSecured);
            }
            let api_key_hash = key_hash_from(&head.api_key_hash)?;
            let taken = tx.query_opt(
                &format!(
                    "SELECT id, {} FROM accounts
                     WHERE managed = 0 AND lower(admin_wallet_address) = lower(?1) LIMIT 1",
                    ACCOUNTS.select("")
                ),
                params![new_admin.to_checksum(None)],
                |r| {
                    r.seal(1, &ACCOUNTS)?;
                    r.get::<i64>(0)
                },
            )?;
            if taken.is_some() {
                return Ok(Conversion::AdminTaken);
            }
            if !signature_replay::accept(tx, &signature)? {
                return Ok(Conversion::Replayed);
            }
            // Queued while the account is still in API mode (the outbox skips
            // ChainSecured ones).
            outbox::record(tx, account, &MirrorOp::ConvertAccount { new_admin })?;
            let admin = new_admin.to_checksum(None);
            integrity::update_eq(tx, &ACCOUNTS, columns![("id", account.0)], |row| {
                row.set("managed", &0i64)?;
                row.set("admin_wallet_address", &admin)?;
                Ok(true)
            })?;
            Ok(Conversion::Converted { api_key_hash })
        })
        .await
    }

    /// The ChainSecured account administered by `admin`: the one it created on chain
    /// (`apiKeyHash = keccak256(admin)`) if any, else the oldest one converted to it.
    pub async fn chain_secured_account_of(
        &self,
        admin: Address,
    ) -> Result<Option<ChainSecuredAccount>> {
        self.read(move |conn| {
            let own = keccak256(admin.as_slice());
            Ok(conn
                .query_opt(
                    &format!(
                        "SELECT id, api_key_hash, {} FROM accounts
                         WHERE managed = 0 AND lower(admin_wallet_address) = lower(?1)
                         ORDER BY api_key_hash = ?2 DESC, id LIMIT 1",
                        ACCOUNTS.select("")
                    ),
                    params![admin.to_checksum(None), own.as_slice()],
                    |r| {
                        r.seal(2, &ACCOUNTS)?;
                        Ok((r.get::<i64>(0)?, r.get::<Vec<u8>>(1)?))
                    },
                )?
                .and_then(|(id, hash)| {
                    Some(ChainSecuredAccount {
                        account: AccountId(id),
                        api_key_hash: KeyHash(hash.as_slice().try_into().ok()?),
                        admin,
                    })
                }))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::OutboxEntry;
    use crate::testing::store_test;
    use crate::testing::{identity, now, signature};
    use crate::{InitialCredit, NewAccount, NewUsageKey, ResolvedKey};
    use alloy::primitives::B256;
    use appliance_domain::authz::{GroupSet, Permissions};

    #[tokio::test]
    async fn admin_wallet_lookup_uses_its_index_not_a_table_scan() {
        let db = crate::testing::TestDb::sqlite();
        let store = db.open().await;
        let plan: Vec<String> = store
            .read(|c| {
                let c = c
                    .as_sqlite()
                    .ok_or_else(|| StoreError::Task("SQLite only".into()))?;
                let mut stmt = c.prepare(
                    "EXPLAIN QUERY PLAN SELECT id, api_key_hash FROM accounts
                     WHERE managed = 0 AND lower(admin_wallet_address) = lower(?1)",
                )?;
                let rows = stmt
                    .query_map(["0xAbC"], |r| r.get::<_, String>(3))?
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX accounts_by_admin_wallet")),
            "X-Wallet-Auth lookups would scan every account: {plan:?}"
        );
    }

    store_test! {
    async fn a_conversion_the_chain_refuses_leaves_the_account_in_api_mode(db) {
        let store = db.open().await;
        let new = |n: u8| NewAccount {
            api_key_hash: KeyHash([n; 32]),
            name: format!("{n}"),
            description: String::new(),
            email: None,
            wallet: identity(n),
        };
        let refused = store
            .create_account(new(21), InitialCredit::NONE)
            .await
            .unwrap();
        let mined = store
            .create_account(new(22), InitialCredit::NONE)
            .await
            .unwrap();
        for (account, n) in [(refused, 23), (mined, 24)] {
            // One admin per account.
            let admin = Address::repeat_byte(0xC0 + n);
            store
                .convert_account(account, admin, signature(n, now()))
                .await
                .unwrap();
        }
        let entries = store.outbox_pending(100).await.unwrap();
        let seq_of = |key: u8| {
            entries
                .iter()
                .find(|e| {
                    e.api_key_hash == B256::from([key; 32])
                        && matches!(e.op, MirrorOp::ConvertAccount { .. })
                })
                .unwrap()
                .seq
        };
        // An unrelated entry (account 21's creation) fails for good.
        let first = entries.first().unwrap().seq;
        store.outbox_fail(first, "refused".into()).await.unwrap();
        let master = |key: u8| {
            let store = store.clone();
            async move {
                store
                    .master_key_account(KeyHash([key; 32]))
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        assert_eq!(
            master(21).await.mode,
            AccountMode::ChainSecured,
            "an unrelated failure undid it"
        );
        assert_eq!(master(22).await.mode, AccountMode::ChainSecured);
        // The chain refuses account 21's conversion in a batch, then again alone: it is
        // API mode again and its master key works; account 22 stays ChainSecured.
        for nonce in 0..2 {
            let batch = store
                .outbox_record_batch(vec![seq_of(21)], 0, nonce, vec![1], B256::repeat_byte(1))
                .await
                .unwrap();
            assert_eq!(master(21).await.mode == AccountMode::Api, nonce == 2);
            store
                .outbox_settle(batch.id, false, B256::repeat_byte(1), 1, 21_000)
                .await
                .unwrap();
        }
        let back = master(21).await;
        assert_eq!(back.mode, AccountMode::Api);
        assert_eq!(back.admin_wallet_address, None);
        assert!(
            store
                .resolve_key(KeyHash([21; 32]))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(master(22).await.mode, AccountMode::ChainSecured);
        assert_eq!(store.resolve_key(KeyHash([22; 32])).await.unwrap(), None);
    }

    async fn a_wallet_is_the_admin_of_at_most_one_account(db) {
        let store = db.open().await;
        let new = |n: u8| NewAccount {
            api_key_hash: KeyHash([n; 32]),
            name: format!("{n}"),
            description: String::new(),
            email: None,
            wallet: identity(n),
        };
        let first = store.create_account(new(31), InitialCredit::NONE).await.unwrap();
        let second = store.create_account(new(32), InitialCredit::NONE).await.unwrap();
        let admin = Address::repeat_byte(0xE1);
        assert!(matches!(
            store
                .convert_account(first, admin, signature(33, now()))
                .await
                .unwrap(),
            Conversion::Converted { .. }
        ));
        let queued = store.outbox_pending(100).await.unwrap().len();
        let second_signature = signature(34, now());
        assert_eq!(
            store
                .convert_account(second, admin, second_signature)
                .await
                .unwrap(),
            Conversion::AdminTaken
        );
        // Nothing changed: still API mode, nothing queued, the signature not consumed.
        let master = store
            .master_key_account(KeyHash([32; 32]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(master.mode, AccountMode::Api);
        assert_eq!(master.admin_wallet_address, None);
        assert_eq!(store.outbox_pending(100).await.unwrap().len(), queued);
        assert!(
            !store
                .signature_accepted(second_signature.digest)
                .await
                .unwrap()
        );
        assert_eq!(
            store.chain_secured_account_of(admin).await.unwrap().map(|a| a.account),
            Some(first)
        );
        // Another wallet may take the second account.
        assert!(matches!(
            store
                .convert_account(second, Address::repeat_byte(0xE2), signature(35, now()))
                .await
                .unwrap(),
            Conversion::Converted { .. }
        ));
    }

    async fn conversion_queues_the_chain_call_and_unmanages_the_account_once(db) {
        let store = db.open().await;
        let key = KeyHash([7; 32]);
        let account = store
            .create_account(
                NewAccount {
                    api_key_hash: key,
                    name: "a".into(),
                    description: String::new(),
                    email: None,
                    wallet: identity(8),
                },
                InitialCredit::NONE,
            )
            .await
            .unwrap();
        let usage = KeyHash([6; 32]);
        let granted = Permissions {
            can_create_groups: true,
            can_create_pkps: true,
            add_pkp_to_groups: GroupSet::new(vec![0]),
            execute_in_groups: GroupSet::new(vec![5]),
            ..Permissions::default()
        };
        store
            .add_usage_key(
                account,
                NewUsageKey {
                    key_hash: usage,
                    name: "u".into(),
                    description: String::new(),
                    permissions: granted.clone(),
                },
                crate::Charge::free(),
            )
            .await
            .unwrap();
        let admin = Address::repeat_byte(0xAB);
        assert_eq!(
            store
                .convert_account(account, admin, signature(9, now()))
                .await
                .unwrap(),
            Conversion::Converted { api_key_hash: key }
        );
        let entries: Vec<OutboxEntry> = store.outbox_pending(100).await.unwrap();
        assert_eq!(
            entries.last().map(|e| &e.op),
            Some(&MirrorOp::ConvertAccount { new_admin: admin })
        );
        assert_eq!(
            entries.last().map(|e| e.api_key_hash),
            Some(B256::from(key.0))
        );
        let master = store.master_key_account(key).await.unwrap().unwrap();
        assert_eq!(master.mode, AccountMode::ChainSecured);
        assert_eq!(master.admin_wallet_address, Some(admin.to_checksum(None)));
        assert_eq!(store.resolve_key(key).await.unwrap(), None);
        // Its usage keys keep running actions, and only that: writes are the wallet's.
        match store.resolve_key(usage).await.unwrap() {
            Some(ResolvedKey::Usage { permissions, .. }) => assert_eq!(
                permissions,
                Permissions {
                    execute_in_groups: granted.execute_in_groups.clone(),
                    ..Permissions::default()
                }
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            store.chain_secured_account_of(admin).await.unwrap(),
            Some(ChainSecuredAccount {
                account,
                api_key_hash: key,
                admin
            })
        );
        // Again (a fresh signature): already ChainSecured, and nothing more queued.
        assert_eq!(
            store
                .convert_account(account, admin, signature(10, now()))
                .await
                .unwrap(),
            Conversion::AlreadyChainSecured
        );
        assert_eq!(
            store.outbox_pending(100).await.unwrap().len(),
            entries.len()
        );
    }
    }
}
