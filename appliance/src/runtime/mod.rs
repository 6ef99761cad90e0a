//! Action execution on the appliance side: the worker pool, the host calls actions make
//! (key operations through keyservice, bounded fetch), and the IPFS gateway fallback.
//! The JavaScript itself runs in `action-worker` processes (crate `action-runtime`).

pub mod fetch;
pub mod host;
pub mod pool;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::ActionsConfig;
use crate::error::ApiError;
use fetch::{FetchLimits, Fetcher};
use host::HostContext;
use pool::{JobLimits, Pool, WorkerSpec};

/// One action to run.
#[derive(Debug, Clone)]
pub struct Job {
    pub code: String,
    pub action_cid: String,
    pub js_params: Value,
}

/// What running it gave: the worker's `done` message, or one the pool made up for a
/// worker it killed (timeout) or lost (memory).
pub type Outcome = action_runtime::protocol::JobDone;

/// An outcome with the job's run time (queueing for a worker excluded).
#[derive(Debug)]
pub struct Timed {
    pub outcome: Outcome,
    pub run_time: Duration,
    /// The wall-clock limit stopped it.
    pub deadline_hit: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("every action worker is busy; retry shortly")]
    Overloaded,
    #[error("actions cannot run right now: {0}")]
    Unavailable(String),
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        match err {
            RuntimeError::Overloaded => ApiError::TooManyRequests(err.to_string()),
            RuntimeError::Unavailable(_) => {
                tracing::error!(error = %err, "action runtime unavailable");
                ApiError::Unavailable("actions cannot run right now; retry shortly".into())
            }
        }
    }
}

/// The appliance's action runtime.
#[derive(Clone)]
pub struct Runtime {
    pool: Arc<Pool>,
    fetcher: Fetcher,
    gateway: Option<(String, reqwest::Client)>,
}

impl Runtime {
    /// Starts the worker pool. `worker_cwd` must be an empty directory.
    pub fn start(
        config: &ActionsConfig,
        worker_binary: std::path::PathBuf,
        worker_cwd: std::path::PathBuf,
    ) -> Result<Self, String> {
        let size = if config.workers == 0 {
            std::thread::available_parallelism()
                .map_or(2, |n| n.get() * 2)
                .max(2)
        } else {
            config.workers
        };
        let spec = WorkerSpec {
            binary: worker_binary,
            memory_limit_mb: config.memory_limit_mb,
            cwd: worker_cwd,
        };
        let limits = JobLimits {
            timeout: Duration::from_millis(config.timeout_ms),
            queue_timeout: Duration::from_secs(10),
            worker: action_runtime::protocol::JobLimits {
                max_response_bytes: config.max_response_bytes,
                max_log_bytes: config.max_log_bytes,
                max_fetches: config.max_fetches,
            },
        };
        let fetcher = Fetcher::new(FetchLimits {
            timeout: Duration::from_millis(config.fetch_timeout_ms),
            max_response_bytes: config.fetch_max_response_bytes,
            max_request_bytes: 64 * 1024,
            allow_private: config.fetch_allow_private,
        })?;
        let gateway = match &config.ipfs_gateway {
            Some(url) => Some((
                url.trim_end_matches('/').to_owned(),
                reqwest::Client::builder()
                    .use_rustls_tls()
                    .timeout(Duration::from_secs(20))
                    .build()
                    .map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        Ok(Self {
            pool: Pool::new(spec, limits, size),
            fetcher,
            gateway,
        })
    }

    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// Runs `job`, answering its host calls with `host`.
    pub async fn execute(&self, job: Job, host: &mut HostContext) -> Result<Outcome, RuntimeError> {
        self.pool.run(job, host).await
    }

    /// Runs `job` under a wall-clock limit lowered to `limit` (when shorter than
    /// `actions.timeout_ms`), and reports how long it ran.
    pub async fn execute_within(
        &self,
        job: Job,
        host: &mut HostContext,
        limit: Option<Duration>,
    ) -> Result<Timed, RuntimeError> {
        self.pool.run_within(job, host, limit).await
    }

    /// Fetches `cid` from the configured IPFS gateway, accepting the content only if it
    /// hashes to that CID. `None` without a gateway or when the gateway lacks it.
    pub async fn fetch_from_gateway(
        &self,
        cid: &str,
        max_bytes: usize,
    ) -> Result<Option<String>, ApiError> {
        let Some((base, client)) = &self.gateway else {
            return Ok(None);
        };
        let unavailable =
            |e: String| ApiError::Unavailable(format!("the IPFS gateway failed: {e}"));
        let mut resp = client
            .get(format!("{base}/ipfs/{cid}"))
            .send()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(unavailable(format!("status {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > max_bytes {
                return Err(ApiError::PayloadTooLarge(format!(
                    "the code for {cid} is over {max_bytes} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if crate::cid::cid_v0(&body) != cid {
            return Err(ApiError::Unprocessable(format!(
                "the gateway's content for {cid} does not hash to that CID"
            )));
        }
        String::from_utf8(body)
            .map(Some)
            .map_err(|_| ApiError::Unprocessable(format!("the code for {cid} is not UTF-8")))
    }
}

/// The default worker binary: next to the running appliance binary.
pub fn default_worker_binary() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("action-worker")))
        .unwrap_or_else(|| "action-worker".into())
}
