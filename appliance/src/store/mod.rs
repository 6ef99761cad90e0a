//! The durable store: SQLite (bundled) in WAL mode.
//!
//! One writer thread owns the writer connection and commits writes in batches (`writer`:
//! group commit, each write in its own savepoint, so one failing write keeps nothing and
//! does not disturb the others); a write is answered only once its batch is committed
//! with `synchronous = FULL`, so a write that was acknowledged to a client survives
//! `kill -9` and power loss. A pool of read-only connections serves reads, which WAL
//! never blocks behind a writer. Reads run on the calling task: every read is an indexed
//! look-up or one bounded page (at most 1000 rows), shorter than the two thread switches
//! a hop to the blocking pool would cost.
//!
//! Handlers never see SQL: they call the domain methods on [`Store`]. The modules, from
//! the bottom up (each calls only those above it in this list):
//!
//! * `base`: ids and shared types, SQL error helpers, row reads several modules need;
//! * `ledger`: the credit ledger, and the [`Charge`] a billed write applies in its own
//!   transaction;
//! * `outbox`: the queue of `AccountConfig` calls that mirror API-mode writes on chain;
//! * `wallets`, `actions`, `usage_keys`: their rows, and their mirror entries;
//! * `accounts`, `groups`: built on the above;
//! * `signature_replay`: accepted wallet signatures (each accepted once);
//! * `chain_secured`: ChainSecured accounts: conversion, their master and admin keys;
//! * `execution`: what a running action may use;
//! * `chain_apply`: applying `AccountConfig` events of ChainSecured accounts;
//! * `migrations`: the schema.

mod accounts;
mod actions;
mod base;
mod chain_apply;
mod chain_secured;
mod execution;
mod groups;
mod key_cache;
mod ledger;
mod migrations;
pub mod outbox;
mod signature_replay;
#[cfg(test)]
mod testing;
mod usage_keys;
mod wallets;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags, Transaction};

use base::CachedSql as _;

pub use accounts::{AccountRecord, NewAccount};
pub use actions::{ActionRecord, CidHash, CodeOwner};
pub use base::{AccountId, AccountMode, ResolvedKey, UsageKeyId, WalletIdentity};
pub use chain_apply::{ChainChange, ChainEvent};
pub use chain_secured::{ChainSecuredAccount, Conversion, MasterKeyAccount};
pub use execution::WalletScope;
pub use groups::{GroupRecord, GroupSpec, Permitted};
pub use ledger::{Charge, Credited, InitialCredit, LedgerEntry, LedgerKind};
pub use usage_keys::{NewUsageKey, UsageKeyRecord};
pub use wallets::{WalletRecord, WalletRef};
pub use writer::WriteStats;

/// How many idle read connections are kept.
const MAX_IDLE_READERS: usize = 16;

