//! Backups of the SQLite store that restore: `appliance backup` and `appliance restore`.
//!
//! **Backup** ([`backup`]) copies the live database with SQLite's online backup API while
//! the appliance keeps serving. The whole copy runs inside one read transaction on the
//! source, so it is one snapshot: exactly the transactions committed before it began,
//! whatever the writer commits meanwhile. In WAL mode that read transaction never blocks
//! the writer (the WAL only cannot be checkpointed past the snapshot until the copy
//! ends). Without it SQLite restarts a backup whenever another process writes, so a busy
//! appliance would starve the copy. Pages are copied [`PAGES_PER_STEP`] at a time with a
//! short pause between steps, so the copy does not take the disk for itself.
//!
//! The copy is written to a temporary file beside the target, turned into one
//! self-contained file (rollback-journal mode, no `-wal`), given its metadata (the
//! one-row table `appliance_backup`, a [`BackupMeta`] in JSON), checked with
//! `PRAGMA integrity_check`, fsynced and only then moved to its name; an existing file is
//! replaced only when asked (`force`).
//!
//! **Restore** ([`restore`]) puts a backup in place of `state.db`. It refuses, changing
//! nothing:
//!
//! * a backup that fails `PRAGMA integrity_check`, is not one `appliance backup` wrote, or
//!   whose content no longer matches the metadata written into it;
//! * a backup whose schema is newer than this build understands (even with `force`);
//! * while any process has the database open (the appliance running on it): restore
//!   takes SQLite's exclusive lock on the file, which an open connection in WAL mode
//!   prevents;
//! * without `force`, a database that is newer than the backup ([`Marks::newer_than`]):
//!   a higher schema version, any table that has handed out a higher id, or a row written
//!   later than any in the backup.
//!
//! The database it replaces is checkpointed (its `-wal` folded in) and kept beside it as
//! `state.db.before-restore-<UTC time>`; the new file is staged in the data directory,
//! fsynced, and renamed over `state.db` in one step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::migrations;

/// The table of a backup file that holds its [`BackupMeta`] (one row, JSON).
pub const META_TABLE: &str = "appliance_backup";

/// The version of [`BackupMeta`] this build writes and reads.
pub const FORMAT: u32 = 1;

/// Pages copied per step of the online backup (4 MiB at SQLite's default page size).
pub const PAGES_PER_STEP: i32 = 1024;

/// The pause between two steps.
pub const STEP_PAUSE: Duration = Duration::from_millis(5);

/// How long a backup keeps retrying steps that find the source or the copy locked.
const BUSY_LIMIT: Duration = Duration::from_secs(30);

/// How long restore waits for another connection to let go of the database before it
/// calls it in use.
const IN_USE_WAIT: Duration = Duration::from_millis(250);

/// Columns that record when their row was written (Unix seconds). `expires_at` is not
/// one: it lies in the future.
const WRITE_TIME_COLUMNS: &[&str] = &[
    "created_at",
    "updated_at",
    "mined_at",
    "accepted_at",
    "minted_at",
    "last_used",
];

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    #[error("there is no database at {0}")]
    NoDatabase(PathBuf),
    #[error("{0} exists; pass --force to replace it")]
    OutExists(PathBuf),
    #[error("refusing to write the backup over the database itself ({0})")]
    OutIsDatabase(PathBuf),
    #[error(
        "the database {0} is in use (is the appliance running on this data directory?); stop the appliance first"
    )]
    InUse(PathBuf),
    #[error(
        "the database {db} is newer than the backup: {reasons}; pass --force to restore over it anyway (it is kept as {db}.before-restore-<time>)"
    )]
    TargetNewer { db: PathBuf, reasons: String },
    #[error(
        "cannot read the database {db} to compare it with the backup ({source}); pass --force to restore over it anyway (it is kept as {db}.before-restore-<time>)"
    )]
    TargetUnreadable {
        db: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "the backup's schema version {found} is newer than this build understands ({known}); restore it with the build that wrote it, or a newer one"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error("{path} is not a backup written by `appliance backup`: {reason}")]
    NotABackup { path: PathBuf, reason: String },
    #[error("the backup {path} is damaged: {reason}")]
    Damaged { path: PathBuf, reason: String },
    #[error("SQLite, on {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the online backup of {0} found the database locked for {1:?}; try again")]
    Busy(PathBuf, Duration),
}

impl BackupError {
    /// Whether a safety check refused the operation (nothing was written or changed), as
    /// opposed to a failure while carrying it out.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::NoDatabase(_)
                | Self::OutExists(_)
                | Self::OutIsDatabase(_)
                | Self::InUse(_)
                | Self::TargetNewer { .. }
                | Self::TargetUnreadable { .. }
                | Self::SchemaTooNew { .. }
                | Self::NotABackup { .. }
                | Self::Damaged { .. }
        )
    }
}

