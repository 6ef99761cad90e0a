//! Running an action for a caller, the one path behind `POST /lit_action`: [`execute`]
//! finds the code, decides what it may use (by `authz`'s execution operations),
//! reserves credit, runs it in the worker pool and charges the time it ran.
//!
//! The run and its charge happen in a task of their own, which the request does not
//! own: whatever ends the request (a client that goes away, an HTTP/2 stream reset, the
//! server's request deadline), the task stops the job (its worker is killed) and charges
//! the time it ran, exactly once. A job that asks for a wallet outside its scope is
//! stopped at that call and charged too; the caller gets the refusal (403).
//!
//! The JavaScript runs in `action-worker` processes (crate `action-runtime`): `pool`
//! drives them (`idle` keeps each worker to the one account it first served), `host`
//! answers their key operations and fetches (`fetch`), `code` finds
//! code by CID. Nothing here speaks HTTP; `error.rs` maps [`ExecError`] to responses.

pub mod code;
pub use appliance_execution::{fair, fetch, host, idle, imports, pool, routable, rpc, spawn};

use std::sync::Arc;
use std::time::Duration;

use action_runtime::protocol::{ActionError, ErrorKind};
use serde_json::Value;
use tracing::Instrument as _;

use crate::authz::{self, Credential, Denied, ExecutionGrant};
use crate::billing::{ActionTicket, Billing, BillingError};
use crate::cid;
use crate::config::ActionsConfig;
use crate::keyservice_client::Keys;
use crate::store::{AccountId, CidHash, Store, StoreError, WalletScope};
use crate::telemetry::metrics::{BillingKind, Metrics};
use crate::telemetry::{self as telemetry, request_span};
use code::{Gateway, GatewayError};
use fetch::{FetchLimits, Fetcher};
use host::{HostContext, WalletRefused};
use pool::{Admission, JobLimits, Pool, PoolError, RetirePolicy, Run};
use spawn::{Spawner, WorkerSpec};

/// What a caller asks to run, as the request gave it.
#[derive(Debug, Clone)]
pub struct Job {
    /// The code (defines `main`); with `ipfs_id` too, it must hash to that CID.
    pub code: Option<String>,
    /// The CID of code the service has seen, or the gateway has.
    pub ipfs_id: Option<String>,
    /// The argument of `main`, already held to `actions.max_js_params_bytes` by the
    /// handler (`http::extract::bounded_value`, measured before the value was built).
    pub js_params: Value,
}

/// Who runs it: the account, and the credential it authenticated with.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub account: AccountId,
    pub credential: &'a Credential,
}

/// What running it gave: the worker's `done` message, one the pool made up for a worker
/// it killed (timeout) or lost (memory), or a `limit` error when the credit ran out.
pub use pool::Outcome;

/// What execution needs from the appliance, borrowed for one call.
#[derive(Clone, Copy)]
pub struct ExecContext<'a> {
    pub store: &'a Store,
    pub keys: &'a Keys,
    pub billing: &'a Arc<Billing>,
    pub executor: &'a Executor,
    pub limits: &'a ActionsConfig,
}

