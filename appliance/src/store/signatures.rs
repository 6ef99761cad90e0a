//! Wallet-signature flows: accepted signatures (replay protection), wallets minted for a
//! signature, conversion of an API-mode account to ChainSecured, and finding the
//! ChainSecured account a wallet administers.
//!
//! A signature is accepted once: its EIP-712 digest is inserted into
//! `accepted_signatures` in the same transaction as whatever it authorizes, and the
//! primary key makes a second insert fail. Rows are kept until the signature's issuedAt
//! window has passed (then the window check alone refuses it) and pruned afterwards.

use alloy::primitives::{Address, keccak256};
use rusqlite::{OptionalExtension, Transaction, params};

use super::accounts::is_unique_violation;
use super::outbox::MirrorOp;
use super::{AccountId, Result, Store, StoreError, WalletIdentity, now_unix};
use crate::secrets::KeyHash;
use crate::typed_data::Verified;

/// Records `signature` as accepted; `false` if it already was (a replay). Prunes rows whose
/// window has passed.
pub(super) fn accept(tx: &Transaction<'_>, signature: &Verified) -> Result<bool> {
    let now = now_unix();
    tx.prepare_cached("DELETE FROM accepted_signatures WHERE expires_at < ?1")?
        .execute([now])?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO accepted_signatures (digest, flow, signer, expires_at, accepted_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            signature.digest.as_slice(),
            signature.flow.primary_type(),
            signature.signer.as_slice(),
            signature.remember_until(),
            now
        ]);
    match inserted {
        Ok(_) => Ok(true),
        Err(e) if is_primary_key_violation(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn is_primary_key_violation(err: &rusqlite::Error) -> bool {
    is_unique_violation(err)
        || matches!(
            err,
            rusqlite::Error::SqliteFailure(e, _)
                if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        )
}

/// An account's master key, whatever the account's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterKeyAccount {
    pub account: AccountId,
    /// `true` in API mode; `false` once converted to ChainSecured.
    pub managed: bool,
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
    /// Whether a signature over `digest` was accepted (and is still remembered).
    pub async fn signature_accepted(&self, digest: alloy::primitives::B256) -> Result<bool> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM accepted_signatures WHERE digest = ?1")?
                .query_row([digest.as_slice()], |_| Ok(()))
                .optional()?
                .is_some())
        })
        .await
    }

    /// Accepts a signature that authorizes nothing stored (e.g. `X-Wallet-Auth`); `false`
    /// if it was accepted before.
    pub async fn accept_signature(&self, signature: Verified) -> Result<bool> {
        self.write(move |tx| accept(tx, &signature)).await
    }

    /// Accepts `signature` and stores the wallet minted for it, unattached (it joins an
    /// account when its owner registers it on chain); `false`, storing nothing, if the
    /// signature was accepted before.
    pub async fn record_signed_wallet(
        &self,
        signature: Verified,
        wallet: WalletIdentity,
    ) -> Result<bool> {
        self.write(move |tx| {
            if !accept(tx, &signature)? {
                return Ok(false);
            }
            super::wallets::insert(tx, None, &wallet, "", "")?;
            Ok(true)
        })
        .await
    }

    /// The account whose master key hashes to `hash`, in either mode.
    pub async fn master_key_account(&self, hash: KeyHash) -> Result<Option<MasterKeyAccount>> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, managed, admin_wallet_address FROM accounts WHERE api_key_hash = ?1",
                )?
                .query_row([hash.0.as_slice()], |r| {
                    Ok(MasterKeyAccount {
                        account: AccountId(r.get(0)?),
                        managed: r.get(1)?,
                        admin_wallet_address: r.get(2)?,
                    })
                })
                .optional()?)
        })
        .await
    }

    /// Converts API-mode `account` to ChainSecured with `new_admin`, in one transaction:
    /// accepts the signature, queues `convertToChainSecuredAccount` for the API payer and
    /// makes the account unmanaged (its master key stops authenticating; usage keys,
    /// groups, wallets and actions stay).
    pub async fn convert_account(
        &self,
        account: AccountId,
        new_admin: Address,
        signature: Verified,
    ) -> Result<Conversion> {
        self.write(move |tx| {
            let row: Option<(Vec<u8>, bool)> = tx
                .prepare_cached("SELECT api_key_hash, managed FROM accounts WHERE id = ?1")?
                .query_row([account.0], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((hash, managed)) = row else {
                return Err(StoreError::NotFound("no such account".into()));
            };
            if !managed {
                return Ok(Conversion::AlreadyChainSecured);
            }
            let api_key_hash =
                KeyHash(hash.as_slice().try_into().map_err(|_| {
                    StoreError::Corrupt("an account key hash is not 32 bytes".into())
                })?);
            if !accept(tx, &signature)? {
                return Ok(Conversion::Replayed);
            }
            // Queued while the account is still managed (the outbox skips unmanaged ones).
            super::outbox::record(tx, account, &MirrorOp::ConvertAccount { new_admin })?;
            tx.execute(
                "UPDATE accounts SET managed = 0, admin_wallet_address = ?2 WHERE id = ?1",
                params![account.0, new_admin.to_checksum(None)],
            )?;
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
                .prepare_cached(
                    "SELECT id, api_key_hash FROM accounts
                     WHERE managed = 0 AND lower(admin_wallet_address) = lower(?1)
                     ORDER BY api_key_hash = ?2 DESC, id LIMIT 1",
                )?
                .query_row(params![admin.to_checksum(None), own.as_slice()], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .optional()?
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
    use crate::authz::{GroupSet, Permissions};
    use crate::store::outbox::OutboxEntry;
    use crate::store::{NewAccount, NewUsageKey, ResolvedKey};
    use crate::typed_data::Flow;
    use alloy::primitives::B256;
    use keyservice_api::{DerivationPath, PkpId};

    fn signature(n: u8, issued_at: u64) -> Verified {
        Verified {
            flow: Flow::ConvertAccount,
            signer: Address::repeat_byte(n),
            issued_at,
            digest: B256::repeat_byte(n),
        }
    }

    fn identity(n: u8) -> WalletIdentity {
        WalletIdentity {
            pkp_id: PkpId([n; 32]),
            address: keyservice_api::Address([n; 20]),
            derivation_path: DerivationPath([n; 32]),
        }
    }

    fn now() -> u64 {
        now_unix() as u64
    }

    #[tokio::test]
    async fn a_signature_is_accepted_once_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Store::open(&path).unwrap();
        let sig = signature(1, now());
        assert!(store.accept_signature(sig).await.unwrap());
        assert!(!store.accept_signature(sig).await.unwrap());
        assert!(store.accept_signature(signature(2, now())).await.unwrap());
        drop(store);
        let store = Store::open(&path).unwrap();
        assert!(
            !store.accept_signature(sig).await.unwrap(),
            "a restart reopened replay"
        );
    }

    #[tokio::test]
    async fn admin_wallet_lookup_uses_its_index_not_a_table_scan() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let plan: Vec<String> = store
            .read(|c| {
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

    #[tokio::test]
    async fn a_conversion_the_chain_refuses_leaves_the_account_in_api_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let new = |n: u8| NewAccount {
            api_key_hash: KeyHash([n; 32]),
            name: format!("{n}"),
            description: String::new(),
            email: None,
            wallet: identity(n),
        };
        let refused = store.create_account(new(21)).await.unwrap();
        let mined = store.create_account(new(22)).await.unwrap();
        let admin = Address::repeat_byte(0xCD);
        for (account, n) in [(refused, 23), (mined, 24)] {
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
        assert!(!master(21).await.managed, "an unrelated failure undid it");
        assert!(!master(22).await.managed);
        // The chain refuses account 21's conversion in a batch, then again alone: it is
        // API mode again and its master key works; account 22 stays ChainSecured.
        for nonce in 0..2 {
            let batch = store
                .outbox_record_batch(vec![seq_of(21)], 0, nonce, vec![1], B256::repeat_byte(1))
                .await
                .unwrap();
            assert!(master(21).await.managed == (nonce == 2));
            store
                .outbox_settle(batch.id, false, B256::repeat_byte(1), 1, 21_000)
                .await
                .unwrap();
        }
        let back = master(21).await;
        assert!(back.managed);
        assert_eq!(back.admin_wallet_address, None);
        assert!(
            store
                .resolve_key(KeyHash([21; 32]))
                .await
                .unwrap()
                .is_some()
        );
        assert!(!master(22).await.managed);
        assert_eq!(store.resolve_key(KeyHash([22; 32])).await.unwrap(), None);
    }

    #[tokio::test]
    async fn expired_signatures_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        // Issued long ago: its window has passed, so its row may go.
        store.accept_signature(signature(1, 1_000)).await.unwrap();
        store.accept_signature(signature(2, now())).await.unwrap();
        let rows = || async {
            store
                .read(|c| {
                    Ok(
                        c.query_row("SELECT count(*) FROM accepted_signatures", [], |r| {
                            r.get::<_, i64>(0)
                        })?,
                    )
                })
                .await
                .unwrap()
        };
        assert_eq!(rows().await, 1, "the expired row was not pruned");
    }

    #[tokio::test]
    async fn a_replayed_wallet_signature_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let sig = signature(3, now());
        assert!(store.record_signed_wallet(sig, identity(4)).await.unwrap());
        assert!(!store.record_signed_wallet(sig, identity(5)).await.unwrap());
        let wallets: i64 = store
            .read(|c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM wallets WHERE account_id IS NULL",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap();
        assert_eq!(wallets, 1);
    }

    #[tokio::test]
    async fn conversion_queues_the_chain_call_and_unmanages_the_account_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let key = KeyHash([7; 32]);
        let account = store
            .create_account(NewAccount {
                api_key_hash: key,
                name: "a".into(),
                description: String::new(),
                email: None,
                wallet: identity(8),
            })
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
        assert!(!master.managed);
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