/// What a database holds, as far as telling which of two is newer goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marks {
    /// SQLite's `user_version`: the schema version (`store::migrations`).
    pub schema_version: i64,
    /// The highest id each `AUTOINCREMENT` table has ever handed out (`sqlite_sequence`:
    /// `credit_ledger`, `chain_outbox`, `accounts`, …). Ids are never reused, deleted
    /// rows included, so a database with a higher one has seen writes the other has not.
    pub sequences: BTreeMap<String, i64>,
    /// The latest time (Unix seconds) any row records in a column of
    /// [`WRITE_TIME_COLUMNS`]; `None` if no row records one.
    pub last_write_at: Option<i64>,
    /// Rows per table (for the summary; deletions make counts no measure of age).
    pub rows: BTreeMap<String, i64>,
}

impl Marks {
    /// Reads the marks of the database `conn` is open on (the backup's metadata table
    /// left out). Run it inside one transaction for a consistent answer.
    pub fn read(conn: &Connection) -> rusqlite::Result<Self> {
        let schema_version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let tables: Vec<String> = {
            let mut stmt = conn.prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table'
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name <> ?1 ORDER BY name",
            )?;
            stmt.query_map([META_TABLE], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        let mut rows = BTreeMap::new();
        let mut last_write_at: Option<i64> = None;
        for table in &tables {
            let name = quoted(table);
            let count: i64 =
                conn.query_row(&format!("SELECT count(*) FROM {name}"), [], |r| r.get(0))?;
            rows.insert(table.clone(), count);
            let columns: Vec<String> = {
                let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
                stmt.query_map([table], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            for column in columns
                .iter()
                .filter(|c| WRITE_TIME_COLUMNS.contains(&c.as_str()))
            {
                let latest: Option<i64> = conn.query_row(
                    &format!("SELECT max({}) FROM {name}", quoted(column)),
                    [],
                    |r| r.get(0),
                )?;
                last_write_at = last_write_at.max(latest);
            }
        }
        let has_sequences: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get(0),
        )?;
        let mut sequences = BTreeMap::new();
        if has_sequences {
            let mut stmt = conn.prepare("SELECT name, seq FROM sqlite_sequence")?;
            for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
                let (table, seq) = row?;
                let entry = sequences.entry(table).or_insert(seq);
                *entry = (*entry).max(seq);
            }
        }
        Ok(Self {
            schema_version,
            sequences,
            last_write_at,
            rows,
        })
    }

    /// Whether no write of the service is recorded: no id handed out, no row with a
    /// write time (a database that was only created and migrated).
    pub fn holds_no_writes(&self) -> bool {
        self.sequences.values().all(|&seq| seq <= 0) && self.last_write_at.is_none()
    }

    /// Why this database (the one a restore would replace) is newer than `backup`; empty
    /// if it is not. A database holding no writes is never newer.
    pub fn newer_than(&self, backup: &Marks) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.holds_no_writes() {
            return reasons;
        }
        if self.schema_version > backup.schema_version {
            reasons.push(format!(
                "schema version {} (the backup's: {})",
                self.schema_version, backup.schema_version
            ));
        }
        for (table, &seq) in &self.sequences {
            let theirs = backup.sequences.get(table).copied().unwrap_or(0);
            if seq > theirs {
                reasons.push(format!(
                    "{table} has handed out ids up to {seq} (the backup's: up to {theirs})"
                ));
            }
        }
        if let Some(latest) = self.last_write_at
            && backup.last_write_at.is_none_or(|theirs| latest > theirs)
        {
            reasons.push(format!(
                "a row written at {} (the backup's latest: {})",
                utc(latest),
                backup.last_write_at.map_or_else(|| "none".to_owned(), utc)
            ));
        }
        reasons
    }

