//! The writer thread: group commit.
//!
//! Every write is a job sent to one thread that owns the writer connection. The thread
//! takes the first waiting job and whatever else is queued behind it or arrives while
//! the transaction begins (at most [`MAX_BATCH`]), runs them in one `BEGIN IMMEDIATE`
//! transaction (PostgreSQL: one holding the replicas' write lock), each inside its own
//! savepoint, and commits once: one WAL sync for the whole batch instead of one per
//! write. Nothing is answered before that commit, so "acknowledged" still means "on
//! disk" (`synchronous = FULL`).
//!
//! Each job keeps the isolation of a transaction of its own: a job that fails is rolled
//! back to its savepoint, so nothing it did is kept and the other jobs of the batch are
//! unaffected. If the batch itself cannot be committed (or a savepoint cannot be
//! released: the disk is full, SQLite rolled the transaction back), no job of the batch
//! is kept and every one of them gets an error. A job that panics is rolled back and its
//! caller gets an error; the thread carries on.
//!
//! The queue is bounded ([`MAX_QUEUED`]): beyond it a write is refused at once with
//! `StoreError::Unavailable` (503) rather than held in memory.
//!
//! On PostgreSQL a batch costs few round trips (`docs/performance.md`, "PostgreSQL writes,
//! round three"): one to begin (the replicas' write lock, the write epoch, the id
//! sequences, the first savepoint); none between jobs, since what the batch owes the
//! database after a job (its deferred rows, the end of its savepoint, the next one) goes
//! with the next statement any job runs (`integrity::BatchRows::owe`); the jobs' own
//! reads; and one to end. Before that end, one keyservice round trip checks every row the
//! batch read and the write epoch (not below the highest this replica has seen: a batch on
//! a rolled-back database is refused whole) and computes every MAC the batch writes; the
//! closing statement writes them, advances the epoch and commits (`store::integrity`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Duration;

use super::integrity::{BatchRows, Checks, EPOCH_AS_TEXT, Integrity, SEQUENCES_AS_TEXT};
use super::postgres::{CHANGES_CHANNEL, PgPool};
use super::sql::{Conn, PgSession, TextRows};
use super::{Result, StoreError};

/// Most jobs committed together.
const MAX_BATCH: usize = 64;
/// Most jobs waiting for the writer.
pub(super) const MAX_QUEUED: usize = 4096;

/// The advisory lock every PostgreSQL write batch takes (`pg_advisory_xact_lock`), so
/// the batches of all replicas run one after another, exactly as SQLite's single writer
/// runs them: a write sees every write acknowledged before it, on any replica.
pub(super) const WRITE_LOCK_KEY: i64 = 0x6170_706c_0001; // "appl" 1

/// What a job leaves for after the commit: called with `None` when the batch was
/// committed, or with why it was not; and with why the store refused the job after it
/// ran (its rows failed their integrity check), if it did.
type Completion = Box<dyn FnOnce(Option<&StoreError>, Option<StoreError>) + Send>;

/// One write: runs on the writer thread inside the batch's transaction and returns
/// how it ended (unless kept, its savepoint is rolled back) and its completion. Called
/// with `None` when the batch could not even begin: it then only fails.
type Job = Box<dyn FnOnce(Option<Conn<'_>>) -> (Ran, Completion) + Send>;

/// How a job ended on the writer thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// It succeeded: its savepoint is released.
    Kept,
    /// It failed: its savepoint is rolled back.
    Failed,
    /// It failed because the disk is full (`StoreError::DiskFull`). SQLite may then have
    /// rolled back the whole transaction by itself; the other writes of the batch are
    /// told the same reason.
    DiskFull,
}

/// What runs after each batch, before its writes are answered, told whether the batch
/// may have changed what API keys resolve to (the store then empties its key cache:
/// `store::key_cache`). Always `true` on SQLite (nothing tracks what a batch wrote
/// there) and for a batch that was not committed; on PostgreSQL, whether a kept job
/// wrote or deleted a row of a table keys resolve from (`integrity::KEY_TABLES`).
pub(super) type AfterBatch = Box<dyn Fn(bool) + Send>;

