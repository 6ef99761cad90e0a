//! Development mode: runs keyservice as a supervised child process.
//!
//! The child is started with `--exit-with-parent`, so it stops even if the appliance
//! is killed without running any shutdown code. If the child dies, it is restarted with
//! backoff; meanwhile key operations answer 503. On shutdown the child gets SIGTERM
//! (it finishes in-flight requests and removes its socket), then SIGKILL if it lingers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What to start.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    pub binary: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub compose_file: PathBuf,
    /// The chain the payers may sign for (`--chain-id`): the appliance's `chain.chain_id`.
    pub chain_id: u64,
    /// Where keyservice gets quotes (`--quote-provider`): the appliance's
    /// `attestation.provider`; the appliance itself never talks to the provider.
    pub quote_provider: &'static str,
    /// `--tsm-dir`: `attestation.tsm_dir`.
    pub tsm_dir: PathBuf,
    /// `--app-id` of simulated and configfs-tsm quotes: `attestation.app_id`, else
    /// `chain.governance_address`, when set at start.
    pub app_id: Option<String>,
    /// `AccountConfig` contracts deployed by someone else that the payers may call
    /// (`--account-config`); contracts keyservice's admin payer deploys it records itself.
    pub account_configs: Vec<String>,
    /// `--operator`: `[operator] addresses`, whose signed reseal requests keyservice
    /// checks itself.
    pub operators: Vec<String>,
    /// `--governance`: `chain.governance_address`, which decides reseal targets (read over
    /// `KEYSERVICE_GOVERNANCE_RPC` or `APPLIANCE_CHAIN__RPC_URL` of the environment the
    /// child inherits).
    pub governance: Option<String>,
    /// The RPC URL to read it with (`chain.rpc_url` when known at start), given in the
    /// environment (`KEYSERVICE_GOVERNANCE_RPC`), never on the command line: it may hold
    /// an API key.
    pub governance_rpc: Option<String>,
    /// `--shared-root`: keyservice makes no root of its own and waits for the appliance to
    /// hand it the shared sealed root (replicas of one app on one database).
    pub shared_root: bool,
    /// `--dev-secret`: the dev platform's sealing secret file (default
    /// `STATE_DIR/dev-secret`); replicas sharing a root must share this file.
    pub dev_secret: Option<PathBuf>,
}

impl ChildSpec {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("run")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(["--platform", "dev", "--exit-with-parent"])
            // Our pid, not the parent keyservice would see at start: if we die before
            // it looks, it still stops.
            .arg("--parent-pid")
            .arg(std::process::id().to_string())
            .arg("--compose-file")
            .arg(&self.compose_file)
            .arg("--chain-id")
            .arg(self.chain_id.to_string())
            .args(["--quote-provider", self.quote_provider])
            .arg("--tsm-dir")
            .arg(&self.tsm_dir);
        if let Some(app_id) = &self.app_id {
            cmd.arg("--app-id").arg(app_id);
        }
        for address in &self.account_configs {
            cmd.arg("--account-config").arg(address);
        }
        for address in &self.operators {
            cmd.arg("--operator").arg(address);
        }
        if let Some(governance) = &self.governance {
            cmd.arg("--governance").arg(governance);
        }
        if let Some(rpc) = &self.governance_rpc {
            cmd.env("KEYSERVICE_GOVERNANCE_RPC", rpc);
        }
        if self.shared_root {
            cmd.arg("--shared-root");
        }
        if let Some(dev_secret) = &self.dev_secret {
            cmd.arg("--dev-secret").arg(dev_secret);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its log goes where ours goes.
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        cmd
    }
}

/// The default keyservice binary: next to the running appliance binary.
pub fn default_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join("keyservice"))
}

/// A running supervisor.
pub struct Supervisor {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Supervisor {
    /// Starts the child now (failing if it cannot even be spawned) and keeps it running.
    pub fn start(spec: ChildSpec) -> std::io::Result<Self> {
        let first = spec.command().spawn()?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(spec, first, stopped));
        Ok(Self { stop, task })
    }

    /// Stops the child and waits for it.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn supervise(spec: ChildSpec, first: Child, stopped: watch::Receiver<bool>) {
    let respawn = || {
        let spawned = spec
            .command()
            .spawn()
            .map_err(|source| super::supervise::RespawnError {
                binary: spec.binary.clone(),
                source,
            });
        async move { spawned }
    };
    super::supervise::keep_running(
        "keyservice",
        first,
        Duration::from_secs(3),
        respawn,
        stopped,
    )
    .await;
}

/// Writes the development compose if none exists, so a fresh `appliance dev` seals to
/// the real compose: the committed template (`compose/docker-compose.yml`) rendered by
/// `compose_pin::render_dev` into `app-compose.json`, with the documented placeholder
/// image `compose_pin::DEV_IMAGE` (development runs binaries, not an image). An existing
/// file is kept: the dev keyservice's root is sealed to its hash.
pub fn ensure_dev_compose(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let rendered = compose_pin::render_dev().map_err(std::io::Error::other)?;
    std::fs::write(path, rendered.bytes())
}