    /// `table id, …` for the summary: the highest ids handed out.
    fn sequences_line(&self) -> String {
        if self.sequences.is_empty() {
            return "none".to_owned();
        }
        self.sequences
            .iter()
            .map(|(table, seq)| format!("{table} {seq}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The metadata a backup file carries (table [`META_TABLE`], one row, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupMeta {
    /// [`FORMAT`].
    pub format: u32,
    /// When the snapshot was taken (Unix seconds).
    pub taken_at: i64,
    /// The version of the appliance that wrote it.
    pub appliance_version: String,
    /// The snapshot's marks, read from the copy itself.
    pub marks: Marks,
}

/// What [`backup`] did.
#[derive(Debug, Clone)]
pub struct BackupSummary {
    pub out: PathBuf,
    pub bytes: u64,
    pub meta: BackupMeta,
    /// Online backup steps it took.
    pub steps: u32,
    pub elapsed: Duration,
}

impl BackupSummary {
    /// The one-line summary `appliance backup` prints.
    pub fn line(&self) -> String {
        let marks = &self.meta.marks;
        format!(
            "backup written to {}: {} bytes, schema version {}, taken {}, {} accounts, {} ledger rows, highest ids: {}; last write {}; {:.2} s",
            self.out.display(),
            self.bytes,
            marks.schema_version,
            utc(self.meta.taken_at),
            marks.rows.get("accounts").copied().unwrap_or(0),
            marks.rows.get("credit_ledger").copied().unwrap_or(0),
            marks.sequences_line(),
            marks.last_write_at.map_or_else(|| "none".to_owned(), utc),
            self.elapsed.as_secs_f64()
        )
    }
}

/// What [`restore`] did.
#[derive(Debug, Clone)]
pub struct RestoreSummary {
    pub db: PathBuf,
    pub meta: BackupMeta,
    /// Where the database it replaced was kept, if there was one.
    pub kept: Option<PathBuf>,
    /// The reasons the replaced database was newer, overridden by `force`.
    pub forced_over: Vec<String>,
}

impl RestoreSummary {
    /// The one-line summary `appliance restore` prints.
    pub fn line(&self) -> String {
        let marks = &self.meta.marks;
        let mut line = format!(
            "restored {} from a backup taken {} (schema version {}, {} accounts, highest ids: {})",
            self.db.display(),
            utc(self.meta.taken_at),
            marks.schema_version,
            marks.rows.get("accounts").copied().unwrap_or(0),
            marks.sequences_line(),
        );
        match &self.kept {
            Some(kept) => line.push_str(&format!(
                "; the database it replaced is kept as {}",
                kept.display()
            )),
            None => line.push_str("; there was no database before"),
        }
        if !self.forced_over.is_empty() {
            line.push_str(&format!(
                " (forced over a newer database: {})",
                self.forced_over.join("; ")
            ));
        }
        line
    }
}

/// Copies the database at `db` into a new backup file `out` while other processes
/// (the appliance) keep reading and writing it. `force` replaces an existing `out`.
pub fn backup(db: &Path, out: &Path, force: bool) -> Result<BackupSummary, BackupError> {
    let started = Instant::now();
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db.to_owned()));
    }
    if same_file_family(db, out) {
        return Err(BackupError::OutIsDatabase(out.to_owned()));
    }
    if !force && out.exists() {
        return Err(BackupError::OutExists(out.to_owned()));
    }
    let sql = |path: &Path| {
        let path = path.to_owned();
        move |source: rusqlite::Error| BackupError::Sqlite { path, source }
    };
    let dir = parent_dir(out);
    std::fs::create_dir_all(dir).map_err(|source| BackupError::Io {
        action: "create the directory",
        path: dir.to_owned(),
        source,
    })?;
    let partial = Partial::create(dir.join(format!(
        ".{}.partial-{}",
        file_name(out),
        std::process::id()
    )))?;

    let source = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql(db))?;
    source
        .busy_timeout(Duration::from_secs(5))
        .map_err(sql(db))?;
    let mut copy = Connection::open(&partial.path).map_err(sql(&partial.path))?;

    // One read transaction for the whole copy: one snapshot, never restarted by the
    // writer's commits (see the module's documentation).
    source.execute_batch("BEGIN").map_err(sql(db))?;
    let taken_at = super::now_unix();
    source
        .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        .map_err(sql(db))?;
    let steps = copy_pages(&source, &mut copy, db)?;
    source.execute_batch("COMMIT").map_err(sql(db))?;
    drop(source);

    // One self-contained file, then its metadata, read from the copy itself.
    copy.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get::<_, String>(0))
        .map_err(sql(&partial.path))?;
    let marks = Marks::read(&copy).map_err(sql(&partial.path))?;
    let meta = BackupMeta {
        format: FORMAT,
        taken_at,
        appliance_version: env!("CARGO_PKG_VERSION").to_owned(),
        marks,
    };
    let json = serde_json::to_string(&meta).map_err(|e| BackupError::Damaged {
        path: partial.path.clone(),
        reason: format!("cannot encode its metadata: {e}"),
    })?;
    copy.execute_batch(&format!(
        "CREATE TABLE {META_TABLE} (one INTEGER PRIMARY KEY CHECK (one = 1), meta TEXT NOT NULL)"
    ))
    .map_err(sql(&partial.path))?;
    copy.execute(
        &format!("INSERT INTO {META_TABLE} (one, meta) VALUES (1, ?1)"),
        [&json],
    )
    .map_err(sql(&partial.path))?;
    let problems = integrity_problems(&copy, "integrity_check").map_err(sql(&partial.path))?;
    if !problems.is_empty() {
        return Err(BackupError::Damaged {
            path: db.to_owned(),
            reason: format!(
                "the copy fails PRAGMA integrity_check: {}",
                problems.join("; ")
            ),
        });
    }
    copy.close().map_err(|(_, e)| sql(&partial.path)(e))?;

    sync_file(&partial.path)?;
    partial.place(out, force)?;
    sync_dir(dir)?;
    let bytes = std::fs::metadata(out)
        .map_err(|source| BackupError::Io {
            action: "read the size of",
            path: out.to_owned(),
            source,
        })?
        .len();
    tracing::info!(out = %out.display(), bytes, steps, "backup written");
    Ok(BackupSummary {
        out: out.to_owned(),
        bytes,
        meta,
        steps,
        elapsed: started.elapsed(),
    })
}

