//! Worker start time, spawn → `ready`, directly (the appliance's own child) and through
//! the launcher (connect, `Spawn`, descriptors handed over): what replacing a worker
//! costs on each path. The per-job path is the same pipes either way.
//!
//! `cargo bench -p worker-launcher --bench start` (build `action-worker` in the same
//! profile first; `scripts/bench` does). `BENCH_STARTS` sets the samples per path (30).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use action_runtime::protocol::{FromWorker, HEADER_LEN, frame_len};
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;

fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_owned()
}

async fn ready(stdout: &mut pipe::Receiver) {
    let mut header = [0u8; HEADER_LEN];
    stdout.read_exact(&mut header).await.unwrap();
    let mut body = vec![0u8; frame_len(header).unwrap()];
    stdout.read_exact(&mut body).await.unwrap();
    let msg: FromWorker = action_runtime::protocol::decode(&body).unwrap();
    assert_eq!(msg, FromWorker::Ready);
}

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<28} n={:<4} mean {:>7.2} ms  p50 {:>7.2} ms  p90 {:>7.2} ms",
        samples.len(),
        mean.as_secs_f64() * 1e3,
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.9).as_secs_f64() * 1e3
    );
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("BENCH_STARTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let dir = profile_dir();
    let worker = dir.join("action-worker");
    let launcher_bin = dir.join("worker-launcher");
    assert!(
        worker.is_file(),
        "build action-worker in this profile first"
    );
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("empty");
    std::fs::create_dir(&cwd).unwrap();

    let mut direct = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let mut child = tokio::process::Command::new(&worker)
            .args(["--memory-limit-mb", "128"])
            .env_clear()
            .current_dir(&cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap().into_owned_fd().unwrap();
        let mut stdout = pipe::Receiver::from_owned_fd(stdout).unwrap();
        ready(&mut stdout).await;
        direct.push(t.elapsed());
        drop(child.stdin.take());
        let _ = child.wait().await;
    }

    let socket = tmp.path().join("wl.sock");
    let mut launcher = Command::new(&launcher_bin)
        .arg("--socket")
        .arg(&socket)
        .arg("--worker-binary")
        .arg(&worker)
        .arg("--worker-cwd")
        .arg(&cwd)
        .args(["--memory-limit-mb", "128", "--allow-same-uid-dev"])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while !socket.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut launched = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let w = worker_launcher::client::launch(&socket).await.unwrap();
        let mut stdout = pipe::Receiver::from_owned_fd(w.stdout).unwrap();
        ready(&mut stdout).await;
        launched.push(t.elapsed());
        let mut connection = w.connection;
        drop(w.stdin);
        let _ = connection.wait().await;
    }
    let _ = launcher.kill();
    let _ = launcher.wait();

    println!("worker start (spawn -> ready), {}", dir.display());
    stats("direct child", direct);
    stats("through worker-launcher", launched);
}
