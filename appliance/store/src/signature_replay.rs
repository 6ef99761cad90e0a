//! Replay protection of wallet signatures: a signature is accepted once. Its EIP-712
//! digest is inserted into `accepted_signatures` in the same transaction as whatever it
//! authorizes, and the primary key makes a second insert fail. Rows are kept until the
//! signature's issuedAt window has passed (then the window check alone refuses it) and
//! pruned afterwards.
//!
//! Invariant: "passed" is decided by the database's clock, never by a replica's own
//! ([`database_now`]): rows are pruned, and signatures whose window has passed are
//! refused, against the same clock every replica shares. A replica whose clock runs fast
//! therefore cannot prune a row other replicas still need (which would reopen a replay
//! window on them), and one whose clock runs slow cannot accept a signature whose row
//! may already be gone.

use super::base::WalletIdentity;
use super::integrity::{self, ACCEPTED_SIGNATURES, MINTED_USAGE_KEYS, WALLETS, columns};
use super::sql::{Conn, Engine, params};
use super::{Result, Store, StoreError, now_unix, wallets};
use appliance_domain::api_keys::KeyHash;
use typed_data::Verified;

/// Records `signature` as accepted; `false` if it already was (a replay), or if its
/// window has passed by the database's clock. Prunes rows whose window has passed.
pub(super) fn accept(tx: Conn<'_>, signature: &Verified) -> Result<bool> {
    accept_at(tx, signature, now_unix())
}

/// The database server's clock, in Unix seconds (for SQLite, inside the CVM, the
/// machine's).
fn database_now(tx: Conn<'_>) -> Result<i64> {
    let sql = match tx.engine() {
        Engine::Sqlite => "SELECT CAST(strftime('%s', 'now') AS INTEGER)",
        Engine::Postgres => "SELECT CAST(floor(extract(epoch FROM now())) AS BIGINT)",
    };
    Ok(tx.query_row(sql, params![], |r| r.get::<i64>(0))?)
}

/// [`accept`], with `replica_now` this replica's clock: recorded as `accepted_at` (for
/// people reading the table), never used to decide what is pruned or refused.
fn accept_at(tx: Conn<'_>, signature: &Verified, replica_now: i64) -> Result<bool> {
    let now = database_now(tx)?;
    integrity::prune(tx, &ACCEPTED_SIGNATURES, "expires_at < ?1", params![now])?;
    if signature.remember_until() < now {
        // Its row, had it been accepted before, may be pruned already: it cannot be
        // told apart from a replay, so it is refused as one.
        return Ok(false);
    }
    // A replay inserts nothing (and fails no statement: on PostgreSQL a failed statement
    // would abort the whole write).
    integrity::insert_or_ignore(
        tx,
        &ACCEPTED_SIGNATURES,
        columns![
            ("digest", signature.digest.as_slice()),
            ("flow", signature.flow.primary_type()),
            ("signer", signature.signer.as_slice()),
            ("expires_at", signature.remember_until()),
            ("accepted_at", replica_now),
        ],
    )
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
            integrity::update_eq(tx, &WALLETS, columns![("id", row)], |w| {
                w.set("minted_by", &signature.signer.as_slice())?;
                Ok(true)
            })?;
            if let Some(key) = usage_key {
                integrity::insert(
                    tx,
                    &MINTED_USAGE_KEYS,
                    columns![
                        ("key_hash", key.0),
                        ("minted_by", signature.signer.as_slice()),
                        ("minted_at", now_unix()),
                    ],
                )
                .map_err(|e| {
                    if integrity::is_unique_violation(&e) {
                        StoreError::Conflict("this usage key was minted before".into())
                    } else {
                        e
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
    use crate::sql::params;
    use crate::testing::store_test;
    use crate::testing::{identity, now, signature};

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
        // A row whose window passed long ago (as if accepted then): it may go.
        store
            .write(|tx| {
                integrity::insert(
                    tx,
                    &ACCEPTED_SIGNATURES,
                    columns![
                        ("digest", [1u8; 32].as_slice()),
                        ("flow", "ConvertAccount"),
                        ("signer", [1u8; 20].as_slice()),
                        ("expires_at", 1_000i64),
                        ("accepted_at", 700i64),
                    ],
                )
            })
            .await
            .unwrap();
        assert!(store.accept_signature(signature(2, now())).await.unwrap());
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

    async fn a_fast_replica_clock_prunes_no_signature_still_in_its_window(db) {
        let store = db.open().await;
        let sig = signature(11, now());
        assert!(store.accept_signature(sig).await.unwrap());
        // A replica whose clock runs a day ahead accepts a signature (its own window
        // check passed by its own clock) and prunes on the way.
        let day = 86_400;
        let ahead = signature(12, now() + day);
        assert!(
            store
                .write(move |tx| accept_at(tx, &ahead, now_unix() + day as i64))
                .await
                .unwrap()
        );
        assert!(
            store.signature_accepted(sig.digest).await.unwrap(),
            "a fast clock pruned a signature still in its window"
        );
        assert!(
            !store.accept_signature(sig).await.unwrap(),
            "a replay was accepted after a fast clock pruned"
        );
    }

    async fn a_slow_replica_clock_cannot_accept_a_signature_past_its_window(db) {
        let store = db.open().await;
        // Issued 20 minutes ago: within the window of a replica whose clock is 20
        // minutes slow, past it by the database's clock (where its row may be gone).
        let late = now() - 1_200;
        let old = signature(13, late);
        let slow = now_unix() - 1_200;
        assert!(
            !store
                .write(move |tx| accept_at(tx, &old, slow))
                .await
                .unwrap()
        );
        assert!(!store.signature_accepted(old.digest).await.unwrap());
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