/// Runs the online backup from `source` to `copy` to the end; returns the steps taken.
fn copy_pages(source: &Connection, copy: &mut Connection, db: &Path) -> Result<u32, BackupError> {
    let sql = |source: rusqlite::Error| BackupError::Sqlite {
        path: db.to_owned(),
        source,
    };
    let backup = Backup::new(source, copy).map_err(sql)?;
    let mut steps = 0u32;
    let mut busy_since: Option<Instant> = None;
    loop {
        steps = steps.saturating_add(1);
        match backup.step(PAGES_PER_STEP).map_err(sql)? {
            StepResult::Done => return Ok(steps),
            StepResult::More => busy_since = None,
            _ => {
                let since = *busy_since.get_or_insert_with(Instant::now);
                if since.elapsed() > BUSY_LIMIT {
                    return Err(BackupError::Busy(db.to_owned(), BUSY_LIMIT));
                }
            }
        }
        std::thread::sleep(STEP_PAUSE);
    }
}

/// Puts the backup `from` in place of the database `db` (see the module's
/// documentation for what it refuses). `force` restores over a newer or unreadable
/// database.
pub fn restore(db: &Path, from: &Path, force: bool) -> Result<RestoreSummary, BackupError> {
    if same_file_family(db, from) {
        return Err(BackupError::NotABackup {
            path: from.to_owned(),
            reason: "it is the database itself".into(),
        });
    }
    let meta = check_backup(from)?;
    let dir = parent_dir(db);
    std::fs::create_dir_all(dir).map_err(|source| BackupError::Io {
        action: "create the data directory",
        path: dir.to_owned(),
        source,
    })?;

    let existed = db.exists();
    let mut forced_over = Vec::new();
    if existed {
        let reasons = match release_target(db)? {
            Target::Readable(marks) => marks.newer_than(&meta.marks),
            Target::Unreadable(source) if force => vec![format!("unreadable: {source}")],
            Target::Unreadable(source) => {
                return Err(BackupError::TargetUnreadable {
                    db: db.to_owned(),
                    source,
                });
            }
        };
        if !reasons.is_empty() && !force {
            return Err(BackupError::TargetNewer {
                db: db.to_owned(),
                reasons: reasons.join("; "),
            });
        }
        forced_over = reasons;
    }

    // The new database, staged in the data directory (so the rename below is atomic).
    let staged = Partial::create(dir.join(format!(
        ".{}.restoring-{}",
        file_name(db),
        std::process::id()
    )))?;
    std::fs::copy(from, &staged.path)
        .and_then(|_| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&staged.path, std::fs::Permissions::from_mode(0o600))
        })
        .map_err(|source| BackupError::Io {
            action: "copy the backup to",
            path: staged.path.clone(),
            source,
        })?;
    prepare_staged(&staged.path)?;
    sync_file(&staged.path)?;

    // Keep the database it replaces; its -wal (empty after the checkpoint, normally
    // gone) goes with it, its -shm (an index of the -wal) is dropped, so neither can be
    // taken for the new database's.
    let kept = if existed {
        let kept = kept_path(db);
        if std::fs::hard_link(db, &kept).is_err() {
            std::fs::rename(db, &kept).map_err(|source| BackupError::Io {
                action: "move the replaced database to",
                path: kept.clone(),
                source,
            })?;
        }
        Some(kept)
    } else {
        None
    };
    let wal = suffixed(db, "-wal");
    if wal.exists() {
        match &kept {
            Some(kept) => std::fs::rename(&wal, suffixed(kept, "-wal")),
            None => std::fs::remove_file(&wal),
        }
        .map_err(|source| BackupError::Io {
            action: "move aside",
            path: wal.clone(),
            source,
        })?;
    }
    let shm = suffixed(db, "-shm");
    if shm.exists() {
        std::fs::remove_file(&shm).map_err(|source| BackupError::Io {
            action: "remove",
            path: shm.clone(),
            source,
        })?;
    }
    staged.place(db, true)?;
    sync_dir(dir)?;
    tracing::info!(db = %db.display(), from = %from.display(), "database restored from a backup");
    Ok(RestoreSummary {
        db: db.to_owned(),
        meta,
        kept,
        forced_over,
    })
}

