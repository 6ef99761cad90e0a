//! The worker pool: pre-started `action-worker` processes, one action at a time each.
//!
//! A job takes an idle worker (or waits for one to start), sends `run`, answers the
//! worker's host calls, and waits for `done` under the wall-clock deadline. A worker that
//! overruns is killed (`timeout`); one that dies on its own, which under its
//! address-space limit means an allocation failed, is reported as `memory`.
//!
//! **A worker never serves two accounts.** It is bound to the account of its first job
//! and afterwards only ever handed that account's jobs (`idle`: the idle set is keyed by
//! account, and taking a worker for a job cannot reach another account's). So an
//! interpreter exploit that survives its job inside the worker sees nothing of any other
//! tenant. Fresh workers, started ahead of need, take any account's first job; a job of
//! an account with no idle worker of its own and no fresh one makes room: the bound
//! worker idle longest is retired and a fresh one started in its place. A bound worker
//! idle for [`RetirePolicy::bound_idle`] is retired and replaced by a fresh one too.
//!
//! Within one account, workers carry nothing from one job to the next that could hurt
//! it: a worker is retired (killed, never parked again) after [`RetirePolicy::max_jobs`]
//! jobs, after any job that hit a limit (`timeout`, `memory`, `limit`) or broke the
//! protocol, and when the live heap it reports in `done` passes
//! [`RetirePolicy::heap_limit_bytes`] (boa keeps some state process-wide, such as the
//! `Symbol.for` registry). The heap report is the worker's own word and only ever
//! retires a worker early; the job count and the failure rules are decided here. Every
//! retired or lost worker is replaced at once in the background by a fresh one, retried
//! with backoff if it cannot start, so the pool keeps its size and the next job usually
//! finds a warm worker; a job that finds none waits for a replacement already on its way
//! rather than starting another.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use action_runtime::protocol::{
    self, ActionError, ErrorKind, FromWorker, HEADER_LEN, HostReply, JobDone, ReplyOutcome, RunJob,
    ToWorker,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::Notify;

use super::fair::{FairLimits, Refusal, Scheduler};
use super::host::{HostContext, HostError, WalletRefused};
use super::idle::{Held, IdleSet};
use super::spawn::{SpawnError, Spawner, WorkerProcess};
use appliance_domain::backoff::Backoff;
use appliance_store::AccountId;

/// One action to run, its code found.
#[derive(Debug, Clone)]
pub struct ResolvedJob {
    pub code: String,
    pub action_cid: String,
    pub js_params: Value,
}

/// An outcome with the job's run time (queueing for a worker excluded).
#[derive(Debug)]
pub struct Timed {
    pub outcome: Outcome,
    pub run_time: Duration,
    /// The wall-clock limit stopped it.
    pub deadline_hit: bool,
    /// The pool's number for the worker that ran it (workers are numbered from 1 in the
    /// order they started; for logs and tests).
    pub worker: u64,
}

/// How a job ended.
#[derive(Debug)]
pub enum Run {
    /// It ran to its end (or its limit); the outcome says how.
    Finished(Timed),
    /// A host call was refused a wallet: the job was stopped there (its worker killed,
    /// the call never answered) after running for `run_time`.
    Refused {
        refused: WalletRefused,
        run_time: Duration,
    },
    /// Whoever asked for it went away mid-run: the job was stopped (its worker killed)
    /// after running for `run_time`.
    Abandoned { run_time: Duration },
}

impl Run {
    /// How long the job ran (whatever ended it).
    pub fn run_time(&self) -> Duration {
        match self {
            Self::Finished(timed) => timed.run_time,
            Self::Refused { run_time, .. } | Self::Abandoned { run_time } => *run_time,
        }
    }

    /// What ended it, for the log.
    pub fn ending(&self) -> &'static str {
        match self {
            Self::Finished(timed) if timed.deadline_hit => "deadline",
            Self::Finished(timed) if timed.outcome.error.is_some() => "failed",
            Self::Finished(_) => "finished",
            Self::Refused { .. } => "refused wallet",
            Self::Abandoned { .. } => "abandoned",
        }
    }
}

/// Why a job could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Not admitted (see `fair`).
    #[error(transparent)]
    Busy(#[from] Refusal),
    #[error("actions cannot run right now: {0}")]
    Unavailable(String),
    /// Whoever asked for it went away before it started; nothing ran.
    #[error("the job was abandoned before it started")]
    Abandoned,
}

/// Time a worker gets to start and say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The limits of every job.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    /// Wall-clock deadline, enforced here by killing the worker.
    pub timeout: Duration,
    /// How long a job may wait for a free worker before it is refused as busy.
    pub queue_timeout: Duration,
    /// Who gets a worker when (the pool's size and the wait are added by the pool).
    pub admission: Admission,
    /// Enforced by the worker; sent with each job.
    pub worker: protocol::JobLimits,
    /// When a worker stops serving jobs.
    pub retire: RetirePolicy,
}

/// The per-account rules of [`FairLimits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Jobs one account may run at once.
    pub per_account: usize,
    /// Jobs one account may have waiting for a worker.
    pub queued_per_account: usize,
    /// Jobs waiting in all.
    pub queued_total: usize,
}

/// When a worker is retired instead of parked for the next job (besides any job that hit
/// a limit or broke the worker, which always retires it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetirePolicy {
    /// Jobs a worker runs before it is retired (at least 1; 1 = a fresh worker per job).
    pub max_jobs: u32,
    /// Live heap, as the worker reports it in `done`, beyond which it is retired.
    pub heap_limit_bytes: u64,
    /// How long a worker bound to an account may wait idle for that account's next job
    /// before it is retired (and a fresh one, for anyone, started in its place).
    pub bound_idle: Duration,
}

/// First wait before starting a worker again after a failed start; doubled after each
/// failure up to [`RESTART_BACKOFF_MAX`].
const RESTART_BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest wait between attempts to start a replacement worker.
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(30);

struct Worker {
    /// Started directly or by the worker launcher (`spawn.rs`).
    process: WorkerProcess,
    stdin: pipe::Sender,
    stdout: BufReader<pipe::Receiver>,
}

/// A started worker with the pool's bookkeeping.
struct Pooled {
    worker: Worker,
    /// The pool's number for it (see [`Timed::worker`]).
    id: u64,
    /// Jobs it has finished.
    jobs_done: u32,
}

