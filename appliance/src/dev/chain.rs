//! `appliance dev`'s local chain: a supervised anvil with its state in the data directory,
//! the payers funded, and both contracts deployed once and reused on later starts.
//!
//! anvil runs under `appliance child-guard` (this same binary), which stops it when the
//! appliance exits, even by `kill -9`: the guard notices it was orphaned and sends anvil
//! SIGTERM, on which anvil writes its state (`--state <data_dir>/anvil/state.json`). If
//! anvil dies it is restarted on the same port, with its saved state.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use keyservice_api::Payer;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::chain::ChainClient;
use crate::chain::contract_deployment::{
    DeployPlan, DeploySigner, allow_compose_hash, contracts_in_place, deploy_contracts,
};
use crate::config::ChainConfig;
use crate::keyservice_client::Keys;

/// Balance every payer is given on the dev chain (10 000 ETH).
const DEV_BALANCE_WEI: u128 = 10_000 * 10u128.pow(18);
/// Where `scripts/setup` installs anvil, under the tools directory.
const ANVIL_IN_TOOLS: &str = "node/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil";
/// The record of the contracts deployed on the dev chain.
const RECORD_FILE: &str = "contracts.json";

/// Why the dev chain could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevChainError {
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("anvil ({binary}) did not start: {reason}")]
    Start { binary: PathBuf, reason: String },
    #[error(transparent)]
    Chain(#[from] crate::chain::ChainError),
    #[error("deploying the contracts: {0}")]
    Deploy(#[from] crate::chain::contract_deployment::DeployError),
    #[error("the dev compose hash is unreadable: {0}")]
    ComposeHash(String),
}

/// Which anvil `appliance dev` should run: `chain.dev_anvil` if set (an empty value turns
/// the local chain off), else the one `scripts/setup` installs, else `anvil` on `PATH`.
/// `None` (with a warning) when there is none.
pub fn resolve_anvil(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = configured {
        if path.as_os_str().is_empty() {
            tracing::info!("chain.dev_anvil is empty: no local chain");
            return None;
        }
        if path.is_file() {
            return Some(path.to_owned());
        }
        tracing::warn!(path = %path.display(), "chain.dev_anvil does not exist: starting WITHOUT a chain (management writes wait in the outbox)");
        return None;
    }
    // (scripts/dev turns an APPLIANCE_TOOLS_DIR into chain.dev_anvil.)
    let mut candidates = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(
            PathBuf::from(home)
                .join(".cache/appliance-tools")
                .join(ANVIL_IN_TOOLS),
        );
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("anvil")));
    }
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return Some(found);
    }
    tracing::warn!(
        "no anvil found (run scripts/setup, or set APPLIANCE_CHAIN__DEV_ANVIL): starting WITHOUT a chain; management writes wait in the outbox"
    );
    None
}

/// The contracts deployed on the dev chain (`<data_dir>/anvil/contracts.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    version: u32,
    chain_id: u64,
    account_config: Address,
    governance: Address,
    deploy_block: u64,
}

