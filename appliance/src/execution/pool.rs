//! The worker pool: pre-started `action-worker` processes, one action at a time each.
//!
//! A job takes an idle worker (or starts one), sends `run`, answers the worker's host
//! calls, and waits for `done` under the wall-clock deadline. A worker that overruns
//! is killed (`timeout`); one that dies on its own, which under its address-space limit
//! means an allocation failed, is reported as `memory`. Either way it is replaced in the
//! background, so the pool stays warm and other actions are unaffected.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use action_runtime::protocol::{
    self, ActionError, ErrorKind, FromWorker, HEADER_LEN, HostReply, JobDone, ReplyOutcome, RunJob,
    ToWorker,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::Semaphore;

use super::Outcome;
use super::host::{HostContext, HostError, WalletRefused};
use super::spawn::{Spawner, WorkerProcess};

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
}

/// How a job ended.
#[derive(Debug)]
pub enum Run {
    /// It ran to its end (or its limit); the outcome says how.
    Finished(Timed),
    /// A host call was refused a wallet: the action saw a rejected promise and ran on,
    /// but its outcome must not reach the caller. The first refusal is kept.
    Refused(WalletRefused),
}

/// Why a job could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("every action worker is busy; retry shortly")]
    Busy,
    #[error("actions cannot run right now: {0}")]
    Unavailable(String),
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
    /// Enforced by the worker; sent with each job.
    pub worker: protocol::JobLimits,
}

struct Worker {
    /// Started directly or by the worker launcher (`spawn.rs`).
    process: WorkerProcess,
    stdin: pipe::Sender,
    stdout: BufReader<pipe::Receiver>,
}

/// Why a worker stopped serving a job.
enum WorkerEnd {
    /// It finished the job and can take another.
    Done(Outcome),
    /// It died or broke the protocol; it must not be reused.
    Broken(Outcome),
}

pub struct Pool {
    spawner: Spawner,
    limits: JobLimits,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
}

impl Pool {
    /// Starts `size` workers (in the background; the pool fills as they come up).
    pub fn new(spawner: Spawner, limits: JobLimits, size: usize) -> Arc<Self> {
        let pool = Arc::new(Self {
            spawner,
            limits,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(size),
        });
        for _ in 0..size {
            pool.replenish();
        }
        pool
    }

    /// Starts one worker in the background and parks it as idle.
    fn replenish(self: &Arc<Self>) {
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            match spawn(&pool.spawner).await {
                Ok(worker) => pool.park(worker),
                Err(err) => tracing::error!(error = %err, "cannot start an action worker"),
            }
        });
    }

    fn park(&self, worker: Worker) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(worker);
        }
    }

    fn take_idle(&self) -> Option<Worker> {
        self.idle.lock().ok().and_then(|mut idle| idle.pop())
    }

    /// Runs `job` on a worker, answering its host calls through `host`, with the
    /// wall-clock limit lowered to `limit` (if that is shorter than the configured one).
    /// The run time reported is from handing the job to the worker to its end; time
    /// queued for a worker is not included.
    pub async fn run(
        self: &Arc<Self>,
        job: ResolvedJob,
        host: &mut HostContext,
        limit: Option<Duration>,
    ) -> Result<Run, PoolError> {
        let timeout = limit.map_or(self.limits.timeout, |l| l.min(self.limits.timeout));
        let _slot = tokio::time::timeout(self.limits.queue_timeout, self.slots.acquire())
            .await
            .map_err(|_| PoolError::Busy)?
            .map_err(|_| PoolError::Unavailable("the worker pool is closed".into()))?;
        let mut worker = match self.take_idle() {
            Some(worker) => worker,
            None => spawn(&self.spawner).await.map_err(PoolError::Unavailable)?,
        };
        let run = protocol::encode(&ToWorker::Run(RunJob {
            code: job.code,
            js_params: job.js_params,
            action_cid: job.action_cid,
            limits: self.limits.worker,
        }))
        .map_err(|e| PoolError::Unavailable(e.to_string()))?;

        let started = Instant::now();
        let mut refused = None;
        let ended =
            tokio::time::timeout(timeout, serve_job(&mut worker, &run, host, &mut refused)).await;
        let run_time = started.elapsed();
        let timed = |outcome, deadline_hit| Timed {
            outcome,
            run_time,
            deadline_hit,
        };
        let timed = match ended {
            Ok(WorkerEnd::Done(outcome)) => {
                self.park(worker);
                timed(outcome, false)
            }
            Ok(WorkerEnd::Broken(outcome)) => {
                let _ = worker.process.start_kill();
                self.replenish();
                timed(outcome, false)
            }
            Err(_) => {
                let _ = worker.process.start_kill();
                let _ = worker.process.wait().await;
                self.replenish();
                timed(
                    failed(
                        ErrorKind::Timeout,
                        format!(
                            "the action did not finish within {} ms",
                            timeout.as_millis()
                        ),
                    ),
                    true,
                )
            }
        };
        Ok(match refused {
            Some(refused) => Run::Refused(refused),
            None => Run::Finished(timed),
        })
    }
}

async fn spawn(spawner: &Spawner) -> Result<Worker, String> {
    let spawned = spawner.spawn().await?;
    tokio::spawn(forward_stderr(spawned.stderr, spawned.process.id()));
    let mut worker = Worker {
        process: spawned.process,
        stdin: spawned.stdin,
        stdout: BufReader::new(spawned.stdout),
    };
    match tokio::time::timeout(READY_TIMEOUT, read_frame(&mut worker.stdout)).await {
        Ok(Ok(FromWorker::Ready)) => Ok(worker),
        Ok(Ok(msg)) => Err(format!("the worker sent {msg:?} instead of ready")),
        Ok(Err(err)) => Err(format!("the worker did not start: {err}")),
        Err(_) => Err("the worker did not become ready in time".into()),
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

/// Sends `run` and serves the worker until `done`, keeping the first wallet refusal in
/// `refused` (outside this future, so a timeout does not lose it).
async fn serve_job(
    worker: &mut Worker,
    run: &[u8],
    host: &mut HostContext,
    refused: &mut Option<WalletRefused>,
) -> WorkerEnd {
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
                    Err(HostError::Refused(wallet)) => {
                        let message = wallet.to_string();
                        refused.get_or_insert(wallet);
                        ReplyOutcome::Err(message)
                    }
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

fn failed(kind: ErrorKind, message: String) -> Outcome {
    JobDone {
        response: Value::Null,
        logs: String::new(),
        error: Some(ActionError { kind, message }),
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
async fn died(worker: &mut Worker, err: &str) -> Outcome {
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

async fn read_frame(reader: &mut BufReader<pipe::Receiver>) -> Result<FromWorker, String> {
    let mut header = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut header)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let len = protocol::frame_len(header).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("read: {e}"))?;
    protocol::decode(&body).map_err(|e| e.to_string())
}

/// Writes a complete frame (from [`protocol::encode`]).
async fn write_frame(writer: &mut pipe::Sender, frame: &[u8]) -> Result<(), String> {
    writer
        .write_all(frame)
        .await
        .map_err(|e| format!("write: {e}"))?;
    writer.flush().await.map_err(|e| format!("write: {e}"))
}
