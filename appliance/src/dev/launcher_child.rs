//! Development mode: runs `worker-launcher` as a supervised child, so `appliance dev`
//! starts its workers through the same launcher protocol as the image does. The child
//! runs under the appliance's own uid (`--allow-same-uid-dev`, which it logs loudly): the
//! uid layer of the worker sandbox needs the image's separate user.

use std::os::unix::fs::FileTypeExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What to start.
#[derive(Debug, Clone)]
pub struct LauncherSpec {
    pub binary: PathBuf,
    pub socket: PathBuf,
    pub worker_binary: PathBuf,
    pub worker_cwd: PathBuf,
    pub memory_limit_mb: u64,
    pub max_workers: usize,
}

impl LauncherSpec {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--worker-binary")
            .arg(&self.worker_binary)
            .arg("--worker-cwd")
            .arg(&self.worker_cwd)
            .arg("--memory-limit-mb")
            .arg(self.memory_limit_mb.to_string())
            .arg("--max-workers")
            .arg(self.max_workers.to_string())
            .args(["--allow-same-uid-dev", "--exit-with-parent"])
            // Our pid, not the parent the launcher would see at start: if we die before
            // it looks, it still stops.
            .arg("--parent-pid")
            .arg(std::process::id().to_string())
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its log goes where ours goes.
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Ok(filter) = std::env::var("RUST_LOG") {
            cmd.env("RUST_LOG", filter);
        }
        cmd
    }
}

/// The default launcher binary: next to the running appliance binary.
pub fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("worker-launcher")))
        .unwrap_or_else(|| PathBuf::from("worker-launcher"))
}

/// A running launcher child.
pub struct Supervisor {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Why the launcher child did not come up.
#[derive(Debug, thiserror::Error)]
pub enum LauncherChildError {
    #[error("cannot start {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the worker launcher did not listen on {0} in time")]
    NotReady(PathBuf),
}

impl Supervisor {
    /// Starts the launcher, waits until it listens, and keeps it running (restarted
    /// with backoff if it dies).
    pub async fn start(spec: LauncherSpec) -> Result<Self, LauncherChildError> {
        // A socket left by a launcher that was killed outright: its file would look
        // like the new one listening.
        if std::fs::symlink_metadata(&spec.socket).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(&spec.socket);
        }
        let first = spec
            .command()
            .spawn()
            .map_err(|source| LauncherChildError::Spawn {
                binary: spec.binary.clone(),
                source,
            })?;
        let (stop, stopped) = watch::channel(false);
        let socket = spec.socket.clone();
        let task = tokio::spawn(async move {
            let respawn = || {
                let spawned =
                    spec.command()
                        .spawn()
                        .map_err(|source| super::supervise::RespawnError {
                            binary: spec.binary.clone(),
                            source,
                        });
                async move { spawned }
            };
            super::supervise::keep_running(
                "worker-launcher",
                first,
                Duration::from_secs(3),
                respawn,
                stopped,
            )
            .await;
        });
        let supervisor = Self { stop, task };
        // The launcher binds by renaming a finished socket into place: once the path is
        // a socket, it accepts.
        let ready = super::supervise::wait_ready(Duration::from_secs(20), || {
            let listening =
                std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket());
            async move { if listening { Ok(()) } else { Err(()) } }
        })
        .await;
        if ready.is_err() {
            supervisor.shutdown().await;
            return Err(LauncherChildError::NotReady(socket));
        }
        Ok(supervisor)
    }

    /// Stops the launcher (its workers die with it) and waits for it.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