/// Why a worker is retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retirement {
    /// It ran [`RetirePolicy::max_jobs`] jobs.
    MaxJobs,
    /// Its job hit a limit; whatever state it reached is not reused.
    Failed(ErrorKind),
    /// It reported more live heap than [`RetirePolicy::heap_limit_bytes`].
    Heap(u64),
    /// It died or broke the protocol.
    Broken,
    /// It overran the deadline and was killed.
    Timeout,
    /// Its job was refused a wallet and stopped there.
    Refused,
    /// Its job was abandoned by its caller.
    Abandoned,
    /// It was bound to another account and idle longest when a job needed room.
    Evicted,
    /// It was bound to an account and idle for [`RetirePolicy::bound_idle`].
    Idle,
}

impl Retirement {
    /// The reason's label in `appliance_workers_retired_total`.
    fn label(self) -> &'static str {
        match self {
            Self::MaxJobs => "max_jobs",
            Self::Failed(_) => "failed",
            Self::Heap(_) => "heap",
            Self::Broken => "broken",
            Self::Timeout => "timeout",
            Self::Refused => "refused",
            Self::Abandoned => "abandoned",
            Self::Evicted => "evicted",
            Self::Idle => "idle",
        }
    }
}

impl std::fmt::Display for Retirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MaxJobs => f.write_str("it ran its last allowed job"),
            Self::Failed(kind) => write!(f, "its job failed with {kind:?}"),
            Self::Heap(bytes) => write!(f, "it holds {bytes} bytes of heap"),
            Self::Broken => f.write_str("it died or broke the protocol"),
            Self::Timeout => f.write_str("it overran the deadline"),
            Self::Refused => f.write_str("its job was refused a wallet and stopped"),
            Self::Abandoned => f.write_str("its job's caller went away"),
            Self::Evicted => f.write_str("another account's job needed its place"),
            Self::Idle => f.write_str("it waited too long for its account's next job"),
        }
    }
}

impl RetirePolicy {
    /// Whether a worker that has now finished `jobs_done` jobs, the last ending with
    /// `outcome`, must be retired, and why.
    fn verdict(&self, jobs_done: u32, outcome: &Outcome) -> Option<Retirement> {
        if let Some(error) = &outcome.error {
            match error.kind {
                ErrorKind::Timeout | ErrorKind::Memory | ErrorKind::Limit => {
                    return Some(Retirement::Failed(error.kind));
                }
                ErrorKind::Exception => {}
            }
        }
        if let Some(bytes) = outcome.heap_bytes
            && bytes > self.heap_limit_bytes
        {
            return Some(Retirement::Heap(bytes));
        }
        (jobs_done >= self.max_jobs).then_some(Retirement::MaxJobs)
    }
}

/// Why a worker stopped serving a job.
enum WorkerEnd {
    /// It finished the job and can take another.
    Done(Outcome),
    /// It died or broke the protocol; it must not be reused.
    Broken(Outcome),
    /// It asked for a wallet outside the job's scope; the call was not answered.
    Refused(WalletRefused),
}

/// What a job ends with: the worker's `done` message, or one the pool made up for a
/// worker it killed (timeout) or lost (memory).
pub type Outcome = JobDone;

/// The worker pool as it is at one moment (read when scraped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Workers the pool keeps.
    pub size: usize,
    /// Started workers waiting for a job.
    pub idle: usize,
    /// Jobs holding a place in the pool (running, or taking a worker).
    pub busy: usize,
    /// Jobs waiting for a place.
    pub queued: usize,
}

/// What the pool reports as it works (the appliance: its worker and queue metrics).
pub trait PoolTelemetry: Send + Sync + 'static {
    /// A worker started (`ok`) or failed to start.
    fn worker_start(&self, ok: bool);
    /// A worker was retired, for `reason` ([`Retirement`]'s label).
    fn worker_retired(&self, reason: &'static str);
    /// A job waited `wait` for its place and its worker.
    fn action_waited(&self, wait: Duration);
}

/// Reports nothing (tools and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl PoolTelemetry for Unobserved {
    fn worker_start(&self, _ok: bool) {}
    fn worker_retired(&self, _reason: &'static str) {}
    fn action_waited(&self, _wait: Duration) {}
}

pub struct Pool {
    /// Where the pool's events go.
    telemetry: Arc<dyn PoolTelemetry>,
    spawner: Spawner,
    limits: JobLimits,
    /// Workers kept ready (and the most jobs running at once).
    size: usize,
    /// Idle workers (fresh, and bound per account) and the bookkeeping that decides when
    /// a job makes room by retiring another account's idle worker.
    idle: Mutex<Idle>,
    /// Who runs next: at most `size` jobs at once, fairly between accounts.
    scheduler: Arc<Scheduler>,
    /// Workers started so far (the last one's number).
    started: AtomicU64,
    /// Woken (all waiters) when a worker is parked: a worker bound to one account is of
    /// use only to that account's waiters, so every waiter looks again.
    parked: Notify,
    /// Why the last attempt to start a worker failed (cleared by a success).
    start_error: Mutex<Option<String>>,
}

/// The idle workers and what is on its way.
struct Idle {
    set: IdleSet<Pooled>,
    /// Fresh workers being started (or retried after a failed start).
    starting: usize,
    /// Jobs holding a place and waiting for a worker.
    waiting: usize,
}

impl Idle {
    /// For a waiting job that found neither a worker of its own account nor a fresh one:
    /// when fewer fresh workers are on their way than jobs wait, the bound worker idle
    /// longest, taken out to be retired so a fresh one can start in its place (counted
    /// as starting).
    ///
    /// Why a waiting job cannot stall: jobs holding a place are at most the pool's size,
    /// so the idle and starting workers are at least the waiting jobs. While a waiting
    /// job finds nothing of its own or fresh, either enough fresh ones are starting, or
    /// one of the idle workers is bound to another account and is evicted here.
    fn make_room(&mut self) -> Option<Held<Pooled>> {
        if self.starting >= self.waiting {
            return None;
        }
        let evicted = self.set.evict_lru()?;
        self.starting += 1;
        Some(evicted)
    }
}

/// Counts a job as waiting for a worker while it lives.
struct Waiter<'a>(&'a Pool);

impl<'a> Waiter<'a> {
    fn new(pool: &'a Pool) -> Self {
        pool.lock_idle().waiting += 1;
        Self(pool)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut idle = self.0.lock_idle();
        idle.waiting = idle.waiting.saturating_sub(1);
    }
}

/// Starts a replacement worker when dropped armed (see [`Pool::run`]).
struct ReplaceOnDrop(Option<Arc<Pool>>);