/// Why an execution did not produce an outcome. A failure of the code itself
/// (exception, timeout, memory, a limit) is not an error: it is in the [`Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("action code is limited to {limit} bytes")]
    CodeTooLarge { limit: usize },
    #[error("give `code` or `ipfs_id`")]
    NoCode,
    #[error("the code's CID is {computed}, not the given ipfs_id {given}")]
    CidMismatch { computed: String, given: String },
    #[error("`ipfs_id` is not a valid IPFS CID: {0}")]
    InvalidCid(String),
    #[error(
        "no code is known for {0}: send it once as `code` (or to get_lit_action_ipfs_id) first"
    )]
    UnknownCid(String),
    /// The code cache holds bytes that are not text: a bug, never the caller's fault.
    #[error("stored code for {0} is not UTF-8")]
    StoredCodeNotUtf8(String),
    /// The code found for a CID does not hash to it (`code::verify`): the store's code
    /// cache was changed outside the service. Nothing ran; logged and counted.
    #[error(
        "the code kept for {cid} does not hash to that CID and was refused; send the code itself as `code`"
    )]
    CodeIntegrity {
        cid: String,
        origin: code::CodeSource,
    },
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The caller may not run this code at all (`authz`: no `ExecuteInGroup` group
    /// permits it, and no `ExecuteUnrestricted`).
    #[error(transparent)]
    ExecutionDenied(Denied),
    /// The code asked for a wallet outside its scope (or one that does not exist). It
    /// was stopped at that call and charged for the time it ran; nothing else of it
    /// reaches the caller.
    #[error("the action was refused a wallet: {0}")]
    WalletDenied(WalletRefused),
    /// The account cannot pay for one second of running; nothing ran.
    #[error(transparent)]
    InsufficientCredit(BillingError),
    /// Not admitted to the worker pool: the account's queue or the whole queue is
    /// full, or the wait for a worker ran out.
    #[error(transparent)]
    Busy(fair::Refusal),
    /// The request went away (client gone, stream reset, request deadline); the action
    /// was stopped and charged for the time it ran. No one receives this error.
    #[error("the request was abandoned; the action was stopped")]
    Abandoned,
    /// No worker can be started or reached.
    #[error("actions cannot run right now: {0}")]
    WorkersUnavailable(String),
    #[error(transparent)]
    Billing(BillingError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<PoolError> for ExecError {
    fn from(err: PoolError) -> Self {
        match err {
            PoolError::Busy(refusal) => Self::Busy(refusal),
            PoolError::Unavailable(detail) => Self::WorkersUnavailable(detail),
            PoolError::Abandoned => Self::Abandoned,
        }
    }
}

impl From<BillingError> for ExecError {
    fn from(err: BillingError) -> Self {
        match err {
            BillingError::InsufficientCredit { .. } => Self::InsufficientCredit(err),
            BillingError::Store(store) => Self::Store(store),
            other => Self::Billing(other),
        }
    }
}

/// The `appliance_actions_total` outcome of an execution: `ok`, the code's error kind,
/// or why it did not run or finish (a bounded set).
fn outcome_label(result: Result<&Outcome, &ExecError>) -> &'static str {
    match result {
        Ok(outcome) => outcome.error.as_ref().map_or("ok", |e| e.kind.as_str()),
        Err(err) => match err {
            ExecError::CodeTooLarge { .. }
            | ExecError::NoCode
            | ExecError::CidMismatch { .. }
            | ExecError::InvalidCid(_) => "invalid",
            ExecError::UnknownCid(_) => "unknown_code",
            ExecError::Gateway(_) => "gateway",
            ExecError::ExecutionDenied(_) => "denied",
            ExecError::WalletDenied(_) => "wallet_refused",
            ExecError::InsufficientCredit(_) => "insufficient_credit",
            ExecError::Busy(_) => "busy",
            ExecError::Abandoned => "abandoned",
            ExecError::WorkersUnavailable(_) => "unavailable",
            ExecError::CodeIntegrity { .. } => "integrity",
            ExecError::StoredCodeNotUtf8(_) | ExecError::Billing(_) | ExecError::Store(_) => {
                "error"
            }
        },
    }
}

/// Counts an execution's outcome (and a refusal for credit as a 402).
fn record_outcome(m: &Metrics, result: Result<&Outcome, &ExecError>) {
    m.action_finished(outcome_label(result));
    if let Err(ExecError::InsufficientCredit(_)) = result {
        m.payment_required(BillingKind::Action);
    }
}

/// Runs `job` for `caller`: the whole execution path, in the order it is decided.
pub async fn execute(
    ctx: &ExecContext<'_>,
    caller: Caller<'_>,
    job: Job,
) -> Result<Outcome, ExecError> {
    let (job, host, ticket) = match prepare(ctx, caller, job).await {
        Ok(prepared) => prepared,
        Err(err) => {
            record_outcome(ctx.executor.metrics(), Err(&err));
            return Err(err);
        }
    };
    // The run and its charge belong to a task the request does not own. `_attached` lives
    // as long as this future: when the request is dropped, so is it, and the task stops
    // the job and charges what ran. The task counts its own outcome, and belongs to the
    // request's trace (its span and request id).
    let (_attached, detached) = tokio::sync::oneshot::channel::<()>();
    let abandoned = async move {
        let _ = detached.await;
    };
    let paid = paid_run(
        ctx.store.clone(),
        Arc::clone(&ctx.executor.pool),
        Arc::clone(&ctx.executor.metrics),
        job,
        host,
        ticket,
        abandoned,
    );
    let request = telemetry::request_id();
    let paid = async move {
        match request {
            Some(id) => telemetry::in_request(id, paid).await,
            None => paid.await,
        }
    };
    match tokio::spawn(paid.in_current_span()).await {
        Ok(result) => result,
        Err(err) => {
            let err = ExecError::WorkersUnavailable(format!("the action's task failed: {err}"));
            record_outcome(ctx.executor.metrics(), Err(&err));
            Err(err)
        }
    }
}

/// Everything decided before an action runs: what may run, its code, its scope and its
/// credit.
async fn prepare(
    ctx: &ExecContext<'_>,
    caller: Caller<'_>,
    job: Job,
) -> Result<(pool::ResolvedJob, HostContext, Option<ActionTicket>), ExecError> {
    let limits = ctx.limits;
    // Authorize before resolving: the rights are decided on the CID the job names, so
    // a caller who may not run it gets the same 403 whether or not the code is known.
    let action_cid = code::requested_cid(limits, job.code.as_deref(), job.ipfs_id.as_deref())?;
    let span = request_span!("authorize", step = "execution");
    let scope = wallet_scope(ctx, caller, &action_cid)
        .instrument(span)
        .await?;
    let code = code::resolve(ctx, caller.account, job.code, action_cid.clone()).await?;

    // Reserve the seconds the account can pay for (402 if not even one) and cap the run
    // by them. Everything above was authorization and validation, never charged.
    let ticket = ctx
        .billing
        .start_action(
            ctx.store,
            caller.account,
            Duration::from_millis(limits.timeout_ms),
        )
        .await?;
    let host = HostContext::new(
        ctx.store.clone(),
        ctx.keys.client().clone(),
        ctx.executor.fetcher.clone(),
        caller.account,
        scope,
        action_cid.clone(),
        limits.max_fetches,
    )
    .with_imports(ctx.executor.imports.as_ref())
    .with_rpc(ctx.executor.rpc.clone());
    let job = pool::ResolvedJob {
        code,
        action_cid,
        js_params: job.js_params,
    };
    Ok((job, host, ticket))
}

/// Runs `job` and charges the time it ran against `ticket`, whatever ended it: its end,
/// its limit, a refused wallet, or `abandoned` (the request went away). A job that never
/// started is not charged; either way the reservation is released (the ticket's drop).
/// Counts the outcome, whoever still waits for it.
async fn paid_run(
    store: Store,
    pool: Arc<Pool>,
    metrics: Arc<Metrics>,
    job: pool::ResolvedJob,
    host: HostContext,
    ticket: Option<ActionTicket>,
    abandoned: impl Future<Output = ()>,
) -> Result<Outcome, ExecError> {
    let result = run_and_charge(store, pool, &metrics, job, host, ticket, abandoned).await;
    record_outcome(&metrics, result.as_ref());
    result
}

async fn run_and_charge(
    store: Store,
    pool: Arc<Pool>,
    metrics: &Metrics,
    job: pool::ResolvedJob,
    mut host: HostContext,
    ticket: Option<ActionTicket>,
    abandoned: impl Future<Output = ()>,
) -> Result<Outcome, ExecError> {
    let credit_limit = ticket.as_ref().and_then(|t| t.deadline());
    // What the charge records: the action that ran, and the request (this task runs in
    // the request's scope: `execute`).
    let action_cid = job.action_cid.clone();
    let span = request_span!("worker.run");
    let run = pool
        .run(job, &mut host, credit_limit, abandoned)
        .instrument(span)
        .await?;
    let run_time = run.run_time();
    metrics.action_ran(run_time);
    let mut charged = None;
    if let Some(ticket) = ticket {
        let paid_seconds = ticket.seconds();
        let request_id = telemetry::request_id().map(|id| id.to_string());
        let cents = ticket
            .charge(&store, run_time, &action_cid, request_id)
            .await?;
        metrics.charged(BillingKind::Action, cents);
        tracing::info!(
            cents,
            run_ms = run_time.as_millis() as u64,
            ending = run.ending(),
            "action charged"
        );
        charged = Some((paid_seconds, cents));
    }
    match run {
        Run::Finished(timed) => {
            let mut outcome = timed.outcome;
            if let (true, Some(_), Some((paid_seconds, cents))) =
                (timed.deadline_hit, credit_limit, charged)
            {
                outcome.error = Some(ActionError {
                    kind: ErrorKind::Limit,
                    message: format!(
                        "the action was stopped after {paid_seconds} s because the account's credit ran out ({cents} cent(s) charged); add credit to run longer"
                    ),
                });
            }
            Ok(outcome)
        }
        Run::Refused { refused, .. } => Err(ExecError::WalletDenied(refused)),
        Run::Abandoned { .. } => Err(ExecError::Abandoned),
    }
}

/// The wallets `caller` may use while running `action_cid`, or the refusal to run it:
/// `authz` grants the groups, the store says which of them permit this code (one read).
async fn wallet_scope(
    ctx: &ExecContext<'_>,
    caller: Caller<'_>,
    action_cid: &str,
) -> Result<WalletScope, ExecError> {
    let groups = match authz::execution_grant(caller.credential) {
        ExecutionGrant::Unrestricted => return Ok(WalletScope::Account),
        ExecutionGrant::InGroups(groups) => groups,
    };
    let hash = CidHash(cid::hashed_cid(action_cid));
    ctx.store
        .execution_scope(caller.account, groups, hash)
        .await?
        .ok_or_else(|| ExecError::ExecutionDenied(Denied::action_not_permitted(action_cid)))
}

/// The appliance's means to run actions: the worker pool, the HTTP client actions fetch
/// with, the module importer (when a CDN is configured), and the IPFS gateway code may
/// come from.
#[derive(Clone)]
pub struct Executor {
    pool: Arc<Pool>,
    fetcher: Fetcher,
    /// JSON-RPC for `ethers.providers` (`[actions.rpc]`).
    rpc: rpc::RpcClient,
    imports: Option<imports::ModuleImports>,
    gateway: Option<Gateway>,
    metrics: Arc<Metrics>,
}

/// Why the action runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeStartError {
    #[error(transparent)]
    Fetch(#[from] fetch::FetchError),
    #[error(transparent)]
    Gateway(#[from] code::GatewayError),
    #[error(transparent)]
    Imports(#[from] imports::ImportError),
    #[error(transparent)]
    Rpc(#[from] rpc::RpcSetupError),
}

impl Executor {
    /// Starts the worker pool. `worker_cwd` must be an empty directory.
    pub fn start(
        config: &ActionsConfig,
        worker_binary: std::path::PathBuf,
        worker_cwd: std::path::PathBuf,
        metrics: Arc<Metrics>,
    ) -> Result<Self, RuntimeStartError> {
        let size = pool_size(config);
        let spawner = match &config.worker_launcher_socket {
            Some(socket) => Spawner::Launcher(socket.clone()),
            None => Spawner::Direct(WorkerSpec {
                binary: worker_binary,
                memory_limit_mb: config.memory_limit_mb,
                cwd: worker_cwd,
            }),
        };
        spawner.report();
        let limits = JobLimits {
            timeout: Duration::from_millis(config.timeout_ms),
            queue_timeout: Duration::from_millis(config.queue_timeout_ms),
            admission: Admission {
                per_account: max_concurrent_per_account(config),
                queued_per_account: config.max_queued_per_account,
                queued_total: config.max_queued,
            },
            worker: action_runtime::protocol::JobLimits {
                max_response_bytes: config.max_response_bytes,
                max_log_bytes: config.max_log_bytes,
                max_fetches: config.max_fetches,
                // Set per job by the pool (the deadline may be lowered by credit).
                timeout_ms: None,
            },
            retire: RetirePolicy {
                max_jobs: config.worker_max_jobs,
                heap_limit_bytes: config.worker_retire_heap_bytes(),
                bound_idle: Duration::from_millis(config.worker_bound_idle_ms),
            },
        };
        let fetcher = Fetcher::new(FetchLimits {
            timeout: Duration::from_millis(config.fetch_timeout_ms),
            max_response_bytes: config.fetch_max_response_bytes,
            max_request_bytes: 64 * 1024,
            allow_private: config.fetch_allow_private,
        })?;
        let gateway = config
            .ipfs_gateway
            .as_deref()
            .map(|url| Gateway::new(url, Arc::clone(&metrics)))
            .transpose()?;
        Ok(Self {
            pool: Pool::new(
                spawner,
                limits,
                size,
                Arc::new(telemetry::PoolTelemetry(Arc::clone(&metrics))),
            ),
            fetcher,
            rpc: rpc::RpcClient::new(&config.rpc, config.fetch_allow_private)?,
            imports: imports::ModuleImports::new(&config.imports)?,
            gateway,
            metrics,
        })
    }

    /// The registry the executor's events are counted in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The HTTP client actions fetch with.
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// The IPFS gateway, when one is configured.
    pub fn gateway(&self) -> Option<&Gateway> {
        self.gateway.as_ref()
    }

    /// The worker pool as it is now (for the metrics endpoint).
    pub fn pool_stats(&self) -> crate::telemetry::metrics::PoolStats {
        self.pool.stats()
    }
}

/// Workers the pool keeps ready: `actions.workers`, or two per CPU (at least 2) for 0.
pub fn pool_size(config: &ActionsConfig) -> usize {
    if config.workers == 0 {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get() * 2)
            .max(2)
    } else {
        config.workers
    }
}

/// Actions one account may run at once: `actions.max_concurrent_per_account`, or for 0
/// half the pool (rounded down, at least 1), so one account always leaves room for others.
pub fn max_concurrent_per_account(config: &ActionsConfig) -> usize {
    match config.max_concurrent_per_account {
        0 => (pool_size(config) / 2).max(1),
        n => n,
    }
}

/// The default worker binary: next to the running appliance binary.
pub fn default_worker_binary() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("action-worker")))
        .unwrap_or_else(|| "action-worker".into())
}
