//! Replay protection of wallet signatures: a signature is accepted once. Its EIP-712
//! digest is inserted into `accepted_signatures` in the same transaction as whatever it
//! authorizes, and the primary key makes a second insert fail. Rows are kept until the
//! signature's issuedAt window has passed (then the window check alone refuses it) and
//! pruned afterwards.

use super::base::{WalletIdentity, is_unique_violation};
use super::integrity::ACCEPTED_SIGNATURES;
use super::sql::{Conn, params};
use super::{Result, Store, StoreError, now_unix, wallets};
use crate::api_keys::KeyHash;
use crate::typed_data::Verified;

/// Records `signature` as accepted; `false` if it already was (a replay). Prunes rows whose
/// window has passed.
pub(super) fn accept(tx: Conn<'_>, signature: &Verified) -> Result<bool> {
    let now = now_unix();
    tx.execute(
        "DELETE FROM accepted_signatures WHERE expires_at < ?1",
        params![now],
    )?;
    // A replay inserts nothing (and fails no statement: on PostgreSQL a failed statement
    // would abort the whole write).
    let inserted = tx.execute(
        "INSERT INTO accepted_signatures (digest, flow, signer, expires_at, accepted_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (digest) DO NOTHING",
        params![
            signature.digest.as_slice(),
            signature.flow.primary_type(),
            signature.signer.as_slice(),
            signature.remember_until(),
            now
        ],
    )?;
    Ok(inserted == 1)
}

impl Store {
    /// Whether a signature over `digest` was accepted (and is still remembered).
    pub async fn signature_accepted(&self, digest: alloy::primitives::B256) -> Result<bool> {
        self.read(move |conn| {
            Ok(conn
                .query_opt(
                    &format!(
                        "SELECT {} FROM accepted_signatures WHERE digest = ?1",
                        ACCEPTED_SIGNATURES.select("")
                    ),
                    params![digest.as_slice()],
                    |r| r.seal(0, &ACCEPTED_SIGNATURES),
                )?
                .is_some())
        })
        .await
    }

    /// Accepts a signature that authorizes nothing stored (e.g. `X-Wallet-Auth`); `false`
    /// if it was accepted before.
    pub async fn accept_signature(&self, signature: Verified) -> Result<bool> {
        self.write(move |tx| accept(tx, &signature)).await
    }

    /// Accepts `signature` and stores the wallet minted for it, unattached and recorded as
    /// minted by the signer (it joins an account when that signer, as the account's admin,
    /// registers it on chain); with `usage_key`, also records that key hash as the signer's.
    /// `false`, storing nothing, if the signature was accepted before.
    pub async fn record_signed_wallet(
        &self,
        signature: Verified,
        wallet: WalletIdentity,
        usage_key: Option<KeyHash>,
    ) -> Result<bool> {
        self.write(move |tx| {
            if !accept(tx, &signature)? {
                return Ok(false);
            }
            let row = wallets::insert(tx, None, &wallet, "", "")?;
            tx.execute(
                "UPDATE wallets SET minted_by = ?2 WHERE id = ?1",
                params![row, signature.signer.as_slice()],
            )?;
            if let Some(key) = usage_key {
                tx.execute(
                    "INSERT INTO minted_usage_keys (key_hash, minted_by, minted_at)
                     VALUES (?1, ?2, ?3)",
                    params![key.0, signature.signer.as_slice(), now_unix()],
                )
                .map_err(|e| {
                    if is_unique_violation(&e) {
                        StoreError::Conflict("this usage key was minted before".into())
                    } else {
                        e.into()
                    }
                })?;
            }
            Ok(true)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::params;
    use crate::store::testing::store_test;
    use crate::store::testing::{identity, now, signature};

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

    store_test! {
    async fn expired_signatures_are_pruned(db) {
        let store = db.open().await;
        // Issued long ago: its window has passed, so its row may go.
        store.accept_signature(signature(1, 1_000)).await.unwrap();
        store.accept_signature(signature(2, now())).await.unwrap();
        let rows = || async {
            store
                .read(|c| {
                    Ok(
                        c.query_row("SELECT count(*) FROM accepted_signatures", params![], |r| {
                            r.get::<i64>(0)
                        })?,
                    )
                })
                .await
                .unwrap()
        };
        assert_eq!(rows().await, 1, "the expired row was not pruned");
    }

    async fn a_replayed_wallet_signature_stores_nothing(db) {
        let store = db.open().await;
        let sig = signature(3, now());
        assert!(
            store
                .record_signed_wallet(sig, identity(4), None)
                .await
                .unwrap()
        );
        assert!(
            !store
                .record_signed_wallet(sig, identity(5), None)
                .await
                .unwrap()
        );
        let wallets: i64 = store
            .read(|c| {
                Ok(c.query_row("SELECT count(*) FROM wallets WHERE account_id IS NULL", params![],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap();
        assert_eq!(wallets, 1);
    }
    }
}