/// Checks that `from` is a whole backup this build can restore; returns its metadata.
fn check_backup(from: &Path) -> Result<BackupMeta, BackupError> {
    if !from.is_file() {
        return Err(BackupError::Io {
            action: "read the backup",
            path: from.to_owned(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let damaged = |reason: String| BackupError::Damaged {
        path: from.to_owned(),
        reason,
    };
    let conn = Connection::open_with_flags(
        from,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| damaged(e.to_string()))?;
    let problems =
        integrity_problems(&conn, "integrity_check").map_err(|e| damaged(e.to_string()))?;
    if !problems.is_empty() {
        return Err(damaged(format!(
            "PRAGMA integrity_check: {}",
            problems.join("; ")
        )));
    }
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [META_TABLE],
            |r| r.get(0),
        )
        .map_err(|e| damaged(e.to_string()))?;
    if !has_meta {
        return Err(BackupError::NotABackup {
            path: from.to_owned(),
            reason: format!("it has no {META_TABLE} table"),
        });
    }
    let json: Option<String> = conn
        .query_row(
            &format!("SELECT meta FROM {META_TABLE} WHERE one = 1"),
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| damaged(e.to_string()))?;
    let meta: BackupMeta = json
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| damaged(format!("its metadata does not parse: {e}")))?
        .ok_or_else(|| damaged("its metadata row is missing".into()))?;
    if meta.format != FORMAT {
        return Err(BackupError::NotABackup {
            path: from.to_owned(),
            reason: format!(
                "its format is {}, this build reads format {FORMAT}",
                meta.format
            ),
        });
    }
    let known = migrations::latest_version();
    if meta.marks.schema_version > known {
        return Err(BackupError::SchemaTooNew {
            found: meta.marks.schema_version,
            known,
        });
    }
    let marks = Marks::read(&conn).map_err(|e| damaged(e.to_string()))?;
    if marks != meta.marks {
        return Err(damaged(
            "its content does not match the metadata written with it (schema version, ids, rows or write times changed since)"
                .into(),
        ));
    }
    Ok(meta)
}

/// What a restore found at the database it replaces.
enum Target {
    /// A database this build reads, with its marks.
    Readable(Marks),
    /// Not readable as the appliance's database (why): `--force` restores over it anyway.
    Unreadable(rusqlite::Error),
}

/// Takes SQLite's exclusive lock on the database a restore replaces (refusing if any
/// process has it open), reads its marks, folds its WAL into the file and closes it.
fn release_target(db: &Path) -> Result<Target, BackupError> {
    let conn = match Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(e) if is_busy(&e) => return Err(BackupError::InUse(db.to_owned())),
        Err(e) => return Ok(Target::Unreadable(e)),
    };
    let read = (|| {
        conn.busy_timeout(IN_USE_WAIT)?;
        // Exclusive before the first read: in WAL mode SQLite then takes an exclusive
        // lock on the file itself, which any other open connection prevents.
        conn.pragma_update_and_check(None, "locking_mode", "EXCLUSIVE", |r| r.get::<_, String>(0))?;
        conn.execute_batch("BEGIN EXCLUSIVE")?;
        let marks = Marks::read(&conn)?;
        conn.execute_batch("COMMIT")?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok::<_, rusqlite::Error>(marks)
    })();
    match read {
        Ok(marks) => {
            conn.close().map_err(|(_, source)| BackupError::Sqlite {
                path: db.to_owned(),
                source,
            })?;
            Ok(Target::Readable(marks))
        }
        Err(e) if is_busy(&e) => Err(BackupError::InUse(db.to_owned())),
        Err(e) => Ok(Target::Unreadable(e)),
    }
}

/// Turns the staged copy of a backup into the appliance's database: without the
/// backup's metadata table, in WAL mode, checked.
fn prepare_staged(path: &Path) -> Result<(), BackupError> {
    let sql = |source: rusqlite::Error| BackupError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let conn = Connection::open(path).map_err(sql)?;
    conn.execute_batch(&format!("DROP TABLE {META_TABLE}"))
        .map_err(sql)?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .map_err(sql)?;
    let problems = integrity_problems(&conn, "quick_check").map_err(sql)?;
    if !problems.is_empty() {
        return Err(BackupError::Damaged {
            path: path.to_owned(),
            reason: format!(
                "the staged copy fails PRAGMA quick_check: {}",
                problems.join("; ")
            ),
        });
    }
    conn.close().map_err(|(_, e)| sql(e))
}

/// The rows of `PRAGMA <check>` other than a single `ok`.
fn integrity_problems(conn: &Connection, check: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA {check}"))?;
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(if rows == ["ok"] { Vec::new() } else { rows })
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// A file being written, removed (with its rollback journal) unless it was placed.
struct Partial {
    path: PathBuf,
    placed: bool,
}

impl Partial {
    /// Creates `path` empty, readable by its owner only (SQLite opens an empty file as
    /// an empty database and gives its journal the same mode).
    fn create(path: PathBuf) -> Result<Self, BackupError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| BackupError::Io {
                action: "create",
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            placed: false,
        })
    }

    /// Moves the file to `to`: replacing it (`replace`), or only if `to` does not exist
    /// (a hard link fails on an existing name, so no race can lose a file).
    fn place(mut self, to: &Path, replace: bool) -> Result<(), BackupError> {
        let io = |action: &'static str| {
            let path = to.to_owned();
            move |source| BackupError::Io {
                action,
                path,
                source,
            }
        };
        if replace {
            std::fs::rename(&self.path, to).map_err(io("rename the finished file to"))?;
        } else {
            match std::fs::hard_link(&self.path, to) {
                Ok(()) => {
                    std::fs::remove_file(&self.path).map_err(io("remove the temporary name of"))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(BackupError::OutExists(to.to_owned()));
                }
                // No hard links on this file system: check, then rename.
                Err(_) if to.exists() => return Err(BackupError::OutExists(to.to_owned())),
                Err(_) => {
                    std::fs::rename(&self.path, to).map_err(io("rename the finished file to"))?
                }
            }
        }
        self.placed = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.path);
            for suffix in ["-journal", "-wal", "-shm"] {
                let _ = std::fs::remove_file(suffixed(&self.path, suffix));
            }
        }
    }
}

