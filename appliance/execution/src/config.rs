//! The actions' section of the appliance's configuration (`[actions]`): code limits,
//! the sandbox's limits, the fetch budget and the worker pool. The appliance's `config`
//! module composes it with the other sections; this crate owns its keys, defaults and
//! checks (the appliance's code resolution reads the code-cache keys from it too).

use std::collections::BTreeMap;
use std::path::PathBuf;

use appliance_domain::settings::{InvalidSetting, SecretString};
use serde::{Deserialize, Serialize};

pub use super::imports::ImportsConfig;

/// Action execution: code limits, the sandbox's limits and the worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActionsConfig {
    /// Largest action code accepted, in bytes.
    pub max_code_bytes: usize,
    /// Bytes of anonymous action code kept by CID for execution by `ipfs_id`: what
    /// `get_lit_action_ipfs_id` receives without a key. Beyond it, the least recently
    /// used anonymous code is evicted. An account's code is kept apart, within
    /// `code_quota_bytes_per_account`, so anonymous uploads never evict it.
    pub code_cache_bytes: u64,
    /// Bytes of action code kept for one account: code it ran inline, code fetched for
    /// it from the gateway, code sent to `get_lit_action_ipfs_id` with its key, and the
    /// code of its registered actions (pinned: never evicted, but counted). Beyond it,
    /// the account's least recently used unpinned code is evicted; registering an action
    /// whose known code would push its pinned code past it is refused with 409.
    pub code_quota_bytes_per_account: u64,
    /// Wall-clock limit of one action; the worker running it is killed after it.
    pub timeout_ms: u64,
    /// Memory an action may allocate (the worker's address-space limit above its
    /// start-up size).
    pub memory_limit_mb: u64,
    /// Largest `response` an action may produce.
    pub max_response_bytes: usize,
    /// Largest `logs` an action may produce.
    pub max_log_bytes: usize,
    /// Largest `js_params`, serialized.
    pub max_js_params_bytes: usize,
    /// Fetches per action.
    pub max_fetches: u32,
    /// Time limit of one fetch.
    pub fetch_timeout_ms: u64,
    /// Largest fetch response body.
    pub fetch_max_response_bytes: usize,
    /// Let actions fetch private, loopback and link-local addresses (off: they could
    /// reach services on the host or cloud metadata endpoints).
    pub fetch_allow_private: bool,
    /// Worker processes kept ready; 0 = two per CPU (at least 2).
    pub workers: usize,
    /// Actions one account may run at once; more wait in the account's own queue, and
    /// waiting accounts are served in turn (round-robin between accounts, FIFO within
    /// one). 0 = half the pool, rounded down, at least 1.
    pub max_concurrent_per_account: usize,
    /// Actions one account may have waiting for a worker; beyond it the account's new
    /// actions are refused with 429 (other accounts are not affected).
    pub max_queued_per_account: usize,
    /// Actions waiting for a worker in all; beyond it an action that cannot run at once
    /// is refused with 429.
    pub max_queued: usize,
    /// Longest wait for a worker, in ms; an action still waiting then is refused with 429.
    pub queue_timeout_ms: u64,
    /// Jobs one worker runs before it is retired and replaced (at least 1; 1 = a fresh
    /// worker for every job). A worker is also retired after any job that hit a limit
    /// (timeout, memory, size or depth limits).
    pub worker_max_jobs: u32,
    /// Live heap, in MiB, past which a worker is retired after its job (as the worker
    /// reports it; advisory). 0 = a quarter of `memory_limit_mb`. Must be below
    /// `memory_limit_mb`. An action on a reused worker can count on about
    /// `memory_limit_mb` minus this.
    pub worker_retire_heap_mb: u64,
    /// A worker serves one account only: the account of its first job. Once bound, it is
    /// retired (and a fresh one started for anyone) after waiting this many ms idle for
    /// that account's next job (at least 1). It is also retired sooner when another
    /// account's job needs its place.
    pub worker_bound_idle_ms: u64,
    /// The worker binary. Default: `action-worker` next to the appliance binary.
    /// Not used when workers come from the launcher (it names its own).
    pub worker_binary: Option<PathBuf>,
    /// The `worker-launcher` socket: workers are started by the launcher, under its uid
    /// (the image's third uid, no supplementary groups), and their pipes handed over.
    /// The launcher takes the memory limit from its own copy of this file. Unset (and
    /// `spawn_worker_launcher` off): workers are the appliance's own children, under
    /// its uid and groups (development only; logged at start).
    pub worker_launcher_socket: Option<PathBuf>,
    /// Development: start `worker-launcher` as a supervised child (same uid, reported at
    /// start) on `worker_launcher_socket`, by default `<data_dir>/worker-launcher.sock`,
    /// so development drives workers through the same path as the image.
    pub spawn_worker_launcher: bool,
    /// spawn_worker_launcher: the launcher binary. Default: next to the appliance binary.
    pub worker_launcher_binary: Option<PathBuf>,
    /// An IPFS HTTP gateway (e.g. `https://ipfs.io`) from which unknown CIDs are
    /// fetched for execution; the content is accepted only if its CID matches.
    pub ipfs_gateway: Option<String>,
    /// JSON-RPC for `ethers.providers` in actions (`[actions.rpc]`).
    pub rpc: RpcConfig,
    /// Module imports (`[actions.imports]`): the ESM CDN and the bounds.
    pub imports: ImportsConfig,
}