/// Each connection's page cache, in KiB (SQLite's default is 2 MiB). The caches fill as
/// the database grows, so they are memory the appliance takes on over its life: at 2 MiB
/// the writer and sixteen readers could hold 34 MiB, more than the appliance's whole
/// working set (a 30-minute soak saw RSS creep by 2.8 MiB as they filled). At 512 KiB the
/// bound is under 9 MiB; reads that miss it are served from the kernel's page cache.
const PAGE_CACHE_KIB: i64 = 512;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The named resource does not exist (in this account).
    #[error("{0}")]
    NotFound(String),
    /// The write conflicts with existing state.
    #[error("{0}")]
    Conflict(String),
    /// A billed write found too little credit (nothing was written).
    #[error("{0}")]
    PaymentRequired(String),
    /// A per-account quota (stored action code) would be exceeded; nothing was written.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The database cannot be used right now (disk full, locked too long).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("cannot open the database at {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "the database schema version {found} is newer than this build understands ({known}); refusing to start rather than corrupt it"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: i64,
        name: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("store task failed: {0}")]
    Task(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match err.sqlite_error_code() {
            Some(ErrorCode::DiskFull | ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                Self::Unavailable(err.to_string())
            }
            _ => Self::Sqlite(err),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A page of a list: `number` is 0-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub number: u64,
    pub size: u32,
}

impl Page {
    /// `LIMIT` and `OFFSET`, or `None` when the page lies beyond any possible row.
    ///
    /// The queries bind them as `LIMIT ?2 + 0 OFFSET ?3 + 0`: a bare `LIMIT ?` makes
    /// SQLite plan with the bound value and so re-prepare the cached statement on every
    /// run (parse and plan again: a fifth of a `list_groups` request's CPU);
    /// `store::tests::paged_queries_are_prepared_once` keeps it that way.
    fn limit_offset(self) -> Option<(i64, i64)> {
        let offset = self.number.checked_mul(u64::from(self.size))?;
        Some((i64::from(self.size), i64::try_from(offset).ok()?))
    }
}

/// A cheap handle to the store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: writer::Writer,
    keys: Arc<key_cache::KeyCache>,
    readers: Mutex<Vec<Connection>>,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to
    /// date.
    pub fn open(path: &Path) -> Result<Self> {
        let open_err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let mut writer = Connection::open(path).map_err(open_err)?;
        configure(&writer).map_err(open_err)?;
        // journal_mode is persistent; set it once on the writer.
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        migrations::run(&mut writer)?;
        let keys = Arc::new(key_cache::KeyCache::default());
        let after_batch = {
            let keys = Arc::clone(&keys);
            Box::new(move || keys.invalidate())
        };
        let store = Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                writer: writer::Writer::start(writer, writer::MAX_QUEUED, after_batch).map_err(
                    |e| StoreError::Task(format!("cannot start the store's writer thread: {e}")),
                )?,
                keys,
                readers: Mutex::new(Vec::new()),
            }),
        };
        // Fail at start, not on the first request, if readers cannot be opened.
        let reader = store.open_reader()?;
        store.return_reader(reader);
        Ok(store)
    }

    fn open_reader(&self) -> Result<Connection> {
        let open_err = |source| StoreError::Open {
            path: self.inner.path.clone(),
            source,
        };
        let conn = Connection::open_with_flags(
            &self.inner.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        configure(&conn).map_err(open_err)?;
        Ok(conn)
    }

    fn take_reader(&self) -> Result<Connection> {
        let idle = self
            .inner
            .readers
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop());
        match idle {
            Some(conn) => Ok(conn),
            None => self.open_reader(),
        }
    }

    fn return_reader(&self, conn: Connection) {
        if let Ok(mut pool) = self.inner.readers.lock()
            && pool.len() < MAX_IDLE_READERS
        {
            pool.push(conn);
        }
    }

    /// Runs `f` on a read connection (an idle one, or a new one), on the calling task.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let conn = self.take_reader()?;
        let out = f(&conn);
        self.return_reader(conn);
        out
    }

    /// Runs `f` in an immediate transaction of its own (a savepoint of the writer's
    /// current batch) and returns once it is durably committed. If `f` fails, nothing it
    /// did is kept. (A billed write goes through `write_charged`, which adds its charge
    /// to the same transaction.)
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.inner.writer.write(f).await
    }

    /// Batches and writes the writer has committed since the store was opened.
    pub fn write_stats(&self) -> WriteStats {
        self.inner.writer.stats()
    }

    /// A cheap query proving the database answers; used by `/health`.
    pub async fn check(&self) -> Result<()> {
        self.read(|conn| {
            conn.query_row_cached("SELECT 1", [], |_| Ok(()))?;
            Ok(())
        })
        .await
    }

    /// The schema version in force.
    pub async fn schema_version(&self) -> Result<i64> {
        self.read(|conn| Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?))
            .await
    }
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Negative: a size in KiB rather than in pages.
    conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_bounds() {
        assert_eq!(
            Page {
                number: 0,
                size: 100
            }
            .limit_offset(),
            Some((100, 0))
        );
        assert_eq!(
            Page {
                number: 3,
                size: 10
            }
            .limit_offset(),
            Some((10, 30))
        );
        assert_eq!(
            Page {
                number: u64::MAX,
                size: 1000
            }
            .limit_offset(),
            None
        );
    }

    #[test]
    fn paged_queries_are_prepared_once() {
        // SQLite re-prepares a statement with a bare `LIMIT ?` on every run; with
        // `LIMIT ? + 0` it does not. Both halves: the engine's behaviour, and that every
        // query of the store is written the cheap way.
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER)")
            .unwrap();
        let reprepares = |sql: &str| {
            for page in 0..4i64 {
                let mut stmt = conn.prepare_cached(sql).unwrap();
                let rows = stmt
                    .query_map(rusqlite::params![1, 10, page * 10], |_| Ok(()))
                    .unwrap();
                assert_eq!(rows.count(), 0);
            }
            conn.prepare_cached(sql)
                .unwrap()
                .get_status(rusqlite::StatementStatus::RePrepare)
        };
        let bare = "SELECT id FROM t WHERE a = ?1 ORDER BY id LIMIT ?2 OFFSET ?3"; // bare example
        assert!(reprepares(bare) > 0);
        assert_eq!(
            reprepares("SELECT id FROM t WHERE a = ?1 ORDER BY id LIMIT ?2 + 0 OFFSET ?3 + 0"),
            0
        );
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
        let needle = ["LIMIT", " ?"].concat();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap();
            for (i, line) in source.lines().enumerate() {
                if line.trim_start().starts_with("//") || line.contains("bare example") {
                    continue;
                }
                for (at, _) in line.match_indices(&needle) {
                    let rest =
                        line[at + needle.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
                    assert!(
                        rest.starts_with(" + 0"),
                        "{}:{}: a bare `LIMIT` parameter: {line}",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn open_migrates_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Store::open(&path).unwrap();
        let version = store.schema_version().await.unwrap();
        assert_eq!(version, migrations::latest_version());
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().await.unwrap(), version);
        store.check().await.unwrap();
    }

    #[tokio::test]
    async fn every_connection_has_the_bounded_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let cache = |c: &Connection| -> Result<i64> {
            Ok(c.pragma_query_value(None, "cache_size", |row| row.get(0))?)
        };
        let reader = store.read(move |c| cache(c)).await.unwrap();
        let writer = store.write(move |tx| cache(tx)).await.unwrap();
        assert_eq!((reader, writer), (-PAGE_CACHE_KIB, -PAGE_CACHE_KIB));
    }

    #[tokio::test]
    async fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 9999).unwrap();
        drop(conn);
        match Store::open(&path) {
            Err(StoreError::SchemaTooNew { found: 9999, .. }) => {}
            Err(other) => panic!("unexpected error {other}"),
            Ok(_) => panic!("opened a database from the future"),
        }
    }

    #[tokio::test]
    async fn failed_write_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let result: Result<()> = store
            .write(|tx| {
                tx.execute_cached(
                    "INSERT INTO accounts (api_key_hash, name, description, wallet_address, managed, created_at) VALUES (zeroblob(32), 'x', '', '0x00', 1, 0)",
                    [],
                )?;
                Err(StoreError::Conflict("abort".into()))
            })
            .await;
        assert!(result.is_err());
        let count: i64 = store
            .read(|c| Ok(c.query_row_cached("SELECT count(*) FROM accounts", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 0);
    }

    #[tokio::test]
    async fn readers_are_not_blocked_by_an_open_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .write(move |tx| {
                        tx.execute_cached(
                            "INSERT INTO accounts (api_key_hash, name, description, wallet_address, managed, created_at) VALUES (zeroblob(32), 'x', '', '0x00', 1, 0)",
                            [],
                        )?;
                        let _ = started_tx.send(());
                        // Hold the write transaction open until the reader is done.
                        let _ = finish_rx.recv();
                        Ok(())
                    })
                    .await
            })
        };
        tokio::task::spawn_blocking(move || started_rx.recv())
            .await
            .unwrap()
            .unwrap();
        // The write holds the lock; a read still answers, seeing the committed state.
        let count: i64 = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            store.read(|c| {
                Ok(c.query_row_cached("SELECT count(*) FROM accounts", [], |r| r.get(0))?)
            }),
        )
        .await
        .expect("a read waited for the writer")
        .unwrap();
        assert_eq!(count, 0);
        finish_tx.send(()).unwrap();
        writer.await.unwrap().unwrap();
        let count: i64 = store
            .read(|c| Ok(c.query_row_cached("SELECT count(*) FROM accounts", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 1);
    }
}