/// The writer's connection: SQLite's one writer connection, or a PostgreSQL session
/// (re-opened from the pool when it breaks).
pub(super) enum WriterDb {
    Sqlite(rusqlite::Connection),
    Postgres {
        pool: Arc<PgPool>,
        session: Option<Box<PgSession>>,
        integrity: Arc<Integrity>,
    },
}

impl WriterDb {
    /// Opens the batch's transaction and the first job's savepoint, in one round trip:
    /// `BEGIN IMMEDIATE` (SQLite), or a transaction that holds the replicas' write lock
    /// (PostgreSQL), which also shows the `write_epoch` row and the id sequences (each
    /// statement's rows, for `begin_batch`).
    fn begin(&mut self) -> Result<Vec<TextRows>> {
        match self {
            Self::Sqlite(conn) => {
                conn.execute_batch("BEGIN IMMEDIATE; SAVEPOINT job")?;
                Ok(Vec::new())
            }
            Self::Postgres { pool, session, .. } => {
                if session.as_ref().is_none_or(|s| s.is_closed()) {
                    *session = None;
                    *session = Some(Box::new(pool.connect()?));
                }
                let Some(s) = session.as_ref() else {
                    return Err(StoreError::Unavailable("no database session".into()));
                };
                s.clear_failure();
                let began = s.simple_rows(&format!(
                    "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY}); \
                     {EPOCH_AS_TEXT}; {SEQUENCES_AS_TEXT}; SAVEPOINT job"
                ));
                match began {
                    Ok(rows) => Ok(rows),
                    Err(err) => {
                        if err.breaks_session() {
                            *session = None;
                        } else {
                            let _ = s.batch("ROLLBACK");
                        }
                        Err(err.into())
                    }
                }
            }
        }
    }

    /// Forgets a failed statement of an earlier job, whose savepoint has been rolled back.
    fn clear_failure(&self) {
        if let Self::Postgres {
            session: Some(s), ..
        } = self
        {
            s.clear_failure();
        }
    }

    /// Round trips this writer's PostgreSQL session has made (0 on SQLite).
    fn round_trips(&self) -> u64 {
        match self {
            Self::Sqlite(_) => 0,
            Self::Postgres { session, .. } => session.as_ref().map_or(0, |s| s.round_trips()),
        }
    }

    fn integrity(&self) -> Option<&Integrity> {
        match self {
            Self::Sqlite(_) => None,
            Self::Postgres { integrity, .. } => Some(integrity),
        }
    }

    fn conn(&self) -> Option<Conn<'_>> {
        match self {
            Self::Sqlite(conn) => Some(Conn::sqlite(conn)),
            Self::Postgres { session, .. } => session.as_deref().map(Conn::postgres),
        }
    }

    fn run(&self, sql: &str) -> Result<()> {
        match self {
            Self::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Self::Postgres { session, .. } => match session {
                Some(s) => Ok(s.batch(sql)?),
                None => Err(StoreError::Unavailable(
                    "the database session is gone".into(),
                )),
            },
        }
    }

    /// Whether the transaction is still open (SQLite rolls it back by itself on some
    /// errors, a full disk among them).
    fn in_transaction(&self) -> bool {
        match self {
            Self::Sqlite(conn) => !conn.is_autocommit(),
            Self::Postgres { session, .. } => session.as_ref().is_some_and(|s| !s.is_closed()),
        }
    }

    /// Runs `last` (the last job's savepoint end and the batch's closing statement),
    /// then commits, in one round trip. `keys`: the batch may have changed what API keys
    /// resolve to, so every replica is told.
    fn commit(&mut self, last: &str, keys: bool) -> Result<()> {
        let sql = match self {
            Self::Sqlite(_) => format!("{last}; COMMIT"),
            // Delivered to every listening replica when (and only if) this commits.
            Self::Postgres { .. } if keys => format!("{last}; NOTIFY {CHANGES_CHANNEL}; COMMIT"),
            Self::Postgres { .. } => format!("{last}; COMMIT"),
        };
        let out = match self {
            Self::Postgres {
                session: Some(s), ..
            } => s.batch(&sql).map_err(|err| {
                if err.is_guard_failure() {
                    StoreError::Unavailable(
                        "rows this write batch wrote were changed or removed in the database \
                         before it committed (or another writer moved the write epoch); \
                         nothing was kept"
                            .into(),
                    )
                } else {
                    err.into()
                }
            }),
            _ => self.run(&sql),
        };
        if out.is_err() {
            self.rollback();
        }
        out
    }

    fn rollback(&mut self) {
        match self {
            Self::Sqlite(conn) => {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
            }
            Self::Postgres { session, .. } => {
                let broken = match session.as_ref() {
                    Some(s) => s.batch("ROLLBACK").is_err_and(|e| e.breaks_session()),
                    None => false,
                };
                if broken {
                    *session = None;
                }
            }
        }
    }
}