/// `[actions.rpc]`: the chains actions reach through the appliance, and the bounds of
/// their JSON-RPC traffic. Every request also counts as one of the action's
/// `max_fetches`.
///
/// An action names a configured chain by id (`new ethers.providers.JsonRpcProvider(
/// undefined, 31337)` or the URL `chain:31337`) without ever seeing its URL, or by
/// writing exactly that URL. Configured URLs may be loopback or private addresses (the
/// operator chose them); any other URL an action gives is held to the rules of `fetch`
/// (globally reachable addresses only, unless `fetch_allow_private`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RpcConfig {
    /// Chain id → JSON-RPC URL (`chains = { 31337 = "http://127.0.0.1:8545" }`). The
    /// URLs may carry credentials: they are never shown to actions or logged.
    pub chains: BTreeMap<String, SecretString>,
    /// Time limit of one request, in ms.
    pub request_timeout_ms: u64,
    /// Largest request body, in bytes.
    pub max_request_bytes: usize,
    /// Largest response body, in bytes (at most 3 MiB: it travels to the worker in one
    /// frame).
    pub max_response_bytes: usize,
    /// Request and response bytes one action may move in all.
    pub max_bytes_per_action: u64,
    /// Time one action may spend waiting for JSON-RPC answers in all, in ms.
    pub max_time_per_action_ms: u64,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            chains: BTreeMap::new(),
            request_timeout_ms: 10_000,
            max_request_bytes: 128 * 1024,
            max_response_bytes: 2 * 1024 * 1024,
            max_bytes_per_action: 16 * 1024 * 1024,
            max_time_per_action_ms: 20_000,
        }
    }
}

/// The largest `max_response_bytes` (the reply, escaped as JSON, must fit one frame).
pub const MAX_RPC_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

impl RpcConfig {
    /// The configured chains with their ids parsed.
    pub fn chain_urls(&self) -> Result<BTreeMap<u64, &SecretString>, InvalidSetting> {
        self.chains
            .iter()
            .map(|(id, url)| {
                id.parse::<u64>().map(|id| (id, url)).map_err(|_| {
                    InvalidSetting(format!(
                        "actions.rpc.chains: {id:?} is not a chain id (a decimal integer)"
                    ))
                })
            })
            .collect()
    }

    /// Checks the chain ids, their URLs and the bounds.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        for (id, url) in self.chain_urls()? {
            let scheme_ok =
                url.expose().starts_with("http://") || url.expose().starts_with("https://");
            if !scheme_ok {
                return Err(InvalidSetting(format!(
                    "actions.rpc.chains.{id} must be an http:// or https:// URL"
                )));
            }
        }
        if self.request_timeout_ms == 0 || self.max_time_per_action_ms == 0 {
            return Err(InvalidSetting::new(
                "actions.rpc.request_timeout_ms and actions.rpc.max_time_per_action_ms must be positive",
            ));
        }
        if self.max_request_bytes == 0 || self.max_bytes_per_action == 0 {
            return Err(InvalidSetting::new(
                "actions.rpc.max_request_bytes and actions.rpc.max_bytes_per_action must be positive",
            ));
        }
        if self.max_response_bytes == 0 || self.max_response_bytes > MAX_RPC_RESPONSE_BYTES {
            return Err(InvalidSetting(format!(
                "actions.rpc.max_response_bytes must be between 1 and {MAX_RPC_RESPONSE_BYTES}"
            )));
        }
        Ok(())
    }
}

