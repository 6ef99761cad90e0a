//! `appliance-store`: the appliance's durable state, on SQLite (bundled, WAL mode) or
//! PostgreSQL (replicas; rows sealed by keyservice MACs, `integrity`).
//!
//! May depend on: `appliance-domain` (the permission model, key hashes), `keyservice-api`
//! (row MACs, wallet identities), `chain-contracts` (the `AccountConfig` calls its outbox
//! holds and the events it applies), `typed-data` (the accepted signatures), the engines'
//! client libraries, and with the `testing` feature (for the tests of the crates above)
//! `test-support`. Never on `appliance` (the HTTP layer), `appliance-execution` (the
//! worker pool) or a metrics registry: what it reports goes through the [`StoreTelemetry`]
//! the composer hands in.
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
//! * `credit_holds`: credit held by running actions, which other writes may not spend;
//! * `outbox`: the queue of `AccountConfig` calls that mirror API-mode writes on chain;
//! * `wallets`, `actions`, `usage_keys`: their rows, and their mirror entries;
//! * `accounts`, `groups`: built on the above;
//! * `signature_replay`: accepted wallet signatures (each accepted once);
//! * `chain_secured`: ChainSecured accounts: conversion, their master and admin keys;
//! * `execution`: what a running action may use;
//! * `module_locks`: the SHA-384 each module URL actions import must have (sealed rows);
//! * `chain_apply`: applying `AccountConfig` events of ChainSecured accounts;
//! * `migrations`: the schema;
//! * `ledger_report`: every account's ledger rows, read from the SQLite file for the
//!   operator's report (`appliance billing report`).
//!
//! Beside them, `backup`: online copies of the SQLite file and their restore
//! (`appliance backup`, `appliance restore`), on whole files (it uses only `migrations`).

mod accounts;
mod acme_state;
mod actions;
mod backlog;
pub mod backup;
mod base;
mod chain_apply;
mod chain_secured;
pub mod config;
mod credit_holds;
mod execution;
mod groups;
mod integrity;
mod key_cache;
mod leadership;
mod ledger;
mod ledger_report;
mod migrations;
mod module_locks;
pub mod outbox;
mod postgres;
#[cfg(test)]
mod replica_tests;
mod sealed_roots;
mod signature_replay;
pub(crate) mod sql;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod usage_keys;
pub mod wallet;
mod wallets;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::{Connection, OpenFlags};

pub use accounts::{AccountRecord, NewAccount};
pub use acme_state::AcmeChallenge;
pub use actions::{ActionRecord, CidHash, CodeOwner};
pub use backlog::OutboxBacklog;
pub use base::{AccountId, AccountMode, ResolvedKey, UsageKeyId, WalletIdentity};
pub use chain_apply::{ChainChange, ChainEvent};
pub use chain_secured::{ChainSecuredAccount, Conversion, MasterKeyAccount};
pub use config::{StoreConfig, StoreEngine};
pub use credit_holds::{CreditHold, NotEnough};
pub use execution::WalletScope;
pub use groups::{GroupRecord, GroupSpec, Permitted};
pub use integrity::{IntegrityFailure, IntegrityReport, Rollback, RowAuthenticator};
pub use leadership::Leadership;
pub use ledger::{Charge, Credited, InitialCredit, LedgerEntry, LedgerKind, LedgerRange};
pub use ledger_report::{AccountLedgerEntry, read_ledger};
pub use module_locks::{MAX_MODULE_URL_LEN, ModuleLock};
pub use postgres::{PgOptions, redact as postgres_target};
pub use sealed_roots::SealedRootRow;
pub use sql::{Conn, Engine, SqlError};
pub use telemetry::{StoreTelemetry, TransactionKind};
pub use usage_keys::{NewUsageKey, UsageKeyRecord};
pub use wallets::{WalletRecord, WalletRef};
pub use writer::WriteStats;