/// `state.db.before-restore-<UTC time>` beside `db`, with `.1`, `.2`, … if taken.
fn kept_path(db: &Path) -> PathBuf {
    let stamp = utc(super::now_unix()).replace([':', '-'], "");
    let base = suffixed(db, &format!(".before-restore-{stamp}"));
    let mut candidate = base.clone();
    let mut n = 0u32;
    while candidate.exists() || suffixed(&candidate, "-wal").exists() {
        n += 1;
        candidate = suffixed(&base, &format!(".{n}"));
    }
    candidate
}

/// Whether `other` names `db` or one of its `-wal`, `-shm`, `-journal` files.
fn same_file_family(db: &Path, other: &Path) -> bool {
    let (Some(db), Some(other)) = (resolved(db), resolved(other)) else {
        return false;
    };
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .any(|suffix| suffixed(&db, suffix) == other)
}

/// `path` with its directory resolved (the file itself need not exist).
fn resolved(path: &Path) -> Option<PathBuf> {
    let dir = parent_dir(path).canonicalize().ok()?;
    Some(dir.join(path.file_name()?))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "backup".to_owned(), |n| n.to_string_lossy().into_owned())
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn sync_file(path: &Path) -> Result<(), BackupError> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|source| BackupError::Io {
            action: "fsync",
            path: path.to_owned(),
            source,
        })
}

fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|source| BackupError::Io {
            action: "fsync the directory",
            path: dir.to_owned(),
            source,
        })
}

