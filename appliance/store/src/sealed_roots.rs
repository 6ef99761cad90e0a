//! The shared sealed root: with several replicas, keyservice's root lives in the
//! database, sealed (the 101-byte sealed-root format of `keyservice/README.md`), once per
//! compose hash it was sealed to. A sealed root opens only inside a TEE running that
//! compose hash of this app, so the rows need no MAC of their own: a changed blob does
//! not open, and keyservice then refuses to start (`crate::shared_root`).

use super::sql::params;
use super::{Result, Store, StoreError, now_unix};

/// One sealed root row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRootRow {
    pub compose_hash: [u8; 32],
    pub sealed: Vec<u8>,
    /// keyservice's public fingerprint of the root inside.
    pub root_id: [u8; 32],
}

impl Store {
    /// Every sealed root the database holds (one per compose hash it was sealed to).
    pub async fn sealed_roots(&self) -> Result<Vec<SealedRootRow>> {
        self.read(|conn| {
            Ok(conn.query_map(
                "SELECT compose_hash, sealed, root_id FROM sealed_roots ORDER BY created_at, compose_hash",
                params![],
                |r| {
                    Ok(SealedRootRow {
                        compose_hash: r.get(0)?,
                        sealed: r.get(1)?,
                        root_id: r.get(2)?,
                    })
                },
            )?)
        })
        .await
    }

    /// Records `offer` as the app's root if the database holds none yet; answers the row
    /// for `offer`'s compose hash as it now stands: `offer` itself, or the root another
    /// replica recorded first (the caller adopts that one and forgets its own).
    pub async fn offer_first_root(&self, offer: SealedRootRow) -> Result<SealedRootRow> {
        self.write(move |tx| {
            let any: i64 =
                tx.query_row("SELECT count(*) FROM sealed_roots", params![], |r| r.get(0))?;
            if any == 0 {
                tx.execute(
                    "INSERT INTO sealed_roots (compose_hash, sealed, root_id, created_at)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![offer.compose_hash, offer.sealed, offer.root_id, now_unix()],
                )?;
            }
            tx.query_opt(
                "SELECT compose_hash, sealed, root_id FROM sealed_roots WHERE compose_hash = ?1",
                params![offer.compose_hash],
                |r| {
                    Ok(SealedRootRow {
                        compose_hash: r.get(0)?,
                        sealed: r.get(1)?,
                        root_id: r.get(2)?,
                    })
                },
            )?
            .ok_or_else(|| {
                StoreError::Conflict(
                    "the database holds the shared root, but not sealed for this compose hash"
                        .into(),
                )
            })
        })
        .await
    }

    /// Records `root_id` as the root this database's wallets derive from, the first time;
    /// answers the root recorded (the first one, whatever is passed later).
    pub async fn record_root_identity(&self, root_id: [u8; 32]) -> Result<[u8; 32]> {
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO root_identity (one, root_id) VALUES (1, ?1) ON CONFLICT (one) DO NOTHING",
                params![root_id],
            )?;
            Ok(tx.query_row("SELECT root_id FROM root_identity", params![], |r| r.get(0))?)
        })
        .await
    }

    /// Adds the root resealed for another compose hash (an upgrade: `appliance root
    /// import`); it must be the root the database already holds (same `root_id`).
    pub async fn import_sealed_root(&self, row: SealedRootRow) -> Result<()> {
        self.write(move |tx| {
            let ids = tx.query_map(
                "SELECT DISTINCT root_id FROM sealed_roots",
                params![],
                |r| r.get::<[u8; 32]>(0),
            )?;
            if !ids.is_empty() && !ids.contains(&row.root_id) {
                return Err(StoreError::Conflict(
                    "this sealed root is not the root the database's replicas run (another root id)"
                        .into(),
                ));
            }
            tx.execute(
                "INSERT INTO sealed_roots (compose_hash, sealed, root_id, created_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (compose_hash) DO UPDATE SET sealed = excluded.sealed",
                params![row.compose_hash, row.sealed, row.root_id, now_unix()],
            )?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store_test;

    fn row(hash: u8, root: u8) -> SealedRootRow {
        SealedRootRow {
            compose_hash: [hash; 32],
            sealed: vec![hash; 101],
            root_id: [root; 32],
        }
    }

    store_test! {
    async fn the_first_root_identity_sticks(db) {
        let store = db.open().await;
        assert_eq!(store.record_root_identity([1; 32]).await.unwrap(), [1; 32]);
        assert_eq!(store.record_root_identity([2; 32]).await.unwrap(), [1; 32]);
        drop(store);
        let store = db.open().await;
        assert_eq!(store.record_root_identity([3; 32]).await.unwrap(), [1; 32]);
    }

    async fn the_first_root_offered_wins_and_every_later_offer_gets_it(db) {
        let store = db.open().await;
        assert!(store.sealed_roots().await.unwrap().is_empty());
        assert_eq!(store.offer_first_root(row(1, 7)).await.unwrap(), row(1, 7));
        // A replica that raced and lost is told the winner's root.
        let mut late = row(1, 8);
        late.sealed = vec![9; 101];
        assert_eq!(store.offer_first_root(late).await.unwrap(), row(1, 7));
        // Another compose hash gets nothing from an offer: it needs an import (reseal).
        assert!(matches!(
            store.offer_first_root(row(2, 8)).await,
            Err(StoreError::Conflict(_))
        ));
        // An import of the same root for the new compose hash is kept; another root not.
        store.import_sealed_root(row(2, 7)).await.unwrap();
        assert!(matches!(
            store.import_sealed_root(row(3, 8)).await,
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(store.sealed_roots().await.unwrap(), vec![row(1, 7), row(2, 7)]);
    }
    }
}