use sql::params;

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
    /// The database cannot be used right now (locked too long, unreachable).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The disk under the database is full (`SqlError::is_disk_full`): nothing of the
    /// write was kept. Reads go on, and writes succeed again as soon as space is freed,
    /// without a restart.
    #[error(
        "the service's storage is full: writes are refused until an operator frees space (reads still work)"
    )]
    DiskFull,
    #[error("cannot open the database at {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: SqlError,
    },
    /// The store's configuration cannot work (a bad URL, a CA that does not parse).
    #[error("store configuration: {0}")]
    Config(String),
    #[error(
        "the database schema version {found} is newer than this build understands ({known}); refusing to start rather than corrupt it"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: i64,
        name: &'static str,
        #[source]
        source: SqlError,
    },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A row failed its MAC: it was changed outside the appliance (`store::integrity`).
    /// Never used; logged and counted for `/health`.
    #[error("a row of {table} ({row}) failed its integrity check and was refused")]
    Tampered { table: &'static str, row: String },
    #[error("database error: {0}")]
    Database(SqlError),
    #[error("store task failed: {0}")]
    Task(String),
}

impl From<SqlError> for StoreError {
    fn from(err: SqlError) -> Self {
        if err.is_disk_full() {
            Self::DiskFull
        } else if err.is_unavailable() {
            Self::Unavailable(err.to_string())
        } else {
            Self::Database(err)
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        SqlError::from(err).into()
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
    /// `store::tests::paged_queries_are_prepared_once` keeps it that way. (PostgreSQL
    /// gets `LIMIT $2::bigint`: `store::sql`.)
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
    backend: Backend,
    writer: writer::Writer,
    keys: Arc<key_cache::KeyCache>,
    /// PostgreSQL: row MACs (`store::integrity`).
    integrity: Option<Arc<integrity::Integrity>>,
    /// Spans and timings, once the composer hands them in.
    telemetry: OnceLock<Arc<dyn StoreTelemetry>>,
}

/// Where reads go.
enum Backend {
    /// SQLite: read-only connections on the calling task (WAL never blocks them).
    Sqlite {
        path: PathBuf,
        readers: Mutex<Vec<Connection>>,
    },
    /// PostgreSQL: pooled sessions on the blocking pool.
    Postgres(Arc<postgres::PgPool>),
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and brings its schema up
    /// to date.
    pub fn open(path: &Path) -> Result<Self> {
        let open_err = |source: rusqlite::Error| StoreError::Open {
            path: path.display().to_string(),
            source: source.into(),
        };
        let mut writer = Connection::open(path).map_err(open_err)?;
        configure(&writer).map_err(open_err)?;
        // journal_mode is persistent; set it once on the writer.
        writer
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        migrations::run_sqlite(&mut writer)?;
        let keys = Arc::new(key_cache::KeyCache::default());
        let store = Self::assemble(
            Backend::Sqlite {
                path: path.to_owned(),
                readers: Mutex::new(Vec::new()),
            },
            writer::WriterDb::Sqlite(writer),
            keys,
            None,
        )?;
        // Fail at start, not on the first request, if readers cannot be opened.
        let reader = store.open_reader()?;
        store.return_reader(reader);
        Ok(store)
    }

    /// Connects to PostgreSQL (see [`PgOptions`]), brings the schema up to date (one
    /// replica at a time) and starts following the other replicas' writes.
    pub async fn open_postgres(options: PgOptions) -> Result<Self> {
        let pool = Arc::new(postgres::PgPool::new(&options)?);
        let target = postgres::redact(&options.url);
        let (writer_session, pool) = {
            let pool = Arc::clone(&pool);
            tokio::task::spawn_blocking(move || {
                let open_err = |source: SqlError| StoreError::Open {
                    path: target.clone(),
                    source,
                };
                let session = pool.connect().map_err(open_err)?;
                migrations::run_postgres(&session)?;
                Ok::<_, StoreError>((session, pool))
            })
            .await
            .map_err(|e| StoreError::Task(format!("opening the database: {e}")))??
        };
        let keys = Arc::new(key_cache::KeyCache::with_ttl(key_cache::REPLICA_TTL));
        postgres::follow_changes(Arc::clone(&pool), Arc::downgrade(&keys))
            .map_err(|e| StoreError::Task(format!("cannot start the store's change feed: {e}")))?;
        let integrity = Arc::new(integrity::Integrity::new());
        // The database's triggers, rules and functions, at start and then periodically
        // (defence in depth: `store::integrity`).
        {
            let integrity = Arc::clone(&integrity);
            pool.run(move |session| {
                integrity.watch(Conn::postgres(session));
                Ok(())
            })
            .await?;
        }
        tokio::spawn(watch_database(
            Arc::downgrade(&pool),
            Arc::downgrade(&integrity),
            options.integrity_check_interval,
        ));
        Self::assemble(
            Backend::Postgres(Arc::clone(&pool)),
            writer::WriterDb::Postgres {
                pool,
                session: Some(Box::new(writer_session)),
                integrity: Arc::clone(&integrity),
            },
            keys,
            Some(integrity),
        )
    }

    fn assemble(
        backend: Backend,
        writer: writer::WriterDb,
        keys: Arc<key_cache::KeyCache>,
        integrity: Option<Arc<integrity::Integrity>>,
    ) -> Result<Self> {
        let after_batch = {
            let keys = Arc::clone(&keys);
            Box::new(move |keys_changed: bool| {
                if keys_changed {
                    keys.invalidate();
                }
            })
        };
        Ok(Self {
            inner: Arc::new(Inner {
                backend,
                writer: writer::Writer::start(writer, writer::MAX_QUEUED, after_batch).map_err(
                    |e| StoreError::Task(format!("cannot start the store's writer thread: {e}")),
                )?,
                keys,
                integrity,
                telemetry: OnceLock::new(),
            }),
        })
    }

    /// Gives a PostgreSQL store the holder of its row keys (keyservice, once it has its
    /// root). Until then protected rows can be neither read nor written (503). `false`
    /// if the store needs none (SQLite) or has one already.
    pub fn set_row_authenticator(&self, auth: Arc<dyn RowAuthenticator>) -> bool {
        self.inner
            .integrity
            .as_ref()
            .is_some_and(|i| i.set_authenticator(auth))
    }

    /// Whether this replica leads the singleton `name` (the chain relayer, the indexer):
    /// always on SQLite; on PostgreSQL while it holds that advisory lock
    /// (`store::leadership`).
    pub fn leadership(&self, name: &'static str) -> Result<Leadership> {
        match &self.inner.backend {
            Backend::Sqlite { .. } => Ok(Leadership::always(name)),
            Backend::Postgres(pool) => Leadership::contend(Arc::clone(pool), name)
                .map_err(|e| StoreError::Task(format!("cannot contend for {name}: {e}"))),
        }
    }

    /// Rows refused for failing their MAC (PostgreSQL; `None` for SQLite).
    pub fn integrity_report(&self) -> Option<Arc<IntegrityReport>> {
        self.inner.integrity.as_ref().map(|i| Arc::clone(&i.report))
    }

    /// Runs the database check now (PostgreSQL; `None` for SQLite): lists the
    /// triggers, rules and functions no migration created (also reported on the
    /// [`IntegrityReport`]) and checks the write epoch. It also runs at start and every
    /// `integrity_check_interval`.
    pub async fn check_database(&self) -> Result<Option<Vec<String>>> {
        let (Backend::Postgres(pool), Some(integrity)) =
            (&self.inner.backend, self.inner.integrity.clone())
        else {
            return Ok(None);
        };
        pool.run(move |session| {
            integrity.watch(Conn::postgres(session));
            Ok(integrity.report.foreign_objects())
        })
        .await
    }

    /// The engine behind this store.
    pub fn engine(&self) -> Engine {
        match self.inner.backend {
            Backend::Sqlite { .. } => Engine::Sqlite,
            Backend::Postgres(_) => Engine::Postgres,
        }
    }

    fn open_reader(&self) -> Result<Connection> {
        let Backend::Sqlite { path, .. } = &self.inner.backend else {
            return Err(StoreError::Task("not a SQLite store".into()));
        };
        let open_err = |source: rusqlite::Error| StoreError::Open {
            path: path.display().to_string(),
            source: source.into(),
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        configure(&conn).map_err(open_err)?;
        Ok(conn)
    }

    fn take_reader(&self) -> Result<Connection> {
        let idle = match &self.inner.backend {
            Backend::Sqlite { readers, .. } => readers.lock().ok().and_then(|mut pool| pool.pop()),
            Backend::Postgres(_) => None,
        };
        match idle {
            Some(conn) => Ok(conn),
            None => self.open_reader(),
        }
    }

    fn return_reader(&self, conn: Connection) {
        if let Backend::Sqlite { readers, .. } = &self.inner.backend
            && let Ok(mut pool) = readers.lock()
            && pool.len() < MAX_IDLE_READERS
        {
            pool.push(conn);
        }
    }

    /// Runs `f` on a read connection: SQLite, an idle read-only connection (or a new
    /// one) on the calling task; PostgreSQL, a pooled session on the blocking pool.
    /// Timed and given a span through the [`StoreTelemetry`] handed in (the appliance:
    /// `appliance_store_transaction_duration_seconds{kind="read"}`, a `store.read` span).
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<T> + Send + 'static,
    {
        let started = std::time::Instant::now();
        let telemetry = self.inner.telemetry.get();
        let span = telemetry.map_or_else(tracing::Span::none, |t| t.span(TransactionKind::Read));
        let out = tracing::Instrument::instrument(self.read_untimed(f), span).await;
        if let Some(telemetry) = telemetry {
            telemetry.transaction(TransactionKind::Read, started.elapsed());
        }
        out
    }

    async fn read_untimed<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<T> + Send + 'static,
    {
        match &self.inner.backend {
            Backend::Sqlite { .. } => {
                let conn = self.take_reader()?;
                let out = f(Conn::sqlite(&conn));
                self.return_reader(conn);
                out
            }
            Backend::Postgres(pool) => {
                let integrity = self.inner.integrity.clone();
                pool.run(move |session| {
                    let conn = Conn::postgres(session);
                    match integrity {
                        Some(integrity) => {
                            let checks = integrity::Checks::for_read();
                            let out = f(conn.with_checks(&checks))?;
                            integrity.verify(conn, &checks)?;
                            Ok(out)
                        }
                        None => f(conn),
                    }
                })
                .await
            }
        }
    }

    /// Runs `f` in a transaction of its own (a savepoint of the writer's current batch)
    /// and returns once it is durably committed. If `f` fails, nothing it did is kept.
    /// (A billed write goes through `write_charged`, which adds its charge to the same
    /// transaction.)
    /// Timed from submission to durable commit and given a span through the
    /// [`StoreTelemetry`] handed in (the appliance: `{kind="write"}`, a `store.write` span).
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<T> + Send + 'static,
    {
        let started = std::time::Instant::now();
        let telemetry = self.inner.telemetry.get();
        let span = telemetry.map_or_else(tracing::Span::none, |t| t.span(TransactionKind::Write));
        let out = tracing::Instrument::instrument(self.inner.writer.write(f), span).await;
        if let Some(telemetry) = telemetry {
            telemetry.transaction(TransactionKind::Write, started.elapsed());
        }
        out
    }

    /// Hands in where the store's spans and timings go (the first call wins: the
    /// composition root makes it once, before serving).
    pub fn set_telemetry(&self, telemetry: Arc<dyn StoreTelemetry>) {
        let _ = self.inner.telemetry.set(telemetry);
    }

    /// Batches and writes the writer has committed since the store was opened.
    pub fn write_stats(&self) -> WriteStats {
        self.inner.writer.stats()
    }

    /// A cheap query proving the database answers; used by `/health`.
    pub async fn check(&self) -> Result<()> {
        self.read(|conn| {
            conn.query_row("SELECT 1", params![], |_| Ok(()))?;
            Ok(())
        })
        .await
    }

    /// The schema version in force.
    pub async fn schema_version(&self) -> Result<i64> {
        self.read(migrations::current_version).await
    }
}

/// Every `interval`, lists the database's foreign objects and checks its write epoch,
/// until the store is dropped.
async fn watch_database(
    pool: std::sync::Weak<postgres::PgPool>,
    integrity: std::sync::Weak<integrity::Integrity>,
    interval: std::time::Duration,
) {
    let interval = interval.max(std::time::Duration::from_secs(1));
    loop {
        tokio::time::sleep(interval).await;
        let (Some(pool), Some(integrity)) = (pool.upgrade(), integrity.upgrade()) else {
            return;
        };
        let watched = pool
            .run(move |session| {
                integrity.watch(Conn::postgres(session));
                Ok(())
            })
            .await;
        if let Err(err) = watched {
            tracing::warn!(error = %err, "store integrity: the periodic check could not run");
        }
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
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store_test;

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
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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

    store_test! {
    async fn open_migrates_and_reopens(db) {
        let store = db.open().await;
        let version = store.schema_version().await.unwrap();
        assert_eq!(version, migrations::latest_version());
        drop(store);
        let store = db.open().await;
        assert_eq!(store.schema_version().await.unwrap(), version);
        store.check().await.unwrap();
    }

    async fn refuses_a_newer_schema(db) {
        let store = db.open().await;
        store
            .write(|tx| {
                match tx.as_sqlite() {
                    Some(c) => c.pragma_update(None, "user_version", 9999)?,
                    None => {
                        tx.execute("UPDATE schema_version SET version = 9999", params![])?;
                    }
                }
                Ok(())
            })
            .await
            .unwrap();
        drop(store);
        let opened = match (db.postgres_url(), db.sqlite_path()) {
            (Some(url), _) => Store::open_postgres(PgOptions::new(url)).await.map(|_| ()),
            (None, Some(path)) => Store::open(&path).map(|_| ()),
            (None, None) => unreachable!("a test database is one or the other"),
        };
        match opened {
            Err(StoreError::SchemaTooNew { found: 9999, .. }) => {}
            Err(other) => panic!("unexpected error {other}"),
            Ok(()) => panic!("opened a database from the future"),
        }
    }

    async fn failed_write_keeps_nothing(db) {
        let store = db.open().await;
        let result: Result<()> = store
            .write(|tx| {
                tx.execute(
                    "INSERT INTO accounts (api_key_hash, name, description, wallet_address, managed, created_at) VALUES (?1, 'x', '', '0x00', 1, 0)",
                    params![[0u8; 32]],
                )?;
                Err(StoreError::Conflict("abort".into()))
            })
            .await;
        assert!(result.is_err());
        let count: i64 = store
            .read(|c| Ok(c.query_row("SELECT count(*) FROM accounts", params![], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 0);
    }

    async fn a_write_that_swallows_a_failed_statement_keeps_nothing(db) {
        // PostgreSQL aborts the transaction on a failed statement; SQLite carries on.
        // Either way a write that ignores the failure keeps nothing it did on PostgreSQL,
        // and on both engines the writer goes on serving.
        let store = db.open().await;
        let engine = db.engine();
        let result: Result<()> = store
            .write(|tx| {
                tx.execute(
                    "INSERT INTO accounts (api_key_hash, name, description, wallet_address, managed, created_at) VALUES (?1, 'x', '', '0x00', 1, 0)",
                    params![[1u8; 32]],
                )?;
                let _ = tx.execute("INSERT INTO no_such_table VALUES (1)", params![]);
                Ok(())
            })
            .await;
        let count: i64 = store
            .read(|c| Ok(c.query_row("SELECT count(*) FROM accounts", params![], |r| r.get(0))?))
            .await
            .unwrap();
        match engine {
            Engine::Postgres => {
                assert!(matches!(result, Err(StoreError::Task(_))), "{result:?}");
                assert_eq!(count, 0);
            }
            Engine::Sqlite => {
                assert!(result.is_ok());
                assert_eq!(count, 1);
            }
        }
        crate::testing::new_account(&store, 7).await;
    }

    async fn readers_are_not_blocked_by_an_open_write(db) {
        let store = db.open().await;
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .write(move |tx| {
                        tx.execute(
                            "INSERT INTO accounts (api_key_hash, name, description, wallet_address, managed, created_at) VALUES (?1, 'x', '', '0x00', 1, 0)",
                            params![[0u8; 32]],
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
            std::time::Duration::from_secs(5),
            store.read(|c| {
                Ok(c.query_row("SELECT count(*) FROM accounts", params![], |r| r.get(0))?)
            }),
        )
        .await
        .expect("a read waited for the writer")
        .unwrap();
        assert_eq!(count, 0);
        finish_tx.send(()).unwrap();
        writer.await.unwrap().unwrap();
        let count: i64 = store
            .read(|c| Ok(c.query_row("SELECT count(*) FROM accounts", params![], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 1);
    }
    }

    #[tokio::test]
    async fn every_connection_has_the_bounded_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let cache = |c: Conn<'_>| -> Result<i64> {
            let c = c
                .as_sqlite()
                .ok_or_else(|| StoreError::Task("not SQLite".into()))?;
            Ok(c.pragma_query_value(None, "cache_size", |row| row.get(0))?)
        };
        let reader = store.read(cache).await.unwrap();
        let writer = store.write(cache).await.unwrap();
        assert_eq!((reader, writer), (-PAGE_CACHE_KIB, -PAGE_CACHE_KIB));
    }
}
