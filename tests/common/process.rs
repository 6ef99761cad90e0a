//! Processes seen from outside: signals, liveness and parentage from `/proc`, and polling
//! until a condition holds.

use std::process::Command;
use std::time::Duration;

/// Sends a signal by name (`TERM`, `KILL`) with the system's `kill` command.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// The state letter and parent pid of `pid`, from `/proc/PID/stat` (the fields after the
/// parenthesised command name).
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit(')').next()?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Live processes whose parent is `parent` and whose command line contains `needle`.
pub fn children_of(parent: u32, needle: &str) -> Vec<u32> {
    processes_matching(&[needle])
        .into_iter()
        .filter(|pid| proc_stat(*pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// Ids of live processes whose command line contains every one of `needles`.
pub fn processes_matching(needles: &[&str]) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if alive(pid) && needles.iter().all(|n| cmdline.contains(n)) {
            out.push(pid);
        }
    }
    out
}

/// As [`eventually`], with an async check (polled every 100 ms).
pub async fn eventually_async<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check().await
}

/// Polls `check` every 50 ms until it is true or `limit` passes; returns its last answer.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// Live processes descended from `root` (children, their children, …), from the parent
/// pids in `/proc/*/stat`.
pub fn descendants_of(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some((state, parent)) = proc_stat(pid)
            && state != 'Z'
        {
            parents.push((pid, parent));
        }
    }
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        next += 1;
    }
    found.remove(0);
    found
}

/// A process's command name (`/proc/PID/comm`, at most 15 bytes), if it is alive.
pub fn command_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}
