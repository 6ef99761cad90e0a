//! Supervision shared by every development child (keyservice, worker-launcher, anvil):
//! the restart loop with backoff, and waiting for a child to become ready.

use appliance_domain::backoff::Backoff;
use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio::sync::watch;

/// A child process that could not be started again: the spawn error and the binary.
#[derive(Debug, thiserror::Error)]
#[error("{source} ({})", binary.display())]
pub(crate) struct RespawnError {
    pub(crate) binary: std::path::PathBuf,
    #[source]
    pub(crate) source: std::io::Error,
}

/// Keeps a child process running until `stopped` changes: one that exits is restarted by
/// `respawn` after a backoff (200 ms, doubling up to 5 s, back to 200 ms after 30 s of
/// good running). When stopped, the child gets SIGTERM and `grace` to exit, then SIGKILL.
pub(crate) async fn keep_running<F, Fut, E>(
    name: &'static str,
    first: Child,
    grace: Duration,
    mut respawn: F,
    mut stopped: watch::Receiver<bool>,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Child, E>>,
    E: std::fmt::Display,
{
    let mut child = Some(first);
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        if let Some(running) = child.as_mut() {
            let started = Instant::now();
            tokio::select! {
                status = running.wait() => {
                    match status {
                        Ok(status) => tracing::error!(%status, child = name, "child exited; restarting"),
                        Err(err) => tracing::error!(error = %err, child = name, "child could not be waited on; restarting"),
                    }
                    if started.elapsed() > Duration::from_secs(30) {
                        backoff.reset();
                    }
                    child = None;
                }
                _ = stopped.changed() => {
                    crate::dev::child_guard::terminate(running, grace).await;
                    return;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            _ = stopped.changed() => return,
        }
        match respawn().await {
            Ok(next) => child = Some(next),
            Err(err) => tracing::error!(error = %err, child = name, "cannot restart the child"),
        }
    }
}

/// Waits until `ready` succeeds, up to `limit`.
pub async fn wait_ready<F, Fut, E>(limit: Duration, mut ready: F) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match ready().await {
            Ok(()) => return Ok(()),
            Err(err) if Instant::now() >= deadline => return Err(err),
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
}