/// The sending side, held by the store.
pub(super) struct Writer {
    jobs: SyncSender<Job>,
    stats: Arc<Counters>,
}

/// Batches committed and writes in them, since start.
#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    writes: AtomicU64,
    round_trips: AtomicU64,
    /// The last batch failed for a full disk: logged once when the disk fills and once
    /// when writes commit again, not for every refused batch.
    disk_full: std::sync::atomic::AtomicBool,
}

impl Counters {
    /// Logs a batch that was not committed: a full disk once, until a batch commits.
    fn not_committed(&self, err: &StoreError, jobs: usize, what: &str) {
        match err {
            StoreError::DiskFull => {
                if !self.disk_full.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        jobs,
                        "store: the disk is full: writes are refused until space is freed (reads go on)"
                    );
                }
            }
            err => tracing::error!(error = %err, jobs, "store: {what}"),
        }
    }

    /// A batch committed: says so if the disk had been full.
    fn committed(&self) {
        if self.disk_full.swap(false, Ordering::Relaxed) {
            tracing::warn!("store: writes are committed again (the disk has space)");
        }
    }
}

/// What the writer has committed since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed.
    pub batches: u64,
    /// Writes (successful or rolled back to their savepoint) in those transactions.
    pub writes: u64,
    /// Round trips the writer made to PostgreSQL, for every batch (0 on SQLite).
    pub round_trips: u64,
}

impl Writer {
    /// Starts the writer thread on `db`, with room for `queue` waiting jobs. The
    /// thread ends when the `Writer` is dropped. `after_batch` runs after every batch
    /// (committed or not), before any of its writes is answered.
    pub(super) fn start(
        db: WriterDb,
        queue: usize,
        after_batch: AfterBatch,
    ) -> std::io::Result<Self> {
        let (jobs, waiting) = std::sync::mpsc::sync_channel(queue);
        let stats = Arc::new(Counters::default());
        let counters = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || serve(db, &waiting, &counters, &*after_batch))?;
        Ok(Self { jobs, stats })
    }

    pub(super) fn stats(&self) -> WriteStats {
        WriteStats {
            batches: self.stats.batches.load(Ordering::Relaxed),
            writes: self.stats.writes.load(Ordering::Relaxed),
            round_trips: self.stats.round_trips.load(Ordering::Relaxed),
        }
    }

    /// Runs `f` in the next batch and waits for that batch's commit.
    pub(super) async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<T> + Send + 'static,
    {
        let (answer, answered) = tokio::sync::oneshot::channel::<Result<T>>();
        let job: Job = Box::new(move |tx| {
            let Some(tx) = tx else {
                // The batch never began: the completion reports why.
                let completion: Completion = Box::new(move |why, _| {
                    let err = why.map_or_else(
                        || StoreError::Unavailable("the write was not run".into()),
                        not_committed,
                    );
                    let _ = answer.send(Err(err));
                });
                return (Ran::Failed, completion);
            };
            let out = match f(tx) {
                // PostgreSQL: a statement failed and the job carried on regardless; the
                // transaction is aborted, so nothing of this job can be kept.
                Ok(_) if tx.failed() => Err(StoreError::Task(
                    "a statement of this write failed; nothing was kept".into(),
                )),
                out => out,
            };
            let ran = match &out {
                Ok(_) => Ran::Kept,
                Err(StoreError::DiskFull) => Ran::DiskFull,
                Err(_) => Ran::Failed,
            };
            let completion: Completion = Box::new(move |batch_failed, refused| {
                let out = match (out, batch_failed, refused) {
                    (_, _, Some(refused)) => Err(refused),
                    (Ok(_), Some(why), None) => Err(not_committed(why)),
                    (out, _, _) => out,
                };
                let _ = answer.send(out);
            });
            (ran, completion)
        });
        self.jobs.try_send(job).map_err(|err| match err {
            TrySendError::Full(_) => StoreError::Unavailable(
                "too many writes are waiting for the store; retry shortly".into(),
            ),
            TrySendError::Disconnected(_) => {
                StoreError::Task("the store's writer has stopped".into())
            }
        })?;
        answered.await.map_err(|_| {
            StoreError::Task(
                "the write did not complete (it panicked or the writer stopped)".into(),
            )
        })?
    }
}