impl ReplaceOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for ReplaceOnDrop {
    fn drop(&mut self) {
        if let Some(pool) = self.0.take() {
            tracing::debug!("action job cancelled; its worker is stopped and replaced");
            pool.replenish();
        }
    }
}

impl Pool {
    /// Starts `size` workers (in the background; the pool fills as they come up), and
    /// the task that retires bound workers idle too long.
    pub fn new(
        spawner: Spawner,
        limits: JobLimits,
        size: usize,
        telemetry: Arc<dyn PoolTelemetry>,
    ) -> Arc<Self> {
        let pool = Arc::new(Self {
            telemetry,
            spawner,
            limits,
            size,
            idle: Mutex::new(Idle {
                set: IdleSet::new(size),
                starting: 0,
                waiting: 0,
            }),
            scheduler: Scheduler::new(FairLimits {
                slots: size,
                per_account: limits.admission.per_account,
                queued_per_account: limits.admission.queued_per_account,
                queued_total: limits.admission.queued_total,
                wait: limits.queue_timeout,
            }),
            started: AtomicU64::new(0),
            parked: Notify::new(),
            start_error: Mutex::new(None),
        });
        for _ in 0..size {
            pool.replenish();
        }
        tokio::spawn(retire_idle_bound(Arc::downgrade(&pool)));
        pool
    }

    fn lock_idle(&self) -> MutexGuard<'_, Idle> {
        // The bookkeeping is consistent between statements; a panic elsewhere leaves it
        // usable.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a worker and numbers it.
    async fn start(&self) -> Result<Pooled, StartError> {
        let started = spawn(&self.spawner).await;
        if let Ok(mut last) = self.start_error.lock() {
            *last = started.as_ref().err().map(ToString::to_string);
        }
        self.telemetry.worker_start(started.is_ok());
        let worker = started?;
        let id = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Pooled {
            worker,
            id,
            jobs_done: 0,
        })
    }

    /// Starts one fresh worker in the background and parks it as idle.
    fn replenish(self: &Arc<Self>) {
        self.lock_idle().starting += 1;
        self.start_counted();
    }

    /// Starts one fresh worker already counted in [`Idle::starting`]. A failed start is
    /// logged and tried again after a growing pause ([`RESTART_BACKOFF_START`] doubling
    /// to [`RESTART_BACKOFF_MAX`]) until one starts or the pool is gone.
    fn start_counted(self: &Arc<Self>) {
        let pool: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut backoff = Backoff::new(RESTART_BACKOFF_START, RESTART_BACKOFF_MAX);
            loop {
                let Some(live) = pool.upgrade() else { return };
                let pause = backoff.next_delay();
                match live.start().await {
                    Ok(worker) => return live.park_started(worker),
                    Err(err) => tracing::error!(
                        error = %err,
                        retry_in_ms = pause.as_millis() as u64,
                        "cannot start an action worker; trying again"
                    ),
                }
                drop(live);
                tokio::time::sleep(pause).await;
            }
        });
    }

    /// Parks a worker just started (fresh, for any account's job).
    fn park_started(&self, worker: Pooled) {
        let surplus = {
            let mut idle = self.lock_idle();
            idle.starting = idle.starting.saturating_sub(1);
            idle.set.park(Held::fresh(worker)).err()
        };
        self.after_park(surplus);
    }

    /// Keeps `worker` for its account's next job (or, fresh, anyone's) and wakes the jobs
    /// waiting for one. The pool never holds more idle workers than its size (a bound,
    /// not expected to bind: each replacement follows exactly one lost worker).
    fn park(&self, worker: Held<Pooled>) {
        let surplus = self.lock_idle().set.park(worker).err();
        self.after_park(surplus);
    }

    fn after_park(&self, surplus: Option<Held<Pooled>>) {
        if let Some(held) = surplus {
            tracing::debug!(worker = held.worker().id, "surplus action worker stopped");
            discard(held.into_worker().worker);
        }
        // Even with nothing parked the counts changed (a start ended): a waiting job may
        // now have to make room itself.
        self.parked.notify_waiters();
    }

    /// A worker for a job of `account`: an idle one bound to it or a fresh one, or the
    /// next one parked. A job holding a slot always has one on its way: every lost or
    /// retired worker is replaced, and when the idle workers are all bound to other
    /// accounts the one idle longest is retired to make room (see
    /// [`Idle::make_room`]). So it waits rather than starting another; after
    /// [`JobLimits::queue_timeout`] without one (starts keep failing) it gives up.
    async fn take_or_wait(self: &Arc<Self>, account: AccountId) -> Result<Held<Pooled>, PoolError> {
        let wait = async {
            let _waiter = Waiter::new(self);
            loop {
                let parked = self.parked.notified();
                tokio::pin!(parked);
                parked.as_mut().enable();
                let evicted = {
                    let mut idle = self.lock_idle();
                    if let Some(worker) = idle.set.take_for(account) {
                        return worker;
                    }
                    idle.make_room()
                };
                if let Some(evicted) = evicted {
                    self.retire_counted(evicted, Retirement::Evicted);
                }
                parked.await;
            }
        };
        tokio::time::timeout(self.limits.queue_timeout, wait)
            .await
            .map_err(|_| {
                let why = self
                    .start_error
                    .lock()
                    .ok()
                    .and_then(|e| e.clone())
                    .unwrap_or_else(|| "starting one takes too long".into());
                PoolError::Unavailable(format!("no action worker is ready: {why}"))
            })
    }

    /// Stops `worker` for good and starts its replacement in the background.
    fn retire(self: &Arc<Self>, worker: Held<Pooled>, why: Retirement) {
        self.lock_idle().starting += 1;
        self.retire_counted(worker, why);
    }

    /// [`Self::retire`] with the replacement already counted in [`Idle::starting`].
    fn retire_counted(self: &Arc<Self>, worker: Held<Pooled>, why: Retirement) {
        let worker = worker.into_worker();
        match why {
            Retirement::MaxJobs | Retirement::Evicted | Retirement::Idle => {
                tracing::debug!(worker = worker.id, jobs = worker.jobs_done, reason = %why, "action worker retired");
            }
            _ => {
                tracing::info!(worker = worker.id, jobs = worker.jobs_done, reason = %why, "action worker retired");
            }
        }
        self.telemetry.worker_retired(why.label());
        discard(worker.worker);
        self.start_counted();
    }

    /// Retires (and replaces) the bound workers idle for [`RetirePolicy::bound_idle`].
    fn retire_expired(self: &Arc<Self>) {
        let expired = {
            let mut idle = self.lock_idle();
            let expired = idle
                .set
                .expired(Instant::now(), self.limits.retire.bound_idle);
            idle.starting += expired.len();
            expired
        };
        for held in expired {
            self.retire_counted(held, Retirement::Idle);
        }
    }

    /// The pool as it is now.
    pub fn stats(&self) -> PoolStats {
        let (busy, queued) = self.scheduler.load();
        PoolStats {
            size: self.size,
            idle: self.lock_idle().set.len(),
            busy,
            queued,
        }
    }

    /// Runs `job` on a worker, answering its host calls through `host`, with the
    /// wall-clock limit lowered to `limit` (if that is shorter than the configured one).
    /// The job waits its turn first (see `fair`: the account is `host.account`). The run
    /// time reported is from handing the job to the worker to its end; time queued for a
    /// worker is not included. When `abandoned` completes (the caller went away) the job
    /// is stopped: before it started, nothing ran; after, its worker is killed and the
    /// time it ran is reported.
    pub async fn run(
        self: &Arc<Self>,
        job: ResolvedJob,
        host: &mut HostContext,
        limit: Option<Duration>,
        abandoned: impl Future<Output = ()>,
    ) -> Result<Run, PoolError> {
        let timeout = limit.map_or(self.limits.timeout, |l| l.min(self.limits.timeout));
        let run = protocol::encode(&ToWorker::Run(RunJob {
            code: job.code,
            js_params: job.js_params,
            action_cid: job.action_cid,
            limits: protocol::JobLimits {
                // The worker ends a job whose timers would outlast this at once.
                timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
                ..self.limits.worker
            },
        }))
        .map_err(|e| PoolError::Unavailable(e.to_string()))?;
        tokio::pin!(abandoned);
        let queued = Instant::now();
        let _slot = tokio::select! {
            permit = self.scheduler.acquire(host.account) => permit?,
            () = &mut abandoned => return Err(PoolError::Abandoned),
        };
        let mut worker = tokio::select! {
            worker = self.take_or_wait(host.account) => worker?,
            () = &mut abandoned => return Err(PoolError::Abandoned),
        };
        self.telemetry.action_waited(queued.elapsed());
        // If this future is dropped mid-job (the task running it was cancelled), the
        // worker is killed with it (`kill_on_drop`) and this guard starts its replacement.
        let replace_if_cancelled = ReplaceOnDrop(Some(Arc::clone(self)));
        let worker_id = worker.worker().id;

        let started = Instant::now();
        let ended = tokio::select! {
            end = serve_job(&mut worker.worker_mut().worker, &run, host) => Ended::Worker(end),
            () = tokio::time::sleep(timeout) => Ended::Deadline,
            () = &mut abandoned => Ended::Abandoned,
        };
        let run_time = started.elapsed();
        let jobs_done = worker.worker().jobs_done.saturating_add(1);
        worker.worker_mut().jobs_done = jobs_done;
        let timed = |outcome, deadline_hit| Timed {
            outcome,
            run_time,
            deadline_hit,
            worker: worker_id,
        };
        let run = match ended {
            Ended::Worker(WorkerEnd::Done(mut outcome)) => {
                replace_if_cancelled.disarm();
                match self.limits.retire.verdict(jobs_done, &outcome) {
                    Some(why) => self.retire(worker, why),
                    None => self.park(worker),
                }
                // The worker's own bookkeeping, not the caller's business.
                outcome.heap_bytes = None;
                Run::Finished(timed(outcome, false))
            }
            Ended::Worker(WorkerEnd::Broken(outcome)) => {
                replace_if_cancelled.disarm();
                self.retire(worker, Retirement::Broken);
                Run::Finished(timed(outcome, false))
            }
            Ended::Worker(WorkerEnd::Refused(refused)) => {
                // The refused call is never answered: the job ends here.
                self.stop(worker, Retirement::Refused).await;
                replace_if_cancelled.disarm();
                Run::Refused { refused, run_time }
            }
            Ended::Abandoned => {
                self.stop(worker, Retirement::Abandoned).await;
                replace_if_cancelled.disarm();
                Run::Abandoned { run_time }
            }
            Ended::Deadline => {
                self.stop(worker, Retirement::Timeout).await;
                replace_if_cancelled.disarm();
                Run::Finished(timed(
                    failed(
                        ErrorKind::Timeout,
                        format!(
                            "the action did not finish within {} ms",
                            timeout.as_millis()
                        ),
                    ),
                    true,
                ))
            }
        };
        Ok(run)
    }

    /// Kills a worker in the middle of a job, waits for it to be gone (so nothing it
    /// started goes on), and replaces it.
    async fn stop(self: &Arc<Self>, mut worker: Held<Pooled>, why: Retirement) {
        let process = &mut worker.worker_mut().worker.process;
        let _ = process.start_kill();
        let _ = process.wait().await;
        self.retire(worker, why);
    }

    /// The admission scheduler (for tests).
    #[cfg(test)]
    fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }
}

