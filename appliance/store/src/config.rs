//! The store's section of the appliance's configuration (`[store]`): which engine
//! holds the state and how the PostgreSQL sessions behave. The appliance's `config`
//! module composes it with the other sections; this crate owns its keys, defaults and
//! checks.

use std::time::Duration;

use appliance_domain::settings::{InvalidSetting, SecretString};
use serde::{Deserialize, Serialize};

use crate::PgOptions;

/// The SQLite database's file in the data directory (serving, backup and restore).
pub const SQLITE_FILE: &str = "state.db";

/// Which database holds the appliance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreEngine {
    /// SQLite at `<data_dir>/state.db`, on the CVM's own (encrypted) volume: one replica.
    Sqlite,
    /// PostgreSQL at `store.url`, shared by every replica of the app; outside the TEE, so
    /// every authorizing row carries a MAC (`docs/operators.md`, "Replicas").
    Postgres,
}

/// The store. The engine is part of the measured configuration (keyservice reads it too:
/// with PostgreSQL it takes its root from the database instead of creating one); the
/// URL, which holds the database password, comes from the encrypted environment
/// (`APPLIANCE_STORE__URL`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub engine: StoreEngine,
    /// postgres: `postgres://user:password@host:5432/database?sslmode=require`. Anything
    /// but a loopback host must use `sslmode=require` (verified TLS). Never logged.
    pub url: Option<SecretString>,
    /// postgres: PEM of the CA that signs the server's certificate (default: the public
    /// web PKI).
    pub ca_pem: Option<String>,
    /// postgres: most read connections open at once (the writer, the change feed and
    /// each singleton hold one more each).
    pub max_connections: usize,
    /// postgres: how long a read waits for a free connection before answering 503.
    pub acquire_timeout_ms: u64,
    /// postgres: the server-side limit of any one statement (and of lock waits).
    pub statement_timeout_ms: u64,
    /// postgres: how often the store looks for triggers, rules and functions it did not
    /// create and checks that the database has not been rolled back (also at start).
    pub integrity_check_interval_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            engine: StoreEngine::Sqlite,
            url: None,
            ca_pem: None,
            max_connections: 16,
            acquire_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
            integrity_check_interval_secs: 60,
        }
    }
}

impl StoreConfig {
    /// Checks that the keys hold together (an engine with its URL, positive limits).
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        match (self.engine, &self.url) {
            (StoreEngine::Postgres, None) => Err(InvalidSetting::new(
                "store.engine = \"postgres\" needs store.url (set APPLIANCE_STORE__URL in the encrypted environment)",
            )),
            (StoreEngine::Sqlite, Some(_)) => Err(InvalidSetting::new(
                "store.url is set but store.engine is \"sqlite\"; set store.engine = \"postgres\" in the (measured) configuration",
            )),
            _ if self.max_connections == 0 => Err(InvalidSetting::new(
                "store.max_connections must be at least 1",
            )),
            _ => Ok(()),
        }
    }

    /// The PostgreSQL session options of this section (serving and the operator
    /// commands alike), when the engine is PostgreSQL.
    pub fn pg_options(&self) -> Option<PgOptions> {
        let url = match (self.engine, &self.url) {
            (StoreEngine::Postgres, Some(url)) => url,
            _ => return None,
        };
        Some(PgOptions {
            url: url.expose().to_owned(),
            ca_pem: self.ca_pem.clone(),
            max_connections: self.max_connections,
            acquire_timeout: Duration::from_millis(self.acquire_timeout_ms),
            statement_timeout: Duration::from_millis(self.statement_timeout_ms),
            integrity_check_interval: Duration::from_secs(self.integrity_check_interval_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_and_its_url_go_together() {
        let postgres = StoreConfig {
            engine: StoreEngine::Postgres,
            ..StoreConfig::default()
        };
        let err = postgres.validate().unwrap_err();
        assert!(err.0.contains("APPLIANCE_STORE__URL"), "{err}");
        let sqlite_with_url = StoreConfig {
            url: Some(SecretString::new("postgres://u:pw@127.0.0.1/db")),
            ..StoreConfig::default()
        };
        let err = sqlite_with_url.validate().unwrap_err();
        assert!(!err.0.contains("pw@"), "the URL is not shown: {err}");
        assert!(StoreConfig::default().validate().is_ok());
    }

    #[test]
    fn postgres_options_carry_the_section_and_sqlite_has_none() {
        assert!(StoreConfig::default().pg_options().is_none());
        let config = StoreConfig {
            engine: StoreEngine::Postgres,
            url: Some(SecretString::new("postgres://u:pw@127.0.0.1/db")),
            max_connections: 3,
            statement_timeout_ms: 1_500,
            ..StoreConfig::default()
        };
        let options = config.pg_options().unwrap();
        assert_eq!(options.url, "postgres://u:pw@127.0.0.1/db");
        assert_eq!(options.max_connections, 3);
        assert_eq!(options.statement_timeout, Duration::from_millis(1_500));
    }
}