/// The error a job that had succeeded gets when its batch was not committed.
fn not_committed(why: &StoreError) -> StoreError {
    match why {
        StoreError::Unavailable(msg) => StoreError::Unavailable(msg.clone()),
        StoreError::DiskFull => StoreError::DiskFull,
        other => StoreError::Unavailable(format!("the write was not committed: {other}")),
    }
}

fn serve(
    mut db: WriterDb,
    queue: &Receiver<Job>,
    stats: &Counters,
    after_batch: &(dyn Fn(bool) + Send),
) {
    let mut backoff = Duration::ZERO;
    while let Ok(first) = queue.recv() {
        let mut batch = Vec::with_capacity(8);
        batch.push(first);
        fill(&mut batch, queue);
        if commit_batch(&mut db, batch, queue, stats, after_batch) {
            backoff = Duration::ZERO;
        } else {
            // The database is unreachable: do not spin on the next batch.
            backoff = (backoff * 2).clamp(Duration::from_millis(20), Duration::from_secs(1));
            std::thread::sleep(backoff);
        }
    }
}

/// Adds the writes waiting in `queue` to `batch`, up to [`MAX_BATCH`].
fn fill(batch: &mut Vec<Job>, queue: &Receiver<Job>) {
    while batch.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// Runs `batch` in one transaction and commits it (counted in `stats`); completes every
/// job. `false` when the batch could not begin. The writes that reached `queue` while the
/// batch began (on PostgreSQL, while it waited for another replica's batch to release
/// the write lock) join it.
///
/// Round trips (PostgreSQL): one to begin (the lock, the epoch, the id sequences, the
/// first savepoint); the jobs' own statements, the first of which also carries what the
/// batch owes the database after the jobs before (their deferred rows and savepoint
/// ends); and one to end (what is still owed, every MAC the batch wrote, the epoch step,
/// the commit). A job that runs no statement of its own costs none.
fn commit_batch(
    db: &mut WriterDb,
    mut batch: Vec<Job>,
    queue: &Receiver<Job>,
    stats: &Counters,
    after_batch: &(dyn Fn(bool) + Send),
) -> bool {
    let trips_before = db.round_trips();
    let shown = match db.begin() {
        Ok(shown) => shown,
        Err(err) => {
            stats.not_committed(&err, batch.len(), "cannot begin a write batch");
            let why = match err {
                StoreError::DiskFull => StoreError::DiskFull,
                err => StoreError::Unavailable(format!("the store cannot write right now: {err}")),
            };
            for job in batch {
                let (_, completion) = job(None);
                completion(Some(&why), None);
            }
            return false;
        }
    };
    // PostgreSQL: the database must not have gone back in time, and this batch advances
    // its write epoch (`store::integrity`).
    let epoch = match db.integrity() {
        Some(integrity) => match integrity.begin_batch(&shown) {
            Ok(step) => step,
            Err(err) => {
                tracing::error!(error = %err, jobs = batch.len(), "store: a write batch was refused");
                db.rollback();
                for job in batch {
                    let (_, completion) = job(None);
                    completion(Some(&err), None);
                }
                after_batch(true);
                return true;
            }
        },
        None => None,
    };
    fill(&mut batch, queue);
    let jobs = batch.len() as u64;
    let rows = BatchRows::default();
    if epoch.is_some() {
        // The statements of `begin`: BEGIN, the lock, the epoch, the sequences, SAVEPOINT.
        rows.prefetch(shown.get(3).map_or(&[][..], Vec::as_slice));
    }
    let mut completions: Vec<(Completion, Option<StoreError>)> = Vec::with_capacity(batch.len());
    let mut broken: Option<StoreError> = None;
    // A job failed for a full disk (then, should the transaction be gone, that is why).
    let mut disk_full = false;
    // SQLite: how the previous job's savepoint ends, sent with the next job's savepoint.
    // PostgreSQL: the batch owes it to the database (`BatchRows::owe`) and sends it
    // before the next statement any job runs, or with the batch's end.
    let mut end: Option<&str> = None;
    let mut queued = batch.into_iter();
    for job in queued.by_ref() {
        if let Some(previous) = end.take()
            && let Err(err) = db.run(&format!("{previous}; SAVEPOINT job"))
        {
            broken = Some(err);
            break;
        }
        // The previous job's savepoint is ended or will be before this job's first
        // statement (rolled back if a statement of it failed): a failure of that job's
        // is not this one's.
        db.clear_failure();
        let Some(tx) = db.conn() else {
            broken = Some(StoreError::Unavailable(
                "the database session is gone".into(),
            ));
            break;
        };
        // PostgreSQL: what the job read is checked, and what it wrote sealed, when the
        // batch ends (`store::integrity`).
        let place = completions.len();
        let checks = db.integrity().map(|_| Checks::for_write(&rows, place));
        let job_tx = match &checks {
            Some(checks) => tx.with_checks(checks),
            None => tx,
        };
        let trips = db.round_trips();
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| job(Some(job_tx))));
        // Whether the job ran a statement (then its savepoint, and what the batch owed
        // before it, reached the database).
        let ran_statements = db.round_trips() != trips;
        let ok = match ran {
            Ok((ran, completion)) => {
                disk_full |= ran == Ran::DiskFull;
                let ok = ran == Ran::Kept;
                let refused = match (ok, db.integrity(), &checks) {
                    (true, Some(integrity), Some(checks)) if !tx.failed() => {
                        integrity.finish_job(checks).err()
                    }
                    // A failed job is not kept, but what it read is still checked: a
                    // tampered row is what its caller hears of (and it is counted).
                    (false, Some(integrity), Some(checks)) => integrity.check_failed_job(checks),
                    _ => None,
                };
                let ok = ok && refused.is_none();
                completions.push((completion, refused));
                ok
            }
            Err(_) => {
                tracing::error!("store: a write panicked; it is rolled back");
                false
            }
        };
        if let Some(why) = rows.owed_failed() {
            let refused = || {
                StoreError::Unavailable(format!(
                    "the database refused rows of this write batch ({why}); nothing was kept"
                ))
            };
            // The job that was sending them failed for it, not for anything of its own.
            if let Some((_, own)) = completions.get_mut(place) {
                *own = Some(refused());
            }
            broken = Some(refused());
            break;
        }
        match checks {
            // PostgreSQL.
            Some(checks) => {
                if ok {
                    let mut owed = checks.take_own_deferred();
                    owed.push("RELEASE job; SAVEPOINT job".into());
                    rows.owe(owed.join("; "));
                    checks.keep();
                } else if ran_statements {
                    rows.owe("ROLLBACK TO job; RELEASE job; SAVEPOINT job");
                }
                // A failed job that ran no statement changed nothing.
            }
            None => {
                end = Some(if ok {
                    "RELEASE job"
                } else {
                    "ROLLBACK TO job; RELEASE job"
                });
            }
        }
        if !db.in_transaction() {
            broken = Some(if disk_full {
                StoreError::DiskFull
            } else {
                StoreError::Unavailable("the store rolled back the write batch".into())
            });
            break;
        }
    }
    // The jobs a broken batch never ran are answered with why it broke, like the others
    // (dropped, their callers would hear only that the write vanished: a 500).
    for job in queued {
        let (_, completion) = job(None);
        completions.push((completion, None));
    }
    // The last savepoint ends in the batch's closing round trip (with what the batch
    // still owes: should it fail there, the batch is not committed).
    let mut last = rows.take_owed();
    last.push(end.unwrap_or("RELEASE job").to_owned());
    let last = last.join("; ");
    let closing = match (&broken, db.integrity(), &epoch) {
        (None, Some(integrity), Some(step)) => match integrity.batch_end(step, &rows) {
            Ok(sql) => format!("{last}; {sql}"),
            Err(err) => {
                // The jobs that read a tampered row are refused for it; the others of
                // the batch were not committed either.
                if let StoreError::Tampered { table, row } = &err {
                    for (place, (_, refused)) in completions.iter_mut().enumerate() {
                        if rows.tampered(place) {
                            *refused = Some(StoreError::Tampered {
                                table,
                                row: row.clone(),
                            });
                        }
                    }
                }
                broken = Some(match err {
                    StoreError::Tampered { .. } if rows.any_tampered() => StoreError::Unavailable(
                        "another write of its batch read a row that failed its integrity check; nothing was kept".into(),
                    ),
                    other => other,
                });
                String::new()
            }
        },
        _ => last,
    };
    let failure = match broken {
        Some(err) => {
            db.rollback();
            Some(err)
        }
        None => db.commit(&closing, rows.changes_keys()).err(),
    };
    if failure.is_none()
        && let (Some(integrity), Some(step)) = (db.integrity(), &epoch)
    {
        integrity.committed(step);
    }
    stats.round_trips.fetch_add(
        db.round_trips().saturating_sub(trips_before),
        Ordering::Relaxed,
    );
    match &failure {
        Some(err) => stats.not_committed(err, completions.len(), "a write batch was not committed"),
        None => {
            stats.committed();
            // Counted before anyone hears of the commit.
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.writes.fetch_add(jobs, Ordering::Relaxed);
        }
    }
    after_batch(failure.is_some() || db.integrity().is_none() || rows.changes_keys());
    for (completion, refused) in completions {
        completion(failure.as_ref(), refused);
    }
    true
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt as _;

    use super::*;
    use crate::sql::params;

    fn writer(queue: usize) -> (tempfile::TempDir, Writer, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER PRIMARY KEY)")
            .unwrap();
        (
            dir,
            Writer::start(WriterDb::Sqlite(conn), queue, Box::new(|_| {})).unwrap(),
            path,
        )
    }

    fn rows(path: &std::path::Path) -> Vec<i64> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn.prepare("SELECT v FROM t ORDER BY v").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Holds the writer inside a job until the returned sender is used (or dropped).
    async fn hold(w: &Arc<Writer>) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let w = Arc::clone(w);
        let task = tokio::spawn(async move {
            w.write(move |tx| {
                tx.execute("INSERT INTO t (v) VALUES (0)", params![])?;
                let _ = started_tx.send(());
                let _ = released.recv();
                Ok(())
            })
            .await
            .unwrap();
        });
        started.await.unwrap();
        (release, task)
    }

    fn insert(v: i64) -> impl FnOnce(Conn<'_>) -> Result<i64> + Send + 'static {
        move |tx| {
            tx.execute("INSERT INTO t (v) VALUES (?1)", params![v])?;
            Ok(v)
        }
    }

    /// A batch the database ends in the middle (here a job rolls the transaction back,
    /// as a lost session does): every write of it is answered with why, the ones queued
    /// behind the breaking one too, never left without an answer (which its caller
    /// would report as a 500).
    #[tokio::test]
    async fn every_write_of_a_broken_batch_is_answered_with_why() {
        let (_dir, w, path) = writer(MAX_QUEUED);
        let w = Arc::new(w);
        let (release, held) = hold(&w).await;
        let breaking = {
            let w = Arc::clone(&w);
            tokio::spawn(async move {
                w.write(|tx| {
                    tx.execute("ROLLBACK", params![])?;
                    Ok(1)
                })
                .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let behind: Vec<_> = (2..=4)
            .map(|v| {
                let w = Arc::clone(&w);
                tokio::spawn(async move { w.write(insert(v)).await })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        release.send(()).unwrap();
        let _ = held.await;
        assert!(breaking.await.unwrap().is_err());
        for write in behind {
            match write.await.unwrap() {
                Err(StoreError::Unavailable(why)) => {
                    assert!(why.contains("rolled back"), "{why}")
                }
                other => panic!("a write behind the broken one: {other:?}"),
            }
        }
        assert!(!rows(&path).contains(&2));
        // The writer carries on.
        assert_eq!(w.write(insert(9)).await.unwrap(), 9);
    }

    #[tokio::test]
    async fn queued_writes_commit_together_and_a_failing_one_keeps_nothing() {
        let (_dir, w, path) = writer(MAX_QUEUED);
        let w = Arc::new(w);
        let (release, held) = hold(&w).await;
        let before = w.stats();
        let mut waiting = Vec::new();
        for v in 1..=5 {
            let w = Arc::clone(&w);
            waiting.push(tokio::spawn(async move {
                if v == 3 {
                    // Writes a row, then fails: the row must not survive.
                    w.write(move |tx| {
                        tx.execute("INSERT INTO t (v) VALUES (3)", params![])?;
                        Err::<i64, _>(StoreError::Conflict("no".into()))
                    })
                    .await
                } else {
                    w.write(insert(v)).await
                }
            }));
        }
        // Let every write reach the queue while the writer is held.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        release.send(()).unwrap();
        held.await.unwrap();
        let mut results = Vec::new();
        for t in waiting {
            results.push(t.await.unwrap());
        }
        assert!(matches!(results[2], Err(StoreError::Conflict(_))));
        for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != 2) {
            assert_eq!(*r.as_ref().unwrap(), i as i64 + 1);
        }
        assert_eq!(rows(&path), vec![0, 1, 2, 4, 5]);
        let after = w.stats();
        assert_eq!(after.writes - before.writes, 6, "{before:?} {after:?}");
        assert_eq!(
            after.batches - before.batches,
            2,
            "the held write, then the five queued behind it in one commit"
        );
    }

    #[tokio::test]
    async fn a_panicking_write_is_rolled_back_and_the_writer_carries_on() {
        let (_dir, w, path) = writer(MAX_QUEUED);
        let err = w
            .write(|tx| -> Result<()> {
                tx.execute("INSERT INTO t (v) VALUES (7)", params![])?;
                panic!("a bug in a write");
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Task(_)), "{err}");
        assert_eq!(w.write(insert(8)).await.unwrap(), 8);
        assert_eq!(rows(&path), vec![8]);
    }

    #[tokio::test]
    async fn a_full_disk_refuses_a_write_as_disk_full_and_the_writer_carries_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER PRIMARY KEY, pad BLOB)")
            .unwrap();
        // SQLite answers SQLITE_FULL past `max_page_count`, as it does on a full disk:
        // the file may not grow by a page.
        let pages: i64 = conn
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .unwrap();
        conn.pragma_update(None, "max_page_count", pages).unwrap();
        let w = Writer::start(WriterDb::Sqlite(conn), MAX_QUEUED, Box::new(|_| {})).unwrap();
        let big = w
            .write(|tx| {
                tx.execute(
                    "INSERT INTO t (v, pad) VALUES (1, ?1)",
                    params![vec![0_u8; 64 * 1024]],
                )?;
                Ok(())
            })
            .await
            .unwrap_err();
        assert!(matches!(big, StoreError::DiskFull), "{big:?}");
        // A write that fits in the pages the file has is kept: nothing needs a restart.
        assert_eq!(w.write(insert(2)).await.unwrap(), 2);
        assert_eq!(rows(&path), vec![2]);
    }

    #[tokio::test]
    async fn a_full_queue_refuses_writes_at_once() {
        let (_dir, w, path) = writer(3);
        let w = Arc::new(w);
        let (release, held) = hold(&w).await;
        // Three fit in the queue (polled once: queued, awaited below).
        let mut queued = Vec::new();
        for v in 1..=3 {
            let mut write = Box::pin(w.write(insert(v)));
            assert!((&mut write).now_or_never().is_none());
            queued.push(write);
        }
        match w.write(insert(4)).now_or_never() {
            Some(Err(StoreError::Unavailable(msg))) => assert!(msg.contains("retry"), "{msg}"),
            other => panic!(
                "expected 503-style refusal, got {:?}",
                other.map(|r| r.is_ok())
            ),
        }
        release.send(()).unwrap();
        held.await.unwrap();
        // The queued three still commit, and the queue takes writes again.
        for (v, write) in (1..=3).zip(queued) {
            assert_eq!(write.await.unwrap(), v);
        }
        assert_eq!(w.write(insert(5)).await.unwrap(), 5);
        assert_eq!(rows(&path), vec![0, 1, 2, 3, 5]);
    }
}
