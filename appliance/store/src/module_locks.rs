//! The integrity lock of the modules actions import: for each module URL, the SHA-384 of
//! the body it had when the appliance first fetched it (trust on first use). A later
//! body of another hash is refused by the importer (`appliance-execution`), so a module
//! URL runs the same code for as long as its row exists.
//!
//! **The rows are sealed** (`module_locks` is a protected table of [`integrity`]): the
//! database is outside the TEE, and a lock row decides which code the appliance runs. A
//! database operator who could rewrite a URL's hash could make the appliance accept a
//! changed body for it, or, since the importer caches bodies by hash, serve the body of
//! another module (one they published themselves, already cached) under a trusted URL.
//! With the MAC a changed row is refused like any other ([`StoreError::Tampered`]); what
//! remains is deleting a row, which only makes the next import fetch the URL again and
//! record what the CDN serves then (the first use, again).
//!
//! Rows are never updated: a URL's lock is written once ([`Store::lock_module`]), by
//! whichever replica fetched it first. They hold no account and no secret (what public
//! modules some action imported).

use super::integrity::{self, MODULE_LOCKS, columns};
use super::sql::{Conn, params};
use super::{Result, Store, StoreError, now_unix};

/// Migration 16 (SQLite).
pub(super) const MIGRATION_16_SQL: &str = r#"
-- The integrity lock of imported modules: the SHA-384 each module URL had when first
-- fetched (store::module_locks). Written once per URL, never updated.
CREATE TABLE module_locks (
    url        TEXT    PRIMARY KEY CHECK (length(url) BETWEEN 1 AND 2048),
    sha384     BLOB    NOT NULL CHECK (length(sha384) = 48),
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    first_seen INTEGER NOT NULL,
    row_mac    BLOB
);
"#;

/// Migration 16 (PostgreSQL).
pub(super) const MIGRATION_16_POSTGRES: &str = r#"
CREATE TABLE module_locks (
    url        TEXT   PRIMARY KEY CHECK (length(url) BETWEEN 1 AND 2048),
    sha384     BYTEA  NOT NULL CHECK (octet_length(sha384) = 48),
    bytes      BIGINT NOT NULL CHECK (bytes >= 0),
    first_seen BIGINT NOT NULL,
    row_mac    BYTEA
);
"#;

/// Longest module URL the lock keeps (the table's check).
pub const MAX_MODULE_URL_LEN: usize = 2048;

/// A module URL's lock: the SHA-384 of its body, and the body's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleLock {
    pub sha384: [u8; 48],
    pub bytes: u64,
}

fn lock_of(row: &super::sql::Row<'_>) -> super::sql::SqlResult<Option<ModuleLock>> {
    row.seal(0, &MODULE_LOCKS)?;
    let hash: Vec<u8> = row.get(1)?;
    let bytes: u64 = row.get(2)?;
    Ok(<[u8; 48]>::try_from(hash.as_slice())
        .ok()
        .map(|sha384| ModuleLock { sha384, bytes }))
}

fn read_lock(conn: Conn<'_>, url: &str) -> Result<Option<ModuleLock>> {
    let found = conn.query_opt(
        &format!(
            "SELECT {} FROM module_locks WHERE url = ?1",
            MODULE_LOCKS.select("")
        ),
        params![url],
        lock_of,
    )?;
    match found {
        None => Ok(None),
        Some(Some(lock)) => Ok(Some(lock)),
        // The table's check keeps 48 bytes; anything else was written behind our back.
        Some(None) => Err(StoreError::Tampered {
            table: MODULE_LOCKS.name,
            row: format!("url={}", url.chars().take(64).collect::<String>()),
        }),
    }
}

impl Store {
    /// The lock recorded for `url`, if any.
    pub async fn module_lock(&self, url: &str) -> Result<Option<ModuleLock>> {
        let url = url.to_owned();
        self.read(move |conn| read_lock(conn, &url)).await
    }

    /// Records `lock` for `url` unless a lock is recorded already, and returns the lock
    /// in force: `lock` itself, or the one recorded first (by another job or replica),
    /// which the caller must compare with what it fetched. A URL longer than
    /// [`MAX_MODULE_URL_LEN`] is refused by the table's check (an error, nothing kept).
    pub async fn lock_module(&self, url: &str, lock: ModuleLock) -> Result<ModuleLock> {
        let url = url.to_owned();
        self.write(move |tx| {
            let bytes = i64::try_from(lock.bytes)
                .map_err(|_| StoreError::Task("a module body over i64::MAX bytes".into()))?;
            integrity::insert_or_ignore(
                tx,
                &MODULE_LOCKS,
                columns![
                    ("url", url.as_str()),
                    ("sha384", lock.sha384.as_slice()),
                    ("bytes", bytes),
                    ("first_seen", now_unix()),
                ],
            )?;
            read_lock(tx, &url)?
                .ok_or_else(|| StoreError::Task(format!("the lock of {url} was not kept")))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store_test;

    fn lock(byte: u8, bytes: u64) -> ModuleLock {
        ModuleLock {
            sha384: [byte; 48],
            bytes,
        }
    }

    const URL: &str = "https://cdn.test/zod@3.22.4";

    store_test! {
        async fn the_first_lock_of_a_url_stays(db) {
            let store = db.open().await;
            assert_eq!(store.module_lock(URL).await.unwrap(), None);
            assert_eq!(store.lock_module(URL, lock(1, 10)).await.unwrap(), lock(1, 10));
            // A second, different body does not replace it: the first one is answered.
            assert_eq!(store.lock_module(URL, lock(2, 20)).await.unwrap(), lock(1, 10));
            assert_eq!(store.module_lock(URL).await.unwrap(), Some(lock(1, 10)));
            // Another URL has a lock of its own.
            let other = "https://cdn.test/zod@3.22.5";
            assert_eq!(store.lock_module(other, lock(3, 30)).await.unwrap(), lock(3, 30));
            assert_eq!(store.module_lock(URL).await.unwrap(), Some(lock(1, 10)));
        }

        async fn urls_beyond_the_limit_are_refused(db) {
            let store = db.open().await;
            let long = format!("https://cdn.test/{}", "a".repeat(MAX_MODULE_URL_LEN));
            assert!(store.lock_module(&long, lock(1, 1)).await.is_err());
            assert_eq!(store.module_lock(&long).await.unwrap(), None);
            assert!(store.lock_module("", lock(1, 1)).await.is_err());
        }
    }

    /// On PostgreSQL (outside the TEE) a lock rewritten behind the appliance's back is
    /// refused: the database cannot choose which code a module URL runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lock_rewritten_in_the_database_is_refused() {
        let Some(db) = crate::testing::TestDb::postgres() else {
            return;
        };
        let store = db.open().await;
        store.lock_module(URL, lock(1, 10)).await.unwrap();
        assert_eq!(store.module_lock(URL).await.unwrap(), Some(lock(1, 10)));
        db.behind_the_back(&format!(
            "UPDATE module_locks SET sha384 = '\\x{}'::bytea WHERE url = '{URL}'",
            "22".repeat(48)
        ))
        .await;
        match store.module_lock(URL).await {
            Err(StoreError::Tampered { table, .. }) => assert_eq!(table, "module_locks"),
            other => panic!("expected the lock to be refused, got {other:?}"),
        }
        // The import path records through the same read: refused too.
        assert!(matches!(
            store.lock_module(URL, lock(2, 20)).await,
            Err(StoreError::Tampered { .. })
        ));
    }
}