impl Default for ActionsConfig {
    fn default() -> Self {
        Self {
            max_code_bytes: 1024 * 1024,
            code_cache_bytes: 64 * 1024 * 1024,
            code_quota_bytes_per_account: 16 * 1024 * 1024,
            timeout_ms: 30_000,
            memory_limit_mb: 128,
            max_response_bytes: 100 * 1024,
            max_log_bytes: 100 * 1024,
            max_js_params_bytes: 64 * 1024,
            max_fetches: 50,
            fetch_timeout_ms: 10_000,
            fetch_max_response_bytes: 1024 * 1024,
            fetch_allow_private: false,
            workers: 0,
            max_concurrent_per_account: 0,
            max_queued_per_account: 64,
            max_queued: 1024,
            queue_timeout_ms: 10_000,
            worker_max_jobs: 1000,
            worker_retire_heap_mb: 0,
            worker_bound_idle_ms: 30_000,
            worker_binary: None,
            worker_launcher_socket: None,
            spawn_worker_launcher: false,
            worker_launcher_binary: None,
            ipfs_gateway: None,
            rpc: RpcConfig::default(),
            imports: ImportsConfig::default(),
        }
    }
}

impl ActionsConfig {
    /// The heap threshold of [`Self::worker_retire_heap_mb`] in bytes, the default
    /// (a quarter of the memory limit) applied.
    pub fn worker_retire_heap_bytes(&self) -> u64 {
        let mb = match self.worker_retire_heap_mb {
            0 => self.memory_limit_mb / 4,
            mb => mb,
        };
        mb.saturating_mul(1024 * 1024)
    }

    /// Checks that the pool can run with these settings.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.memory_limit_mb == 0 {
            return Err(InvalidSetting::new(
                "actions.memory_limit_mb must be positive",
            ));
        }
        if self.max_queued_per_account == 0 || self.max_queued == 0 {
            return Err(InvalidSetting::new(
                "actions.max_queued_per_account and actions.max_queued must be at least 1",
            ));
        }
        if self.worker_max_jobs == 0 {
            return Err(InvalidSetting::new(
                "actions.worker_max_jobs must be at least 1 (1 = a fresh worker for every job)",
            ));
        }
        if self.worker_bound_idle_ms == 0 {
            return Err(InvalidSetting::new(
                "actions.worker_bound_idle_ms must be at least 1",
            ));
        }
        self.rpc.validate()?;
        self.imports.validate()?;
        if self.worker_retire_heap_mb >= self.memory_limit_mb {
            return Err(InvalidSetting(format!(
                "actions.worker_retire_heap_mb ({}) must be below actions.memory_limit_mb ({}); 0 = a quarter of it",
                self.worker_retire_heap_mb, self.memory_limit_mb
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retire_threshold_defaults_to_a_quarter_of_the_memory_limit() {
        let config = ActionsConfig {
            memory_limit_mb: 128,
            ..ActionsConfig::default()
        };
        assert_eq!(config.worker_retire_heap_bytes(), 32 * 1024 * 1024);
        let set = ActionsConfig {
            worker_retire_heap_mb: 10,
            ..config
        };
        assert_eq!(set.worker_retire_heap_bytes(), 10 * 1024 * 1024);
    }

    #[test]
    fn settings_the_pool_cannot_run_with_are_refused_by_name() {
        let cases = [
            (
                ActionsConfig {
                    memory_limit_mb: 0,
                    ..ActionsConfig::default()
                },
                "actions.memory_limit_mb",
            ),
            (
                ActionsConfig {
                    max_queued: 0,
                    ..ActionsConfig::default()
                },
                "actions.max_queued",
            ),
            (
                ActionsConfig {
                    worker_max_jobs: 0,
                    ..ActionsConfig::default()
                },
                "actions.worker_max_jobs",
            ),
            (
                ActionsConfig {
                    worker_bound_idle_ms: 0,
                    ..ActionsConfig::default()
                },
                "actions.worker_bound_idle_ms",
            ),
            (
                ActionsConfig {
                    worker_retire_heap_mb: 128,
                    ..ActionsConfig::default()
                },
                "actions.worker_retire_heap_mb",
            ),
        ];
        for (config, key) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.0.contains(key), "{key}: {err}");
        }
        assert!(ActionsConfig::default().validate().is_ok());
    }
}
