//! The operator's day-2 endpoints (`/operator/v1/…`, outside `/core/v1` and its OpenAPI
//! document): every request is one signed operator request (the `operator-auth` text and
//! its EIP-191 signature); the answers below. `docs/operators.md` ("Day-2 tasks") is the
//! guide.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The path prefix of the operator endpoints.
pub const OPERATOR_PREFIX: &str = "/operator/v1";

/// The body of every operator request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedRequest {
    /// The request text, exactly as signed (`operator-auth`).
    pub request: String,
    /// Its EIP-191 signature, `0x` + 130 hex digits (`r ‖ s ‖ v`).
    pub signature: String,
}

/// `POST /operator/v1/status`: what the deployment runs and holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorStatus {
    /// The appliance's version.
    pub version: String,
    /// The app id and compose hash the evidence names (`0x` hex).
    pub app_id: String,
    pub compose_hash: String,
    /// `dev` or `dstack`.
    pub platform: String,
    /// The public fingerprint of the root every key derives from (`0x` hex).
    pub root_id: String,
    /// `sqlite` or `postgres`.
    pub store_engine: String,
    /// keyservice's state files: the sealed roots (with the compose hash each opens for)
    /// and the payer-contract record.
    pub keyservice_files: Vec<StateFileInfo>,
    /// PostgreSQL: the shared root's sealed copies, one per compose hash.
    pub shared_roots: Vec<SharedRootInfo>,
    /// The configured operators and governance contract.
    pub operators: Vec<String>,
    pub governance_address: Option<String>,
    /// The operator who asked.
    pub operator: String,
}

/// One of keyservice's state files, described.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFileInfo {
    pub name: String,
    pub bytes: u64,
    /// For a sealed root: the compose hash it opens for (`0x` hex).
    pub compose_hash: Option<String>,
    /// For a sealed root: whether it is the running compose hash's.
    pub current: bool,
}

/// A sealed copy of the shared root kept in PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedRootInfo {
    pub compose_hash: String,
    pub root_id: String,
}

/// `POST /operator/v1/export-root`: the files to back up, base64. Sealed roots open only
/// in a TEE running their compose hash of this app: the files are no secret, and useless
/// anywhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportedRoot {
    /// keyservice's state files by name (`root.sealed*`, `payer-contracts.json`).
    pub keyservice_files: BTreeMap<String, String>,
    /// PostgreSQL: the shared root's sealed copies by compose hash (`0x` hex).
    pub shared_roots: BTreeMap<String, String>,
    pub root_id: String,
}

/// `POST /operator/v1/reseal`: the root sealed for the target compose hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resealed {
    pub target: String,
    pub root_id: String,
    /// Where it is kept: `keyservice:<file name>` or `database`.
    pub stored: String,
    /// The sealed root (101 bytes), base64.
    pub sealed: String,
}

/// `POST /operator/v1/backup-database`: the body is the SQLite file; this summary is in
/// the [`BACKUP_SUMMARY_HEADER`] header, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupSummary {
    pub bytes: u64,
    pub schema_version: i64,
    /// Unix seconds.
    pub taken_at: i64,
    pub appliance_version: String,
    /// Rows per table.
    pub rows: BTreeMap<String, i64>,
    /// SHA-256 of the file (hex), to check the download.
    pub sha256: String,
}

/// The header carrying a database backup's [`BackupSummary`].
pub const BACKUP_SUMMARY_HEADER: &str = "x-appliance-backup";
