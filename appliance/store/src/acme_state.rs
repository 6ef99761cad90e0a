//! ACME state shared by replicas (PostgreSQL): the account and certificate documents
//! (`acme_files`, the same JSON the single appliance keeps in `<data_dir>/acme/`, their
//! private keys sealed by keyservice under the shared root), and the answers to the
//! CA's pending challenges (`acme_challenges`), which every replica serves, whichever of
//! them the CA's validation reaches. The replica that leads `acme` orders and renews;
//! the others follow (`crate::acme`).
//!
//! These rows carry no MAC: the keys in them are AEAD-sealed by keyservice, the chain is
//! checked against its key before it is served, and a challenge answer only proves
//! control of the domain to the CA, which the database's operator could not use to get a
//! certificate for a key it does not hold.

use super::sql::params;
use super::{Result, Store, now_unix};

/// A pending challenge: `kind` is `tls-alpn-01` (name: the domain; value: hex of the
/// key authorization's SHA-256) or `http-01` (name: the token; value: the key
/// authorization).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcmeChallenge {
    pub kind: String,
    pub name: String,
    pub value: String,
}

impl Store {
    /// The ACME document `name`, if stored.
    pub async fn acme_file(&self, name: String) -> Result<Option<Vec<u8>>> {
        self.read(move |conn| {
            Ok(conn.query_opt(
                "SELECT content FROM acme_files WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )?)
        })
        .await
    }

    pub async fn put_acme_file(&self, name: String, content: Vec<u8>) -> Result<()> {
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO acme_files (name, content, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
                params![name, content, now_unix()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn remove_acme_file(&self, name: String) -> Result<()> {
        self.write(move |tx| {
            tx.execute("DELETE FROM acme_files WHERE name = ?1", params![name])?;
            Ok(())
        })
        .await
    }

    /// The challenges still pending (not past their expiry).
    pub async fn acme_challenges(&self) -> Result<Vec<AcmeChallenge>> {
        self.read(|conn| {
            Ok(conn.query_map(
                "SELECT kind, name, value FROM acme_challenges WHERE expires_at >= ?1
                 ORDER BY kind, name",
                params![now_unix()],
                |r| {
                    Ok(AcmeChallenge {
                        kind: r.get(0)?,
                        name: r.get(1)?,
                        value: r.get(2)?,
                    })
                },
            )?)
        })
        .await
    }

    /// Publishes a challenge answer for every replica, until `expires_at` (Unix seconds)
    /// at the latest; expired ones are dropped.
    pub async fn put_acme_challenge(
        &self,
        challenge: AcmeChallenge,
        expires_at: i64,
    ) -> Result<()> {
        self.write(move |tx| {
            tx.execute(
                "DELETE FROM acme_challenges WHERE expires_at < ?1",
                params![now_unix()],
            )?;
            tx.execute(
                "INSERT INTO acme_challenges (kind, name, value, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                params![challenge.kind, challenge.name, challenge.value, expires_at],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn remove_acme_challenge(&self, kind: String, name: String) -> Result<()> {
        self.write(move |tx| {
            tx.execute(
                "DELETE FROM acme_challenges WHERE kind = ?1 AND name = ?2",
                params![kind, name],
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

    store_test! {
    async fn documents_and_challenges_round_trip_and_expire(db) {
        let store = db.open().await;
        assert_eq!(store.acme_file("certificate.json".into()).await.unwrap(), None);
        store.put_acme_file("certificate.json".into(), b"{}".to_vec()).await.unwrap();
        store.put_acme_file("certificate.json".into(), b"{\"v\":2}".to_vec()).await.unwrap();
        assert_eq!(
            store.acme_file("certificate.json".into()).await.unwrap().as_deref(),
            Some(&b"{\"v\":2}"[..])
        );
        store.remove_acme_file("certificate.json".into()).await.unwrap();
        assert_eq!(store.acme_file("certificate.json".into()).await.unwrap(), None);

        let c = |name: &str| AcmeChallenge {
            kind: "tls-alpn-01".into(),
            name: name.into(),
            value: "ab".into(),
        };
        store.put_acme_challenge(c("live.example"), now_unix() + 60).await.unwrap();
        store.put_acme_challenge(c("gone.example"), now_unix() - 1).await.unwrap();
        assert_eq!(store.acme_challenges().await.unwrap(), vec![c("live.example")]);
        store
            .remove_acme_challenge("tls-alpn-01".into(), "live.example".into())
            .await
            .unwrap();
        assert!(store.acme_challenges().await.unwrap().is_empty());
    }
    }
}