/// An SQL identifier, quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `secs` (Unix time) as `YYYY-MM-DDTHH:MM:SSZ` (times before 1970 as 1970-01-01).
pub fn utc(secs: i64) -> String {
    let secs = secs.max(0);
    let (mut days, of_day) = (secs / 86_400, secs % 86_400);
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut year = 1970;
    loop {
        let length = if leap(year) { 366 } else { 365 };
        if days < length {
            break;
        }
        days -= length;
        year += 1;
    }
    let february = if leap(year) { 29 } else { 28 };
    let mut month = 1;
    for length in [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] {
        if days < length {
            break;
        }
        days -= length;
        month += 1;
    }
    format!(
        "{year:04}-{month:02}-{:02}T{:02}:{:02}:{:02}Z",
        days + 1,
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn marks(schema_version: i64, sequences: &[(&str, i64)], last: Option<i64>) -> Marks {
        Marks {
            schema_version,
            sequences: sequences
                .iter()
                .map(|(t, s)| ((*t).to_owned(), *s))
                .collect(),
            last_write_at: last,
            rows: BTreeMap::new(),
        }
    }

    #[test]
    fn the_same_state_and_an_older_one_are_not_newer() {
        let backup = marks(11, &[("accounts", 5), ("credit_ledger", 40)], Some(1_000));
        assert!(backup.newer_than(&backup).is_empty());
        let older = marks(10, &[("accounts", 3), ("credit_ledger", 40)], Some(900));
        assert!(
            older.newer_than(&backup).is_empty(),
            "{:?}",
            older.newer_than(&backup)
        );
    }

    #[test]
    fn a_higher_schema_id_or_write_time_is_newer() {
        let backup = marks(11, &[("accounts", 5), ("credit_ledger", 40)], Some(1_000));
        let schema = marks(12, &[("accounts", 5), ("credit_ledger", 40)], Some(1_000));
        let reasons = schema.newer_than(&backup);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("schema version 12"), "{reasons:?}");

        let ledger = marks(11, &[("accounts", 5), ("credit_ledger", 41)], Some(1_000));
        let reasons = ledger.newer_than(&backup);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("credit_ledger") && reasons[0].contains("41"));

        // A table the backup never wrote to.
        let outbox = marks(11, &[("accounts", 5), ("chain_outbox", 1)], Some(1_000));
        let reasons = outbox.newer_than(&backup);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("chain_outbox"), "{reasons:?}");

        // Only an update, later than anything in the backup: no id moved.
        let later = marks(11, &[("accounts", 5), ("credit_ledger", 40)], Some(1_001));
        let reasons = later.newer_than(&backup);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("1970-01-01T00:16:41Z"), "{reasons:?}");
        let none = marks(11, &[("accounts", 5), ("credit_ledger", 40)], None);
        assert_eq!(
            later.newer_than(&none).len(),
            1,
            "a write time against none"
        );

        // Lower in one place does not hide higher in another.
        let mixed = marks(10, &[("accounts", 1), ("credit_ledger", 99)], Some(10));
        assert_eq!(mixed.newer_than(&backup).len(), 1);
    }

    #[test]
    fn a_database_holding_no_writes_is_never_newer() {
        let backup = marks(9, &[("accounts", 5)], Some(1_000));
        // Created and migrated by a newer build, nothing written: restoring over it
        // loses nothing (the appliance migrates the restored database on start).
        let fresh = marks(11, &[], None);
        assert!(fresh.holds_no_writes());
        assert!(fresh.newer_than(&backup).is_empty());
        let with_ids = marks(11, &[("accounts", 1)], None);
        assert!(!with_ids.holds_no_writes());
        assert!(!with_ids.newer_than(&backup).is_empty());
    }

    #[test]
    fn utc_formats_unix_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(utc(1_735_689_599), "2024-12-31T23:59:59Z");
    }

    /// A database with the appliance's schema, and a connection that writes to it
    /// beside the store's own (the store stays open: "the appliance is running").
    struct Live {
        dir: tempfile::TempDir,
        store: Option<Store>,
        conn: Option<Connection>,
    }

    impl Live {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("state.db")).unwrap();
            let conn = Connection::open(dir.path().join("state.db")).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            Self {
                dir,
                store: Some(store),
                conn: Some(conn),
            }
        }

        fn db(&self) -> PathBuf {
            self.dir.path().join("state.db")
        }

        fn add_accounts(&self, n: usize) {
            let conn = self.conn.as_ref().unwrap();
            for _ in 0..n {
                conn.execute(
                    "INSERT INTO accounts (api_key_hash, name, wallet_address, created_at)
                     VALUES (randomblob(32), 'a', '0x00', 1000)",
                    [],
                )
                .unwrap();
            }
        }

        /// Closes every connection: "the appliance stopped".
        fn stop(&mut self) {
            self.conn.take();
            self.store.take();
        }
    }

    fn accounts(db: &Path) -> i64 {
        let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        conn.query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn backup_of_an_open_database_restores() {
        let live = Live::new();
        live.add_accounts(3);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("b.db");
        let summary = backup(&live.db(), &out, false).unwrap();
        assert_eq!(summary.meta.marks.sequences.get("accounts"), Some(&3));
        assert_eq!(summary.meta.marks.rows.get("accounts"), Some(&3));
        assert_eq!(
            summary.meta.marks.schema_version,
            migrations::latest_version()
        );
        assert!(summary.bytes > 0);
        assert!(summary.line().contains("accounts 3"), "{}", summary.line());
        // One file: no -wal, no leftovers of the temporary name.
        let names: Vec<String> = std::fs::read_dir(out_dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["b.db"]);

        // Never over an existing file without force, never over the database.
        live.add_accounts(1);
        let err = backup(&live.db(), &out, false).unwrap_err();
        assert!(matches!(err, BackupError::OutExists(_)), "{err}");
        assert!(err.is_refusal());
        assert_eq!(accounts(&out), 3, "the existing backup is untouched");
        let err = backup(&live.db(), &live.db(), true).unwrap_err();
        assert!(matches!(err, BackupError::OutIsDatabase(_)), "{err}");
        let err = backup(&live.db(), &suffixed(&live.db(), "-wal"), true).unwrap_err();
        assert!(matches!(err, BackupError::OutIsDatabase(_)), "{err}");
        let summary = backup(&live.db(), &out, true).unwrap();
        assert_eq!(summary.meta.marks.sequences.get("accounts"), Some(&4));
        assert_eq!(accounts(&out), 4);

        // Into a fresh data directory.
        let fresh = tempfile::tempdir().unwrap();
        let target = fresh.path().join("data").join("state.db");
        let restored = restore(&target, &out, false).unwrap();
        assert_eq!(restored.kept, None);
        assert_eq!(accounts(&target), 4);
        let conn = Connection::open(&target).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let meta_tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
                [META_TABLE],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(meta_tables, 0, "the metadata table is not restored");
        drop(conn);
        // The store opens it (schema current), and a backup of it backs up again.
        drop(Store::open(&target).unwrap());
        backup(&target, &fresh.path().join("again.db"), false).unwrap();
    }

    #[test]
    fn restore_refuses_an_open_or_newer_database_and_keeps_what_it_replaces() {
        let mut live = Live::new();
        live.add_accounts(2);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("b.db");
        backup(&live.db(), &out, false).unwrap();

        // In use: the store (the appliance) has it open.
        let err = restore(&live.db(), &out, true).unwrap_err();
        assert!(matches!(err, BackupError::InUse(_)), "{err}");

        // Newer: one more account, then stopped.
        live.add_accounts(1);
        live.stop();
        let err = restore(&live.db(), &out, false).unwrap_err();
        match &err {
            BackupError::TargetNewer { reasons, .. } => {
                assert!(
                    reasons.contains("accounts has handed out ids up to 3"),
                    "{reasons}"
                )
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(accounts(&live.db()), 3, "nothing changed");

        let restored = restore(&live.db(), &out, true).unwrap();
        assert_eq!(restored.forced_over.len(), 1, "{:?}", restored.forced_over);
        let kept = restored.kept.clone().unwrap();
        assert!(
            kept.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("state.db.before-restore-"),
            "{}",
            kept.display()
        );
        assert_eq!(accounts(&kept), 3, "the replaced database is kept whole");
        assert_eq!(accounts(&live.db()), 2);
        assert!(
            !suffixed(&live.db(), "-wal").exists() || {
                // Only an empty WAL of the new database may be there.
                std::fs::metadata(suffixed(&live.db(), "-wal"))
                    .unwrap()
                    .len()
                    == 0
            }
        );
        assert!(restored.line().contains("kept as"), "{}", restored.line());

        // The same backup again: the database equals it now, no force needed; the
        // first kept file is not overwritten.
        let again = restore(&live.db(), &out, false).unwrap();
        assert_ne!(again.kept.as_ref(), Some(&kept));
        assert_eq!(accounts(&kept), 3);
    }

    #[test]
    fn an_unreadable_database_is_replaced_only_with_force_and_kept() {
        let live = Live::new();
        live.add_accounts(2);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("b.db");
        backup(&live.db(), &out, false).unwrap();
        // Not the live directory: the store's connections close on their own threads.
        let data = tempfile::tempdir().unwrap();
        let db = data.path().join("state.db");
        let garbage = b"not a database at all, but somebody's precious file".repeat(200);
        std::fs::write(&db, &garbage).unwrap();

        let err = restore(&db, &out, false).unwrap_err();
        assert!(matches!(err, BackupError::TargetUnreadable { .. }), "{err}");
        assert!(err.is_refusal());
        let message = err.to_string();
        assert!(message.contains("--force"), "{message}");
        assert!(
            std::error::Error::source(&err).is_some(),
            "SQLite's own error is kept as the source"
        );
        assert!(std::fs::read(&db).unwrap() == garbage, "nothing changed");

        let restored = restore(&db, &out, true).unwrap();
        assert!(
            restored
                .forced_over
                .iter()
                .any(|r| r.starts_with("unreadable: ")),
            "{:?}",
            restored.forced_over
        );
        assert_eq!(accounts(&db), 2);
        let kept = restored.kept.unwrap();
        assert!(
            std::fs::read(kept).unwrap() == garbage,
            "the replaced file is kept whole"
        );
    }

    #[test]
    fn a_damaged_foreign_or_too_new_backup_is_refused() {
        let live = Live::new();
        live.add_accounts(50);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("b.db");
        backup(&live.db(), &out, false).unwrap();
        let good = std::fs::read(&out).unwrap();
        let target_dir = tempfile::tempdir().unwrap();
        let target = target_dir.path().join("state.db");
        let refused = |path: &Path| {
            let err = restore(&target, path, true).unwrap_err();
            assert!(err.is_refusal(), "{err}");
            assert!(!target.exists(), "nothing written for {}", path.display());
            err
        };

        // Page 2 overwritten.
        let page = 4096;
        let mut bytes = good.clone();
        bytes[page..2 * page].fill(0xA5);
        let damaged = out_dir.path().join("damaged.db");
        std::fs::write(&damaged, &bytes).unwrap();
        let err = refused(&damaged);
        assert!(matches!(err, BackupError::Damaged { .. }), "{err}");

        // Cut short.
        let short = out_dir.path().join("short.db");
        std::fs::write(&short, &good[..good.len() / 2]).unwrap();
        let err = refused(&short);
        assert!(matches!(err, BackupError::Damaged { .. }), "{err}");

        // Not a database at all.
        let text = out_dir.path().join("text.db");
        std::fs::write(&text, b"not a database, just some text that is long enough").unwrap();
        let err = refused(&text);
        assert!(matches!(err, BackupError::Damaged { .. }), "{err}");

        // The live database itself, copied: no metadata.
        let copied = out_dir.path().join("copied.db");
        {
            let conn = Connection::open(&copied).unwrap();
            conn.execute_batch("CREATE TABLE t (x)").unwrap();
        }
        let err = refused(&copied);
        assert!(matches!(err, BackupError::NotABackup { .. }), "{err}");

        // Rows removed after the backup was written: integrity holds, the metadata
        // does not match.
        let edited = out_dir.path().join("edited.db");
        std::fs::write(&edited, &good).unwrap();
        Connection::open(&edited)
            .unwrap()
            .execute("DELETE FROM accounts WHERE id = 7", [])
            .unwrap();
        let err = refused(&edited);
        assert!(
            matches!(&err, BackupError::Damaged { reason, .. } if reason.contains("does not match")),
            "{err}"
        );

        // Written by a newer build.
        let newer = out_dir.path().join("newer.db");
        std::fs::write(&newer, &good).unwrap();
        {
            let conn = Connection::open(&newer).unwrap();
            let json: String = conn
                .query_row(&format!("SELECT meta FROM {META_TABLE}"), [], |r| r.get(0))
                .unwrap();
            let mut meta: BackupMeta = serde_json::from_str(&json).unwrap();
            meta.marks.schema_version = migrations::latest_version() + 1;
            conn.pragma_update(None, "user_version", meta.marks.schema_version)
                .unwrap();
            conn.execute(
                &format!("UPDATE {META_TABLE} SET meta = ?1"),
                [serde_json::to_string(&meta).unwrap()],
            )
            .unwrap();
        }
        let err = refused(&newer);
        assert!(matches!(err, BackupError::SchemaTooNew { .. }), "{err}");

        // The untouched backup restores (the checks above are not refusing everything).
        std::fs::write(&out, &good).unwrap();
        restore(&target, &out, false).unwrap();
        assert_eq!(accounts(&target), 50);
    }
}
