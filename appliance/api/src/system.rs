//! Service health and version, at the root (outside `/core/v1`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`; `degraded` (HTTP 503) when a dependency is down; `alert` (HTTP 200) when
    /// the store has refused rows that failed their integrity check, refused a rolled
    /// back database, or found database objects it did not create (see `store`).
    #[schema(example = "ok")]
    pub status: String,
    /// Each dependency and its state.
    pub checks: HealthChecks,
    /// The ACME certificate's life cycle, when ACME is configured. Its failures are
    /// retried with backoff and do not make the service unhealthy (the current
    /// certificate is still served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<AcmeHealth>,
    /// The store's engine and, on PostgreSQL, the rows refused for failing their MAC
    /// (changed outside the appliance). Refused rows are never used; the service keeps
    /// serving everything else, and `status` is `alert` until the process restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreHealth>,
}

/// The store on `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StoreHealth {
    /// `sqlite` or `postgres`.
    #[schema(example = "postgres")]
    pub engine: String,
    /// Rows refused since start because their MAC did not verify (PostgreSQL; always 0
    /// on SQLite, whose file is inside the TEE).
    pub refused_rows: u64,
    /// The last refused row: its table, its key columns, when (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_refused: Option<RefusedRow>,
    /// Reads and write batches refused since start because the database showed an
    /// older write epoch than this replica had seen: it was rolled back (PostgreSQL).
    #[serde(default)]
    pub rollbacks: u64,
    /// The highest write epoch this replica has seen (PostgreSQL).
    #[serde(default)]
    pub write_epoch: u64,
    /// Triggers, rules, functions and event triggers in the database that no migration
    /// created, by kind and name, at the last check (PostgreSQL; checked at start and
    /// periodically). The appliance's integrity does not depend on their absence; any
    /// is reported as an `alert`.
    #[serde(default)]
    pub foreign_objects: Vec<String>,
    /// The singletons this replica runs now (`chain-relayer`, `chain-indexer`): with
    /// replicas, each runs on exactly one of them.
    #[serde(default)]
    pub leads: Vec<String>,
}

/// A row refused for failing its MAC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RefusedRow {
    #[schema(example = "usage_keys")]
    pub table: String,
    #[schema(example = "id=42")]
    pub row: String,
    pub at_unix: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthChecks {
    #[schema(example = "ok")]
    pub store: String,
    #[schema(example = "ok")]
    pub keyservice: String,
    /// `disabled` (no ACME directory), `pending`, `ok`, `renewing` or `failed`.
    #[schema(example = "ok")]
    pub acme: String,
}

/// ACME's state on `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AcmeHealth {
    /// `pending` (no certificate yet), `ok`, `renewing` or `failed` (retrying with backoff).
    #[schema(example = "ok")]
    pub state: String,
    /// The last failure, kept until an issuance succeeds.
    pub last_error: Option<String>,
    /// The ACME account URI.
    pub account_uri: Option<String>,
    /// The served certificate's expiry, Unix seconds.
    pub not_after: Option<i64>,
    /// When it will be renewed, Unix seconds.
    pub renew_after: Option<i64>,
    /// Certificates issued since start.
    pub issued: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Version {
    #[schema(example = "appliance")]
    pub name: String,
    #[schema(example = "0.1.0")]
    pub version: String,
    /// The API version prefix.
    #[schema(example = "v1")]
    pub api: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_without_acme_has_no_acme_field() {
        let text = r#"{"status":"degraded","checks":{"store":"ok","keyservice":"unavailable","acme":"disabled"}}"#;
        let health: Health = serde_json::from_str(text).unwrap();
        assert!(health.acme.is_none());
        assert_eq!(health.checks.keyservice, "unavailable");
        assert_eq!(serde_json::to_string(&health).unwrap(), text);
    }
}
