//! How the pool gets a worker process: started directly as the appliance's own child
//! (development and tests), or through the `worker-launcher` (the image: workers under
//! their own uid, with no supplementary groups). Either way the pool gets the worker's
//! three pipes and a handle that kills it and learns how it ended, so the per-job path
//! (frames over stdin and stdout) is the same.

use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use worker_launcher::client::{self, Connection};

/// How to start a worker directly.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub binary: PathBuf,
    pub memory_limit_mb: u64,
    /// An empty directory the worker runs in.
    pub cwd: PathBuf,
}

/// Where workers come from.
#[derive(Debug, Clone)]
pub enum Spawner {
    /// The appliance's own children, under the appliance's uid (development only).
    Direct(WorkerSpec),
    /// The worker launcher listening on this socket; it sets the memory limit.
    Launcher(PathBuf),
}

/// A started worker: its pipes and its process handle.
pub struct Spawned {
    pub process: WorkerProcess,
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

/// A worker process, whoever started it.
pub struct WorkerProcess {
    inner: Inner,
}

enum Inner {
    /// `kill_on_drop`: dropping it kills the worker.
    Direct(Child),
    /// Dropping the connection makes the launcher kill the worker.
    Launched { pid: u32, connection: Connection },
}

impl WorkerProcess {
    /// Its pid, for logs (in the launcher's pid namespace for a launched worker).
    pub fn id(&self) -> Option<u32> {
        match &self.inner {
            Inner::Direct(child) => child.id(),
            Inner::Launched { pid, .. } => Some(*pid),
        }
    }

    /// Sends SIGKILL (directly, or by asking the launcher) without waiting.
    pub fn start_kill(&mut self) -> std::io::Result<()> {
        match &mut self.inner {
            Inner::Direct(child) => child.start_kill(),
            Inner::Launched { connection, .. } => connection.kill(),
        }
    }

    /// Waits for the worker's end. For a launched worker the status is the one the
    /// launcher reports (exit code or signal), so `ExitStatusExt::signal` works the same.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match &mut self.inner {
            Inner::Direct(child) => child.wait().await,
            Inner::Launched { connection, .. } => connection
                .wait()
                .await
                .map(|exit| exit.to_status())
                .map_err(std::io::Error::other),
        }
    }
}

/// Why a worker process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start {}: {source}", binary.display())]
    Start {
        binary: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the worker's pipes are missing")]
    PipesMissing,
    #[error("the worker's pipes: {0}")]
    Pipes(#[source] io::Error),
    #[error("the launched worker's pipes: {0}")]
    LaunchedPipes(#[source] io::Error),
    #[error(transparent)]
    Launcher(#[from] client::LaunchError),
}

impl Spawner {
    /// Starts one worker (not yet `ready`).
    pub async fn spawn(&self) -> Result<Spawned, SpawnError> {
        match self {
            Self::Direct(spec) => spawn_direct(spec),
            Self::Launcher(socket) => spawn_launched(socket).await,
        }
    }

    /// Says at start-up which uid workers run under.
    pub fn report(&self) {
        match self {
            Self::Direct(_) => tracing::warn!(
                "actions.worker_launcher_socket is not set: action workers run as the appliance's own children under its uid and groups (development only; the image starts them through worker-launcher under their own uid)"
            ),
            Self::Launcher(socket) => tracing::info!(
                socket = %socket.display(),
                "action workers are started by the worker launcher"
            ),
        }
    }
}

fn spawn_direct(spec: &WorkerSpec) -> Result<Spawned, SpawnError> {
    let mut child = Command::new(&spec.binary)
        .arg("--memory-limit-mb")
        .arg(spec.memory_limit_mb.to_string())
        .env_clear()
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // A pipe, not the appliance's own stderr: the worker's lock-down sets
        // RLIMIT_FSIZE to 0, so it could not write to a stderr that is a regular file.
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| SpawnError::Start {
            binary: spec.binary.clone(),
            source,
        })?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        return Err(SpawnError::PipesMissing);
    };
    let pipe_err = SpawnError::Pipes;
    Ok(Spawned {
        stdin: pipe::Sender::from_owned_fd(stdin.into_owned_fd().map_err(pipe_err)?)
            .map_err(pipe_err)?,
        stdout: pipe::Receiver::from_owned_fd(stdout.into_owned_fd().map_err(pipe_err)?)
            .map_err(pipe_err)?,
        stderr: pipe::Receiver::from_owned_fd(stderr.into_owned_fd().map_err(pipe_err)?)
            .map_err(pipe_err)?,
        process: WorkerProcess {
            inner: Inner::Direct(child),
        },
    })
}

async fn spawn_launched(socket: &std::path::Path) -> Result<Spawned, SpawnError> {
    let launched = client::launch(socket).await?;
    let pipe_err = SpawnError::LaunchedPipes;
    Ok(Spawned {
        stdin: pipe::Sender::from_owned_fd(launched.stdin).map_err(pipe_err)?,
        stdout: pipe::Receiver::from_owned_fd(launched.stdout).map_err(pipe_err)?,
        stderr: pipe::Receiver::from_owned_fd(launched.stderr).map_err(pipe_err)?,
        process: WorkerProcess {
            inner: Inner::Launched {
                pid: launched.pid,
                connection: launched.connection,
            },
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_absent_launcher_is_a_clear_error_naming_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("worker-launcher.sock");
        let Err(err) = Spawner::Launcher(socket.clone()).spawn().await else {
            panic!("a worker came from no launcher");
        };
        assert!(matches!(err, SpawnError::Launcher(_)), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("cannot connect to the worker launcher at")
                && err.contains(&socket.display().to_string()),
            "{err}"
        );
        // Positive control: the direct path with a missing binary fails differently,
        // naming the binary, so the message above is the launcher path's own.
        let spec = WorkerSpec {
            binary: dir.path().join("no-such-worker"),
            memory_limit_mb: 64,
            cwd: dir.path().to_owned(),
        };
        let Err(err) = Spawner::Direct(spec).spawn().await else {
            panic!("a worker started from no binary");
        };
        assert!(matches!(err, SpawnError::Start { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("cannot start") && err.contains("no-such-worker"),
            "{err}"
        );
    }
}
