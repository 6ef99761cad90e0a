//! Fixtures shared by the store's unit tests and, through the `testing` feature, by the tests
//! of the crates above: a fresh database on either engine, and
//! accounts in it.
//!
//! [`store_test!`] writes a test once and runs it twice, as `<name>::sqlite` (a database
//! file in a temporary directory) and `<name>::postgres` (a fresh database on the test
//! process's PostgreSQL server, `test_support::postgres`). Where PostgreSQL is not
//! installed the second is skipped with the reason on stderr; with `CI` set it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test fixtures: a failure is the test's

use keyservice_api::{Address, DerivationPath, PkpId};

use super::sql::Engine;
use super::{AccountId, InitialCredit, NewAccount, PgOptions, Store, WalletIdentity};
use appliance_domain::api_keys::KeyHash;

/// A database a test owns: a SQLite file, or a PostgreSQL database of its own.
pub struct TestDb {
    kind: Kind,
}

enum Kind {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl TestDb {
    pub fn sqlite() -> Self {
        Self {
            kind: Kind::Sqlite(tempfile::tempdir().expect("a temporary directory")),
        }
    }

    /// A fresh database on the shared test server; `None` (reported) where PostgreSQL
    /// cannot run.
    pub fn postgres() -> Option<Self> {
        match test_support::postgres::PgServer::shared() {
            Ok(server) => Some(Self {
                kind: Kind::Postgres(server.new_database()),
            }),
            Err(unavailable) => {
                unavailable.report();
                None
            }
        }
    }

    pub fn engine(&self) -> Engine {
        match self.kind {
            Kind::Sqlite(_) => Engine::Sqlite,
            Kind::Postgres(_) => Engine::Postgres,
        }
    }

    /// Opens a store on this database (again, for a test of a restart).
    pub async fn open(&self) -> Store {
        match &self.kind {
            Kind::Sqlite(dir) => {
                Store::open(&dir.path().join("state.db")).expect("the store opens")
            }
            Kind::Postgres(url) => {
                let store = Store::open_postgres(PgOptions::new(url.clone()))
                    .await
                    .expect("the store opens on PostgreSQL");
                store.set_row_authenticator(std::sync::Arc::new(LocalRowKey::new(b"test")));
                store
            }
        }
    }

    /// Runs `sql` on a connection of its own, behind the store's back (as an operator
    /// or an attacker with access to the database would).
    pub async fn behind_the_back(&self, sql: &str) {
        let sql = sql.to_owned();
        match &self.kind {
            Kind::Sqlite(dir) => {
                rusqlite::Connection::open(dir.path().join("state.db"))
                    .expect("the database opens")
                    .execute_batch(&sql)
                    .expect("the statement runs");
            }
            Kind::Postgres(url) => {
                let url = url.clone();
                tokio::task::spawn_blocking(move || {
                    let mut client =
                        postgres::Client::connect(&url, postgres::NoTls).expect("connects");
                    client.batch_execute(&sql).expect("the statement runs");
                })
                .await
                .expect("the statement ran");
            }
        }
    }

    /// The SQLite file (`None` for PostgreSQL).
    pub fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        match &self.kind {
            Kind::Sqlite(dir) => Some(dir.path().join("state.db")),
            Kind::Postgres(_) => None,
        }
    }

    /// The PostgreSQL URL (`None` for SQLite).
    pub fn postgres_url(&self) -> Option<&str> {
        match &self.kind {
            Kind::Sqlite(_) => None,
            Kind::Postgres(url) => Some(url),
        }
    }
}

/// Row MACs with a key held in memory (tests only; production asks keyservice).
pub struct LocalRowKey(ring::hmac::Key);

impl LocalRowKey {
    pub fn new(seed: &[u8]) -> Self {
        Self(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, seed))
    }
}

impl super::RowAuthenticator for LocalRowKey {
    fn tags(&self, items: &[Vec<u8>]) -> Result<Vec<[u8; 32]>, String> {
        Ok(items
            .iter()
            .map(|item| {
                let tag = ring::hmac::sign(&self.0, item);
                let mut out = [0u8; 32];
                out.copy_from_slice(tag.as_ref());
                out
            })
            .collect())
    }
}

/// `store_test! { async fn name(db) { … } … }`: each test on both engines (the crates
/// above use it through the `testing` feature).
#[macro_export]
macro_rules! store_test {
    ($(async fn $name:ident($db:ident) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($db: $crate::testing::TestDb) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run($crate::testing::TestDb::sqlite()).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(db) = $crate::testing::TestDb::postgres() else {
                    return;
                };
                run(db).await
            }
        }
    )*};
}
pub use crate::store_test;

/// An API-mode account whose key hash, wallet and name are all derived from `seed`.
pub fn new_account_spec(seed: u8) -> NewAccount {
    NewAccount {
        api_key_hash: KeyHash([seed; 32]),
        name: format!("a{seed}"),
        description: String::new(),
        email: None,
        wallet: identity(seed),
    }
}

/// Creates the account of `seed` (no starting credit).
pub async fn new_account(store: &Store, seed: u8) -> AccountId {
    store
        .create_account(new_account_spec(seed), InitialCredit::NONE)
        .await
        .expect("the account is created")
}

/// A store on `db` holding the account of `seed` (its key hash is `KeyHash([seed; 32])`).
pub async fn store_with_account(db: &TestDb, seed: u8) -> (Store, AccountId) {
    let store = db.open().await;
    let account = new_account(&store, seed).await;
    (store, account)
}

/// The wallet identity of `n` (every byte `n`).
pub fn identity(n: u8) -> WalletIdentity {
    WalletIdentity {
        pkp_id: PkpId([n; 32]),
        address: Address([n; 20]),
        derivation_path: DerivationPath([n; 32]),
    }
}

/// A verified `ConvertAccount` signature of `n` (signer and digest every byte `n`).
pub fn signature(n: u8, issued_at: u64) -> typed_data::Verified {
    typed_data::Verified {
        flow: typed_data::Flow::ConvertAccount,
        signer: alloy::primitives::Address::repeat_byte(n),
        issued_at,
        digest: alloy::primitives::B256::repeat_byte(n),
    }
}

/// Now, as an issuedAt.
pub fn now() -> u64 {
    super::now_unix() as u64
}
