//! `appliance backup` and `appliance restore`: the SQLite database of the data directory
//! (`<data_dir>/state.db`, found from the same configuration as `appliance serve`),
//! copied online and put back by `store::backup`. A PostgreSQL store is backed up with
//! `pg_dump` instead (docs/operators.md, section 8).

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError, StoreEngine};
use crate::store::backup::{self, BackupError, BackupSummary, RestoreSummary};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupCmdError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "store.engine is \"postgres\": `appliance {0}` handles the SQLite file only; use pg_dump and pg_restore on the PostgreSQL database (docs/operators.md, section 8)"
    )]
    Postgres(&'static str),
    #[error(transparent)]
    Backup(#[from] BackupError),
}

impl BackupCmdError {
    /// The process's exit status: 2 for a configuration error, 3 when a check refused
    /// (nothing was written or changed), 1 when the work itself failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) => 2,
            Self::Postgres(_) => 3,
            Self::Backup(err) if err.is_refusal() => 3,
            Self::Backup(_) => 1,
        }
    }
}

/// Where the SQLite database is: `<data_dir>/state.db` of the configuration (file and
/// `APPLIANCE_*` environment, as `appliance serve` reads them), `data_dir` overriding it.
pub fn database(
    config: Option<&Path>,
    data_dir: Option<PathBuf>,
    command: &'static str,
) -> Result<PathBuf, BackupCmdError> {
    let config = Config::load(config)?;
    if config.store.engine == StoreEngine::Postgres {
        return Err(BackupCmdError::Postgres(command));
    }
    Ok(data_dir
        .unwrap_or(config.data_dir)
        .join(crate::store::config::SQLITE_FILE))
}

/// `appliance backup`: a consistent copy of the live database in `out`.
pub fn backup(
    config: Option<&Path>,
    data_dir: Option<PathBuf>,
    out: &Path,
    force: bool,
) -> Result<BackupSummary, BackupCmdError> {
    let db = database(config, data_dir, "backup")?;
    Ok(backup::backup(&db, out, force)?)
}

/// `appliance restore`: the backup `from` in place of the (stopped) appliance's
/// database.
pub fn restore(
    config: Option<&Path>,
    data_dir: Option<PathBuf>,
    from: &Path,
    force: bool,
) -> Result<RestoreSummary, BackupCmdError> {
    let db = database(config, data_dir, "restore")?;
    Ok(backup::restore(&db, from, force)?)
}