/// The running local chain; stop it with [`DevChain::shutdown`] (dropping it leaves the
/// guard to stop anvil when the appliance exits).
pub struct DevChain {
    pub rpc_url: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl DevChain {
    /// Stops anvil (it saves its state) and waits for it.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// What is started: `appliance child-guard -- anvil …`.
#[derive(Debug, Clone)]
struct AnvilSpec {
    guard: PathBuf,
    anvil: PathBuf,
    state_file: PathBuf,
    chain_id: u64,
}

impl AnvilSpec {
    fn command(&self, port: u16) -> Command {
        let mut args: Vec<OsString> = vec![
            "child-guard".into(),
            "--".into(),
            self.anvil.clone().into(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string().into(),
            "--chain-id".into(),
            self.chain_id.to_string().into(),
            "--state".into(),
        ];
        args.push(self.state_file.clone().into());
        let mut cmd = Command::new(&self.guard);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env_remove("RUST_LOG")
            .kill_on_drop(true);
        cmd
    }

    /// Starts anvil and returns it with the port it listens on.
    async fn spawn(&self, port: u16) -> Result<(Child, u16), DevChainError> {
        let err = |reason: String| DevChainError::Start {
            binary: self.anvil.clone(),
            reason,
        };
        let mut child = self.command(port).spawn().map_err(|e| err(e.to_string()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| err("no standard output".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.trim().strip_prefix("Listening on ") {
                    return addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
                }
            }
            None
        })
        .await;
        let Ok(Some(port)) = found else {
            let _ = child.kill().await;
            return Err(err(
                "it exited or printed no \"Listening on\" line within 30 s (see its output above)"
                    .into(),
            ));
        };
        tokio::spawn(drain(lines));
        Ok((child, port))
    }
}

/// Reads anvil's output (one line per RPC call) so it never blocks on a full pipe.
async fn drain(mut lines: tokio::io::Lines<BufReader<ChildStdout>>) {
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::trace!(target: "anvil", "{line}");
    }
}

/// Starts anvil, funds the payers, deploys (or reuses) the contracts and points `chain` at
/// them. Settings already present in `chain` (from `APPLIANCE_CHAIN__*`) are kept: an
/// `account_config_address` given that way is used instead of deploying.
pub async fn start(
    chain: &mut ChainConfig,
    data_dir: &Path,
    keys: &Keys,
    anvil: PathBuf,
) -> Result<DevChain, DevChainError> {
    let dir = data_dir.join("anvil");
    std::fs::create_dir_all(&dir).map_err(|source| DevChainError::Io {
        path: dir.clone(),
        source,
    })?;
    let guard = std::env::current_exe().map_err(|source| DevChainError::Io {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let spec = AnvilSpec {
        guard,
        anvil,
        state_file: dir.join("state.json"),
        chain_id: chain.chain_id,
    };
    let pid_file = dir.join("guard.pid");
    wait_for_previous(&pid_file, &spec.state_file).await;
    let (child, port) = spec.spawn(0).await?;
    if let Some(pid) = child.id() {
        let _ = std::fs::write(&pid_file, pid.to_string());
    }
    let rpc_url = format!("http://127.0.0.1:{port}");
    tracing::info!(%rpc_url, anvil = %spec.anvil.display(), state = %spec.state_file.display(), "dev chain: anvil started");
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(supervise(spec, child, port, stopped));
    let dev = DevChain {
        rpc_url: rpc_url.clone(),
        stop,
        task,
    };
    match prepare(chain, &dir, keys, &rpc_url).await {
        Ok(()) => Ok(dev),
        Err(err) => {
            dev.shutdown().await;
            Err(err)
        }
    }
}

/// A previous appliance killed a moment ago may still have its anvil writing the state
/// file: wait (up to 15 s) for that anvil's guard to exit before loading the state.
async fn wait_for_previous(pid_file: &Path, state_file: &Path) {
    let Some(pid) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    else {
        return;
    };
    let state = state_file.to_string_lossy().into_owned();
    let still_ours = || {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            cmdline.contains("child-guard") && cmdline.contains(&state)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    if still_ours() {
        tracing::info!(
            pid,
            "waiting for the previous dev anvil to save its state and exit"
        );
    }
    while still_ours() {
        if Instant::now() >= deadline {
            tracing::warn!(
                pid,
                "the previous dev anvil is still running; starting another"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn prepare(
    chain: &mut ChainConfig,
    dir: &Path,
    keys: &Keys,
    rpc_url: &str,
) -> Result<(), DevChainError> {
    let client = ChainClient::new(
        rpc_url,
        chain.chain_id,
        keys.client().clone(),
        Duration::from_millis(chain.request_timeout_ms),
    )?;
    client.check_chain_id().await?;
    let payers = keys
        .client()
        .payers()
        .await
        .map_err(crate::chain::ChainError::from)?;
    let api_payers: Vec<Address> = payers.api.iter().map(|a| Address::from(a.0)).collect();
    let admin = Address::from(payers.admin.0);
    for payer in api_payers.iter().chain([&admin]) {
        client
            .provider()
            .raw_request::<_, serde_json::Value>(
                "anvil_setBalance".into(),
                (*payer, U256::from(DEV_BALANCE_WEI)),
            )
            .await
            .map_err(crate::chain::client::rpc_error)?;
    }
    chain.rpc_url = Some(rpc_url.to_owned());
    if chain.account_config_address.is_some() {
        tracing::info!("dev chain: using the AccountConfig address given by the environment");
        return Ok(());
    }

    let record_path = dir.join(RECORD_FILE);
    let previous: Option<Record> = std::fs::read(&record_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    if let Some(record) = previous.filter(|r| r.version == 1 && r.chain_id == chain.chain_id) {
        if contracts_in_place(
            &client,
            record.account_config,
            record.governance,
            &api_payers,
        )
        .await?
        {
            tracing::info!(account_config = %record.account_config, governance = %record.governance, "dev chain: reusing the deployed contracts");
            apply(chain, &record);
            return allow_dev_compose_hash(&client, chain, &record, keys).await;
        }
        tracing::warn!(
            "dev chain: the contracts recorded in {} are not on anvil (its state was lost?); deploying new ones",
            record_path.display()
        );
    }
    let plan = DeployPlan {
        api_payers,
        account_config_owner: None,
        // The dev governance belongs to a dev key, never to a payer: keyservice lets no
        // payer govern (the deployment must not approve its own code).
        governance_owner: Some(dev_governance_key().address()),
        receipt_timeout: Duration::from_secs(30),
    };
    let deployed = deploy_contracts(&client, DeploySigner::Payer(Payer::Admin), &plan).await?;
    let record = Record {
        version: 1,
        chain_id: chain.chain_id,
        account_config: deployed.account_config,
        governance: deployed.governance,
        deploy_block: deployed.deploy_block,
    };
    let text = serde_json::to_vec_pretty(&record).map_err(|e| DevChainError::Io {
        path: record_path.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&record_path, text).map_err(|source| DevChainError::Io {
        path: record_path.clone(),
        source,
    })?;
    tracing::info!(account_config = %record.account_config, governance = %record.governance, owner = %deployed.deployer, "dev chain: contracts deployed");
    apply(chain, &record);
    allow_dev_compose_hash(&client, chain, &record, keys).await
}

/// The owner of the dev chain's governance contract: anvil's first default account,
/// whose key is public (anvil's well-known test mnemonic). Development only: it lets
/// `appliance dev` allow its own compose hash, which no payer may do.
const DEV_GOVERNANCE_KEY: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

fn dev_governance_key() -> PrivateKeySigner {
    // A constant that parses; the fallback is never taken.
    DEV_GOVERNANCE_KEY
        .parse()
        .unwrap_or_else(|_| PrivateKeySigner::random())
}

/// Puts the dev deployment's compose hash on the allow-list of the governance contract the
/// dev chain deployed (owned by the dev governance key), so that `evidence verify`'s
/// governance check passes against the dev stack. A governance contract given by the
/// environment, or one from before the dev key owned it, is left alone.
async fn allow_dev_compose_hash(
    client: &ChainClient,
    chain: &ChainConfig,
    record: &Record,
    keys: &Keys,
) -> Result<(), DevChainError> {
    if chain.governance_address != Some(record.governance) {
        return Ok(());
    }
    let key = dev_governance_key();
    let owner = chain_contracts::IAppGovernance::new(record.governance, client.provider())
        .owner()
        .call()
        .await
        .map_err(|e| crate::chain::ChainError::Unavailable(e.to_string()))?;
    if owner != key.address() {
        tracing::warn!(governance = %record.governance, %owner, "dev chain: the governance contract is not owned by the dev key (an older dev chain); the governance check of `evidence verify` fails until its compose hash is allowed (or the anvil directory is removed)");
        return Ok(());
    }
    let info = keys
        .client()
        .attestation_info()
        .await
        .map_err(crate::chain::ChainError::from)?;
    let hash: alloy::primitives::B256 = info
        .compose_hash
        .trim_start_matches("0x")
        .parse()
        .map_err(|e| DevChainError::ComposeHash(format!("{}: {e}", info.compose_hash)))?;
    let sent = allow_compose_hash(
        client,
        DeploySigner::Local(key),
        record.governance,
        hash,
        Duration::from_secs(30),
    )
    .await?;
    if sent {
        tracing::info!(compose_hash = %hash, governance = %record.governance, "dev chain: the dev compose hash is allowed by governance");
    }
    Ok(())
}

fn apply(chain: &mut ChainConfig, record: &Record) {
    chain.account_config_address = Some(record.account_config);
    if chain.governance_address.is_none() {
        chain.governance_address = Some(record.governance);
    }
    chain.deploy_block = record.deploy_block;
}

/// Keeps anvil running on `port` until told to stop, then stops it (SIGTERM through the
/// guard: anvil saves its state).
async fn supervise(spec: AnvilSpec, first: Child, port: u16, stopped: watch::Receiver<bool>) {
    let respawn = || async { spec.spawn(port).await.map(|(child, _)| child) };
    crate::dev::supervise::keep_running("anvil", first, Duration::from_secs(10), respawn, stopped)
        .await;
}
