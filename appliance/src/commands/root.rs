//! `appliance root export` and `appliance root import`: moving the shared sealed root
//! (replicas on PostgreSQL, `crate::shared_root`) through an upgrade.
//!
//! The database holds the root sealed to each compose hash it was sealed for
//! (`sealed_roots`). Before a new compose hash is deployed, the operator exports the blob
//! of the running version to a file (the same 101-byte format as keyservice's
//! `root.sealed`), has a running replica's keyservice reseal it to the new hash
//! (`keyservice reseal`, which asks the governance contract), and imports the result.
//! The import takes the compose hash from the file's header and keeps the database's
//! root id: a blob of another root would not be adopted by the new version's keyservice
//! anyway (its root id would differ, and the appliance refuses to start).

use std::path::Path;

use crate::config::Config;
use crate::shared_root::sealed_compose_hash;
use crate::store::{SealedRootRow, Store, StoreError};

/// The sealed-root file format's length (keyservice/src/sealing.rs).
const SEALED_LEN: usize = keyservice_api::SEALED_ROOT_LEN;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RootCommandError {
    #[error(
        "the shared root lives in PostgreSQL: set [store] engine = \"postgres\" and APPLIANCE_STORE__URL"
    )]
    NotShared,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
}

async fn open(config: &Config) -> Result<Store, RootCommandError> {
    let options = config
        .store
        .pg_options()
        .ok_or(RootCommandError::NotShared)?;
    Ok(Store::open_postgres(options).await?)
}

/// Writes the sealed root of `compose_hash` (default: the one recorded last) to `out`,
/// which must not exist; returns a summary line.
pub async fn export(
    config: &Config,
    out: &Path,
    compose_hash: Option<[u8; 32]>,
) -> Result<String, RootCommandError> {
    let store = open(config).await?;
    let rows = store.sealed_roots().await?;
    let row = match compose_hash {
        Some(hash) => rows.iter().find(|r| r.compose_hash == hash),
        None => rows.last(),
    }
    .ok_or_else(|| {
        RootCommandError::Refused(
            "the database holds no sealed root for that compose hash (no replica has started yet?)"
                .into(),
        )
    })?;
    let io = |source| RootCommandError::Io {
        path: out.display().to_string(),
        source,
    };
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(io)?;
    file.write_all(&row.sealed).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(format!(
        "exported the shared root (root id 0x{}) sealed to compose hash 0x{} to {}",
        hex::encode(row.root_id),
        hex::encode(row.compose_hash),
        out.display()
    ))
}

/// Records the sealed root in `from` (resealed for a new compose hash) beside the
/// others; returns a summary line.
pub async fn import(config: &Config, from: &Path) -> Result<String, RootCommandError> {
    let sealed = std::fs::read(from).map_err(|source| RootCommandError::Io {
        path: from.display().to_string(),
        source,
    })?;
    let compose_hash = sealed_compose_hash(&sealed).ok_or_else(|| {
        RootCommandError::Refused(format!(
            "{} is not a keyservice sealed root ({SEALED_LEN} bytes starting with KSVCSEAL, version 1)",
            from.display()
        ))
    })?;
    let store = open(config).await?;
    let rows = store.sealed_roots().await?;
    let Some(root_id) = rows.first().map(|r| r.root_id) else {
        return Err(RootCommandError::Refused(
            "the database holds no root yet: the first replica creates it; import is for upgrades"
                .into(),
        ));
    };
    store
        .import_sealed_root(SealedRootRow {
            compose_hash,
            sealed,
            root_id,
        })
        .await?;
    Ok(format!(
        "imported the shared root sealed to compose hash 0x{} (root id 0x{})",
        hex::encode(compose_hash),
        hex::encode(root_id)
    ))
}