/// Retires bound workers idle for [`RetirePolicy::bound_idle`], looking a few times per
/// that period, until the pool is gone.
async fn retire_idle_bound(pool: Weak<Pool>) {
    let Some(period) = pool.upgrade().map(|p| {
        (p.limits.retire.bound_idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
    }) else {
        return;
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(live) = pool.upgrade() else { return };
        live.retire_expired();
    }
}

/// What ended a job's run.
enum Ended {
    Worker(WorkerEnd),
    Deadline,
    Abandoned,
}

/// Why a worker could not be started and brought to `ready`.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("the worker sent {0} instead of ready")]
    NotReady(String),
    #[error("the worker did not start: {0}")]
    DidNotStart(#[source] FrameError),
    #[error("the worker did not become ready in time")]
    ReadyTimeout,
}

/// A frame could not be read from or written to a worker's pipes.
#[derive(Debug, thiserror::Error)]
enum FrameError {
    #[error("read: {0}")]
    Read(#[source] std::io::Error),
    #[error("write: {0}")]
    Write(#[source] std::io::Error),
    #[error(transparent)]
    Protocol(#[from] action_runtime::protocol::ProtocolError),
}

async fn spawn(spawner: &Spawner) -> Result<Worker, StartError> {
    let spawned = spawner.spawn().await?;
    tokio::spawn(forward_stderr(spawned.stderr, spawned.process.id()));
    let mut worker = Worker {
        process: spawned.process,
        stdin: spawned.stdin,
        stdout: BufReader::new(spawned.stdout),
    };
    match tokio::time::timeout(READY_TIMEOUT, read_frame(&mut worker.stdout)).await {
        Ok(Ok(FromWorker::Ready)) => Ok(worker),
        Ok(Ok(msg)) => Err(StartError::NotReady(format!("{msg:?}"))),
        Ok(Err(err)) => Err(StartError::DidNotStart(err)),
        Err(_) => Err(StartError::ReadyTimeout),
    }
}

/// Most lines of a worker's stderr that are logged; a worker is untrusted, so it cannot
/// flood the appliance's log (the rest is read and dropped).
const MAX_STDERR_LINES: usize = 64;
/// Longest stderr line logged, in bytes (longer lines are cut).
const MAX_STDERR_LINE: usize = 1024;

/// Logs what a worker writes to stderr (its lock-down report, a panic message), bounded
/// by [`MAX_STDERR_LINES`] and [`MAX_STDERR_LINE`], until the worker exits.
async fn forward_stderr(stderr: pipe::Receiver, pid: Option<u32>) {
    let mut reader = BufReader::new(stderr);
    let mut chunk = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut logged = 0usize;
    let log_line = |line: &[u8], logged: &mut usize| {
        if *logged < MAX_STDERR_LINES {
            let text = String::from_utf8_lossy(line);
            tracing::warn!(worker_pid = pid, "action worker: {}", text.trim_end());
            *logged += 1;
        }
    };
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                log_line(&line, &mut logged);
                line.clear();
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        log_line(&line, &mut logged);
    }
}

/// Sends `run` and serves the worker until `done`, or until it asks for a wallet the job
/// may not use (that call is not answered: the job stops there).
async fn serve_job(worker: &mut Worker, run: &[u8], host: &mut HostContext) -> WorkerEnd {
    if let Err(err) = write_frame(&mut worker.stdin, run).await {
        return WorkerEnd::Broken(died(worker, &err).await);
    }
    loop {
        let msg = match read_frame(&mut worker.stdout).await {
            Ok(msg) => msg,
            Err(err) => return WorkerEnd::Broken(died(worker, &err).await),
        };
        match msg {
            FromWorker::Call(call) => {
                let outcome = match host.call(call.request).await {
                    Ok(value) => ReplyOutcome::Ok(value),
                    Err(HostError::Failed(message)) => ReplyOutcome::Err(message),
                    Err(HostError::Refused(wallet)) => return WorkerEnd::Refused(wallet),
                };
                let frame = match protocol::encode(&ToWorker::Reply(HostReply {
                    id: call.id,
                    outcome,
                })) {
                    Ok(frame) => frame,
                    Err(err) => return WorkerEnd::Broken(broken(&err.to_string())),
                };
                if let Err(err) = write_frame(&mut worker.stdin, &frame).await {
                    return WorkerEnd::Broken(died(worker, &err).await);
                }
            }
            FromWorker::Done(done) => return WorkerEnd::Done(done),
            FromWorker::Ready => {
                return WorkerEnd::Broken(broken("the worker sent ready during a job"));
            }
        }
    }
}

/// Stops a worker that will not be used again (killing an already dead one is harmless).
fn discard(mut worker: Worker) {
    let _ = worker.process.start_kill();
}

fn failed(kind: ErrorKind, message: String) -> Outcome {
    JobDone {
        response: Value::Null,
        logs: String::new(),
        error: Some(ActionError { kind, message }),
        heap_bytes: None,
    }
}

fn broken(detail: &str) -> Outcome {
    tracing::error!(detail, "action worker failed");
    failed(
        ErrorKind::Exception,
        "the action's worker failed unexpectedly".into(),
    )
}

/// The outcome of a worker that stopped answering: under its address-space limit an
/// abort means an allocation failed.
async fn died(worker: &mut Worker, err: &FrameError) -> Outcome {
    use std::os::unix::process::ExitStatusExt as _;
    let status = tokio::time::timeout(Duration::from_secs(2), worker.process.wait()).await;
    let aborted = matches!(&status, Ok(Ok(s)) if matches!(s.signal(), Some(6 | 11)));
    if aborted {
        failed(
            ErrorKind::Memory,
            "the action exceeded its memory limit".into(),
        )
    } else {
        broken(&format!("{err}; exit: {status:?}"))
    }
}

async fn read_frame(reader: &mut BufReader<pipe::Receiver>) -> Result<FromWorker, FrameError> {
    let mut header = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut header)
        .await
        .map_err(FrameError::Read)?;
    let len = protocol::frame_len(header)?;
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .map_err(FrameError::Read)?;
    Ok(protocol::decode(&body)?)
}

/// Writes a complete frame (from [`protocol::encode`]).
async fn write_frame(writer: &mut pipe::Sender, frame: &[u8]) -> Result<(), FrameError> {
    writer.write_all(frame).await.map_err(FrameError::Write)?;
    writer.flush().await.map_err(FrameError::Write)
}

#[cfg(test)]
mod tests {
    //! The pool with real `action-worker` processes (built by `cargo test --workspace`, or
    //! `cargo build -p action-runtime --bin action-worker`).

    use std::path::{Path, PathBuf};

    use serde_json::json;

    use super::*;
    use crate::fetch::{FetchLimits, Fetcher};
    use crate::spawn::WorkerSpec;
    use appliance_store::{AccountId, Store, WalletScope};
    use keyservice_api::KeyClient;

    /// 150 global symbols with 80 Ki-character keys, distinct per `run`: boa's symbol
    /// registry is process-wide, so about 70 MiB of heap outlive the action.
    const SYMBOL_FOR_LEAK: &str = "async function main(run) { const base = 'k'.repeat(80 * 1024); for (let i = 0; i < 150; i++) Symbol.for(run + ':' + i + ':' + base); return 'registered'; }";
    const HELLO: &str = "async function main(p) { return p; }";
    const MEMORY_LIMIT_MB: u64 = 256;

    /// Retirement that never happens on its own (only failures retire).
    const NEVER: RetirePolicy = RetirePolicy {
        max_jobs: u32::MAX,
        heap_limit_bytes: u64::MAX,
        bound_idle: Duration::from_secs(3600),
    };

    /// `action-worker` of this target directory, refused when older than its sources.
    fn worker_binary() -> PathBuf {
        test_support::binaries::fresh_binary(
            "action-worker",
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime/src"),
            "build it with `cargo build -p action-runtime --bin action-worker` (`cargo test --workspace` does)",
        )
    }

    struct Fixture {
        dir: tempfile::TempDir,
        store: Store,
    }

    impl Fixture {
        fn new() -> Self {
            // The pool's log (retirements, the workers' stderr) shows with a failure.
            let _ = tracing_subscriber::fmt().with_test_writer().try_init();
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("cwd")).unwrap();
            let store = Store::open(&dir.path().join("state.db")).unwrap();
            Self { dir, store }
        }

        /// A pool of `size` warm workers (it waits until they are parked).
        async fn pool(&self, size: usize, retire: RetirePolicy, timeout: Duration) -> Arc<Pool> {
            let pool = self.pool_with(worker_binary(), size, retire, timeout);
            assert!(
                eventually(|| idle_count(&pool) == size).await,
                "the pool did not fill"
            );
            pool
        }

        fn pool_with(
            &self,
            binary: PathBuf,
            size: usize,
            retire: RetirePolicy,
            timeout: Duration,
        ) -> Arc<Pool> {
            let spec = WorkerSpec {
                binary,
                memory_limit_mb: MEMORY_LIMIT_MB,
                cwd: self.dir.path().join("cwd"),
            };
            let limits = JobLimits {
                timeout,
                queue_timeout: Duration::from_secs(60),
                admission: Admission {
                    per_account: size,
                    queued_per_account: 100,
                    queued_total: 100,
                },
                worker: protocol::JobLimits::default(),
                retire,
            };
            Pool::new(Spawner::Direct(spec), limits, size, Arc::new(Unobserved))
        }

        /// The host side of one tenant (no keys, no fetches: the actions here make no
        /// host calls).
        fn tenant(&self, account: i64) -> HostContext {
            let fetcher = Fetcher::new(FetchLimits {
                timeout: Duration::from_secs(1),
                max_response_bytes: 1024,
                max_request_bytes: 1024,
                allow_private: false,
            })
            .unwrap();
            HostContext::new(
                self.store.clone(),
                KeyClient::with_config(
                    self.dir.path().join("no-keyservice.sock"),
                    keyservice_api::ClientConfig {
                        request_timeout: Duration::from_secs(1),
                        ..keyservice_api::ClientConfig::default()
                    },
                ),
                fetcher,
                AccountId(account),
                WalletScope::Account,
                "QmTest".into(),
                0,
            )
        }
    }

    async fn run(pool: &Arc<Pool>, host: &mut HostContext, code: &str, params: Value) -> Timed {
        let job = ResolvedJob {
            code: code.into(),
            action_cid: "QmTest".into(),
            js_params: params,
        };
        match pool
            .run(job, host, None, std::future::pending())
            .await
            .unwrap()
        {
            Run::Finished(timed) => timed,
            other => panic!("not finished: {other:?}"),
        }
    }

    fn kind(timed: &Timed) -> Option<ErrorKind> {
        timed.outcome.error.as_ref().map(|e| e.kind)
    }

    async fn eventually(mut done: impl FnMut() -> bool) -> bool {
        for _ in 0..400 {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        done()
    }

    fn idle_count(pool: &Pool) -> usize {
        pool.lock_idle().set.len()
    }

    #[tokio::test]
    async fn a_worker_reporting_a_heap_past_the_threshold_is_retired() {
        // A worker only ever serves one account (see the binding tests below), so what
        // a leak leaves behind can only reach that account's own later jobs; the heap
        // rule keeps those from inheriting it. Here, the pool's heap rule on its own.
        let f = Fixture::new();
        let mut tenant = f.tenant(1);
        let timeout = Duration::from_secs(60);
        let heap_rule = |heap_limit_bytes| RetirePolicy {
            heap_limit_bytes,
            ..NEVER
        };
        // Positive control: threshold out of reach, the leaking worker serves on.
        let pool = f.pool(1, heap_rule(u64::MAX), timeout).await;
        let leak = run(&pool, &mut tenant, SYMBOL_FOR_LEAK, json!(0)).await;
        assert_eq!(leak.outcome.response, json!("registered"), "{leak:?}");
        let next = run(&pool, &mut tenant, HELLO, json!(1)).await;
        assert_eq!(next.worker, leak.worker, "no heap rule: the same worker");

        // 32 MiB: the leak (about 70 MiB) retires the worker, the next job gets a fresh
        // one, and jobs that leave nothing behind keep theirs.
        let pool = f.pool(1, heap_rule(32 << 20), timeout).await;
        for round in 0..2 {
            let leak = run(&pool, &mut tenant, SYMBOL_FOR_LEAK, json!(round)).await;
            assert_eq!(leak.outcome.response, json!("registered"), "{leak:?}");
            let next = run(&pool, &mut tenant, HELLO, json!(round)).await;
            assert_eq!(next.outcome.response, json!(round));
            assert_ne!(next.worker, leak.worker, "round {round}: a fresh worker");
            assert_eq!(next.outcome.heap_bytes, None, "not passed on to the caller");
            let again = run(&pool, &mut tenant, HELLO, json!(round)).await;
            assert_eq!(again.worker, next.worker, "round {round}: kept");
        }
    }

    /// The worker numbers of six hello-world jobs on a pool of one retiring after
    /// `max_jobs`.
    async fn workers_of_six_jobs(f: &Fixture, max_jobs: u32) -> Vec<u64> {
        let mut host = f.tenant(1);
        let policy = RetirePolicy { max_jobs, ..NEVER };
        let pool = f.pool(1, policy, Duration::from_secs(60)).await;
        let mut ids = Vec::new();
        for i in 0..6 {
            let timed = run(&pool, &mut host, HELLO, json!(i)).await;
            assert_eq!(timed.outcome.response, json!(i), "{timed:?}");
            ids.push(timed.worker);
        }
        ids
    }

    /// Which accounts each worker served, from `(account, worker)` pairs.
    fn accounts_per_worker(
        jobs: &[(i64, u64)],
    ) -> std::collections::BTreeMap<u64, std::collections::BTreeSet<i64>> {
        let mut served = std::collections::BTreeMap::<u64, std::collections::BTreeSet<i64>>::new();
        for (account, worker) in jobs {
            served.entry(*worker).or_default().insert(*account);
        }
        served
    }

    #[tokio::test]
    async fn a_worker_never_serves_a_second_account() {
        let f = Fixture::new();
        // Two accounts taking turns on three workers. Before binding the pool handed
        // each job the worker idle longest, whoever it had served: A, B, A, B, ... ran on
        // workers 1, 2, 3, 1, ..., so worker 1 ran B's job after A's.
        let pool = f.pool(3, NEVER, Duration::from_secs(60)).await;
        let (mut a, mut b) = (f.tenant(1), f.tenant(2));
        let mut jobs = Vec::new();
        for i in 0..8 {
            jobs.push((1, run(&pool, &mut a, HELLO, json!(i)).await.worker));
            jobs.push((2, run(&pool, &mut b, HELLO, json!(i)).await.worker));
        }
        let served = accounts_per_worker(&jobs);
        assert!(
            served.values().all(|accounts| accounts.len() == 1),
            "a worker served two accounts: {served:?}"
        );
        assert!(
            served.len() < jobs.len(),
            "workers are still reused within an account: {jobs:?}"
        );

        // Twenty accounts at once, five jobs each, on four workers: every job finds
        // either its account's worker, a fresh one, or makes room by retiring another
        // account's idle one.
        let pool = f.pool(4, NEVER, Duration::from_secs(60)).await;
        let mut tasks = tokio::task::JoinSet::new();
        for account in 1..=20 {
            let (pool, mut host) = (Arc::clone(&pool), f.tenant(account));
            tasks.spawn(async move {
                let mut jobs = Vec::new();
                for i in 0..5 {
                    let params = json!(format!("{account}:{i}"));
                    let timed = run(&pool, &mut host, HELLO, params.clone()).await;
                    assert_eq!(timed.outcome.response, params, "{timed:?}");
                    jobs.push((account, timed.worker));
                }
                jobs
            });
        }
        let mut jobs = Vec::new();
        while let Some(done) = tasks.join_next().await {
            jobs.extend(done.unwrap());
        }
        assert_eq!(jobs.len(), 100);
        let served = accounts_per_worker(&jobs);
        assert!(
            served.values().all(|accounts| accounts.len() == 1),
            "a worker served two accounts: {served:?}"
        );
        assert!(
            eventually(|| idle_count(&pool) == 4).await,
            "the pool keeps its size"
        );
        assert_eq!(pool.scheduler().load(), (0, 0));
    }

    #[tokio::test]
    async fn another_accounts_job_retires_the_bound_worker_idle_longest() {
        let f = Fixture::new();
        let pool = f.pool(2, NEVER, Duration::from_secs(60)).await;
        let (mut a, mut b, mut c) = (f.tenant(1), f.tenant(2), f.tenant(3));
        let a1 = run(&pool, &mut a, HELLO, json!(1)).await.worker;
        let b1 = run(&pool, &mut b, HELLO, json!(1)).await.worker;
        assert_ne!(a1, b1);
        // Both workers are bound and idle: C's job retires A's (idle longer) and runs
        // on the fresh worker started in its place.
        let c1 = run(&pool, &mut c, HELLO, json!(1)).await;
        assert_eq!(c1.outcome.response, json!(1));
        assert!(c1.worker > b1, "a fresh worker: {c1:?}");
        assert_eq!(
            run(&pool, &mut b, HELLO, json!(2)).await.worker,
            b1,
            "B's worker was kept"
        );
        let a2 = run(&pool, &mut a, HELLO, json!(2)).await.worker;
        assert!(
            ![a1, b1, c1.worker].contains(&a2),
            "A's worker was retired; A runs on a fresh one: {a2}"
        );
        assert!(
            eventually(|| idle_count(&pool) == 2).await,
            "the pool keeps its size"
        );
    }

    #[tokio::test]
    async fn a_bound_worker_idle_too_long_is_replaced_by_a_fresh_one() {
        let f = Fixture::new();
        let policy = RetirePolicy {
            bound_idle: Duration::from_millis(300),
            ..NEVER
        };
        let pool = f.pool(1, policy, Duration::from_secs(60)).await;
        let (mut a, mut b) = (f.tenant(1), f.tenant(2));
        let first = run(&pool, &mut a, HELLO, json!(1)).await.worker;
        assert_eq!(
            run(&pool, &mut a, HELLO, json!(2)).await.worker,
            first,
            "reused while its account keeps it busy"
        );
        assert!(
            eventually(|| {
                let idle = pool.lock_idle();
                idle.set.fresh_len() == 1 && idle.set.bound_len() == 0
            })
            .await,
            "the idle bound worker is retired and a fresh one parked"
        );
        let started = pool.started.load(Ordering::Relaxed);
        assert!(started > first);
        // B's job finds the fresh worker waiting: no start on its path.
        assert_eq!(run(&pool, &mut b, HELLO, json!(3)).await.worker, started);
    }

    #[tokio::test]
    async fn the_next_job_goes_to_the_worker_idle_longest() {
        // A worker builds its next context after answering; the one idle longest has
        // had the most time to finish that, so jobs one after another rotate.
        let f = Fixture::new();
        let mut host = f.tenant(1);
        let policy = RetirePolicy {
            max_jobs: 100,
            ..NEVER
        };
        let pool = f.pool(3, policy, Duration::from_secs(60)).await;
        let mut ids = Vec::new();
        for i in 0..6 {
            ids.push(run(&pool, &mut host, HELLO, json!(i)).await.worker);
        }
        assert_eq!(&ids[..3], &ids[3..], "rotating: {ids:?}");
        assert!(
            ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
            "three workers take turns: {ids:?}"
        );
    }

    #[tokio::test]
    async fn a_worker_is_retired_after_max_jobs() {
        let f = Fixture::new();
        let ids = workers_of_six_jobs(&f, 2).await;
        assert!(
            ids[0] == ids[1] && ids[2] == ids[3] && ids[4] == ids[5],
            "two jobs per worker: {ids:?}"
        );
        assert!(
            ids[1] < ids[2] && ids[3] < ids[4],
            "a new worker every two jobs: {ids:?}"
        );
        let ids = workers_of_six_jobs(&f, 1).await;
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "one job each: {ids:?}");
        let ids = workers_of_six_jobs(&f, 100).await;
        assert!(ids.iter().all(|id| *id == ids[0]), "reused: {ids:?}");
    }

    #[tokio::test]
    async fn a_retired_worker_is_replaced_before_the_next_job() {
        let f = Fixture::new();
        let mut host = f.tenant(1);
        let pool = f
            .pool(
                1,
                RetirePolicy {
                    max_jobs: 1,
                    ..NEVER
                },
                Duration::from_secs(60),
            )
            .await;
        let first = run(&pool, &mut host, HELLO, json!(1)).await;
        // No job is waiting, yet the replacement starts and is parked.
        assert!(
            eventually(|| idle_count(&pool) == 1).await,
            "the retired worker is replaced in the background"
        );
        let started = pool.started.load(Ordering::Relaxed);
        let second = run(&pool, &mut host, HELLO, json!(2)).await;
        assert_eq!(second.outcome.response, json!(2));
        assert_ne!(second.worker, first.worker);
        assert_eq!(
            second.worker, started,
            "the job took the worker started ahead of it"
        );
    }

    #[tokio::test]
    async fn after_a_limit_failure_the_next_job_runs_on_a_fresh_worker() {
        let f = Fixture::new();
        let mut host = f.tenant(1);
        let pool = f.pool(1, NEVER, Duration::from_secs(5)).await;
        let cases = [
            (
                "async function main() { while (true) {} }",
                ErrorKind::Timeout,
            ),
            (
                "async function main() { const a = []; while (true) { a.push('x'.repeat(8 << 20) + a.length); } }",
                ErrorKind::Memory,
            ),
            (
                "function f(n) { return f(n + 1) + 1 } async function main() { return f(0) }",
                ErrorKind::Limit,
            ),
            (
                "async function main() { return 'x'.repeat(200 * 1024) }",
                ErrorKind::Limit,
            ),
        ];
        for (code, expected) in cases {
            let before = run(&pool, &mut host, HELLO, json!("before")).await;
            let failed = run(&pool, &mut host, code, Value::Null).await;
            assert_eq!(kind(&failed), Some(expected), "{code}: {failed:?}");
            assert_eq!(
                failed.worker, before.worker,
                "{code}: ran on the warm worker"
            );
            let after = run(&pool, &mut host, HELLO, json!("after")).await;
            assert_eq!(after.outcome.response, json!("after"), "{after:?}");
            assert_ne!(after.worker, failed.worker, "{code}: a fresh worker");
        }
        // A plain exception is the code's own failure: the worker stays.
        let thrown = run(
            &pool,
            &mut host,
            "async function main() { throw new Error('no') }",
            Value::Null,
        )
        .await;
        assert_eq!(kind(&thrown), Some(ErrorKind::Exception));
        let after = run(&pool, &mut host, HELLO, json!(1)).await;
        assert_eq!(after.worker, thrown.worker, "kept after an exception");
    }

    #[tokio::test]
    async fn a_replacement_that_cannot_start_is_retried() {
        let f = Fixture::new();
        let binary = f.dir.path().join("bin").join("action-worker");
        let pool = f.pool_with(binary.clone(), 1, NEVER, Duration::from_secs(60));
        // The first attempts fail (no binary yet); the pool keeps trying with backoff.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(idle_count(&pool), 0);
        std::fs::create_dir(binary.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(worker_binary(), &binary).unwrap();
        assert!(
            eventually(|| idle_count(&pool) == 1).await,
            "a later attempt starts the worker without any job asking for it"
        );
    }

    /// Asks for a wallet that does not exist (refused), ignores the rejection and spins.
    const REFUSED_THEN_SPIN: &str = r#"async function main() {
        try { await Lit.Actions.signEcdsa({pkpId: "0x" + "ab".repeat(32), toSign: "0x" + "11".repeat(32)}); } catch (e) {}
        while (true) {}
    }"#;

    #[tokio::test]
    async fn a_refused_wallet_stops_the_job_at_once() {
        let f = Fixture::new();
        let mut host = f.tenant(1);
        let pool = f.pool(1, NEVER, Duration::from_secs(60)).await;
        let before = run(&pool, &mut host, HELLO, json!(1)).await;
        let job = ResolvedJob {
            code: REFUSED_THEN_SPIN.into(),
            action_cid: "QmTest".into(),
            js_params: Value::Null,
        };
        let started = Instant::now();
        let ran = pool
            .run(job, &mut host, None, std::future::pending())
            .await
            .unwrap();
        let Run::Refused { run_time, .. } = ran else {
            panic!("not refused: {ran:?}");
        };
        assert!(
            started.elapsed() < Duration::from_secs(5) && run_time < Duration::from_secs(5),
            "stopped at the refusal, not the 60 s deadline: {run_time:?}"
        );
        let after = run(&pool, &mut host, HELLO, json!(2)).await;
        assert_ne!(
            after.worker, before.worker,
            "the refused job's worker is gone"
        );
    }

    #[tokio::test]
    async fn an_abandoned_job_is_stopped_and_its_run_time_reported() {
        let f = Fixture::new();
        let mut host = f.tenant(1);
        let pool = f.pool(1, NEVER, Duration::from_secs(60)).await;
        let before = run(&pool, &mut host, HELLO, json!(1)).await;
        let job = ResolvedJob {
            code: "async function main() { while (true) {} }".into(),
            action_cid: "QmTest".into(),
            js_params: Value::Null,
        };
        let ran = pool
            .run(
                job,
                &mut host,
                None,
                tokio::time::sleep(Duration::from_millis(400)),
            )
            .await
            .unwrap();
        let Run::Abandoned { run_time } = ran else {
            panic!("not abandoned: {ran:?}");
        };
        assert!(
            run_time >= Duration::from_millis(400) && run_time < Duration::from_secs(5),
            "{run_time:?}"
        );
        let after = run(&pool, &mut host, HELLO, json!(2)).await;
        assert_ne!(
            after.worker, before.worker,
            "the abandoned job's worker is gone"
        );
        assert_eq!(pool.scheduler().load(), (0, 0), "its place was given back");
    }

    #[test]
    fn the_policy_retires_on_limits_heap_and_job_count() {
        let policy = RetirePolicy {
            max_jobs: 3,
            heap_limit_bytes: 1000,
            ..NEVER
        };
        let done = |error: Option<ErrorKind>, heap_bytes| JobDone {
            response: Value::Null,
            logs: String::new(),
            error: error.map(|kind| ActionError {
                kind,
                message: String::new(),
            }),
            heap_bytes,
        };
        assert_eq!(policy.verdict(1, &done(None, Some(1000))), None);
        assert_eq!(
            policy.verdict(1, &done(None, None)),
            None,
            "no report, no heap rule"
        );
        assert_eq!(
            policy.verdict(1, &done(None, Some(1001))),
            Some(Retirement::Heap(1001))
        );
        assert_eq!(
            policy.verdict(3, &done(None, None)),
            Some(Retirement::MaxJobs)
        );
        assert_eq!(
            policy.verdict(2, &done(Some(ErrorKind::Exception), None)),
            None
        );
        for kind in [ErrorKind::Timeout, ErrorKind::Memory, ErrorKind::Limit] {
            assert_eq!(
                policy.verdict(1, &done(Some(kind), Some(1))),
                Some(Retirement::Failed(kind))
            );
        }
    }
}
