//! `appliance child-guard -- PROGRAM ARGS…`: runs a development helper (anvil) that has no
//! way of its own to exit with its parent, and stops it when the appliance goes away.
//!
//! The guard is the appliance's child and the program is the guard's. The guard stops the
//! program (SIGTERM, then SIGKILL after a grace period) when it is orphaned — the
//! appliance exited, even by `kill -9` — or when it receives SIGTERM/SIGINT itself, and
//! exits when the program exits.

use std::ffi::OsString;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

/// How often the guard checks whether it was orphaned.
const PARENT_POLL: Duration = Duration::from_millis(200);
/// How long the program gets to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(10);

/// Runs `program` under the guard; returns its exit code (1 if it had none, e.g. a
/// signal ended it).
pub async fn run(program: OsString, args: Vec<OsString>) -> std::io::Result<i32> {
    let parent = std::os::unix::process::parent_id();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut child = Command::new(&program)
        .args(&args)
        .kill_on_drop(true)
        .spawn()?;
    let mut tick = tokio::time::interval(PARENT_POLL);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(status?.code().unwrap_or(1)),
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tick.tick() => {
                if std::os::unix::process::parent_id() != parent {
                    break;
                }
            }
        }
    }
    terminate(&mut child, GRACE).await;
    Ok(0)
}

/// SIGTERM, up to `grace` to exit, then SIGKILL.
pub async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}
